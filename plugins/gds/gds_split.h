/*
 * gds_split.h - GDS's split planner: pure functions (no cuFile, no system calls), unit-tested
 * by tests/unit/test_gds_split.c against limits read from cufile.json files.
 *
 * cuFile's batch API refuses (or, in compatibility mode, fails at submission with "Error in
 * setting up Batch") an entry larger than its per-buffer bounce-buffer size
 * (per_buffer_cache_size_kb, 1024 by default), and a batch of more entries than io_batchsize
 * (128) or than the device cache holds (max_device_cache_size_kb / per_buffer_cache_size_kb).
 * The planner cuts every descriptor into pieces of at most the per-buffer size and groups them
 * into batches cuFile can take, so no size is refused.
 */
#ifndef IXL_GDS_SPLIT_H
#define IXL_GDS_SPLIT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* cuFile's limits, in bytes and entries (cufile.json's "properties", or the driver's
 * cuFileDriverGetProperties, which reports the values in effect). */
struct gds_limits {
    uint64_t per_buffer;   /* per_buffer_cache_size_kb * 1024 */
    uint64_t device_cache; /* max_device_cache_size_kb * 1024 */
    uint64_t max_direct;   /* max_direct_io_size_kb * 1024 */
    uint32_t batch_max;    /* io_batchsize (max_batch_io_size) */
};

/* cuFile's documented defaults: 1024 KB per buffer, 128 MB of device cache, 16 MB direct I/O,
 * 128 entries per batch. */
void gds_limits_default(struct gds_limits *out);

/*
 * Reads the limits from cufile.json text (len bytes; comments allowed, as cuFile allows
 * them): the keys per_buffer_cache_size_kb, max_device_cache_size_kb, max_direct_io_size_kb
 * and io_batchsize, wherever they appear (cuFile keeps them under "properties"). A key that is
 * absent keeps its value in *out (call gds_limits_default first). IXL_OK, or
 * IXL_ERR_INVALID_ARG with why when a key's value is not a non-negative integer.
 */
int gds_limits_parse_json(const char *text, size_t len, struct gds_limits *out, char *why,
                          size_t why_len);

/*
 * What the batch path can use under these limits: the largest entry (*entry, the per-buffer
 * size, further capped by cap_entry when non-zero) and the most entries per batch (*entries:
 * io_batchsize, capped by cap_entries when non-zero and by how many per-buffer slots the
 * device cache holds). IXL_OK, or IXL_ERR_NOT_SUPPORTED with why saying which key of
 * cufile.json to change when the configuration cannot serve any transfer (a zero size, or a
 * device cache smaller than one buffer).
 */
int gds_limits_batch(const struct gds_limits *l, uint64_t cap_entry, uint32_t cap_entries,
                     uint64_t *entry, uint32_t *entries, char *why, size_t why_len);

/* A position in a list of descriptor lengths: descriptor desc, byte off within it. */
struct gds_cursor {
    size_t desc;
    uint64_t off;
};

/* One piece: bytes [off, off + len) of descriptor desc. */
struct gds_piece {
    size_t desc;
    uint64_t off;
    uint64_t len;
};

/*
 * The next piece of at most max bytes (> 0) from the cursor over lens[0..n) (zero lengths are
 * skipped); advances the cursor. false when nothing is left.
 */
bool gds_next_piece(const uint64_t *lens, size_t n, uint64_t max, struct gds_cursor *c,
                    struct gds_piece *out);

/* Fills out[0..cap) with the next pieces (at most entry bytes each); returns how many. One
 * batch of the GDS backend is gds_plan_batch(..., entries). */
size_t gds_plan_batch(const uint64_t *lens, size_t n, uint64_t entry, struct gds_cursor *c,
                      struct gds_piece *out, size_t cap);

/* How many pieces of at most entry bytes lens[0..n) makes (the batches a request needs are
 * that divided by the entries per batch, rounded up). */
uint64_t gds_count_pieces(const uint64_t *lens, size_t n, uint64_t entry);

/*
 * GDS_MT: the piece size that spreads a descriptor of len bytes over threads workers: len /
 * threads rounded up to 64 KiB, at least min_piece and at most max_piece (min_piece <=
 * max_piece).
 */
uint64_t gds_mt_piece(uint64_t len, unsigned threads, uint64_t min_piece, uint64_t max_piece);

#endif
