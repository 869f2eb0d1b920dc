/* GDS's split planner (gds_split.h): pure, no cuFile and no system calls. */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include <ixl/ixl_plugin.h>

#include "gds_split.h"

#define KB 1024u

void gds_limits_default(struct gds_limits *out)
{
    out->per_buffer = 1024 * KB;
    out->device_cache = 131072ull * KB;
    out->max_direct = 16384ull * KB;
    out->batch_max = 128;
}

/* Skips blanks and comments (cuFile's JSON allows // and / * * / ones). */
static size_t skip(const char *s, size_t len, size_t i)
{
    for (;;) {
        while (i < len && (s[i] == ' ' || s[i] == '\t' || s[i] == '\n' || s[i] == '\r'))
            i++;
        if (i + 1 < len && s[i] == '/' && s[i + 1] == '/') {
            while (i < len && s[i] != '\n')
                i++;
        } else if (i + 1 < len && s[i] == '/' && s[i + 1] == '*') {
            i += 2;
            while (i + 1 < len && !(s[i] == '*' && s[i + 1] == '/'))
                i++;
            i = i + 2 < len ? i + 2 : len;
        } else {
            return i;
        }
    }
}

int gds_limits_parse_json(const char *text, size_t len, struct gds_limits *out, char *why,
                          size_t why_len)
{
    static const char *const keys[] = {"per_buffer_cache_size_kb", "max_device_cache_size_kb",
                                       "max_direct_io_size_kb", "io_batchsize"};
    struct gds_limits l = *out;
    size_t i = 0;
    while (i < len) {
        if (text[i] == '/' && i + 1 < len && (text[i + 1] == '/' || text[i + 1] == '*')) {
            i = skip(text, len, i);
            continue;
        }
        if (text[i] != '"') {
            i++;
            continue;
        }
        size_t start = ++i;
        while (i < len && text[i] != '"')
            i++;
        size_t klen = i - start;
        i++;
        int k = -1;
        for (int j = 0; j < 4; j++)
            if (strlen(keys[j]) == klen && memcmp(text + start, keys[j], klen) == 0)
                k = j;
        if (k < 0)
            continue;
        size_t p = skip(text, len, i);
        if (p >= len || text[p] != ':')
            continue; /* the name as a value, not a key */
        p = skip(text, len, p + 1);
        uint64_t v = 0;
        size_t digits = 0;
        while (p < len && text[p] >= '0' && text[p] <= '9' && digits < 19) {
            v = v * 10 + (uint64_t)(text[p] - '0');
            p++;
            digits++;
        }
        if (digits == 0 || (p < len && text[p] >= '0' && text[p] <= '9')) {
            snprintf(why, why_len, "cufile.json: \"%s\" wants a non-negative integer", keys[k]);
            return IXL_ERR_INVALID_ARG;
        }
        switch (k) {
        case 0:
            l.per_buffer = v * KB;
            break;
        case 1:
            l.device_cache = v * KB;
            break;
        case 2:
            l.max_direct = v * KB;
            break;
        default:
            l.batch_max = v > UINT32_MAX ? UINT32_MAX : (uint32_t)v;
            break;
        }
        i = p;
    }
    *out = l;
    return IXL_OK;
}

int gds_limits_batch(const struct gds_limits *l, uint64_t cap_entry, uint32_t cap_entries,
                     uint64_t *entry, uint32_t *entries, char *why, size_t why_len)
{
    if (l->per_buffer == 0) {
        snprintf(why, why_len,
                 "cuFile's per_buffer_cache_size_kb is 0: no batch entry can be served (set "
                 "\"per_buffer_cache_size_kb\" in cufile.json to 1024, or use GDS_MT)");
        return IXL_ERR_NOT_SUPPORTED;
    }
    if (l->batch_max == 0) {
        snprintf(why, why_len,
                 "cuFile's io_batchsize is 0: no batch can be set up (set \"io_batchsize\" in "
                 "cufile.json to 128, or use GDS_MT)");
        return IXL_ERR_NOT_SUPPORTED;
    }
    uint64_t slots = l->device_cache / l->per_buffer;
    if (slots == 0) {
        snprintf(why, why_len,
                 "cuFile's device cache (max_device_cache_size_kb %" PRIu64
                 ") is smaller than one buffer (per_buffer_cache_size_kb %" PRIu64
                 "): no transfer of any size can be served (raise \"max_device_cache_size_kb\" "
                 "to at least per_buffer_cache_size_kb x io_batchsize in cufile.json, or use "
                 "GDS_MT)",
                 l->device_cache / KB, l->per_buffer / KB);
        return IXL_ERR_NOT_SUPPORTED;
    }
    uint64_t e = l->per_buffer;
    if (cap_entry != 0 && cap_entry < e)
        e = cap_entry;
    uint64_t n = l->batch_max;
    if (slots < n)
        n = slots; /* (max_device_cache_size_kb / per_buffer_cache_size_kb) >= io_batchsize */
    if (cap_entries != 0 && cap_entries < n)
        n = cap_entries;
    *entry = e;
    *entries = (uint32_t)n;
    return IXL_OK;
}

bool gds_next_piece(const uint64_t *lens, size_t n, uint64_t max, struct gds_cursor *c,
                    struct gds_piece *out)
{
    while (c->desc < n && c->off >= lens[c->desc]) {
        c->desc++;
        c->off = 0;
    }
    if (c->desc >= n || max == 0)
        return false;
    uint64_t left = lens[c->desc] - c->off;
    out->desc = c->desc;
    out->off = c->off;
    out->len = left < max ? left : max;
    c->off += out->len;
    return true;
}

size_t gds_plan_batch(const uint64_t *lens, size_t n, uint64_t entry, struct gds_cursor *c,
                      struct gds_piece *out, size_t cap)
{
    size_t k = 0;
    while (k < cap && gds_next_piece(lens, n, entry, c, &out[k]))
        k++;
    return k;
}

uint64_t gds_count_pieces(const uint64_t *lens, size_t n, uint64_t entry)
{
    uint64_t total = 0;
    if (entry == 0)
        return 0;
    for (size_t i = 0; i < n; i++)
        total += (lens[i] + entry - 1) / entry;
    return total;
}

uint64_t gds_mt_piece(uint64_t len, unsigned threads, uint64_t min_piece, uint64_t max_piece)
{
    const uint64_t align = 64 * KB;
    uint64_t per = threads > 0 ? (len + threads - 1) / threads : len;
    per = (per + align - 1) / align * align;
    if (per < min_piece)
        per = min_piece;
    if (per > max_piece)
        per = max_piece;
    return per == 0 ? 1 : per;
}
