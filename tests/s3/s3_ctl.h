/*
 * Tests' handle on tests/s3/s3_strict_server.py (the SigV4-checking S3 test server): start it on
 * 127.0.0.1 with an ephemeral port, drive its /__ctl endpoints (fault rules, the request log,
 * outstanding multipart uploads, stored objects) over a plain socket, stop it.
 * The server's path comes from IXL_S3T_SERVER_PY (a compile definition); python3 is
 * /usr/bin/python3.
 */
#ifndef IXL_TEST_S3_CTL_H
#define IXL_TEST_S3_CTL_H

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "check.h"

struct s3srv {
    pid_t pid;
    int port;
    char dir[64];
    char endpoint[64]; /* http://127.0.0.1:PORT */
    int tls_port;      /* with TLS (s3srv_start_tls): the HTTPS port, else 0 */
    char tls_dir[96];  /* its certificates: ca.pem (the test CA), other-ca.pem, server.* */
};

static inline long long s3_now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static inline void s3_sleep_ms(int ms)
{
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
        ;
}

static inline void s3srv_stop(struct s3srv *s);

/* The server a failed check leaves running is stopped at exit (check_fail calls exit). */
static struct s3srv *s3srv_live;
static inline void s3srv_atexit(void)
{
    if (s3srv_live)
        s3srv_stop(s3srv_live);
}

/* Starts the server with extra arguments (NULL-terminated list, may be NULL); with tls, also
 * HTTPS on s->tls_port with a test CA made at start (s->tls_dir/ca.pem). Skips (77; under
 * CI=true fails) when python3, botocore or (tls) openssl is missing. */
static inline void s3srv_start_tls(struct s3srv *s, const char *const *extra, int tls)
{
    memset(s, 0, sizeof(*s));
    if (access("/usr/bin/python3", X_OK) != 0)
        skip(1, "/usr/bin/python3 is missing (scripts/deps.sh test installs it)");
    snprintf(s->dir, sizeof(s->dir), "/tmp/ixl-s3t-XXXXXX");
    CHECK(mkdtemp(s->dir) != NULL);
    char port_file[96], log_file[96];
    snprintf(port_file, sizeof(port_file), "%s/port", s->dir);
    snprintf(log_file, sizeof(log_file), "%s/log", s->dir);
    const char *argv[40];
    int n = 0;
    argv[n++] = "/usr/bin/python3";
    argv[n++] = IXL_S3T_SERVER_PY;
    argv[n++] = "--port-file";
    argv[n++] = port_file;
    if (tls) {
        snprintf(s->tls_dir, sizeof(s->tls_dir), "%s/tls", s->dir);
        argv[n++] = "--tls-dir";
        argv[n++] = s->tls_dir;
    }
    for (; extra && *extra && n < 38; extra++)
        argv[n++] = *extra;
    argv[n] = NULL;
    s->pid = fork();
    CHECK(s->pid >= 0);
    if (s->pid == 0) {
        prctl(PR_SET_PDEATHSIG, SIGKILL); /* a test killed by ctest's timeout leaves none */
        int fd = open(log_file, O_WRONLY | O_CREAT | O_TRUNC, 0600);
        if (fd >= 0) {
            dup2(fd, 1);
            dup2(fd, 2);
        }
        execv(argv[0], (char *const *)argv);
        _exit(127);
    }
    static int registered;
    if (!registered && atexit(s3srv_atexit) == 0)
        registered = 1;
    s3srv_live = s;
    long long t0 = s3_now_ms();
    for (;;) {
        FILE *f = fopen(port_file, "r");
        if (f) {
            int ok = fscanf(f, "%d", &s->port) == 1;
            if (ok && tls)
                ok = fscanf(f, "%d", &s->tls_port) == 1 && s->tls_port > 0;
            fclose(f);
            if (ok && s->port > 0)
                break;
        }
        int st;
        if (waitpid(s->pid, &st, WNOHANG) == s->pid) {
            char why[512] = "";
            f = fopen(log_file, "r");
            if (f) {
                size_t got = fread(why, 1, sizeof(why) - 1, f);
                why[got] = '\0';
                fclose(f);
            }
            s->pid = 0;
            if (WIFEXITED(st) && WEXITSTATUS(st) == 77) {
                char msg[700];
                snprintf(msg, sizeof(msg),
                         "the S3 test server needs python3-botocore%s (scripts/deps.sh test): %s",
                         tls ? " and openssl" : "", why);
                skip(1, msg);
            }
            check_fail(__FILE__, __LINE__, "the S3 test server exited at start: %s", why);
        }
        if (s3_now_ms() - t0 > 20000)
            check_fail(__FILE__, __LINE__, "the S3 test server wrote no port in 20 s");
        s3_sleep_ms(20);
    }
    snprintf(s->endpoint, sizeof(s->endpoint), "http://127.0.0.1:%d", s->port);
}

