/*
 * NET's loop_nice (issue 18): each event-loop thread raises its own nice value by loop_nice (0
 * by default, at most 19 in all) at its start, so that on a shared CPU an application thread
 * woken by the same answer runs before it. The nice value of each thread is read from
 * /proc/self/task/TID/stat (field 19). One process, two agents over path=tcp:
 *
 *  five     loop_nice=5: the loop threads of a fresh agent are at the creating thread's
 *           nice + 5, the application's thread is unchanged, and checked 4 KiB WRITEs and
 *           READs (a fresh pattern, the destination poisoned first) go through them.
 *  default  No option: the loop threads keep the creating thread's nice; the same transfers.
 *  range    loop_nice=20 and -1 are refused, naming the option.
 *  clamp    (last: it raises this thread's own nice, which an unprivileged process cannot
 *           undo) the creating thread at nice 17, loop_nice=5: its loops are at 19, not 22.
 *
 * Usage: test_net_loop_nice [case...] (all by default). About 1 s.
 */
#include <dirent.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/syscall.h>

#include "net_raw.h"

#define LEN 4096u
#define ROUNDS 4

/* The nice value of this thread (by /proc, as for the others). */
static int nice_of(const char *tid)
{
    char path[64], buf[1024];
    snprintf(path, sizeof(path), "/proc/self/task/%.16s/stat", tid);
    FILE *f = fopen(path, "r");
    if (f == NULL)
        return 99;
    size_t n = fread(buf, 1, sizeof(buf) - 1, f);
    fclose(f);
    buf[n] = '\0';
    /* After the name in parentheses (which may hold spaces): field 3 on; nice is field 19. */
    const char *p = strrchr(buf, ')');
    if (p == NULL)
        return 99;
    int field = 2, nice = 99;
    for (const char *q = p + 1; *q != '\0'; q++) {
        if (*q != ' ')
            continue;
        if (++field == 19) {
            nice = atoi(q + 1);
            break;
        }
    }
    return nice;
}

static int my_nice(void)
{
    char tid[24];
    snprintf(tid, sizeof(tid), "%ld", (long)syscall(SYS_gettid));
    return nice_of(tid);
}

/* The loop threads (ixl-net-loop*) of this process: how many, and how many at nice want. */
static void loops_at(int want, int *n, int *at)
{
    *n = *at = 0;
    DIR *d = opendir("/proc/self/task");
    CHECK(d != NULL);
    for (struct dirent *de; (de = readdir(d)) != NULL;) {
        char comm[32];
        if (de->d_name[0] == '.' || !thread_comm(de->d_name, comm))
            continue;
        if (strncmp(comm, "ixl-net-loop", 12) != 0)
            continue;
        (*n)++;
        int v = nice_of(de->d_name);
        if (v == want)
            (*at)++;
        else
            fprintf(stderr, "  %s (%s) at nice %d, want %d\n", comm, de->d_name, v, want);
    }
    closedir(d);
}

/* A target and an initiator (two loop threads each), LEN bytes registered at each, the
 * target's metadata loaded; ROUNDS checked WRITEs and READs; then the loops' nice values. */
static void run(const char *nice, int want, const char *what)
{
    char why[512];
    const char *kv[] = {"path", "tcp", "io_threads", "2", nice ? "loop_nice" : NULL, nice, NULL};
    struct ixl_agent *t = NULL, *i = NULL;
    CHECK_RC(nr_agent("ln-t", kv, &t, why, sizeof(why)), IXL_OK);
    CHECK_RC(nr_agent("ln-i", kv, &i, why, sizeof(why)), IXL_OK);
    uint8_t *dst = mmap(NULL, LEN, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    uint8_t *src = mmap(NULL, LEN, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    CHECK(dst != MAP_FAILED && src != MAP_FAILED);
    struct ixl_reg_desc rt = {(uintptr_t)dst, LEN, 0, NULL, 0};
    struct ixl_reg_desc ri = {(uintptr_t)src, LEN, 0, NULL, 0};
    CHECK_RC(ixl_mem_register(t, IXL_MEM_DRAM, &rt, 1, NULL), IXL_OK);
    CHECK_RC(ixl_mem_register(i, IXL_MEM_DRAM, &ri, 1, NULL), IXL_OK);
    void *blob = NULL;
    size_t len = 0;
    CHECK_RC(ixl_md_get(t, NULL, &blob, &len), IXL_OK);
    CHECK_RC(ixl_md_load(i, blob, len, NULL, 0), IXL_OK);
    ixl_free(blob);
    nr_checked_rw(i, src, dst, LEN, ROUNDS, 0x1ce0, "ln-t", what);
    int n, at;
    loops_at(want, &n, &at);
    fprintf(stderr, "%s: %d loop threads, %d at nice %d; this thread at %d\n", what, n, at, want,
            my_nice());
    if (n != 4 || at != 4)
        nr_fail("%s: %d of %d loop threads at nice %d (want 4 of 4)", what, at, n, want);
    ixl_agent_destroy(i);
    ixl_agent_destroy(t);
    munmap(dst, LEN);
    munmap(src, LEN);
}

static void case_five(void)
{
    int base = my_nice();
    run("5", base + 5 > 19 ? 19 : base + 5, "five");
    if (my_nice() != base)
        nr_fail("five: the application's thread moved from nice %d to %d", base, my_nice());
}

static void case_default(void)
{
    run(NULL, my_nice(), "default");
}

static void case_range(void)
{
    static const char *const bad[] = {"20", "-1"};
    for (size_t k = 0; k < 2; k++) {
        char why[512] = "";
        struct ixl_agent *a = NULL;
        const char *kv[] = {"loop_nice", bad[k], NULL};
        ixl_status st = nr_agent("ln-r", kv, &a, why, sizeof(why));
        if (st == IXL_OK) {
            nr_fail("range: loop_nice=%s was taken", bad[k]);
            ixl_agent_destroy(a);
        } else if (strstr(why, "loop_nice") == NULL) {
            nr_fail("range: the refusal of loop_nice=%s does not name the option: %s", bad[k], why);
        }
    }
}

static void case_clamp(void)
{
    if (setpriority(PRIO_PROCESS, (id_t)syscall(SYS_gettid), 17) != 0) {
        nr_fail("clamp: setpriority(17) on this thread: %s", strerror(errno));
        return;
    }
    CHECK(my_nice() == 17);
    run("5", 19, "clamp");
}

int main(int argc, char **argv)
{
    signal(SIGPIPE, SIG_IGN);
    nr_guard("test_net_loop_nice", 60, NULL);
    static const struct nr_case cases[] = {{"five", case_five},
                                           {"default", case_default},
                                           {"range", case_range},
                                           {"clamp", case_clamp}};
    return nr_run_cases(cases, sizeof(cases) / sizeof(cases[0]), argc, argv);
}
