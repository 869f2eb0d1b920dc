/*
 * Output structs that grow "size first" (the rule is stated in ixl.h): every API function
 * that fills a caller-allocated struct builds the whole struct locally, then hands it to
 * ixl_out_write(), so each call checks the caller's size and copies the same way.
 */
#ifndef IXL_UTIL_OUT_H
#define IXL_UTIL_OUT_H

#include <stddef.h>
#include <stdint.h>

/* Bytes of type up to the end of field: the first generation's size of an output struct is
 * IXL_SIZE_THROUGH(type, last field of that generation). */
#define IXL_SIZE_THROUGH(type, field) (offsetof(type, field) + sizeof(((type *)0)->field))

/*
 * Copies built (built_size = sizeof of the library's struct) into out, whose first member is
 * the caller's uint32_t size: IXL_ERR_INVALID_ARG when that size is below first_size (the
 * first generation's); else writes the fields that lie entirely within min(size, built_size),
 * sets out->size to that min and returns IXL_OK. Fields past first_size are taken whole:
 * align (the struct's alignment) rounds the copy down so none is written in part. Nothing is
 * written on error.
 */
int ixl_out_write(void *out, const void *built, size_t built_size, size_t first_size, size_t align);

/* Only the size check of ixl_out_write: IXL_OK or IXL_ERR_INVALID_ARG. */
int ixl_out_check(const void *out, size_t first_size);

#endif
