#include "core/dlist.h"

#include <stdlib.h>
#include <string.h>

#include "util/sys.h"

static int reserve(struct ixl_dlist *l, size_t need)
{
    if (need <= l->cap)
        return IXL_OK;
    /* Both arrays must stay addressable: refuse sizes whose byte counts would wrap. */
    size_t limit = SIZE_MAX / sizeof(struct ixl_run) / 2 - 1;
    if (need > limit)
        return IXL_ERR_NO_MEMORY;
    size_t cap = l->cap ? l->cap * 2 : 16;
    while (cap < need)
        cap = cap > limit / 2 ? limit : cap * 2;
    struct ixl_run *r = sys_realloc(l->runs, cap * sizeof(*r));
    if (r == NULL)
        return IXL_ERR_NO_MEMORY;
    l->runs = r;
    uint64_t *f = sys_realloc(l->first, (cap + 1) * sizeof(*f));
    if (f == NULL)
        return IXL_ERR_NO_MEMORY;
    if (l->first == NULL)
        f[0] = 0;
    l->first = f;
    l->cap = cap;
    return IXL_OK;
}

ixl_status ixl_dlist_create(enum ixl_mem type, size_t capacity_hint, struct ixl_dlist **out)
{
    if (out == NULL || (unsigned)type >= IXL_MEM_COUNT)
        return IXL_ERR_INVALID_ARG;
    struct ixl_dlist *l = sys_calloc(1, sizeof(*l));
    if (l == NULL)
        return IXL_ERR_NO_MEMORY;
    l->type = type;
    if (reserve(l, capacity_hint ? capacity_hint : 1) != IXL_OK) {
        ixl_dlist_destroy(l);
        return IXL_ERR_NO_MEMORY;
    }
    *out = l;
    return IXL_OK;
}

void ixl_dlist_destroy(struct ixl_dlist *list)
{
    if (list == NULL)
        return;
    free(list->runs);
    free(list->first);
    free(list);
}

static int run_ok(const struct ixl_run *r)
{
    if (r->len == 0 || r->count == 0 || r->len > UINT64_MAX - r->addr)
        return 0;
    /* The last descriptor's end must not wrap around. */
    if (r->count > 1 && r->stride > (UINT64_MAX - r->len - r->addr) / (r->count - 1))
        return 0;
    return 1;
}

int ixl_dlist_append_runs(struct ixl_dlist *list, const struct ixl_run *runs, size_t n)
{
    if (reserve(list, list->n_runs + n) != IXL_OK)
        return IXL_ERR_NO_MEMORY;
    uint64_t total = list->first[list->n_runs];
    for (size_t i = 0; i < n; i++) {
        if (runs[i].count > UINT64_MAX - total)
            return IXL_ERR_TOO_LARGE;
        list->runs[list->n_runs + i] = runs[i];
        total += runs[i].count;
        list->first[list->n_runs + i + 1] = total;
    }
    list->n_runs += n;
    return IXL_OK;
}

ixl_status ixl_dlist_add(struct ixl_dlist *list, const struct ixl_desc *descs, size_t n)
{
    if (list == NULL || (descs == NULL && n > 0))
        return IXL_ERR_INVALID_ARG;
    for (size_t i = 0; i < n; i++) {
        struct ixl_run r = {descs[i].addr, descs[i].len, descs[i].len, 1, descs[i].dev};
        if (!run_ok(&r))
            return IXL_ERR_INVALID_ARG;
    }
    if (reserve(list, list->n_runs + n) != IXL_OK)
        return IXL_ERR_NO_MEMORY;
    uint64_t total = list->first[list->n_runs];
    if (n > UINT64_MAX - total)
        return IXL_ERR_TOO_LARGE;
    struct ixl_run *out = list->runs + list->n_runs;
    uint64_t *first = list->first + list->n_runs + 1;
    for (size_t i = 0; i < n; i++) {
        out[i].addr = descs[i].addr;
        out[i].len = descs[i].len;
        out[i].stride = descs[i].len;
        out[i].count = 1;
        out[i].dev = descs[i].dev;
        first[i] = ++total;
    }
    list->n_runs += n;
    return IXL_OK;
}

ixl_status ixl_dlist_add_runs(struct ixl_dlist *list, const struct ixl_run *runs, size_t n)
{
    if (list == NULL || (runs == NULL && n > 0))
        return IXL_ERR_INVALID_ARG;
    for (size_t i = 0; i < n; i++)
        if (!run_ok(&runs[i]))
            return IXL_ERR_INVALID_ARG;
    return ixl_dlist_append_runs(list, runs, n);
}

enum ixl_mem ixl_dlist_type(const struct ixl_dlist *list)
{
    return list ? list->type : IXL_MEM_COUNT;
}

uint64_t ixl_dlist_count(const struct ixl_dlist *list)
{
    return list ? list->first[list->n_runs] : 0;
}

size_t ixl_dlist_run_count(const struct ixl_dlist *list)
{
    return list ? list->n_runs : 0;
}

size_t ixl_dlist_find_run(const struct ixl_dlist *list, uint64_t index)
{
    size_t lo = 0, hi = list->n_runs; /* first[lo] <= index < first[hi] */
    while (hi - lo > 1) {
        size_t mid = lo + (hi - lo) / 2;
        if (list->first[mid] <= index)
            lo = mid;
        else
            hi = mid;
    }
    return lo;
}

ixl_status ixl_dlist_get(const struct ixl_dlist *list, uint64_t index, struct ixl_desc *out)
{
    if (list == NULL || out == NULL)
        return IXL_ERR_INVALID_ARG;
    if (index >= ixl_dlist_count(list))
        return IXL_ERR_INDEX;
    size_t r = ixl_dlist_find_run(list, index);
    const struct ixl_run *run = &list->runs[r];
    out->addr = run->addr + (index - list->first[r]) * run->stride;
    out->len = run->len;
    out->dev = run->dev;
    return IXL_OK;
}

ixl_status ixl_dlist_get_run(const struct ixl_dlist *list, size_t index, struct ixl_run *out)
{
    if (list == NULL || out == NULL)
        return IXL_ERR_INVALID_ARG;
    if (index >= list->n_runs)
        return IXL_ERR_INDEX;
    *out = list->runs[index];
    return IXL_OK;
}
