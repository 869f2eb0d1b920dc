/*
 * Fuzz target for agent metadata, the bytes peers and etcd hand to ixl_md_load(). Each input
 * goes to the codec (ixl_md_decode) and to the public ixl_md_load() of a real agent with the
 * in-memory TEST backend, so decoded entries reach the loader and the backend's parsers of
 * connection info and public data, and to a second agent with a cluster key, which loads only
 * blobs whose MAC verifies (the seeds from gen_corpus's keyed agent, under the same key).
 *
 * Oracles (abort on violation): a decoded blob only points inside the input and obeys the
 * limits the format states; ixl_md_load() fails exactly as the decoder does when the decoder
 * refuses a blob; a loaded remote can be checked and invalidated, and is gone afterwards.
 * Loaded remotes are invalidated at once, so the agent's state does not grow across inputs.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <ixl/ixl.h>

#include "fuzz.h"
#include "serdes/codec.h"

#define LOADER_NAME "fuzz_loader"
#define FUZZ_MD_KEY "fuzz-md-cluster-key-0123456789" /* gen_corpus.c's keyed agent's */

static struct ixl_agent *loader, *keyed;

static void loader_destroy(void)
{
    ixl_agent_destroy(loader);
    ixl_agent_destroy(keyed);
    loader = keyed = NULL;
}

static void fail(const char *what)
{
    fprintf(stderr, "fuzz_md: %s\n", what);
    abort();
}

/* The agent that loads every input, made on the first one. */
static struct ixl_agent *get_loader(void)
{
    if (loader != NULL)
        return loader;
#ifdef IXL_TEST_PLUGIN_DIR_DEFAULT
    /* The TEST plugin lives in the build tree; an explicit IXL_PLUGIN_DIR wins. */
    setenv("IXL_PLUGIN_DIR", IXL_TEST_PLUGIN_DIR_DEFAULT, 0);
#endif
    ixl_log_set_level(IXL_LOG_NONE);
    struct ixl_agent_params p = {.field_mask = IXL_AGENT_F_BACKENDS, .backends = "TEST"};
    ixl_status rc = ixl_agent_create(LOADER_NAME, &p, &loader);
    if (rc != IXL_OK) {
        fprintf(stderr,
                "fuzz_md: cannot create an agent with the TEST backend: %s (set IXL_PLUGIN_DIR "
                "to the build tree's tests/plugins)\n",
                ixl_strerror(rc));
        abort();
    }
    p.field_mask |= IXL_AGENT_F_AUTH_KEY;
    p.auth_key = FUZZ_MD_KEY;
    rc = ixl_agent_create(LOADER_NAME "_keyed", &p, &keyed);
    if (rc != IXL_OK) {
        fprintf(stderr, "fuzz_md: cannot create an agent with a cluster key: %s\n",
                ixl_strerror(rc));
        abort();
    }
    atexit(loader_destroy);
    return loader;
}

/* The loader with a cluster key: loads only blobs whose MAC verifies under it. */
static void load_keyed(const uint8_t *data, size_t size, int drc, int mac_flag)
{
    char name[IXL_NAME_MAX];
    ixl_status rc = ixl_md_load(keyed, data, size, name, sizeof(name));
    if (drc == IXL_ERR_MALFORMED && rc != IXL_ERR_MALFORMED)
        fail("the keyed loader accepted (or failed differently on) a blob the decoder refuses");
    if (drc == IXL_OK && !mac_flag && rc != IXL_ERR_AUTH)
        fail("the keyed loader did not refuse a blob without a MAC with IXL_ERR_AUTH");
    if (rc != IXL_OK)
        return;
    if (ixl_remote_invalidate(keyed, name) != IXL_OK)
        fail("a remote the keyed loader loaded cannot be invalidated");
}

/* p[0..n) lies inside data[0..size). */
static int inside(const void *p, size_t n, const uint8_t *data, size_t size)
{
    uintptr_t a = (uintptr_t)p, base = (uintptr_t)data;
    if (n == 0)
        return 1;
    return p != NULL && a >= base && n <= size && a - base <= size - n;
}

