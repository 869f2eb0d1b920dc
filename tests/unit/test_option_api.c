/* The option API of ixl.h, through libixl.so as a tool sees it: ixl_option_describe (the text
 * ixl-info prints, for every type and range shape) and ixl_option_parse (the parser of backend
 * options), their refusals of NULLs, small buffers and descriptors the plugin manager refuses,
 * outputs untouched on error, and the reason in ixl_agent_last_error(NULL), per thread. */
#include <limits.h>
#include <pthread.h>

#include "check.h"

static const char *const colors[] = {"red", "green", "blue", NULL};

/* A descriptor with the fields a test varies; the others as a plugin would set them. */
static struct ixl_option opt(enum ixl_opt_type type, const char *def, const char *unit, int64_t min,
                             int64_t max)
{
    struct ixl_option o = {.name = "x",
                           .default_value = def,
                           .description = "d",
                           .type = type,
                           .unit = unit,
                           .min = min,
                           .max = max};
    if (type == IXL_OPT_ENUM)
        o.choices = colors;
    return o;
}

static void describes_at(int line, struct ixl_option o, const char *want)
{
    char buf[256];
    int rc = ixl_option_describe(&o, buf, sizeof(buf));
    if (rc != IXL_OK)
        check_fail(__FILE__, line, "describe refused (%s): %s", ixl_strerror(rc),
                   ixl_agent_last_error(NULL));
    if (strcmp(buf, want) != 0)
        check_fail(__FILE__, line, "described as '%s', want '%s'", buf, want);
    if (ixl_agent_last_error(NULL)[0] != '\0')
        check_fail(__FILE__, line, "an error text after success: %s", ixl_agent_last_error(NULL));
    /* Exactly the room it needs is enough; one byte less is refused, buf untouched. */
    size_t need = strlen(want) + 1;
    char exact[256];
    if (ixl_option_describe(&o, exact, need) != IXL_OK || strcmp(exact, want) != 0)
        check_fail(__FILE__, line, "'%s' does not fit in %zu bytes", want, need);
    memset(exact, '#', sizeof(exact));
    if (ixl_option_describe(&o, exact, need - 1) != IXL_ERR_INVALID_ARG)
        check_fail(__FILE__, line, "'%s' accepted in %zu bytes", want, need - 1);
    for (size_t i = 0; i < sizeof(exact); i++)
        if (exact[i] != '#')
            check_fail(__FILE__, line, "buf written on failure");
    char needs[64];
    snprintf(needs, sizeof(needs), "needs %zu bytes, buf has %zu", need, need - 1);
    check_str_has_at(__FILE__, line, ixl_agent_last_error(NULL), needs);
}
#define DESCRIBES(o, want) describes_at(__LINE__, (o), (want))

static void test_describe(void)
{
    DESCRIBES(opt(IXL_OPT_BOOL, "0", NULL, 0, 0), "bool");
    DESCRIBES(opt(IXL_OPT_INT, "4", "connections", 1, 16), "int 1..16 connections");
    DESCRIBES(opt(IXL_OPT_INT, "0", "status", INT32_MIN, 0), "int -2147483648..0 status");
    DESCRIBES(opt(IXL_OPT_INT, "0", "status", INT64_MIN, 0), "int ..0 status");
    DESCRIBES(opt(IXL_OPT_INT, "3", NULL, 1, INT64_MAX), "int 1..");
    DESCRIBES(opt(IXL_OPT_INT, "0", "connections", 0, 0), "int (connections)");
    DESCRIBES(opt(IXL_OPT_INT, "0", "connections", INT64_MIN, INT64_MAX), "int (connections)");
    DESCRIBES(opt(IXL_OPT_INT, "0", NULL, 0, 0), "int");
    DESCRIBES(opt(IXL_OPT_SIZE, "1M", NULL, 4096, 1 << 30), "size 4K..1G bytes");
    DESCRIBES(opt(IXL_OPT_SIZE, "64K", NULL, 65536, INT64_MAX), "size 64K.. bytes");
    DESCRIBES(opt(IXL_OPT_SIZE, "1000", NULL, 1000, 1536), "size 1000..1536 bytes");
    DESCRIBES(opt(IXL_OPT_SIZE, "0", NULL, 0, (int64_t)3 << 40), "size 0..3T bytes");
    DESCRIBES(opt(IXL_OPT_SIZE, "0", NULL, 0, 0), "size (bytes)");
    DESCRIBES(opt(IXL_OPT_SIZE, "0", NULL, 0, INT64_MAX), "size (bytes)");
    DESCRIBES(opt(IXL_OPT_DURATION, "2000", "ms", 10, 3600000), "duration 10..3600000 ms");
    DESCRIBES(opt(IXL_OPT_DURATION, "0", "us", 0, 0), "duration (us)");
    DESCRIBES(opt(IXL_OPT_DURATION, "5", "s", 1, INT64_MAX), "duration 1.. s");
    DESCRIBES(opt(IXL_OPT_ENUM, "green", NULL, 0, 0), "enum red|green|blue");
    DESCRIBES(opt(IXL_OPT_STRING, "", NULL, 0, 0), "string");

    /* Misuse: NULLs, no room at all. */
    struct ixl_option o = opt(IXL_OPT_BOOL, "1", NULL, 0, 0);
    char buf[64] = "untouched";
    CHECK_RC(ixl_option_describe(NULL, buf, sizeof(buf)), IXL_ERR_INVALID_ARG);
    CHECK_STR_HAS(ixl_agent_last_error(NULL), "ixl_option_describe: the option is NULL");
    CHECK_RC(ixl_option_describe(&o, NULL, 64), IXL_ERR_INVALID_ARG);
    CHECK_STR_HAS(ixl_agent_last_error(NULL), "ixl_option_describe: buf is NULL");
    CHECK_RC(ixl_option_describe(&o, buf, 0), IXL_ERR_INVALID_ARG);
    CHECK_STR_HAS(ixl_agent_last_error(NULL), "needs 5 bytes, buf has 0");
    CHECK(strcmp(buf, "untouched") == 0);

    /* Every option of every plugin the manager accepted describes itself. */
    size_t n = ixl_plugin_count(), described = 0;
    for (size_t i = 0; i < n; i++) {
        struct ixl_plugin_info info = {.size = sizeof(info)};
        CHECK_RC(ixl_plugin_get(i, &info), IXL_OK);
        for (size_t j = 0; j < info.n_options; j++, described++)
            CHECK_RC(ixl_option_describe(&info.options[j], buf, sizeof(buf)), IXL_OK);
    }
    printf("  %zu options of %zu plugins described\n", described, n);
}

