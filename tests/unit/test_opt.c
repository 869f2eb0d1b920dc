/* The option parser (src/util/opt.c): every type, suffixes, ranges, overflow, signs, blanks,
 * empty values; the checks of an option table the plugin manager refuses plugins by. */
#include <limits.h>

#include <ixl/ixl_plugin.h>

#include "check.h"
#include "plugin/manager.h"
#include "util/config.h"
#include "util/opt.h"

static const char *const colors[] = {"red", "green", "blue", NULL};

static const struct ixl_option o_bool = {
    .name = "flag", .default_value = "1", .description = "d", .type = IXL_OPT_BOOL};
static const struct ixl_option o_int = {.name = "n",
                                        .default_value = "4",
                                        .description = "d",
                                        .type = IXL_OPT_INT,
                                        .unit = "connections",
                                        .min = -5,
                                        .max = 16};
static const struct ixl_option o_int_any = {
    .name = "any", .default_value = "0", .description = "d", .type = IXL_OPT_INT};
static const struct ixl_option o_size = {.name = "chunk",
                                         .default_value = "1M",
                                         .description = "d",
                                         .type = IXL_OPT_SIZE,
                                         .min = 4096,
                                         .max = 1 << 30};
static const struct ixl_option o_size_any = {
    .name = "sz", .default_value = "0", .description = "d", .type = IXL_OPT_SIZE};
static const struct ixl_option o_ms = {.name = "timeout_ms",
                                       .default_value = "2000",
                                       .description = "d",
                                       .type = IXL_OPT_DURATION,
                                       .unit = "ms",
                                       .min = 0,
                                       .max = 3600000};
static const struct ixl_option o_s = {.name = "ttl",
                                      .default_value = "10",
                                      .description = "d",
                                      .type = IXL_OPT_DURATION,
                                      .unit = "s"};
static const struct ixl_option o_us = {.name = "delay_us",
                                       .default_value = "0",
                                       .description = "d",
                                       .type = IXL_OPT_DURATION,
                                       .unit = "us"};
static const struct ixl_option o_enum = {.name = "color",
                                         .default_value = "green",
                                         .description = "d",
                                         .type = IXL_OPT_ENUM,
                                         .choices = colors};
static const struct ixl_option o_str = {
    .name = "addrs", .default_value = "", .description = "d", .type = IXL_OPT_STRING};

static char why[1024];

/* text parses as o to i (and normalizes to norm_want when not NULL). */
static void ok_at(int line, const struct ixl_option *o, const char *text, int64_t i,
                  const char *norm_want)
{
    struct ixl_opt_value v;
    char norm[IXL_OPT_NORM_MAX];
    int rc = ixl_opt_parse(o, text, &v, norm, why, sizeof(why));
    if (rc != IXL_OK)
        check_fail(__FILE__, line, "%s='%s' refused: %s", o->name, text, why);
    if (v.i != i)
        check_fail(__FILE__, line, "%s='%s' gave %lld, want %lld", o->name, text, (long long)v.i,
                   (long long)i);
    if (i >= 0 && v.u != (uint64_t)i)
        check_fail(__FILE__, line, "%s='%s': u %llu differs from i", o->name, text,
                   (unsigned long long)v.u);
    if (i < 0 && v.u != 0)
        check_fail(__FILE__, line, "%s='%s': u of a negative is not 0", o->name, text);
    if (norm_want && (v.str == NULL || strcmp(v.str, norm_want) != 0))
        check_fail(__FILE__, line, "%s='%s' normalized to '%s', want '%s'", o->name, text,
                   v.str ? v.str : "(null)", norm_want);
}

/* text is refused, and the message names the option, the value and has want_has in it. */
static void bad_at(int line, const struct ixl_option *o, const char *text, const char *want_has)
{
    struct ixl_opt_value v = {.i = 12345};
    char norm[IXL_OPT_NORM_MAX];
    int rc = ixl_opt_parse(o, text, &v, norm, why, sizeof(why));
    if (rc != IXL_ERR_INVALID_ARG)
        check_fail(__FILE__, line, "%s='%s' accepted (%lld)", o->name, text, (long long)v.i);
    if (v.i != 12345)
        check_fail(__FILE__, line, "%s='%s': output written on failure", o->name, text);
    char head[256];
    snprintf(head, sizeof(head), "%s='%s': ", o->name, text);
    if (strncmp(why, head, strlen(head)) != 0 || strstr(why, want_has) == NULL)
        check_fail(__FILE__, line, "message '%s' lacks '%s' or '%s'", why, head, want_has);
    printf("  %-28s -> %s\n", text, why);
}