static inline void s3srv_start(struct s3srv *s, const char *const *extra)
{
    s3srv_start_tls(s, extra, 0);
}

/* Whether the server process still runs (it exits on a "die" fault). */
static inline int s3srv_alive(struct s3srv *s)
{
    int st;
    if (s->pid <= 0)
        return 0;
    if (waitpid(s->pid, &st, WNOHANG) == s->pid) {
        s->pid = 0;
        return 0;
    }
    return 1;
}

static inline void s3srv_stop(struct s3srv *s)
{
    if (s3srv_live == s)
        s3srv_live = NULL;
    if (s->pid > 0) {
        kill(s->pid, SIGTERM);
        int st;
        for (int i = 0; i < 200; i++) {
            if (waitpid(s->pid, &st, WNOHANG) == s->pid) {
                s->pid = 0;
                break;
            }
            s3_sleep_ms(10);
        }
        if (s->pid > 0) {
            kill(s->pid, SIGKILL);
            waitpid(s->pid, &st, 0);
            s->pid = 0;
        }
    }
    char p[128];
    snprintf(p, sizeof(p), "%s/port", s->dir);
    unlink(p);
    snprintf(p, sizeof(p), "%s/log", s->dir);
    unlink(p);
    if (s->tls_dir[0]) {
        static const char *const certs[] = {"ca.pem", "other-ca.pem", "server.pem", "server.key"};
        for (size_t i = 0; i < sizeof(certs) / sizeof(certs[0]); i++) {
            snprintf(p, sizeof(p), "%s/%s", s->tls_dir, certs[i]);
            unlink(p);
        }
        rmdir(s->tls_dir);
    }
    rmdir(s->dir);
}

/* One control request (HTTP/1.0, the connection closes after the answer). The answer's body
 * goes to out (NUL-terminated, cut at cap - 1; out may be NULL); returns the HTTP status, or -1
 * when the server does not answer. */
static inline int s3_ctl(const struct s3srv *s, const char *method, const char *path,
                         const void *body, size_t body_len, char *out, size_t cap)
{
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    CHECK(fd >= 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)s->port)};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (connect(fd, (struct sockaddr *)&a, sizeof(a)) != 0) {
        close(fd);
        return -1;
    }
    char head[512];
    int hl = snprintf(head, sizeof(head),
                      "%s %s HTTP/1.0\r\nHost: 127.0.0.1:%d\r\nContent-Length: %zu\r\n"
                      "Content-Type: application/json\r\n\r\n",
                      method, path, s->port, body_len);
    CHECK(hl > 0 && (size_t)hl < sizeof(head));
    CHECK(send(fd, head, (size_t)hl, MSG_NOSIGNAL) == hl);
    if (body_len)
        CHECK(send(fd, body, body_len, MSG_NOSIGNAL) == (ssize_t)body_len);
    size_t rcap = 1 << 16, n = 0;
    char *r = malloc(rcap);
    CHECK(r != NULL);
    for (;;) {
        if (n + 4096 > rcap) {
            rcap *= 2;
            r = realloc(r, rcap);
            CHECK(r != NULL);
        }
        ssize_t k = recv(fd, r + n, rcap - n - 1, 0);
        if (k <= 0)
            break;
        n += (size_t)k;
    }
    close(fd);
    r[n] = '\0';
    int status = -1;
    if (sscanf(r, "HTTP/1.%*d %d", &status) != 1)
        status = -1;
    if (out && cap) {
        char *b = strstr(r, "\r\n\r\n");
        const char *src = b ? b + 4 : "";
        size_t bl = b ? n - (size_t)(b + 4 - r) : 0;
        if (bl > cap - 1)
            bl = cap - 1;
        memcpy(out, src, bl);
        out[bl] = '\0';
    }
    free(r);
    return status;
}

/* Adds a fault rule (JSON text); fails the test if the server refuses it. */
static inline void s3_fault(const struct s3srv *s, const char *json)
{
    int st = s3_ctl(s, "POST", "/__ctl/fault", json, strlen(json), NULL, 0);
    if (st != 200)
        check_fail(__FILE__, __LINE__, "the S3 test server refused fault %s (%d)", json, st);
}

