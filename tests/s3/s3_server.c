/* An S3 server for tests (see s3_server.h). */
#include "s3_server.h"

#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define MAX_SRV 4

static struct s3_srv *running[MAX_SRV];
static pid_t owner_pid;

static long long now_ms_(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void msleep(int ms)
{
    struct timespec ts = {.tv_sec = ms / 1000, .tv_nsec = (long)(ms % 1000) * 1000000L};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
        ;
}

static bool in_path(const char *prog)
{
    const char *path = getenv("PATH");
    char buf[512];
    while (path && *path) {
        size_t n = strcspn(path, ":");
        if (n > 0 && n < sizeof(buf) - 64) {
            snprintf(buf, sizeof(buf), "%.*s/%s", (int)n, path, prog);
            if (access(buf, X_OK) == 0)
                return true;
        }
        path += n + (path[n] == ':');
    }
    return false;
}

const char *s3_find(char *why, size_t cap)
{
    static char found[600];
    const char *cmd = getenv("IXL_S3_SERVER");
    if (cmd && cmd[0])
        return cmd;
    if (!in_path("node")) {
        snprintf(why, cap,
                 "node not found (install Debian nodejs and npm, then sh tests/s3/setup.sh)");
        return NULL;
    }
    const char *dir = getenv("IXL_S3RVER_DIR");
    const char *cache = getenv("XDG_CACHE_HOME");
    const char *home = getenv("HOME");
    if (dir && dir[0])
        snprintf(found, sizeof(found), "%s/node_modules/s3rver/bin/s3rver.js", dir);
    else if (cache && cache[0])
        snprintf(found, sizeof(found), "%s/ixl/s3rver/node_modules/s3rver/bin/s3rver.js", cache);
    else
        snprintf(found, sizeof(found), "%s/.cache/ixl/s3rver/node_modules/s3rver/bin/s3rver.js",
                 home ? home : "/root");
    if (access(found, R_OK) != 0) {
        snprintf(why, cap, "s3rver not installed at %s (run sh tests/s3/setup.sh)", found);
        return NULL;
    }
    return found;
}

void s3_require(void)
{
    char why[700];
    if (s3_find(why, sizeof(why)) != NULL)
        return;
    const char *ci = getenv("CI");
    if (ci && strcmp(ci, "true") == 0) {
        fprintf(stderr, "FAIL (CI=true, and the project installs it): %s\n", why);
        exit(1);
    }
    fprintf(stderr, "SKIP: %s\n", why);
    exit(77);
}

static int rm_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
    (void)st;
    (void)flag;
    (void)ftw;
    remove(path);
    return 0;
}

static void stop_all(void)
{
    if (getpid() != owner_pid)
        return;
    for (int i = 0; i < MAX_SRV; i++)
        if (running[i] != NULL)
            s3_stop(running[i]);
}

static void track(struct s3_srv *s, bool on)
{
    static bool registered;
    if (!registered) {
        owner_pid = getpid();
        atexit(stop_all);
        registered = true;
    }
    for (int i = 0; i < MAX_SRV; i++) {
        if (on && running[i] == NULL) {
            running[i] = s;
            return;
        }
        if (!on && running[i] == s)
            running[i] = NULL;
    }
}

static void log_tail(const struct s3_srv *s)
{
    char path[192], buf[2048];
    snprintf(path, sizeof(path), "%s/server.log", s->dir);
    FILE *f = fopen(path, "r");
    if (f == NULL)
        return;
    fseek(f, 0, SEEK_END);
    long end = ftell(f);
    fseek(f, end > (long)sizeof(buf) - 1 ? end - (long)sizeof(buf) + 1 : 0, SEEK_SET);
    size_t n = fread(buf, 1, sizeof(buf) - 1, f);
    buf[n] = '\0';
    fclose(f);
    fprintf(stderr, "--- server log tail ---\n%s\n---\n", buf);
}