#define OK(o, text, i, norm) ok_at(__LINE__, (o), (text), (i), (norm))
#define BAD(o, text, has) bad_at(__LINE__, (o), (text), (has))

static void test_bool(void)
{
    OK(&o_bool, "1", 1, "1");
    OK(&o_bool, "0", 0, "0");
    OK(&o_bool, "true", 1, "1");
    OK(&o_bool, "FALSE", 0, "0");
    OK(&o_bool, " yes ", 1, "1");
    OK(&o_bool, "Off", 0, "0");
    OK(&o_bool, "on", 1, "1");
    BAD(&o_bool, "2", "want a boolean");
    BAD(&o_bool, "tru", "not a boolean");
    BAD(&o_bool, "", "empty");
    BAD(&o_bool, "  ", "empty");
    BAD(&o_bool, "1 1", "not a boolean");
}

static void test_int(void)
{
    OK(&o_int, "4", 4, "4");
    OK(&o_int, "16", 16, "16");
    OK(&o_int, "-5", -5, "-5");
    OK(&o_int, "+3", 3, "3");
    OK(&o_int, "007", 7, "7");
    OK(&o_int, "\t 9 \n", 9, "9");
    BAD(&o_int, "17", "out of range; want an integer (connections) in -5..16");
    BAD(&o_int, "-6", "out of range");
    BAD(&o_int, "4K", "no suffix");
    BAD(&o_int, "4.0", "no suffix");
    BAD(&o_int, "0x10", "no suffix");
    BAD(&o_int, "four", "not a number");
    BAD(&o_int, "-", "not a number");
    BAD(&o_int, "", "empty");
    BAD(&o_int, "- 4", "not a number");
    OK(&o_int_any, "9223372036854775807", INT64_MAX, "9223372036854775807");
    OK(&o_int_any, "-9223372036854775808", INT64_MIN, "-9223372036854775808");
    BAD(&o_int_any, "9223372036854775808", "too large");
    BAD(&o_int_any, "-9223372036854775809", "too large");
    BAD(&o_int_any, "99999999999999999999999", "too large");
}

static void test_size(void)
{
    OK(&o_size, "1048576", 1048576, "1048576");
    OK(&o_size, "4096", 4096, "4096");
    OK(&o_size, "4K", 4096, "4096");
    OK(&o_size, "4k", 4096, "4096");
    OK(&o_size, "4KiB", 4096, "4096");
    OK(&o_size, "64 K", 65536, "65536");
    OK(&o_size, "1M", 1 << 20, "1048576");
    OK(&o_size, "2MiB", 2 << 20, "2097152");
    OK(&o_size, "1G", 1 << 30, "1073741824");
    OK(&o_size, "1g", 1 << 30, "1073741824");
    OK(&o_size, "1GiB", 1 << 30, "1073741824");
    OK(&o_size, " 8M ", 8 << 20, "8388608");
    OK(&o_size_any, "3T", 3ll << 40, "3298534883328");
    OK(&o_size_any, "0", 0, "0");
    BAD(&o_size, "2G", "out of range; want a size in bytes, 4K..1G");
    BAD(&o_size, "4095", "out of range");
    BAD(&o_size, "-1", "negative");
    BAD(&o_size, "-4K", "negative");
    BAD(&o_size, "4KB", "unknown size suffix");
    BAD(&o_size, "4kib", "unknown size suffix");
    BAD(&o_size, "4 K B", "unknown size suffix");
    BAD(&o_size, "4P", "unknown size suffix");
    BAD(&o_size, "K", "not a number");
    BAD(&o_size, "1.5M", "unknown size suffix");
    BAD(&o_size, "", "empty");
    BAD(&o_size_any, "99999999999G", "too large");
    BAD(&o_size_any, "8388608T", "too large"); /* 2^63 */
    OK(&o_size_any, "8388607T", 8388607ll << 40, NULL);
    BAD(&o_size_any, "18446744073709551616", "too large");
    BAD(&o_size_any, "9223372036854775808", "too large");
}

