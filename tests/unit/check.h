/* Minimal test helpers: a failed check prints where and why and exits 1; skip() exits 77. */
#ifndef IXL_TEST_CHECK_H
#define IXL_TEST_CHECK_H

#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <ixl/ixl.h>

static inline void check_fail(const char *file, int line, const char *fmt, ...)
    __attribute__((noreturn, format(printf, 3, 4)));
static inline void check_fail(const char *file, int line, const char *fmt, ...)
{
    va_list ap;
    fprintf(stderr, "%s:%d: check failed: ", file, line);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fprintf(stderr, "\n");
    exit(1);
}

/* CHECK(cond): cond must hold. CHECK_RC(expr, want): a status-returning call gives want. */
#define CHECK(cond) ((cond) ? (void)0 : check_fail(__FILE__, __LINE__, "%s", #cond))
#define CHECK_RC(expr, want) check_rc_at(__FILE__, __LINE__, #expr, (int)(expr), (int)(want))
#define CHECK_STR_HAS(hay, needle) check_str_has_at(__FILE__, __LINE__, (hay), (needle))

static inline void check_str_has_at(const char *file, int line, const char *hay, const char *needle)
{
    if (hay == NULL || strstr(hay, needle) == NULL)
        check_fail(file, line, "'%s' does not contain '%s'", hay ? hay : "(null)", needle);
}

static inline void check_rc_at(const char *file, int line, const char *expr, int got, int want)
{
    if (got != want)
        check_fail(file, line, "%s returned %d (%s), want %d (%s)", expr, got, ixl_strerror(got),
                   want, ixl_strerror(want));
}

/* How many of this process's threads are named name (/proc/self/task/N/comm): ixl names the
 * threads it starts, for top -H, perf and gdb. */
#include <dirent.h>
/* The name of thread tid of this process (/proc/self/task/TID/comm) into comm; false when the
 * thread ended meanwhile. */
static inline bool thread_comm(const char *tid, char comm[32])
{
    char path[64];
    comm[0] = '\0';
    snprintf(path, sizeof(path), "/proc/self/task/%.16s/comm", tid);
    FILE *f = fopen(path, "r");
    if (f == NULL)
        return false;
    if (fgets(comm, 32, f) != NULL)
        comm[strcspn(comm, "\n")] = '\0';
    fclose(f);
    return true;
}

static inline int threads_named(const char *name)
{
    DIR *d = opendir("/proc/self/task");
    int n = 0;
    if (d == NULL)
        return -1;
    for (struct dirent *de; (de = readdir(d)) != NULL;) {
        char comm[32];
        if (de->d_name[0] == '.' || !thread_comm(de->d_name, comm))
            continue;
        n += strcmp(comm, name) == 0;
    }
    closedir(d);
    return n;
}

/* Exits 77 with a message; under CI=true a skip for something the project installs is a
 * failure, so tests pass project_installs = 1 for those. */
static inline void skip(int project_installs, const char *why) __attribute__((noreturn));
static inline void skip(int project_installs, const char *why)
{
    const char *ci = getenv("CI");
    if (project_installs && ci && strcmp(ci, "true") == 0) {
        fprintf(stderr, "FAIL (CI=true, and the project installs it): %s\n", why);
        exit(1);
    }
    fprintf(stderr, "SKIP: %s\n", why);
    exit(77);
}

#endif
