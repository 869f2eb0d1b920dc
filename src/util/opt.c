#include "util/opt.h"

#include <inttypes.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include <ixl/ixl.h>

#include "util/err.h"

const char *ixl_opt_type_name(enum ixl_opt_type t)
{
    switch (t) {
    case IXL_OPT_BOOL:
        return "bool";
    case IXL_OPT_INT:
        return "int";
    case IXL_OPT_SIZE:
        return "size";
    case IXL_OPT_DURATION:
        return "duration";
    case IXL_OPT_ENUM:
        return "enum";
    case IXL_OPT_STRING:
        return "string";
    }
    return "unknown";
}

static int is_blank(char c)
{
    return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v';
}

static int is_digit(char c)
{
    return c >= '0' && c <= '9';
}

/* Microseconds per unit of a duration suffix; 0 if s is none. */
static uint64_t duration_factor(const char *s, size_t n)
{
    if (n == 2 && strncmp(s, "us", 2) == 0)
        return 1;
    if (n == 2 && strncmp(s, "ms", 2) == 0)
        return 1000;
    if (n == 1 && s[0] == 's')
        return 1000000;
    return 0;
}

/* Bytes per unit of a size suffix; 0 if s is none ("" is 1). */
static uint64_t size_factor(const char *s, size_t n)
{
    static const char letters[] = "KMGT";
    if (n == 0)
        return 1;
    if (n != 1 && !(n == 3 && s[1] == 'i' && s[2] == 'B'))
        return 0;
    for (int i = 0; letters[i]; i++)
        if (s[0] == letters[i] || (n == 1 && s[0] == letters[i] - 'A' + 'a'))
            return (uint64_t)1 << (10 * (i + 1));
    return 0;
}

/* The range in force: the declared one, or the type's own when min == max == 0. */
static void range_of(const struct ixl_option *o, int64_t *lo, int64_t *hi)
{
    if (o->min == 0 && o->max == 0) {
        *lo = o->type == IXL_OPT_INT ? INT64_MIN : 0;
        *hi = INT64_MAX;
    } else {
        *lo = o->min;
        *hi = o->max;
    }
}

/* v as the largest exact binary unit: 65536 -> "64K", 1000 -> "1000". */
static void fmt_size(char *buf, size_t cap, int64_t v)
{
    static const char letters[] = "KMGT";
    int best = -1;
    for (int i = 0; letters[i] && v > 0; i++)
        if (v % ((int64_t)1 << (10 * (i + 1))) == 0)
            best = i;
    if (best < 0)
        snprintf(buf, cap, "%" PRId64, v);
    else
        snprintf(buf, cap, "%" PRId64 "%c", v >> (10 * (best + 1)), letters[best]);
}

/* A bound as messages and ixl-info print it: a size in its largest exact binary unit, else decimal.
 */
static void fmt_bound(char *buf, size_t cap, const struct ixl_option *o, int64_t v)
{
    if (o->type == IXL_OPT_SIZE)
        fmt_size(buf, cap, v);
    else
        snprintf(buf, cap, "%" PRId64, v);
}

/* The declared range as words: sep then "4K..1G", or ", at least 64K", ", at most 0"; "" when
 * it is the type's own (min == max == 0). */
static void fmt_range(char *buf, size_t cap, const struct ixl_option *o, const char *sep)
{
    char a[32], b[32];
    fmt_bound(a, sizeof(a), o, o->min);
    fmt_bound(b, sizeof(b), o, o->max);
    int64_t floor = o->type == IXL_OPT_INT ? INT64_MIN : 0;
    if ((o->min == 0 && o->max == 0) || (o->min == floor && o->max == INT64_MAX))
        buf[0] = '\0';
    else if (o->max == INT64_MAX)
        snprintf(buf, cap, ", at least %s", a);
    else if (o->min == floor && o->type == IXL_OPT_INT)
        snprintf(buf, cap, ", at most %s", b);
    else
        snprintf(buf, cap, "%s%s..%s", sep, a, b);
}

