/*
 * The storage cost table: measured bandwidth per backend, path, direction and size, that
 * storage plugins (POSIX, GDS, GDS_MT, ...) read to answer estimate_xfer_cost. The core
 * compares those estimates to pick a backend when the user names none (docs/device.md,
 * "Automatic choice"), so every plugin reading the same table makes the choice follow it.
 * Header-only (static inline) so a plugin links against nothing but what ixl_plugin.h
 * declares; include it as "../common/ixl_cost_table.h". Not part of the plugin ABI.
 *
 * File format (text, UTF-8/ASCII, one row per line; bench/gds.sh writes it):
 *
 *     # comment (also after a row)
 *     ixl-cost-table 1                      <- the first non-comment line: format version
 *     POSIX   staged  WRITE  1M   3.10      <- BACKEND PATH OP SIZE GBPS
 *     POSIX   staged  WRITE  16M  5.20
 *     GDS_MT  mt      READ   64M  7.25
 *
 *   BACKEND  the plugin's name as ixl-info lists it ([A-Za-z0-9_]{1,31})
 *   PATH     the data path as the backend reports it in ixl_xfer_info ("staged", "batch",
 *            "mt", "io_uring", "threads", ...; [A-Za-z0-9_.-]{1,31})
 *   OP       READ (file -> memory) or WRITE (memory -> file)
 *   SIZE     the block size: bytes per descriptor of a request (ixlbench's block size), an
 *            integer with an optional K, M or G suffix (powers of 1024)
 *   GBPS     the bandwidth measured at that size, in GB/s (10^9 bytes per second), > 0
 *
 * A backend's estimate for a request of n bytes in descriptors of b bytes on average, on
 * (PATH, OP), interpolates GBPS at b linearly in log2(size) between the two nearest sizes of its
 * rows, holds the first/last row's value outside them, and gives duration = n / GBPS. A backend
 * with no row for its (PATH, OP) gives no estimate (IXL_ERR_NOT_SUPPORTED): the core then ranks it
 * after those that give one.
 *
 * Where the table comes from (ixl_cost_table_open): the plugin option cost_table names a file;
 * its default ("") means $HOME/.cache/ixl/cost_table (HOME from the password database, not the
 * environment); when that file does not exist, IXL_COST_TABLE_DEFAULT below, documented in
 * docs/device.md. A file that exists but does not parse is an error naming the line.
 */
#ifndef IXL_COST_TABLE_H
#define IXL_COST_TABLE_H

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <pwd.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <ixl/ixl_plugin.h>

/* The table used when no calibration file exists: figures of an H200 with an NVMe SSD (the
 * seeds' measurements for GDS and GDS_MT; POSIX staged as pinned copies plus POSIX's DRAM
 * figures). It is a guess for any other machine: run bench/gds.sh to measure this one. */
#define IXL_COST_TABLE_DEFAULT                   \
    "ixl-cost-table 1\n"                         \
    "# built-in default (no calibration file)\n" \
    "GDS     batch  WRITE 1M  5.25\n"            \
    "GDS     batch  READ  1M  8.73\n"            \
    "GDS     batch  WRITE 64M 4.00\n"            \
    "GDS     batch  READ  64M 6.50\n"            \
    "GDS_MT  mt     WRITE 1M  3.27\n"            \
    "GDS_MT  mt     READ  1M  4.70\n"            \
    "GDS_MT  mt     WRITE 16M 4.73\n"            \
    "GDS_MT  mt     READ  16M 7.87\n"            \
    "GDS_MT  mt     WRITE 64M 4.27\n"            \
    "GDS_MT  mt     READ  64M 7.25\n"            \
    "POSIX   staged WRITE 1M  2.50\n"            \
    "POSIX   staged READ  1M  3.50\n"            \
    "POSIX   staged WRITE 16M 4.00\n"            \
    "POSIX   staged READ  16M 5.00\n"            \
    "POSIX   staged WRITE 64M 3.00\n"            \
    "POSIX   staged READ  64M 4.50\n"

