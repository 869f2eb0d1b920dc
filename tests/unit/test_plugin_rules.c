/* The manager's validation (ixl_pm_check_desc) rule by rule, in process: from a valid
 * descriptor, every method slot nulled in turn (refused, naming the method, exactly when the
 * header says it is required for the capabilities), every capability and memory bit, names at
 * the length limits, ops and descriptor sizes around the minimum, the alloc/free pair, options.
 * The dynamic plugins of test_plugin_conformance cover the same rules once each through
 * dlopen. */
#include <stddef.h>

#include "check.h"
#include "plugin/manager.h"

static int fn_any(void)
{
    return IXL_ERR_NOT_SUPPORTED;
}

static int create_any(const struct ixl_engine_init *init, struct ixl_engine **out)
{
    (void)init;
    (void)out;
    return IXL_ERR_NOT_SUPPORTED;
}

static void destroy_any(struct ixl_engine *e)
{
    (void)e;
}

typedef int (*slot_fn)(void);

/* Every method slot of struct ixl_engine_ops, with the capability that requires it (0: every
 * backend; ~0u: optional whatever the capabilities), as ixl_plugin.h documents them. */
static const struct {
    size_t off;
    const char *name;
    uint32_t required_by;
} slots[] = {
    {offsetof(struct ixl_engine_ops, connect), "connect", ~0u},
    {offsetof(struct ixl_engine_ops, disconnect), "disconnect", ~0u},
    {offsetof(struct ixl_engine_ops, get_conn_info), "get_conn_info", IXL_CAP_REMOTE},
    {offsetof(struct ixl_engine_ops, load_remote_conn_info), "load_remote_conn_info",
     IXL_CAP_REMOTE},
    {offsetof(struct ixl_engine_ops, register_mem), "register_mem", 0},
    {offsetof(struct ixl_engine_ops, deregister_mem), "deregister_mem", 0},
    {offsetof(struct ixl_engine_ops, get_public_data), "get_public_data", IXL_CAP_REMOTE},
    {offsetof(struct ixl_engine_ops, load_remote_md), "load_remote_md", IXL_CAP_REMOTE},
    {offsetof(struct ixl_engine_ops, load_local_md), "load_local_md", IXL_CAP_LOCAL},
    {offsetof(struct ixl_engine_ops, unload_md), "unload_md", 0},
    {offsetof(struct ixl_engine_ops, prep_xfer), "prep_xfer", 0},
    {offsetof(struct ixl_engine_ops, estimate_xfer_cost), "estimate_xfer_cost", ~0u},
    {offsetof(struct ixl_engine_ops, post_xfer), "post_xfer", 0},
    {offsetof(struct ixl_engine_ops, check_xfer), "check_xfer", 0},
    {offsetof(struct ixl_engine_ops, release_req), "release_req", 0},
    {offsetof(struct ixl_engine_ops, get_notifs), "get_notifs", IXL_CAP_NOTIF},
    {offsetof(struct ixl_engine_ops, gen_notif), "gen_notif", IXL_CAP_NOTIF},
    {offsetof(struct ixl_engine_ops, progress), "progress", IXL_CAP_PROGRESS},
    {offsetof(struct ixl_engine_ops, query_mem), "query_mem", ~0u},
    {offsetof(struct ixl_engine_ops, alloc_mem), "alloc_mem", ~0u},
    {offsetof(struct ixl_engine_ops, free_mem), "free_mem", ~0u},
    {offsetof(struct ixl_engine_ops, req_info), "req_info", ~0u},
};
#define N_SLOTS (sizeof(slots) / sizeof(slots[0]))

static struct ixl_engine_ops ops;
static struct ixl_plugin_desc desc;
static struct ixl_option options[2];
static char why[512];

static void set_slot(size_t off, slot_fn f)
{
    memcpy((char *)&ops + off, &f, sizeof(f));
}