const char *ixl_opt_want(const struct ixl_option *o, char *buf, size_t cap)
{
    char r[80];
    switch (o->type) {
    case IXL_OPT_BOOL:
        snprintf(buf, cap, "a boolean (1, 0, true, false, yes, no, on, off)");
        break;
    case IXL_OPT_INT:
        fmt_range(r, sizeof(r), o, " in ");
        snprintf(buf, cap, "an integer%s%s%s%s", o->unit ? " (" : "", o->unit ? o->unit : "",
                 o->unit ? ")" : "", r);
        break;
    case IXL_OPT_SIZE:
        fmt_range(r, sizeof(r), o, ", ");
        snprintf(buf, cap, "a size in bytes%s (suffixes K, M, G, T: powers of 1024)", r);
        break;
    case IXL_OPT_DURATION:
        fmt_range(r, sizeof(r), o, ", ");
        snprintf(buf, cap, "a duration in %s%s (a bare number is %s; suffixes us, ms, s)", o->unit,
                 r, o->unit);
        break;
    case IXL_OPT_ENUM: {
        size_t used = (size_t)snprintf(buf, cap, "one of ");
        for (size_t i = 0; o->choices[i] != NULL && used < cap; i++)
            used += (size_t)snprintf(buf + used, cap - used, "%s%s", i ? ", " : "", o->choices[i]);
        break;
    }
    case IXL_OPT_STRING:
        snprintf(buf, cap, "a string");
        break;
    default:
        snprintf(buf, cap, "a value of unknown type %d", (int)o->type);
        break;
    }
    return buf;
}

/* The whole value failed: writes "NAME='TEXT': problem; want WHAT". */
static int refuse(const struct ixl_option *o, const char *text, const char *problem, char *why,
                  size_t cap)
{
    char want[256];
    snprintf(why, cap, "%s='%s': %s; want %s", o->name, text, problem,
             ixl_opt_want(o, want, sizeof(want)));
    return IXL_ERR_INVALID_ARG;
}

int ixl_opt_parse(const struct ixl_option *o, const char *text, struct ixl_opt_value *out,
                  char *norm, char *why, size_t cap)
{
    struct ixl_opt_value v = {0, 0, NULL, {0, 0}};
    if (o->type == IXL_OPT_STRING) {
        v.str = text;
        *out = v;
        return IXL_OK;
    }
    /* Every other type ignores surrounding blanks: [s, e) is what is left. */
    const char *s = text, *e = text + strlen(text);
    while (s < e && is_blank(*s))
        s++;
    while (e > s && is_blank(e[-1]))
        e--;
    size_t n = (size_t)(e - s);
    if (n == 0)
        return refuse(o, text, "empty", why, cap);

    if (o->type == IXL_OPT_BOOL) {
        static const char *const yes[] = {"1", "true", "yes", "on"}, *const no[] = {"0", "false",
                                                                                    "no", "off"};
        for (int i = 0; i < 4; i++) {
            if (strlen(yes[i]) == n && strncasecmp(s, yes[i], n) == 0)
                v.i = 1;
            else if (strlen(no[i]) == n && strncasecmp(s, no[i], n) == 0)
                v.i = 0;
            else
                continue;
            v.u = (uint64_t)v.i;
            snprintf(norm, IXL_OPT_NORM_MAX, "%d", (int)v.i);
            v.str = norm;
            *out = v;
            return IXL_OK;
        }
        return refuse(o, text, "not a boolean", why, cap);
    }
    if (o->type == IXL_OPT_ENUM) {
        for (size_t i = 0; o->choices[i] != NULL; i++)
            if (strlen(o->choices[i]) == n && strncasecmp(s, o->choices[i], n) == 0) {
                v.i = (int64_t)i;
                v.u = i;
                v.str = o->choices[i];
                *out = v;
                return IXL_OK;
            }
        return refuse(o, text, "not a choice", why, cap);
    }

    /* INT, SIZE, DURATION: [sign] digits [blanks] [suffix]. */
    bool neg = false;
    if (*s == '+' || *s == '-') {
        neg = *s == '-';
        s++;
    }
    if (neg && o->type != IXL_OPT_INT)
        return refuse(o, text, "negative", why, cap);
    if (s == e || !is_digit(*s))
        return refuse(o, text, "not a number", why, cap);
    uint64_t mag = 0;
    bool over = false;
    for (; s < e && is_digit(*s); s++) {
        unsigned d = (unsigned)(*s - '0');
        if (mag > (UINT64_MAX - d) / 10)
            over = true;
        else
            mag = mag * 10 + d;
    }
    while (s < e && is_blank(*s))
        s++;
    size_t sl = (size_t)(e - s); /* the suffix: s[0..sl) */
    if (o->type == IXL_OPT_INT && sl > 0)
        return refuse(o, text, "not a number (an integer takes no suffix)", why, cap);
    if (o->type == IXL_OPT_SIZE) {
        uint64_t f = size_factor(s, sl);
        if (f == 0)
            return refuse(o, text, "unknown size suffix", why, cap);
        if (over || mag > (uint64_t)INT64_MAX / f)
            return refuse(o, text, "too large", why, cap);
        mag *= f;
    } else if (o->type == IXL_OPT_DURATION) {
        uint64_t f = sl == 0 ? duration_factor(o->unit, strlen(o->unit)) : duration_factor(s, sl);
        uint64_t base = duration_factor(o->unit, strlen(o->unit));
        if (f == 0)
            return refuse(o, text, "unknown duration suffix", why, cap);
        if (over)
            return refuse(o, text, "too large", why, cap);
        if (f >= base) {
            if (mag > (uint64_t)INT64_MAX / (f / base))
                return refuse(o, text, "too large", why, cap);
            mag *= f / base;
        } else {
            if (mag % (base / f) != 0) {
                char p[64];
                snprintf(p, sizeof(p), "not a whole number of %s", o->unit);
                return refuse(o, text, p, why, cap);
            }
            mag /= base / f;
        }
    }
    int64_t val;
    if (o->type == IXL_OPT_INT) {
        if (over || mag > (uint64_t)INT64_MAX + (neg ? 1u : 0u))
            return refuse(o, text, "too large", why, cap);
        val = neg ? (mag == (uint64_t)INT64_MAX + 1u ? INT64_MIN : -(int64_t)mag) : (int64_t)mag;
    } else {
        val = (int64_t)mag; /* at most INT64_MAX, checked above */
    }
    int64_t lo, hi;
    range_of(o, &lo, &hi);
    if (val < lo || val > hi)
        return refuse(o, text, "out of range", why, cap);
    v.i = val;
    v.u = val < 0 ? 0 : (uint64_t)val;
    snprintf(norm, IXL_OPT_NORM_MAX, "%" PRId64, val);
    v.str = norm;
    *out = v;
    return IXL_OK;
}

