/*
 * "Another user on the same host", for tests: copies programs, libixl and the plugins into a
 * fresh 0755 directory (the build tree may not be readable by that user) and runs a program
 * from there as uid/gid 65534 (nobody) with no supplementary groups. Needs root; without it
 * nobody_prepare() returns 77 (the caller skips with the message it printed).
 *
 *   struct as_nobody nb;
 *   const char *files[] = {ATTACKER_PATH};
 *   int rc = nobody_prepare(&nb, files, 1);      // 0, 77 (skip) or 1 (fail)
 *   char *argv[] = {"attacker", "127.0.0.1", port, NULL};
 *   pid_t pid = nobody_spawn(&nb, "attacker", argv, NULL);   // basename of a copied file
 *   ... waitpid(pid, &st, 0) ...
 *   nobody_cleanup(&nb);
 *
 * Libraries come from $IXL_BUILD_DIR/lib (ctest sets it): libixl.so*, and plugins/ *.so into
 * the copy's plugins/ (IXL_PLUGIN_DIR points there for the child; LD_LIBRARY_PATH at the copy).
 */
#ifndef IXL_TEST_AS_NOBODY_H
#define IXL_TEST_AS_NOBODY_H

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <unistd.h>

#define NOBODY_UID 65534
#define NOBODY_GID 65534

struct as_nobody {
    char dir[64]; /* /tmp/ixl-nobody-XXXXXX */
    int ready;
};

static int nobody_copy(const char *from, const char *to)
{
    int in = open(from, O_RDONLY | O_CLOEXEC);
    if (in < 0) {
        fprintf(stderr, "as_nobody: open %s: %s\n", from, strerror(errno));
        return -1;
    }
    int out = open(to, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0755);
    if (out < 0) {
        fprintf(stderr, "as_nobody: create %s: %s\n", to, strerror(errno));
        close(in);
        return -1;
    }
    char buf[65536];
    ssize_t n;
    int rc = 0;
    while ((n = read(in, buf, sizeof(buf))) > 0)
        if (write(out, buf, (size_t)n) != n) {
            rc = -1;
            break;
        }
    if (n < 0)
        rc = -1;
    fchmod(out, 0755);
    close(in);
    close(out);
    return rc;
}

/* Copies every regular file of dir src whose name starts with prefix into dst. */
static int nobody_copy_dir(const char *src, const char *prefix, const char *dst)
{
    DIR *d = opendir(src);
    if (d == NULL)
        return 0; /* nothing there to copy (no dynamic plugins) */
    struct dirent *e;
    int rc = 0;
    while (rc == 0 && (e = readdir(d)) != NULL) {
        if (strncmp(e->d_name, prefix, strlen(prefix)) != 0)
            continue;
        char a[PATH_MAX], b[PATH_MAX + 300];
        snprintf(a, sizeof(a), "%s/%s", src, e->d_name);
        snprintf(b, sizeof(b), "%s/%s", dst, e->d_name);
        struct stat st;
        if (stat(a, &st) == 0 && S_ISREG(st.st_mode))
            rc = nobody_copy(a, b);
    }
    closedir(d);
    return rc;
}

static void nobody_cleanup(struct as_nobody *n)
{
    if (!n->ready)
        return;
    char cmd[128];
    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", n->dir);
    if (system(cmd) != 0)
        fprintf(stderr, "as_nobody: could not remove %s\n", n->dir);
    n->ready = 0;
}

/* 0 ready, 77 cannot run as another user here (message printed), 1 failed. */
static int nobody_prepare(struct as_nobody *n, const char *const *files, size_t n_files)
{
    memset(n, 0, sizeof(*n));
    if (geteuid() != 0) {
        printf("SKIP: running a process as another user needs root\n");
        return 77;
    }
    const char *build = getenv("IXL_BUILD_DIR");
    if (build == NULL) {
        printf("SKIP: IXL_BUILD_DIR is not set (run under ctest)\n");
        return 77;
    }
    snprintf(n->dir, sizeof(n->dir), "/tmp/ixl-nobody-XXXXXX");
    if (mkdtemp(n->dir) == NULL || chmod(n->dir, 0755) != 0) {
        fprintf(stderr, "as_nobody: mkdtemp: %s\n", strerror(errno));
        return 1;
    }
    n->ready = 1;
    char sub[128], lib[PATH_MAX];
    snprintf(sub, sizeof(sub), "%s/plugins", n->dir);
    if (mkdir(sub, 0755) != 0 || chmod(sub, 0755) != 0)
        goto fail;
    snprintf(lib, sizeof(lib), "%s/lib", build);
    if (nobody_copy_dir(lib, "libixl.so", n->dir) != 0)
        goto fail;
    snprintf(lib, sizeof(lib), "%s/lib/plugins", build);
    if (nobody_copy_dir(lib, "libixl_plugin_", sub) != 0)
        goto fail;
    for (size_t i = 0; i < n_files; i++) {
        const char *base = strrchr(files[i], '/');
        base = base ? base + 1 : files[i];
        char to[PATH_MAX + 80];
        snprintf(to, sizeof(to), "%s/%s", n->dir, base);
        if (nobody_copy(files[i], to) != 0)
            goto fail;
    }
    return 0;
fail:
    nobody_cleanup(n);
    return 1;
}

/* Forks and execs the copied program prog (a basename) as nobody with argv, the parent's
 * environment plus extra_env (NULL-terminated "K=V" strings, may be NULL). The child's stdout
 * and stderr are the parent's. Returns the child's pid or -1. */
static pid_t nobody_spawn(const struct as_nobody *n, const char *prog, char *const argv[],
                          char *const extra_env[])
{
    fflush(stdout);
    fflush(stderr);
    pid_t pid = fork();
    if (pid != 0)
        return pid;
    static char path[PATH_MAX + 80], ld[128], pd[128];
    snprintf(path, sizeof(path), "%s/%s", n->dir, prog);
    snprintf(ld, sizeof(ld), "LD_LIBRARY_PATH=%s", n->dir);
    snprintf(pd, sizeof(pd), "IXL_PLUGIN_DIR=%s/plugins", n->dir);
    putenv(ld);
    putenv(pd);
    for (size_t i = 0; extra_env && extra_env[i]; i++)
        putenv(extra_env[i]);
    if (setgroups(0, NULL) != 0 || setgid(NOBODY_GID) != 0 || setuid(NOBODY_UID) != 0) {
        fprintf(stderr, "as_nobody: dropping to uid %d: %s\n", NOBODY_UID, strerror(errno));
        _exit(126);
    }
    if (setuid(0) == 0 || getuid() != NOBODY_UID || geteuid() != NOBODY_UID) {
        fprintf(stderr, "as_nobody: still able to regain root\n");
        _exit(126);
    }
    if (chdir(n->dir) != 0)
        _exit(126);
    execv(path, argv);
    fprintf(stderr, "as_nobody: exec %s: %s\n", path, strerror(errno));
    _exit(127);
}

#endif
