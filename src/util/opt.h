/*
 * Typed options: the one parser of option values. The core parses plugin options with it (at
 * plugin load, the defaults; at backend creation, the user's values) and src/util/config.c
 * the IXL_* variables that hold sizes and durations, so that "64K" and "2s" mean the same
 * everywhere. The rules are the ones enum ixl_opt_type documents in ixl_types.h. Tools and
 * applications reach the same code through ixl.h: ixl_option_parse() (on top of
 * ixl_opt_check and ixl_opt_parse) and ixl_option_describe() (the text ixl-info prints).
 */
#ifndef IXL_UTIL_OPT_H
#define IXL_UTIL_OPT_H

#include <stddef.h>

#include <ixl/ixl.h>

/** Room for the normalized text of a BOOL, INT, SIZE or DURATION value (and its NUL); ixl.h
 *  gives callers the same number. */
#define IXL_OPT_NORM_MAX IXL_OPTION_NORM_MAX

/**
 * Checks one option descriptor (not the table's duplicate names): IXL_OK, or
 * IXL_ERR_INVALID_ARG with the reason in why ("option chunk: ..."), including a default
 * value that does not parse or lies outside the range.
 */
int ixl_opt_check(const struct ixl_option *o, char *why, size_t cap);

/**
 * Parses text as a value of option o (a descriptor ixl_opt_check accepted). IXL_OK: *out is
 * filled; out->str points at norm (BOOL, INT, SIZE, DURATION: norm must hold
 * IXL_OPT_NORM_MAX bytes), at the declared choice (ENUM) or at text itself (STRING).
 * IXL_ERR_INVALID_ARG: why says "NAME='TEXT': what is wrong; want WHAT" and *out is
 * untouched.
 */
int ixl_opt_parse(const struct ixl_option *o, const char *text, struct ixl_opt_value *out,
                  char *norm, char *why, size_t cap);

/**
 * What option o wants, as a phrase for messages ("a size in bytes, 4K..1G (suffixes K, M,
 * G, T: powers of 1024)"). Returns buf.
 */
const char *ixl_opt_want(const struct ixl_option *o, char *buf, size_t cap);

/** The name of a type ("size"), or "unknown" for a value enum ixl_opt_type lacks. */
const char *ixl_opt_type_name(enum ixl_opt_type t);

#endif