static void test_duration(void)
{
    OK(&o_ms, "2000", 2000, "2000");
    OK(&o_ms, "2s", 2000, "2000");
    OK(&o_ms, "2 s", 2000, "2000");
    OK(&o_ms, "150ms", 150, "150");
    OK(&o_ms, "3000us", 3, "3");
    OK(&o_ms, "0", 0, "0");
    OK(&o_ms, "3600s", 3600000, "3600000");
    BAD(&o_ms, "1500us", "not a whole number of ms");
    BAD(&o_ms, "3601s", "out of range; want a duration in ms, 0..3600000 (a bare number is ms");
    BAD(&o_ms, "-1", "negative");
    BAD(&o_ms, "2m", "unknown duration suffix");
    BAD(&o_ms, "2h", "unknown duration suffix");
    BAD(&o_ms, "2S", "unknown duration suffix");
    BAD(&o_ms, "1.5s", "unknown duration suffix");
    BAD(&o_ms, "ms", "not a number");
    BAD(&o_ms, "", "empty");
    OK(&o_s, "10", 10, "10");
    OK(&o_s, "2000ms", 2, "2");
    OK(&o_s, "1000000us", 1, "1");
    BAD(&o_s, "1500ms", "not a whole number of s");
    BAD(&o_s, "1us", "not a whole number of s");
    OK(&o_us, "5", 5, "5");
    OK(&o_us, "5ms", 5000, "5000");
    OK(&o_us, "2s", 2000000, "2000000");
    BAD(&o_us, "9223372036854775807s", "too large");
    BAD(&o_us, "99999999999999999999999us", "too large");
    OK(&o_us, "9223372036854775807", INT64_MAX, NULL);
    OK(&o_s, "9223372036854775807", INT64_MAX, NULL);
    OK(&o_s, "9223372036854775000ms", 9223372036854775, NULL);
    BAD(&o_s, "9223372036854775001ms", "not a whole number of s");
}

static void test_enum_string(void)
{
    OK(&o_enum, "red", 0, "red");
    OK(&o_enum, "BLUE", 2, "blue");
    OK(&o_enum, " green ", 1, "green");
    BAD(&o_enum, "yellow", "not a choice; want one of red, green, blue");
    BAD(&o_enum, "", "empty");
    BAD(&o_enum, "re", "not a choice");
    struct ixl_opt_value v;
    char norm[IXL_OPT_NORM_MAX];
    const char *text = " 10.0.0.1,10.0.0.2 ";
    CHECK_RC(ixl_opt_parse(&o_str, text, &v, norm, why, sizeof(why)), IXL_OK);
    CHECK(v.str == text && v.i == 0 && v.u == 0); /* strings are taken as they are */
    CHECK_RC(ixl_opt_parse(&o_str, "", &v, norm, why, sizeof(why)), IXL_OK);
    CHECK(v.str[0] == '\0');
}

static void test_want(void)
{
    char buf[256];
    CHECK_STR_HAS(ixl_opt_want(&o_size_any, buf, sizeof(buf)), "a size in bytes (suffixes K");
    CHECK_STR_HAS(ixl_opt_want(&o_int_any, buf, sizeof(buf)), "an integer");
    CHECK(strstr(buf, "..") == NULL);
    CHECK_STR_HAS(ixl_opt_want(&o_str, buf, sizeof(buf)), "a string");
    struct ixl_option o = o_int_any;
    o.min = INT64_MIN;
    o.max = 0;
    CHECK(strcmp(ixl_opt_want(&o, buf, sizeof(buf)), "an integer, at most 0") == 0);
    o.min = 1;
    o.max = INT64_MAX;
    CHECK(strcmp(ixl_opt_want(&o, buf, sizeof(buf)), "an integer, at least 1") == 0);
    o.min = INT64_MIN;
    CHECK(strcmp(ixl_opt_want(&o, buf, sizeof(buf)), "an integer") == 0);
    o = o_size;
    CHECK_STR_HAS(ixl_opt_want(&o, buf, sizeof(buf)), "a size in bytes, 4K..1G (suffixes");
    CHECK(strcmp(ixl_opt_type_name(IXL_OPT_DURATION), "duration") == 0);
    CHECK(strcmp(ixl_opt_type_name((enum ixl_opt_type)0), "unknown") == 0);
}