/* A descriptor with every capability, every method, two valid options. */
static void reset(void)
{
    memset(&ops, 0, sizeof(ops));
    ops.size = sizeof(ops);
    for (size_t i = 0; i < N_SLOTS; i++)
        set_slot(slots[i].off, fn_any);
    memset(options, 0, sizeof(options));
    options[0].name = "a";
    options[0].default_value = "1";
    options[0].description = "option a";
    options[0].type = IXL_OPT_INT;
    options[1].name = "b";
    options[1].default_value = "x";
    options[1].description = "option b";
    options[1].type = IXL_OPT_STRING;
    memset(&desc, 0, sizeof(desc));
    desc.abi_major = IXL_PLUGIN_ABI_MAJOR;
    desc.abi_minor = IXL_PLUGIN_ABI_MINOR;
    desc.size = sizeof(desc);
    desc.name = "RULES";
    desc.version = "1";
    desc.caps = IXL_CAP_LOCAL | IXL_CAP_REMOTE | IXL_CAP_NOTIF | IXL_CAP_PROGRESS;
    desc.mem_mask = IXL_MEM_BIT(IXL_MEM_DRAM);
    desc.options = options;
    desc.n_options = 2;
    desc.create_engine = create_any;
    desc.destroy_engine = destroy_any;
    desc.ops = &ops;
}

static int check(void)
{
    why[0] = '\0';
    return ixl_pm_check_desc(&desc, why, sizeof(why));
}

#define ACCEPTED() CHECK_RC(check(), IXL_OK)
#define REFUSED(text)                      \
    do {                                   \
        CHECK_RC(check(), IXL_ERR_PLUGIN); \
        CHECK_STR_HAS(why, text);          \
    } while (0)