#define IXL_COST_NAME_MAX 32

struct ixl_cost_row {
    char backend[IXL_COST_NAME_MAX];
    char path[IXL_COST_NAME_MAX];
    int op; /* enum ixl_op */
    uint64_t size;
    double gbps;
};

struct ixl_cost_table {
    struct ixl_cost_row *rows; /* malloc'ed; ixl_cost_table_free */
    size_t n;
    bool measured;    /* from a calibration file (IXL_COST_MEASURED), else the default */
    char source[256]; /* the file's path, or "built-in default" */
};

static inline bool ixl_cost__name_ok(const char *s, bool path)
{
    size_t n = strlen(s);
    if (n == 0 || n >= IXL_COST_NAME_MAX)
        return false;
    for (size_t i = 0; i < n; i++) {
        char c = s[i];
        bool ok = (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
                  c == '_' || (path && (c == '.' || c == '-'));
        if (!ok)
            return false;
    }
    return true;
}

static inline bool ixl_cost__size(const char *s, uint64_t *out)
{
    char *end;
    errno = 0;
    unsigned long long v = strtoull(s, &end, 10);
    if (end == s || errno != 0 || s[0] == '-')
        return false;
    uint64_t mul = 1;
    if (*end == 'K' || *end == 'k')
        mul = 1ull << 10, end++;
    else if (*end == 'M' || *end == 'm')
        mul = 1ull << 20, end++;
    else if (*end == 'G' || *end == 'g')
        mul = 1ull << 30, end++;
    if (*end != '\0' || v == 0 || v > UINT64_MAX / mul)
        return false;
    *out = v * mul;
    return true;
}

/* log2(v) for v >= 1, exact at powers of two and linear between them (monotonic; no libm). */
static inline double ixl_cost__log2(uint64_t v)
{
    int k = 63 - __builtin_clzll(v);
    return k + ((double)v / (double)(1ull << k) - 1.0);
}

static inline void ixl_cost_table_free(struct ixl_cost_table *t)
{
    free(t->rows);
    t->rows = NULL;
    t->n = 0;
}

/*
 * Parses text (len bytes, no NUL needed) into *out (rows allocated with alloc, released with
 * free). IXL_OK, or IXL_ERR_INVALID_ARG with why naming the line and what is wrong; *out is
 * written only on success. source names the text in messages and in out->source.
 */
static inline int ixl_cost_table_parse(const char *text, size_t len, const char *source,
                                       bool measured, void *(*alloc)(size_t),
                                       struct ixl_cost_table *out, char *why, size_t why_len)
{
    size_t cap = 16, n = 0;
    struct ixl_cost_row *rows = alloc(cap * sizeof(*rows));
    if (rows == NULL) {
        snprintf(why, why_len, "out of memory reading the cost table %.200s", source);
        return IXL_ERR_NO_MEMORY;
    }
    bool header = false;
    unsigned lineno = 0;
    size_t pos = 0;
    while (pos < len) {
        size_t end = pos;
        while (end < len && text[end] != '\n')
            end++;
        lineno++;
        char line[512];
        size_t ll = end - pos < sizeof(line) - 1 ? end - pos : sizeof(line) - 1;
        memcpy(line, text + pos, ll);
        line[ll] = '\0';
        pos = end + 1;
        char *hash = strchr(line, '#');
        if (hash)
            *hash = '\0';
        char f[6][64];
        int nf = sscanf(line, "%63s %63s %63s %63s %63s %63s", f[0], f[1], f[2], f[3], f[4], f[5]);
        if (nf <= 0)
            continue; /* blank or comment */
        if (!header) {
            if (nf != 2 || strcmp(f[0], "ixl-cost-table") != 0 || strcmp(f[1], "1") != 0) {
                snprintf(why, why_len,
                         "cost table %.200s line %u: the first line must be \"ixl-cost-table 1\" "
                         "(rewrite the file with bench/gds.sh, or delete it to use the default)",
                         source, lineno);
                goto bad;
            }
            header = true;
            continue;
        }
        struct ixl_cost_row r;
        memset(&r, 0, sizeof(r));
        char *e = NULL;
        double g = nf == 5 ? strtod(f[4], &e) : 0;
        const char *what = NULL;
        if (nf != 5)
            what = "want 5 fields: BACKEND PATH OP SIZE GBPS";
        else if (!ixl_cost__name_ok(f[0], false))
            what = "BACKEND must be 1-31 characters of [A-Za-z0-9_]";
        else if (!ixl_cost__name_ok(f[1], true))
            what = "PATH must be 1-31 characters of [A-Za-z0-9_.-]";
        else if (strcmp(f[2], "READ") != 0 && strcmp(f[2], "WRITE") != 0)
            what = "OP must be READ or WRITE";
        else if (!ixl_cost__size(f[3], &r.size))
            what = "SIZE must be a positive integer with an optional K, M or G suffix";
        else if (e == f[4] || *e != '\0' || !(g > 0) || !isfinite(g))
            what = "GBPS must be a number > 0";
        if (what) {
            snprintf(why, why_len, "cost table %.200s line %u: %s", source, lineno, what);
            goto bad;
        }
        memcpy(r.backend, f[0], strlen(f[0]) + 1);
        memcpy(r.path, f[1], strlen(f[1]) + 1);
        r.op = strcmp(f[2], "READ") == 0 ? IXL_OP_READ : IXL_OP_WRITE;
        r.gbps = g;
        if (n == cap) {
            struct ixl_cost_row *nr = alloc(2 * cap * sizeof(*rows));
            if (nr == NULL) {
                snprintf(why, why_len, "out of memory reading the cost table %.200s", source);
                free(rows);
                return IXL_ERR_NO_MEMORY;
            }
            memcpy(nr, rows, n * sizeof(*rows));
            free(rows);
            rows = nr;
            cap *= 2;
        }
        rows[n++] = r;
    }
    if (!header) {
        snprintf(why, why_len, "cost table %.200s is empty (want \"ixl-cost-table 1\" and rows)",
                 source);
        goto bad;
    }
    out->rows = rows;
    out->n = n;
    out->measured = measured;
    snprintf(out->source, sizeof(out->source), "%s", source);
    return IXL_OK;
bad:
    free(rows);
    return IXL_ERR_INVALID_ARG;
}

/* The default calibration file's path: $HOME/.cache/ixl/cost_table, HOME from the password
 * database. false when the user has no home directory. */
static inline bool ixl_cost_table_default_path(char *buf, size_t cap)
{
    struct passwd pw, *res = NULL;
    char tmp[4096];
    if (getpwuid_r(getuid(), &pw, tmp, sizeof(tmp), &res) != 0 || res == NULL ||
        res->pw_dir == NULL || res->pw_dir[0] == '\0')
        return false;
    return (size_t)snprintf(buf, cap, "%s/.cache/ixl/cost_table", res->pw_dir) < cap;
}

/*
 * Loads the table a plugin uses: the file at path (the cost_table option; NULL or "" = the
 * default path), else, when that file does not exist, IXL_COST_TABLE_DEFAULT. sys: the host's
 * system-call table (opens and reads through it). IXL_OK, or an error with why (a file that
 * exists but cannot be read or parsed: the user asked for it, so it is not ignored).
 */
static inline int ixl_cost_table_open(const struct ixl_sys *sys, const char *path,
                                      struct ixl_cost_table *out, char *why, size_t why_len)
{
    char def[512];
    bool named = path != NULL && path[0] != '\0';
    if (!named)
        path = ixl_cost_table_default_path(def, sizeof(def)) ? def : NULL;
    int fd = path ? sys->open(path, O_RDONLY | O_CLOEXEC, 0) : -1;
    if (fd < 0 && (path == NULL || errno == ENOENT) && !named)
        return ixl_cost_table_parse(IXL_COST_TABLE_DEFAULT, sizeof(IXL_COST_TABLE_DEFAULT) - 1,
                                    "built-in default", false, sys->malloc, out, why, why_len);
    if (fd < 0) {
        snprintf(why, why_len,
                 "cannot open the cost table '%.200s': %s (option cost_table; run "
                 "bench/gds.sh to write one, or leave the option empty for the default)",
                 path, strerror(errno));
        return errno == ENOENT ? IXL_ERR_NOT_FOUND : IXL_ERR_SYSTEM;
    }
    size_t cap = 1 << 16, len = 0;
    char *text = sys->malloc(cap);
    int rc = IXL_OK;
    if (text == NULL) {
        snprintf(why, why_len, "out of memory reading the cost table '%.200s'", path);
        rc = IXL_ERR_NO_MEMORY;
        goto close_fd;
    }
    for (;;) {
        ssize_t r = sys->read(fd, text + len, cap - len);
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0) {
            snprintf(why, why_len, "cannot read the cost table '%.200s': %s", path,
                     strerror(errno));
            rc = IXL_ERR_SYSTEM;
            goto free_text;
        }
        if (r == 0)
            break;
        len += (size_t)r;
        if (len == cap) {
            snprintf(why, why_len, "the cost table '%.200s' is larger than %zu bytes", path, cap);
            rc = IXL_ERR_TOO_LARGE;
            goto free_text;
        }
    }
    rc = ixl_cost_table_parse(text, len, path, true, sys->malloc, out, why, why_len);
free_text:
    free(text);
close_fd:
    sys->close(fd);
    return rc;
}