/* Descriptors the plugin manager refuses are refused by both functions, with its reason. */
static void refused_at(int line, struct ixl_option o, const char *has)
{
    char buf[256] = "untouched", norm[IXL_OPTION_NORM_MAX] = "untouched";
    struct ixl_opt_value v = {.i = 12345};
    if (ixl_option_describe(&o, buf, sizeof(buf)) != IXL_ERR_INVALID_ARG)
        check_fail(__FILE__, line, "describe accepted a bad descriptor (%s)", has);
    check_str_has_at(__FILE__, line, ixl_agent_last_error(NULL),
                     "ixl_option_describe: a descriptor the plugin manager refuses: ");
    check_str_has_at(__FILE__, line, ixl_agent_last_error(NULL), has);
    if (ixl_option_parse(&o, "1", &v, norm, sizeof(norm)) != IXL_ERR_INVALID_ARG)
        check_fail(__FILE__, line, "parse accepted a bad descriptor (%s)", has);
    check_str_has_at(__FILE__, line, ixl_agent_last_error(NULL),
                     "ixl_option_parse: a descriptor the plugin manager refuses: ");
    check_str_has_at(__FILE__, line, ixl_agent_last_error(NULL), has);
    if (strcmp(buf, "untouched") != 0 || strcmp(norm, "untouched") != 0 || v.i != 12345)
        check_fail(__FILE__, line, "output written on failure");
}
#define REFUSED(o, has) refused_at(__LINE__, (o), (has))

static void test_bad_descriptors(void)
{
    static const char *const none[] = {NULL}, *const twice[] = {"a", "A", NULL};
    struct ixl_option o = opt(IXL_OPT_BOOL, "1", NULL, 0, 0);
    o.type = (enum ixl_opt_type)0;
    REFUSED(o, "unknown type 0");
    o.type = (enum ixl_opt_type)99;
    REFUSED(o, "unknown type 99");
    o = opt(IXL_OPT_BOOL, "1", NULL, 0, 0);
    o.name = NULL;
    REFUSED(o, "name is missing");
    o.name = "has space";
    REFUSED(o, "not [A-Za-z0-9_]+");
    o = opt(IXL_OPT_BOOL, NULL, NULL, 0, 0);
    REFUSED(o, "lacks a default or a description");
    o = opt(IXL_OPT_BOOL, "maybe", NULL, 0, 0);
    REFUSED(o, "bad default: x='maybe': not a boolean");
    REFUSED(opt(IXL_OPT_INT, "0", NULL, 5, 1), "range 5..1 is empty");
    REFUSED(opt(IXL_OPT_SIZE, "0", NULL, -1, 10), "a size's range cannot go below 0");
    REFUSED(opt(IXL_OPT_SIZE, "2G", NULL, 4096, 1 << 30), "bad default: x='2G': out of range");
    REFUSED(opt(IXL_OPT_DURATION, "1", NULL, 0, 0), "(not NULL)");
    REFUSED(opt(IXL_OPT_DURATION, "1", "min", 0, 0), "unit must be us, ms or s (not min)");
    o = opt(IXL_OPT_ENUM, "red", NULL, 0, 0);
    o.choices = NULL;
    REFUSED(o, "an enum without choices");
    o.choices = none;
    REFUSED(o, "an enum without choices");
    o.choices = twice;
    o.default_value = "a";
    REFUSED(o, "choice 'A' appears twice");
}