/* ---- option tables the manager refuses ------------------------------------------------- */

static int stub_create(const struct ixl_engine_init *init, struct ixl_engine **out)
{
    (void)init;
    (void)out;
    return IXL_ERR_NOT_SUPPORTED;
}

static void stub_destroy(struct ixl_engine *e)
{
    (void)e;
}

static int stub_any(void)
{
    return IXL_ERR_NOT_SUPPORTED;
}

/* A LOCAL plugin with every method a stub: only its options can be wrong. */
static void check_table_at(int line, const struct ixl_option *opts, size_t n, const char *has)
{
    struct ixl_engine_ops ops;
    void (*fn)(void) = (void (*)(void))stub_any;
    memset(&ops, 0, sizeof(ops));
    ops.size = sizeof(ops);
    memcpy(&ops.register_mem, &fn, sizeof(fn));
    memcpy(&ops.deregister_mem, &fn, sizeof(fn));
    memcpy(&ops.load_local_md, &fn, sizeof(fn));
    memcpy(&ops.unload_md, &fn, sizeof(fn));
    memcpy(&ops.prep_xfer, &fn, sizeof(fn));
    memcpy(&ops.post_xfer, &fn, sizeof(fn));
    memcpy(&ops.check_xfer, &fn, sizeof(fn));
    memcpy(&ops.release_req, &fn, sizeof(fn));
    struct ixl_plugin_desc d = {.abi_major = IXL_PLUGIN_ABI_MAJOR,
                                .abi_minor = IXL_PLUGIN_ABI_MINOR,
                                .size = sizeof(d),
                                .name = "OPTS",
                                .version = "0",
                                .caps = IXL_CAP_LOCAL,
                                .mem_mask = IXL_MEM_BIT(IXL_MEM_DRAM),
                                .options = opts,
                                .n_options = n,
                                .create_engine = stub_create,
                                .destroy_engine = stub_destroy,
                                .ops = &ops};
    char reason[512] = "";
    int rc = ixl_pm_check_desc(&d, reason, sizeof(reason));
    if (has == NULL && rc != IXL_OK)
        check_fail(__FILE__, line, "a good table refused: %s", reason);
    if (has != NULL && (rc != IXL_ERR_PLUGIN || strstr(reason, has) == NULL))
        check_fail(__FILE__, line, "refusal %d '%s' lacks '%s'", rc, reason, has);
    if (has)
        printf("  refused: %s\n", reason);
}

#define TABLE(opts, has) check_table_at(__LINE__, (opts), sizeof(opts) / sizeof((opts)[0]), (has))