static int valid_name(const char *s)
{
    if (s == NULL || *s == '\0')
        return 0;
    for (; *s; s++)
        if (!((*s >= 'A' && *s <= 'Z') || (*s >= 'a' && *s <= 'z') || is_digit(*s) || *s == '_'))
            return 0;
    return 1;
}

int ixl_opt_check(const struct ixl_option *o, char *why, size_t cap)
{
    if (!valid_name(o->name)) {
        snprintf(why, cap, "an option's name is missing or not [A-Za-z0-9_]+");
        return IXL_ERR_INVALID_ARG;
    }
    if (o->default_value == NULL || o->description == NULL) {
        snprintf(why, cap, "option %s lacks a default or a description", o->name);
        return IXL_ERR_INVALID_ARG;
    }
    switch (o->type) {
    case IXL_OPT_BOOL:
    case IXL_OPT_STRING:
        break;
    case IXL_OPT_INT:
    case IXL_OPT_SIZE:
    case IXL_OPT_DURATION:
        if (o->min > o->max) {
            snprintf(why, cap, "option %s: range %" PRId64 "..%" PRId64 " is empty", o->name,
                     o->min, o->max);
            return IXL_ERR_INVALID_ARG;
        }
        if (o->type != IXL_OPT_INT && o->min < 0) {
            snprintf(why, cap, "option %s: a %s's range cannot go below 0", o->name,
                     ixl_opt_type_name(o->type));
            return IXL_ERR_INVALID_ARG;
        }
        if (o->type == IXL_OPT_DURATION &&
            (o->unit == NULL || duration_factor(o->unit, strlen(o->unit)) == 0)) {
            snprintf(why, cap, "option %s: a duration's unit must be us, ms or s (not %s)", o->name,
                     o->unit ? o->unit : "NULL");
            return IXL_ERR_INVALID_ARG;
        }
        break;
    case IXL_OPT_ENUM:
        if (o->choices == NULL || o->choices[0] == NULL) {
            snprintf(why, cap, "option %s: an enum without choices", o->name);
            return IXL_ERR_INVALID_ARG;
        }
        for (size_t i = 0; o->choices[i] != NULL; i++) {
            if (o->choices[i][0] == '\0') {
                snprintf(why, cap, "option %s: choice %zu is empty", o->name, i);
                return IXL_ERR_INVALID_ARG;
            }
            for (size_t j = 0; j < i; j++)
                if (strcasecmp(o->choices[i], o->choices[j]) == 0) {
                    snprintf(why, cap, "option %s: choice '%s' appears twice", o->name,
                             o->choices[i]);
                    return IXL_ERR_INVALID_ARG;
                }
        }
        break;
    default:
        snprintf(why, cap,
                 "option %s: unknown type %d (this ixl knows %d..%d: bool, int, size, duration, "
                 "enum, string)",
                 o->name, (int)o->type, IXL_OPT_BOOL, IXL_OPT_STRING);
        return IXL_ERR_INVALID_ARG;
    }
    struct ixl_opt_value v;
    char norm[IXL_OPT_NORM_MAX], bad[512];
    if (ixl_opt_parse(o, o->default_value, &v, norm, bad, sizeof(bad)) != IXL_OK) {
        snprintf(why, cap, "option %s: bad default: %s", o->name, bad);
        return IXL_ERR_INVALID_ARG;
    }
    return IXL_OK;
}