/* text parses as o to i, normalized to norm_want; str points where ixl.h says. */
static void parses_at(int line, struct ixl_option o, const char *text, int64_t i,
                      const char *norm_want)
{
    struct ixl_opt_value v;
    char norm[IXL_OPTION_NORM_MAX];
    memset(norm, '#', sizeof(norm));
    int rc = ixl_option_parse(&o, text, &v, norm, sizeof(norm));
    if (rc != IXL_OK)
        check_fail(__FILE__, line, "%s='%s' refused: %s", o.name, text, ixl_agent_last_error(NULL));
    if (ixl_agent_last_error(NULL)[0] != '\0')
        check_fail(__FILE__, line, "an error text after success: %s", ixl_agent_last_error(NULL));
    if (v.i != i || (i >= 0 && v.u != (uint64_t)i) || (i < 0 && v.u != 0))
        check_fail(__FILE__, line, "'%s' gave i %lld u %llu, want %lld", text, (long long)v.i,
                   (unsigned long long)v.u, (long long)i);
    if (v.str == NULL || strcmp(v.str, norm_want) != 0)
        check_fail(__FILE__, line, "'%s' normalized to '%s', want '%s'", text,
                   v.str ? v.str : "(null)", norm_want);
    const char *where = o.type == IXL_OPT_ENUM     ? o.choices[v.i]
                        : o.type == IXL_OPT_STRING ? text
                                                   : norm;
    if (v.str != where)
        check_fail(__FILE__, line, "'%s': str does not point where ixl.h says", text);
    if ((o.type == IXL_OPT_ENUM || o.type == IXL_OPT_STRING) && norm[0] != '#')
        check_fail(__FILE__, line, "'%s': norm written for a type that does not use it", text);
}
#define PARSES(o, text, i, norm) parses_at(__LINE__, (o), (text), (i), (norm))

/* text is refused with a reason that starts "x='TEXT': " and has has in it; nothing written. */
static void unparsed_at(int line, struct ixl_option o, const char *text, const char *has)
{
    struct ixl_opt_value v = {.i = 12345};
    char norm[IXL_OPTION_NORM_MAX] = "untouched";
    if (ixl_option_parse(&o, text, &v, norm, sizeof(norm)) != IXL_ERR_INVALID_ARG)
        check_fail(__FILE__, line, "'%s' accepted (%lld)", text, (long long)v.i);
    char head[128];
    snprintf(head, sizeof(head), "x='%s': ", text);
    const char *why = ixl_agent_last_error(NULL);
    if (strncmp(why, head, strlen(head)) != 0 || strstr(why, has) == NULL)
        check_fail(__FILE__, line, "reason '%s' lacks '%s' or '%s'", why, head, has);
    if (v.i != 12345 || strcmp(norm, "untouched") != 0)
        check_fail(__FILE__, line, "'%s': output written on failure", text);
    printf("  %-12s -> %s\n", text, why);
}
#define UNPARSED(o, text, has) unparsed_at(__LINE__, (o), (text), (has))