int main(void)
{
    reset();
    ACCEPTED();
    CHECK_RC(ixl_pm_check_desc(NULL, why, sizeof(why)), IXL_ERR_PLUGIN);
    CHECK_STR_HAS(why, "no descriptor");

    /* Every slot nulled under every combination of capabilities that the manager accepts:
     * refused exactly when the header says the slot is required, naming it. */
    static const uint32_t cap_sets[] = {
        IXL_CAP_LOCAL,
        IXL_CAP_LOCAL | IXL_CAP_NOTIF,
        IXL_CAP_LOCAL | IXL_CAP_PROGRESS,
        IXL_CAP_LOCAL | IXL_CAP_NOTIF | IXL_CAP_PROGRESS,
        IXL_CAP_REMOTE | IXL_CAP_NOTIF,
        IXL_CAP_REMOTE | IXL_CAP_NOTIF | IXL_CAP_PROGRESS,
        IXL_CAP_LOCAL | IXL_CAP_REMOTE | IXL_CAP_NOTIF,
        IXL_CAP_LOCAL | IXL_CAP_REMOTE | IXL_CAP_NOTIF | IXL_CAP_PROGRESS,
    };
    size_t n_refused = 0, n_accepted = 0;
    for (size_t c = 0; c < sizeof(cap_sets) / sizeof(cap_sets[0]); c++) {
        for (size_t i = 0; i < N_SLOTS; i++) {
            if (strcmp(slots[i].name, "alloc_mem") == 0 || strcmp(slots[i].name, "free_mem") == 0)
                continue; /* the pair rule, below */
            reset();
            desc.caps = cap_sets[c];
            ACCEPTED();
            set_slot(slots[i].off, NULL);
            uint32_t by = slots[i].required_by;
            int required = by == 0 || (by != ~0u && (cap_sets[c] & by));
            if (required) {
                REFUSED(slots[i].name);
                CHECK_STR_HAS(why, by == 0 ? "every backend needs" : "advertises");
                n_refused++;
            } else {
                ACCEPTED();
                n_accepted++;
            }
        }
    }
    CHECK(n_refused > 0 && n_accepted > 0);

    /* alloc_mem and free_mem: both or neither, also when the table stops between them. */
    reset();
    set_slot(offsetof(struct ixl_engine_ops, alloc_mem), NULL);
    set_slot(offsetof(struct ixl_engine_ops, free_mem), NULL);
    ACCEPTED();
    set_slot(offsetof(struct ixl_engine_ops, alloc_mem), fn_any);
    REFUSED("alloc_mem without free_mem");
    reset();
    set_slot(offsetof(struct ixl_engine_ops, alloc_mem), NULL);
    REFUSED("free_mem without alloc_mem");
    reset();
    ops.size = (uint32_t)offsetof(struct ixl_engine_ops, free_mem);
    REFUSED("alloc_mem without free_mem");
    ops.size = (uint32_t)offsetof(struct ixl_engine_ops, alloc_mem);
    ACCEPTED();

    /* Ops sizes: the minimum and anything above (odd sizes too) pass; one byte less fails. */
    reset();
    ops.size = (uint32_t)IXL_ENGINE_OPS_MIN_SIZE;
    ACCEPTED();
    ops.size = (uint32_t)IXL_ENGINE_OPS_MIN_SIZE + 3;
    ACCEPTED();
    ops.size = UINT32_MAX;
    ACCEPTED();
    ops.size = (uint32_t)IXL_ENGINE_OPS_MIN_SIZE - 1;
    REFUSED("too small");
    ops.size = 0;
    REFUSED("too small");

    /* Descriptor: ABI major, size, name, entry points, ops. */
    reset();
    desc.abi_minor = 999;
    ACCEPTED(); /* the minor is informative */
    desc.abi_major = IXL_PLUGIN_ABI_MAJOR + 1;
    REFUSED("this ixl speaks ABI");
    desc.abi_major = IXL_PLUGIN_ABI_MAJOR - 1;
    REFUSED("this ixl speaks ABI");
    reset();
    desc.size = (uint32_t)(offsetof(struct ixl_plugin_desc, ops) + sizeof(void *));
    ACCEPTED();
    desc.size -= 1;
    REFUSED("descriptor of");
    desc.size = 0;
    REFUSED("descriptor of");
    reset();
    desc.size = UINT32_MAX; /* a descriptor from a far newer header */
    ACCEPTED();
    static const char *bad_names[] = {
        NULL, "", "a-b", "a b", "\xc3\xa9", "a/b", "ABCDEFGHIJKLMNOPQRSTUVWXYZ012345"};
    for (size_t i = 0; i < sizeof(bad_names) / sizeof(bad_names[0]); i++) {
        reset();
        desc.name = bad_names[i];
        REFUSED("invalid plugin name");
    }
    reset();
    desc.name = "ABCDEFGHIJKLMNOPQRSTUVWXYZ01234"; /* 31 characters */
    ACCEPTED();
    desc.name = "x";
    ACCEPTED();
    desc.version = NULL; /* free text, optional */
    ACCEPTED();
    reset();
    desc.create_engine = NULL;
    REFUSED("lacks create_engine");
    reset();
    desc.destroy_engine = NULL;
    REFUSED("lacks destroy_engine");
    reset();
    desc.ops = NULL;
    REFUSED("no ops table");

    /* Capabilities: each unknown bit, neither local nor remote, remote without notifications. */
    for (unsigned bit = 4; bit < 32; bit++) {
        reset();
        desc.caps |= 1u << bit;
        REFUSED("unknown capability bits");
    }
    reset();
    desc.caps = IXL_CAP_NOTIF | IXL_CAP_PROGRESS;
    REFUSED("neither local nor remote");
    desc.caps = 0;
    REFUSED("neither local nor remote");
    desc.caps = IXL_CAP_REMOTE;
    REFUSED("without notifications");
    desc.caps = IXL_CAP_REMOTE | IXL_CAP_LOCAL | IXL_CAP_PROGRESS;
    REFUSED("without notifications");

    /* Memory types: every known one alone is fine; empty or unknown bits are not. */
    for (int t = 0; t < IXL_MEM_COUNT; t++) {
        reset();
        desc.mem_mask = IXL_MEM_BIT(t);
        ACCEPTED();
    }
    reset();
    desc.mem_mask = 0;
    REFUSED("memory-type mask");
    for (unsigned bit = IXL_MEM_COUNT; bit < 32; bit++) {
        reset();
        desc.mem_mask |= 1u << bit;
        REFUSED("memory-type mask");
    }

    /* Options: none at all is fine; a NULL array with a count, or a field missing, is not. */
    reset();
    desc.options = NULL;
    desc.n_options = 0;
    ACCEPTED();
    desc.n_options = 1;
    REFUSED("no options array");
    reset();
    options[1].name = NULL;
    REFUSED("option table entry 1");
    reset();
    options[0].default_value = NULL;
    REFUSED("option a lacks a default");
    reset();
    options[1].description = NULL;
    REFUSED("option b lacks a default or a description");

    printf("ok (%zu required slots refused, %zu optional ones accepted)\n", n_refused, n_accepted);
    return 0;
}