static void check_decoded(const struct ixl_md_decoded *md, const uint8_t *data, size_t size)
{
    size_t nlen = strnlen(md->name, sizeof(md->name));
    if (nlen == 0 || nlen >= IXL_NAME_MAX)
        fail("decoded agent name is empty or not terminated");
    if (md->version != IXL_MD_VERSION)
        fail("decoded a version this ixl does not read");
    if (md->n_backends > 0 && md->backends == NULL)
        fail("backend count without backends");
    for (size_t i = 0; i < md->n_backends; i++) {
        const struct ixl_md_backend *b = &md->backends[i];
        if (b->name_len == 0 || b->name_len > 31 || !inside(b->name, b->name_len, data, size))
            fail("decoded backend name outside the input or too long");
        if (!inside(b->conn, b->conn_len, data, size))
            fail("decoded connection info outside the input");
    }
    if (md->n_regions > 0 && md->regions == NULL)
        fail("region count without regions");
    for (size_t i = 0; i < md->n_regions; i++) {
        const struct ixl_md_region *g = &md->regions[i];
        if (g->backend >= md->n_backends || (unsigned)g->type >= IXL_MEM_COUNT || g->len == 0 ||
            g->len > UINT64_MAX - g->addr)
            fail("decoded region breaks the format's limits");
        if (!inside(g->pub, g->pub_len, data, size))
            fail("decoded public data outside the input");
    }
    if (md->flags & IXL_MDF_MAC) {
        if (md->signed_len + IXL_MD_MAC_LEN != size || md->mac != data + md->signed_len)
            fail("decoded MAC is not the input's last bytes");
    } else if (md->mac != NULL) {
        fail("MAC decoded without the MAC flag");
    }
    if (md->flags & IXL_MDF_LABEL) {
        if (!inside(md->label, md->label_len, data, size) || (md->label == NULL && size > 0))
            fail("decoded label outside the input");
    } else if (md->label != NULL || md->label_len != 0) {
        fail("label decoded without the label flag");
    }
}

/* Makes the agent before libFuzzer takes stock of the instrumented modules, so the TEST
 * plugin it opens is among them. */
int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    get_loader();
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct ixl_agent *a = get_loader();

    /* The codec alone. */
    struct ixl_md_decoded md;
    char why[256] = "";
    int drc = ixl_md_decode(data, size, &md, why, sizeof(why));
    int mac_flag = 0;
    if (drc == IXL_OK) {
        check_decoded(&md, data, size);
        mac_flag = (md.flags & IXL_MDF_MAC) != 0;
        ixl_md_decoded_free(&md);
    } else if (drc != IXL_ERR_MALFORMED && drc != IXL_ERR_NO_MEMORY) {
        fail("ixl_md_decode returned a status other than OK, MALFORMED, NO_MEMORY");
    } else if (drc == IXL_ERR_MALFORMED && why[0] == '\0') {
        fail("ixl_md_decode refused a blob without saying why");
    }

    /* The public loader, with the backend behind it. */
    char name[IXL_NAME_MAX];
    load_keyed(data, size, drc, mac_flag);
    ixl_status rc = ixl_md_load(a, data, size, name, sizeof(name));
    if (drc == IXL_ERR_MALFORMED && rc != IXL_ERR_MALFORMED)
        fail("ixl_md_load accepted (or failed differently on) a blob the decoder refuses");
    if (drc == IXL_OK && mac_flag && rc != IXL_ERR_AUTH)
        fail("an agent without a key did not refuse an authenticated blob with IXL_ERR_AUTH");
    if (rc != IXL_OK)
        return 0;
    if (ixl_remote_check(a, name, NULL) != IXL_OK)
        fail("a loaded remote is not found");
    /* Loading the same blob again is an incremental update of the same incarnation. */
    (void)ixl_md_load(a, data, size, NULL, 0);
    if (ixl_remote_invalidate(a, name) != IXL_OK)
        fail("a loaded remote cannot be invalidated");
    if (ixl_remote_check(a, name, NULL) != IXL_ERR_NOT_FOUND)
        fail("an invalidated remote is still found");
    return 0;
}