/* The port from the log's "listening on 127.0.0.1:PORT" line, else 0. */
static uint16_t read_port(const struct s3_srv *s)
{
    char path[192], buf[8192];
    snprintf(path, sizeof(path), "%s/server.log", s->dir);
    FILE *f = fopen(path, "r");
    if (f == NULL)
        return 0;
    size_t n = fread(buf, 1, sizeof(buf) - 1, f);
    fclose(f);
    buf[n] = '\0';
    const char *p = strstr(buf, "listening on 127.0.0.1:");
    if (p == NULL)
        return 0;
    long port = strtol(p + strlen("listening on 127.0.0.1:"), NULL, 10);
    return port > 0 && port < 65536 ? (uint16_t)port : 0;
}

int s3_start(struct s3_srv *s, const char *bucket)
{
    char why[700];
    const char *prog = s3_find(why, sizeof(why));
    memset(s, 0, sizeof(*s));
    if (prog == NULL) {
        fprintf(stderr, "s3_start: %s\n", why);
        return -1;
    }
    snprintf(s->dir, sizeof(s->dir), "/tmp/ixl-s3-XXXXXX");
    if (mkdtemp(s->dir) == NULL) {
        fprintf(stderr, "s3_start: mkdtemp: %s\n", strerror(errno));
        return -1;
    }
    char data[192], logp[192];
    snprintf(data, sizeof(data), "%s/data", s->dir);
    snprintf(logp, sizeof(logp), "%s/server.log", s->dir);
    mkdir(data, 0700);
    bool custom = getenv("IXL_S3_SERVER") && getenv("IXL_S3_SERVER")[0];
    pid_t parent = getpid();
    pid_t pid = fork();
    if (pid < 0)
        return -1;
    if (pid == 0) {
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        if (getppid() != parent)
            _exit(127);
        int fd = open(logp, O_WRONLY | O_CREAT | O_TRUNC, 0600);
        int nul = open("/dev/null", O_RDONLY);
        if (fd < 0 || nul < 0)
            _exit(127);
        dup2(nul, 0);
        dup2(fd, 1);
        dup2(fd, 2);
        if (custom) {
            char cmd[2048];
            snprintf(cmd, sizeof(cmd),
                     "exec %s --port 0 --address 127.0.0.1 --directory %s --bucket %s", prog, data,
                     bucket);
            execl("/bin/sh", "sh", "-c", cmd, (char *)NULL);
        } else {
            execlp("node", "node", prog, "--silent", "-d", data, "-a", "127.0.0.1", "-p", "0",
                   "--configure-bucket", bucket, (char *)NULL);
        }
        _exit(127);
    }
    s->pid = pid;
    track(s, true);
    long long deadline = now_ms_() + 30000;
    while (now_ms_() < deadline) {
        int st;
        if (waitpid(pid, &st, WNOHANG) == pid) {
            s->pid = 0;
            track(s, false);
            fprintf(stderr, "s3_start: the server exited at start\n");
            log_tail(s);
            return -1;
        }
        uint16_t port = read_port(s);
        if (port) {
            s->port = port;
            snprintf(s->endpoint, sizeof(s->endpoint), "http://127.0.0.1:%u", port);
            return 0;
        }
        msleep(50);
    }
    fprintf(stderr, "s3_start: the server did not listen within 30 s\n");
    log_tail(s);
    s3_stop(s);
    return -1;
}

void s3_stop(struct s3_srv *s)
{
    if (s->pid > 0) {
        kill(s->pid, SIGCONT);
        kill(s->pid, SIGTERM);
        long long deadline = now_ms_() + 3000;
        int st;
        while (waitpid(s->pid, &st, WNOHANG) == 0) {
            if (now_ms_() > deadline) {
                kill(s->pid, SIGKILL);
                waitpid(s->pid, &st, 0);
                break;
            }
            msleep(20);
        }
        s->pid = 0;
    }
    track(s, false);
    if (s->dir[0])
        nftw(s->dir, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
    s->dir[0] = '\0';
}

void s3_pause(struct s3_srv *s, int on)
{
    if (s->pid > 0)
        kill(s->pid, on ? SIGSTOP : SIGCONT);
}