/* ------------------------------------------------------------------------------------------ */
/* The public face (ixl.h): ixl_option_describe and ixl_option_parse                          */
/* ------------------------------------------------------------------------------------------ */

/* Text built by measure-then-write: with buf NULL only len grows (vsnprintf's count). */
struct text {
    char *buf;
    size_t cap;
    size_t len;
};

__attribute__((format(printf, 2, 3))) static void add(struct text *t, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int n = t->len < t->cap ? vsnprintf(t->buf + t->len, t->cap - t->len, fmt, ap)
                            : vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    if (n > 0)
        t->len += (size_t)n;
}

/* "size 4K..1G bytes", "int (connections)", "enum a|b": see ixl_option_describe in ixl.h. */
static void describe(struct text *t, const struct ixl_option *o)
{
    add(t, "%s", ixl_opt_type_name(o->type));
    if (o->type == IXL_OPT_ENUM) {
        for (size_t i = 0; o->choices[i] != NULL; i++)
            add(t, "%c%s", i ? '|' : ' ', o->choices[i]);
        return;
    }
    if (o->type != IXL_OPT_INT && o->type != IXL_OPT_SIZE && o->type != IXL_OPT_DURATION)
        return;
    const char *unit = o->type == IXL_OPT_SIZE ? "bytes" : o->unit;
    int64_t floor = o->type == IXL_OPT_INT ? INT64_MIN : 0;
    bool ranged = !(o->min == 0 && o->max == 0) && !(o->min == floor && o->max == INT64_MAX);
    if (ranged) {
        char lo[32] = "", hi[32] = "";
        if (!(o->type == IXL_OPT_INT && o->min == INT64_MIN))
            fmt_bound(lo, sizeof(lo), o, o->min);
        if (o->max != INT64_MAX)
            fmt_bound(hi, sizeof(hi), o, o->max);
        add(t, " %s..%s", lo, hi);
        if (unit != NULL)
            add(t, " %s", unit);
    } else if (unit != NULL) {
        add(t, " (%s)", unit);
    }
}

/* ixl_opt_check for a public entry: IXL_OK, or the error recorded for agent-less callers. */
static int check_public(const char *fn, const struct ixl_option *o)
{
    char why[512];
    if (ixl_opt_check(o, why, sizeof(why)) != IXL_OK)
        return ixl_err_quiet(IXL_ERR_NO_AGENT, IXL_ERR_INVALID_ARG,
                             "%s: a descriptor the plugin manager refuses: %s", fn, why);
    return IXL_OK;
}

ixl_status ixl_option_describe(const struct ixl_option *o, char *buf, size_t cap)
{
    ixl_err_clear(IXL_ERR_NO_AGENT);
    if (o == NULL || buf == NULL)
        return ixl_err_quiet(IXL_ERR_NO_AGENT, IXL_ERR_INVALID_ARG,
                             "ixl_option_describe: %s is NULL", o == NULL ? "the option" : "buf");
    int rc = check_public("ixl_option_describe", o);
    if (rc != IXL_OK)
        return rc;
    struct text t = {NULL, 0, 0};
    describe(&t, o);
    if (t.len >= cap)
        return ixl_err_quiet(IXL_ERR_NO_AGENT, IXL_ERR_INVALID_ARG,
                             "ixl_option_describe: option %s: the text needs %zu bytes, buf has "
                             "%zu",
                             o->name, t.len + 1, cap);
    t = (struct text){buf, cap, 0};
    describe(&t, o);
    return IXL_OK;
}

ixl_status ixl_option_parse(const struct ixl_option *o, const char *text, struct ixl_opt_value *out,
                            char *norm, size_t norm_cap)
{
    ixl_err_clear(IXL_ERR_NO_AGENT);
    const char *null = o == NULL      ? "the option"
                       : text == NULL ? "text"
                       : out == NULL  ? "out"
                       : norm == NULL ? "norm"
                                      : NULL;
    if (null != NULL)
        return ixl_err_quiet(IXL_ERR_NO_AGENT, IXL_ERR_INVALID_ARG, "ixl_option_parse: %s is NULL",
                             null);
    if (norm_cap < IXL_OPTION_NORM_MAX)
        return ixl_err_quiet(IXL_ERR_NO_AGENT, IXL_ERR_INVALID_ARG,
                             "ixl_option_parse: norm_cap %zu is below IXL_OPTION_NORM_MAX (%d)",
                             norm_cap, IXL_OPTION_NORM_MAX);
    int rc = check_public("ixl_option_parse", o);
    if (rc != IXL_OK)
        return rc;
    char why[1024];
    if (ixl_opt_parse(o, text, out, norm, why, sizeof(why)) != IXL_OK)
        return ixl_err_quiet(IXL_ERR_NO_AGENT, IXL_ERR_INVALID_ARG, "%s", why);
    return IXL_OK;
}
