/* The README's example: copy a buffer inside one agent through its default backends
 * (IXL_BACKENDS, NET unless set otherwise), then check the copy. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <ixl/ixl.h>

static int copy_once(void *src, void *dst, size_t len)
{
    struct ixl_agent *agent;
    if (ixl_agent_create("example", NULL, &agent) != IXL_OK)
        return -1;
    struct ixl_reg_desc regs[2] = {{(uintptr_t)src, len, 0, NULL, 0},
                                   {(uintptr_t)dst, len, 0, NULL, 0}};
    int rc = ixl_mem_register(agent, IXL_MEM_DRAM, regs, 2, NULL);
    int registered = rc == IXL_OK;
    struct ixl_dlist *from = NULL, *to = NULL;
    struct ixl_desc a = {(uintptr_t)src, len, 0}, b = {(uintptr_t)dst, len, 0};
    struct ixl_xfer *xfer = NULL;
    if (rc == IXL_OK && (rc = ixl_dlist_create(IXL_MEM_DRAM, 1, &from)) == IXL_OK &&
        (rc = ixl_dlist_create(IXL_MEM_DRAM, 1, &to)) == IXL_OK &&
        (rc = ixl_dlist_add(from, &a, 1)) == IXL_OK && (rc = ixl_dlist_add(to, &b, 1)) == IXL_OK)
        /* WRITE local (from) into the "remote" side (to): the remote is the agent itself. */
        rc = ixl_xfer_create(agent, IXL_OP_WRITE, from, to, "example", NULL, &xfer);
    if (rc == IXL_OK) {
        rc = ixl_xfer_post(xfer);
        if (rc == IXL_IN_PROGRESS)
            rc = ixl_xfer_wait(xfer, 10000);
        /* Release may be refused (IXL_ERR_BUSY: a transfer that timed out is not stopped
         * yet); the handle then stays valid: call again later, or let destroy free it. */
        int released = ixl_xfer_release(xfer);
        if (rc == IXL_OK)
            rc = released;
    }
    if (rc != IXL_OK)
        fprintf(stderr, "copy failed: %s: %s\n", ixl_strerror(rc), ixl_agent_last_error(agent));
    ixl_dlist_destroy(from);
    ixl_dlist_destroy(to);
    /* Deregistration is refused (IXL_ERR_BUSY) while a request still uses the memory. */
    if (registered && ixl_mem_deregister(agent, IXL_MEM_DRAM, regs, 2, NULL) != IXL_OK) {
        fprintf(stderr, "deregister failed: %s\n", ixl_agent_last_error(agent));
        rc = IXL_ERR_BUSY;
    }
    ixl_agent_destroy(agent);
    return rc == IXL_OK ? 0 : -1;
}

int main(void)
{
    size_t len = 1 << 20;
    unsigned char *src = malloc(len), *dst = calloc(1, len);
    if (src == NULL || dst == NULL)
        return 1;
    for (size_t i = 0; i < len; i++)
        src[i] = (unsigned char)(i * 31 + 7);
    int ok = copy_once(src, dst, len) == 0 && memcmp(src, dst, len) == 0;
    printf("copy: %s\n", ok ? "ok" : "FAILED");
    free(src);
    free(dst);
    return ok ? 0 : 1;
}