static void test_tables(void)
{
    static const char *const none[] = {NULL};
    static const char *const empty[] = {"a", "", NULL};
    static const char *const twice[] = {"a", "A", NULL};
    const struct ixl_option good[] = {o_bool, o_int, o_int_any, o_size, o_size_any,
                                      o_ms,   o_s,   o_us,      o_enum, o_str};
    TABLE(good, NULL);
    check_table_at(__LINE__, NULL, 0, NULL);
    check_table_at(__LINE__, NULL, 1, "1 options but no options array");

    struct ixl_option t[1] = {o_int};
    t[0].type = (enum ixl_opt_type)0;
    TABLE(t, "option n: unknown type 0");
    t[0].type = (enum ixl_opt_type)7;
    TABLE(t, "option n: unknown type 7");
    t[0] = o_int;
    t[0].default_value = "17";
    TABLE(t, "option n: bad default: n='17': out of range");
    t[0].default_value = "x";
    TABLE(t, "bad default: n='x': not a number");
    t[0].default_value = NULL;
    TABLE(t, "option n lacks a default or a description");
    t[0] = o_int;
    t[0].description = NULL;
    TABLE(t, "option n lacks a default or a description");
    t[0] = o_int;
    t[0].name = NULL;
    TABLE(t, "name is missing");
    t[0].name = "has space";
    TABLE(t, "name is missing or not");
    t[0] = o_int;
    t[0].min = 5;
    t[0].max = 1;
    TABLE(t, "range 5..1 is empty");
    t[0] = o_size;
    t[0].min = -1;
    TABLE(t, "a size's range cannot go below 0");
    t[0] = o_size;
    t[0].default_value = "-4K";
    TABLE(t, "bad default: chunk='-4K': negative");
    t[0] = o_ms;
    t[0].unit = "min";
    TABLE(t, "a duration's unit must be us, ms or s (not min)");
    t[0].unit = NULL;
    TABLE(t, "(not NULL)");
    t[0] = o_ms;
    t[0].default_value = "1500us";
    TABLE(t, "not a whole number of ms");
    t[0] = o_enum;
    t[0].choices = NULL;
    TABLE(t, "option color: an enum without choices");
    t[0].choices = none;
    TABLE(t, "an enum without choices");
    t[0].choices = empty;
    TABLE(t, "choice 1 is empty");
    t[0].choices = twice;
    TABLE(t, "choice 'A' appears twice");
    t[0] = o_enum;
    t[0].default_value = "purple";
    TABLE(t, "bad default: color='purple': not a choice");
    const struct ixl_option dup[] = {o_int, o_bool, o_int};
    TABLE(dup, "two options are called n");
}

/* The IXL_* variables that hold sizes and durations follow the same rules; one that does not
 * parse fails the agent's creation with a message naming it. */
static void test_config(void)
{
    uint64_t v = 0;
    CHECK_RC(ixl_cfg_num(IXL_CFG_ETCD_TTL, &v, why, sizeof(why)), IXL_OK);
    CHECK(v == 2);
    v = 7;
    CHECK_RC(ixl_cfg_num(IXL_CFG_NOTIF_MAX, &v, why, sizeof(why)), IXL_ERR_INVALID_ARG);
    CHECK(v == 7);
    CHECK_STR_HAS(why, "IXL_NOTIF_MAX='64KB': unknown size suffix; want a size in bytes, at least "
                       "64K (suffixes");
    struct ixl_agent_params ap = {.field_mask = IXL_AGENT_F_BACKENDS, .backends = ""};
    struct ixl_agent *a = NULL;
    CHECK_RC(ixl_agent_create("cfg", &ap, &a), IXL_ERR_INVALID_ARG);
    CHECK(a == NULL);
    ap.field_mask |= IXL_AGENT_F_NOTIF_MAX; /* the variable is not read then */
    ap.notif_max = 1 << 20;
    CHECK_RC(ixl_agent_create("cfg", &ap, &a), IXL_OK);
    ixl_agent_destroy(a);
}

/* Arrays of these cross the plugin boundary: their layout is frozen (ixl_types.h). */
static void test_layout(void)
{
    if (sizeof(void *) != 8)
        return;
    CHECK(sizeof(struct ixl_option) == 96);
    CHECK(offsetof(struct ixl_option, type) == 24 && offsetof(struct ixl_option, unit) == 32);
    CHECK(offsetof(struct ixl_option, min) == 40 && offsetof(struct ixl_option, choices) == 56);
    CHECK(offsetof(struct ixl_option, reserved) == 64);
    CHECK(sizeof(struct ixl_opt_value) == 40 && offsetof(struct ixl_opt_value, str) == 16);
}

int main(void)
{
    /* Read once, at the first ixl call. */
    setenv("IXL_ETCD_TTL", "2000ms", 1);
    setenv("IXL_NOTIF_MAX", "64KB", 1);
    test_config();
    test_bool();
    test_int();
    test_size();
    test_duration();
    test_enum_string();
    test_want();
    test_tables();
    test_layout();
    printf("ok\n");
    return 0;
}