static void test_parse(void)
{
    struct ixl_option b = opt(IXL_OPT_BOOL, "0", NULL, 0, 0);
    PARSES(b, " Yes ", 1, "1");
    PARSES(b, "off", 0, "0");
    UNPARSED(b, "2", "not a boolean");
    struct ixl_option n = opt(IXL_OPT_INT, "4", "connections", -5, 16);
    PARSES(n, "-5", -5, "-5");
    PARSES(n, "+16", 16, "16");
    UNPARSED(n, "17", "out of range; want an integer (connections) in -5..16");
    UNPARSED(n, "4K", "an integer takes no suffix");
    struct ixl_option s = opt(IXL_OPT_SIZE, "1M", NULL, 4096, 1 << 30);
    PARSES(s, "64K", 65536, "65536");
    PARSES(s, "1GiB", 1 << 30, "1073741824");
    PARSES(s, "4096", 4096, "4096");
    UNPARSED(s, "2G", "out of range; want a size in bytes, 4K..1G");
    UNPARSED(s, "64KB", "unknown size suffix");
    UNPARSED(s, "-4K", "negative");
    UNPARSED(s, "", "empty");
    struct ixl_option any = opt(IXL_OPT_SIZE, "0", NULL, 0, 0);
    PARSES(any, "8T", (int64_t)8 << 40, "8796093022208");
    UNPARSED(any, "99999999999T", "too large");
    struct ixl_option ms = opt(IXL_OPT_DURATION, "2000", "ms", 10, 3600000);
    PARSES(ms, "2s", 2000, "2000");
    PARSES(ms, "1500", 1500, "1500");
    PARSES(ms, "15000us", 15, "15");
    UNPARSED(ms, "1500us", "not a whole number of ms");
    UNPARSED(ms, "5", "out of range");
    UNPARSED(ms, "2min", "unknown duration suffix");
    struct ixl_option e = opt(IXL_OPT_ENUM, "green", NULL, 0, 0);
    PARSES(e, "GREEN", 1, "green");
    PARSES(e, " blue", 2, "blue");
    UNPARSED(e, "purple", "not a choice; want one of red, green, blue");
    struct ixl_option str = opt(IXL_OPT_STRING, "", NULL, 0, 0);
    PARSES(str, " any text ", 0, " any text ");
    PARSES(str, "", 0, "");

    /* Misuse: each NULL, a norm below IXL_OPTION_NORM_MAX (for every type, even those that do
     * not write it); exactly IXL_OPTION_NORM_MAX is enough. */
    struct ixl_opt_value v = {.i = 12345};
    char norm[IXL_OPTION_NORM_MAX] = "untouched";
    CHECK_RC(ixl_option_parse(NULL, "1", &v, norm, sizeof(norm)), IXL_ERR_INVALID_ARG);
    CHECK_STR_HAS(ixl_agent_last_error(NULL), "ixl_option_parse: the option is NULL");
    CHECK_RC(ixl_option_parse(&s, NULL, &v, norm, sizeof(norm)), IXL_ERR_INVALID_ARG);
    CHECK_STR_HAS(ixl_agent_last_error(NULL), "ixl_option_parse: text is NULL");
    CHECK_RC(ixl_option_parse(&s, "1", NULL, norm, sizeof(norm)), IXL_ERR_INVALID_ARG);
    CHECK_STR_HAS(ixl_agent_last_error(NULL), "ixl_option_parse: out is NULL");
    CHECK_RC(ixl_option_parse(&s, "4K", &v, NULL, sizeof(norm)), IXL_ERR_INVALID_ARG);
    CHECK_STR_HAS(ixl_agent_last_error(NULL), "ixl_option_parse: norm is NULL");
    CHECK_RC(ixl_option_parse(&s, "4K", &v, norm, sizeof(norm) - 1), IXL_ERR_INVALID_ARG);
    CHECK_STR_HAS(ixl_agent_last_error(NULL), "norm_cap 31 is below IXL_OPTION_NORM_MAX (32)");
    CHECK_RC(ixl_option_parse(&e, "red", &v, norm, 0), IXL_ERR_INVALID_ARG);
    CHECK(v.i == 12345 && strcmp(norm, "untouched") == 0);
    CHECK_RC(ixl_option_parse(&s, "4K", &v, norm, sizeof(norm)), IXL_OK);
    CHECK(v.u == 4096 && v.str == norm);
    CHECK(strcmp(ixl_agent_last_error(NULL), "") == 0);
}

/* The reason is the calling thread's: another thread's failure does not show here. */
static void *fail_elsewhere(void *arg)
{
    struct ixl_option *o = arg;
    struct ixl_opt_value v;
    char norm[IXL_OPTION_NORM_MAX];
    int rc = ixl_option_parse(o, "nope", &v, norm, sizeof(norm));
    int seen = rc == IXL_ERR_INVALID_ARG && strstr(ixl_agent_last_error(NULL), "x='nope'") != NULL;
    return seen ? o : NULL;
}

static void test_threads(void)
{
    struct ixl_option o = opt(IXL_OPT_SIZE, "0", NULL, 0, 0);
    struct ixl_opt_value v;
    char norm[IXL_OPTION_NORM_MAX];
    CHECK_RC(ixl_option_parse(&o, "mine", &v, norm, sizeof(norm)), IXL_ERR_INVALID_ARG);
    pthread_t t;
    void *ret = NULL;
    CHECK(pthread_create(&t, NULL, fail_elsewhere, &o) == 0);
    CHECK(pthread_join(t, &ret) == 0);
    CHECK(ret == &o);
    CHECK_STR_HAS(ixl_agent_last_error(NULL), "x='mine'");
}

int main(void)
{
    test_describe();
    test_bad_descriptors();
    test_parse();
    test_threads();
    printf("ok\n");
    return 0;
}