static inline void s3_reset(const struct s3srv *s)
{
    CHECK(s3_ctl(s, "POST", "/__ctl/reset", NULL, 0, NULL, 0) == 200);
}

static inline size_t s3_count(const char *hay, const char *needle)
{
    size_t c = 0;
    for (const char *p = hay; (p = strstr(p, needle)) != NULL; p += strlen(needle))
        c++;
    return c;
}

/* s percent-encoded for a query string (all but unreserved characters), into out. */
static inline void s3_qenc(const char *s, char *out, size_t cap)
{
    size_t o = 0;
    for (; *s && o + 4 < cap; s++) {
        unsigned char c = (unsigned char)*s;
        if ((c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
            c == '-' || c == '_' || c == '.' || c == '~')
            out[o++] = (char)c;
        else
            o += (size_t)snprintf(out + o, cap - o, "%%%02X", c);
    }
    out[o] = '\0';
}

/* Requests the server saw with method on key (since the last reset). */
static inline size_t s3_requests(const struct s3srv *s, const char *method, const char *key)
{
    static char buf[1 << 20];
    char path[3300], ek[3200];
    s3_qenc(key, ek, sizeof(ek));
    snprintf(path, sizeof(path), "/__ctl/log?method=%s&key=%s", method, ek);
    CHECK(s3_ctl(s, "GET", path, NULL, 0, buf, sizeof(buf)) == 200);
    return s3_count(buf, "\"status\": ");
}

/* Prints the server's request log (after a failed check). */
static inline void s3_dump_log(const struct s3srv *s)
{
    static char buf[1 << 20];
    if (s3_ctl(s, "GET", "/__ctl/log", NULL, 0, buf, sizeof(buf)) == 200)
        fprintf(stderr, "server log: %s\n", buf);
}

/* CHECK_REQS(srv, method, key, n): the server saw n such requests (else the log is printed). */
#define CHECK_REQS(s, method, key, n)                                                              \
    do {                                                                                           \
        size_t got_ = s3_requests(s, method, key);                                                 \
        if (got_ != (size_t)(n)) {                                                                 \
            s3_dump_log(s);                                                                        \
            check_fail(__FILE__, __LINE__, "%zu %s requests of '%s', want %zu", got_, method, key, \
                       (size_t)(n));                                                               \
        }                                                                                          \
    } while (0)

/* Multipart uploads begun and neither completed nor aborted. */
static inline size_t s3_outstanding_uploads(const struct s3srv *s)
{
    char buf[1 << 16];
    CHECK(s3_ctl(s, "GET", "/__ctl/uploads", NULL, 0, buf, sizeof(buf)) == 200);
    return s3_count(buf, "\"upload_id\"");
}

/* The stored bytes of bucket/key into out (cap bytes); returns the length, or -1 if none. */
static inline long s3_object(const struct s3srv *s, const char *bucket, const char *key, void *out,
                             size_t cap)
{
    char path[3300], ek[3200];
    s3_qenc(key, ek, sizeof(ek));
    snprintf(path, sizeof(path), "/__ctl/object?bucket=%s&key=%s", bucket, ek);
    /* The body is binary: fetch it raw. */
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    CHECK(fd >= 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)s->port)};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    CHECK(connect(fd, (struct sockaddr *)&a, sizeof(a)) == 0);
    char head[3400];
    int hl = snprintf(head, sizeof(head), "GET %s HTTP/1.0\r\nHost: x\r\n\r\n", path);
    CHECK(send(fd, head, (size_t)hl, MSG_NOSIGNAL) == hl);
    size_t rcap = cap + 4096, n = 0;
    char *r = malloc(rcap);
    CHECK(r != NULL);
    ssize_t k;
    while (n < rcap && (k = recv(fd, r + n, rcap - n, 0)) > 0)
        n += (size_t)k;
    close(fd);
    long len = -1;
    int status = 0;
    char *b = memmem(r, n, "\r\n\r\n", 4);
    if (b && sscanf(r, "HTTP/1.%*d %d", &status) == 1 && status == 200) {
        size_t bl = n - (size_t)(b + 4 - r);
        CHECK(bl <= cap);
        memcpy(out, b + 4, bl);
        len = (long)bl;
    }
    free(r);
    return len;
}

#endif