/*
 * The table's bandwidth (GB/s) for backend's (path, op) at size bytes, interpolated in
 * log2(size) between the nearest rows and held constant outside them; 0 when the table has no
 * row for (backend, path, op).
 */
static inline double ixl_cost_table_gbps(const struct ixl_cost_table *t, const char *backend,
                                         const char *path, int op, uint64_t size)
{
    const struct ixl_cost_row *lo = NULL, *hi = NULL;
    for (size_t i = 0; i < t->n; i++) {
        const struct ixl_cost_row *r = &t->rows[i];
        if (r->op != op || strcmp(r->backend, backend) != 0 || strcmp(r->path, path) != 0)
            continue;
        if (r->size <= size && (lo == NULL || r->size > lo->size))
            lo = r;
        if (r->size >= size && (hi == NULL || r->size < hi->size))
            hi = r;
    }
    if (lo == NULL || hi == NULL || lo->size == hi->size)
        return lo ? lo->gbps : hi ? hi->gbps : 0;
    double x = (ixl_cost__log2(size) - ixl_cost__log2(lo->size)) /
               (ixl_cost__log2(hi->size) - ixl_cost__log2(lo->size));
    return lo->gbps + x * (hi->gbps - lo->gbps);
}

/*
 * Fills an estimate for moving bytes in descriptors of block bytes on average (block > 0; for
 * one descriptor, block = bytes) on backend's (path, op): IXL_OK, or IXL_ERR_NOT_SUPPORTED when
 * the table has no row for it. Writes only the first-generation fields of struct ixl_cost.
 */
static inline int ixl_cost_table_estimate(const struct ixl_cost_table *t, const char *backend,
                                          const char *path, int op, uint64_t block, uint64_t bytes,
                                          struct ixl_cost *out)
{
    double g = ixl_cost_table_gbps(t, backend, path, op, block ? block : 1);
    if (!(g > 0))
        return IXL_ERR_NOT_SUPPORTED;
    double us = (double)bytes / (g * 1e3); /* 1 GB/s = 1000 bytes per microsecond */
    out->duration_us = us < 1 ? 1 : (uint64_t)(us + 0.5);
    out->error_margin_us = out->duration_us / 10;
    out->method = t->measured ? IXL_COST_MEASURED : IXL_COST_ANALYTICAL;
    return IXL_OK;
}

#endif /* IXL_COST_TABLE_H */
