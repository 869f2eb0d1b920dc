/* A private etcd for tests (see etcd_ctl.h). */
#include "etcd_ctl.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define MAX_SRV 8

static struct etcd_srv *running[MAX_SRV];
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

const char *etcd_find(void)
{
    static char found[512];
    if (access("/usr/bin/etcd", X_OK) == 0)
        return "/usr/bin/etcd";
    const char *path = getenv("PATH");
    while (path && *path) {
        size_t n = strcspn(path, ":");
        if (n > 0 && n < sizeof(found) - 6) {
            snprintf(found, sizeof(found), "%.*s/etcd", (int)n, path);
            if (access(found, X_OK) == 0)
                return found;
        }
        path += n + (path[n] == ':');
    }
    return NULL;
}

void etcd_require(void)
{
    if (etcd_find() != NULL)
        return;
    const char *ci = getenv("CI");
    if (ci && strcmp(ci, "true") == 0) {
        fprintf(stderr, "FAIL (CI=true, and the project installs it): etcd not found "
                        "(Debian etcd-server; sh scripts/deps.sh test)\n");
        exit(1);
    }
    fprintf(stderr, "SKIP: etcd not found (install Debian etcd-server)\n");
    exit(77);
}

static int free_port(uint16_t *port)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t al = sizeof(a);
    if (fd < 0)
        return -1;
    if (bind(fd, (struct sockaddr *)&a, sizeof(a)) != 0 ||
        getsockname(fd, (struct sockaddr *)&a, &al) != 0) {
        close(fd);
        return -1;
    }
    close(fd);
    *port = ntohs(a.sin_port);
    return 0;
}

static int rm_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
    (void)st;
    (void)flag;
    (void)ftw;
    remove(path);
    return 0;
}

static void rm_tree(const char *dir)
{
    if (dir[0] != '\0')
        nftw(dir, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
}

static void stop_all(void)
{
    if (getpid() != owner_pid)
        return;
    for (int i = 0; i < MAX_SRV; i++)
        if (running[i] != NULL)
            etcd_stop(running[i]);
}

static void track(struct etcd_srv *s, bool on)
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

static void log_tail(const struct etcd_srv *s)
{
    char path[192], buf[2048];
    snprintf(path, sizeof(path), "%s/etcd.log", s->dir);
    FILE *f = fopen(path, "r");
    if (f == NULL)
        return;
    fseek(f, 0, SEEK_END);
    long end = ftell(f);
    fseek(f, end > (long)sizeof(buf) - 1 ? end - (long)sizeof(buf) + 1 : 0, SEEK_SET);
    size_t n = fread(buf, 1, sizeof(buf) - 1, f);
    buf[n] = '\0';
    fclose(f);
    fprintf(stderr, "--- etcd.log (tail) ---\n%s\n---\n", buf);
}

static int start_once(struct etcd_srv *s, size_t max_request_bytes)
{
    const char *bin = etcd_find();
    char data[192], logp[192], curl_[64], purl[64], cluster[96], mrb[32];
    if (bin == NULL || free_port(&s->client_port) != 0 || free_port(&s->peer_port) != 0 ||
        s->client_port == s->peer_port)
        return -1;
    snprintf(data, sizeof(data), "%s/data", s->dir);
    snprintf(logp, sizeof(logp), "%s/etcd.log", s->dir);
    snprintf(curl_, sizeof(curl_), "http://127.0.0.1:%u", s->client_port);
    snprintf(purl, sizeof(purl), "http://127.0.0.1:%u", s->peer_port);
    snprintf(cluster, sizeof(cluster), "default=%s", purl);
    snprintf(mrb, sizeof(mrb), "%zu", max_request_bytes ? max_request_bytes : 1572864);
    snprintf(s->endpoint, sizeof(s->endpoint), "%s", curl_);
    rm_tree(data);
    pid_t parent = getpid();
    pid_t pid = fork();
    if (pid < 0)
        return -1;
    if (pid == 0) {
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        if (getppid() != parent)
            _exit(127);
        int fd = open(logp, O_WRONLY | O_CREAT | O_APPEND, 0600);
        int nul = open("/dev/null", O_RDONLY);
        if (fd >= 0) {
            dup2(fd, 1);
            dup2(fd, 2);
        }
        if (nul >= 0)
            dup2(nul, 0);
        execl(bin, bin, "--name", "default", "--data-dir", data, "--listen-client-urls", curl_,
              "--advertise-client-urls", curl_, "--listen-peer-urls", purl,
              "--initial-advertise-peer-urls", purl, "--initial-cluster", cluster,
              "--initial-cluster-state", "new", "--max-request-bytes", mrb, "--log-level", "warn",
              "--logger", "zap", (char *)NULL);
        _exit(127);
    }
    s->pid = pid;
    long long deadline = now_ms_() + 20000;
    char out[256];
    while (now_ms_() < deadline) {
        int st;
        if (waitpid(pid, &st, WNOHANG) == pid) {
            s->pid = 0;
            fprintf(stderr, "etcd_start: etcd exited (status 0x%x)\n", st);
            return -1;
        }
        if (etcd_http(s, "GET", "/health", NULL, out, sizeof(out), 1000) == 200 &&
            strstr(out, "\"true\"") != NULL)
            return 0;
        msleep(50);
    }
    fprintf(stderr, "etcd_start: no answer from %s in 20 s\n", s->endpoint);
    etcd_kill(s);
    return -1;
}

int etcd_start(struct etcd_srv *s, size_t max_request_bytes)
{
    memset(s, 0, sizeof(*s));
    snprintf(s->dir, sizeof(s->dir), "/tmp/ixl-etcd-XXXXXX");
    if (mkdtemp(s->dir) == NULL) {
        fprintf(stderr, "etcd_start: mkdtemp: %s\n", strerror(errno));
        s->dir[0] = '\0';
        return -1;
    }
    for (int attempt = 0; attempt < 3; attempt++) { /* a port taken between probe and bind */
        if (start_once(s, max_request_bytes) == 0) {
            track(s, true);
            return 0;
        }
    }
    log_tail(s);
    rm_tree(s->dir);
    s->dir[0] = '\0';
    return -1;
}

static void reap(struct etcd_srv *s, int grace_ms)
{
    long long deadline = now_ms_() + grace_ms;
    int st;
    while (waitpid(s->pid, &st, WNOHANG) == 0) {
        if (now_ms_() >= deadline) {
            kill(s->pid, SIGKILL);
            waitpid(s->pid, &st, 0);
            break;
        }
        msleep(10);
    }
    s->pid = 0;
}

void etcd_kill(struct etcd_srv *s)
{
    if (s->pid > 0) {
        kill(s->pid, SIGKILL);
        reap(s, 5000);
    }
}

void etcd_stop(struct etcd_srv *s)
{
    if (s->pid > 0) {
        kill(s->pid, SIGTERM);
        reap(s, 5000);
    }
    track(s, false);
    rm_tree(s->dir);
    s->dir[0] = '\0';
}

/* ---- A minimal HTTP/1.0 client ---- */

static int io_wait(int fd, short ev, long long deadline)
{
    struct pollfd p = {.fd = fd, .events = ev};
    long long left = deadline - now_ms_();
    if (left <= 0)
        return -1;
    return poll(&p, 1, (int)left) == 1 ? 0 : -1;
}

int etcd_http(const struct etcd_srv *s, const char *method, const char *path, const char *body,
              char *out, size_t cap, int timeout_ms)
{
    long long deadline = now_ms_() + timeout_ms;
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    struct sockaddr_in a = {.sin_family = AF_INET,
                            .sin_port = htons(s->client_port),
                            .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    int status = -1;
    char *resp = NULL;
    size_t blen = body ? strlen(body) : 0, rlen = 0, rcap = 0;
    if (fd < 0)
        return -1;
    if (connect(fd, (struct sockaddr *)&a, sizeof(a)) != 0 && errno != EINPROGRESS)
        goto out;
    if (io_wait(fd, POLLOUT, deadline) != 0)
        goto out;
    int soerr = 0;
    socklen_t sl = sizeof(soerr);
    if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &soerr, &sl) != 0 || soerr != 0)
        goto out;
    char hdr[512];
    int hl = snprintf(hdr, sizeof(hdr),
                      "%s %s HTTP/1.0\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                      "Content-Length: %zu\r\n\r\n",
                      method, path, blen);
    for (int part = 0; part < 2; part++) {
        const char *p = part ? body : hdr;
        size_t n = part ? blen : (size_t)hl, off = 0;
        while (off < n) {
            if (io_wait(fd, POLLOUT, deadline) != 0)
                goto out;
            ssize_t w = send(fd, p + off, n - off, MSG_NOSIGNAL);
            if (w < 0 && errno != EAGAIN && errno != EINTR)
                goto out;
            if (w > 0)
                off += (size_t)w;
        }
    }
    for (;;) {
        if (rlen + 4096 + 1 > rcap) {
            rcap = rcap ? rcap * 2 : 16384;
            char *nr = realloc(resp, rcap);
            if (nr == NULL)
                goto out;
            resp = nr;
        }
        if (io_wait(fd, POLLIN, deadline) != 0)
            goto out;
        ssize_t r = recv(fd, resp + rlen, rcap - rlen - 1, 0);
        if (r == 0)
            break;
        if (r < 0 && errno != EAGAIN && errno != EINTR)
            goto out;
        if (r > 0)
            rlen += (size_t)r;
    }
    resp[rlen] = '\0';
    int code;
    char *bodyp = strstr(resp, "\r\n\r\n");
    if (sscanf(resp, "HTTP/%*d.%*d %d", &code) != 1 || bodyp == NULL)
        goto out;
    if (out && cap) {
        snprintf(out, cap, "%s", bodyp + 4);
    }
    status = code;
out:
    free(resp);
    close(fd);
    return status;
}

static char *b64(const void *p, size_t n)
{
    static const char t[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    const unsigned char *b = p;
    char *o = malloc(4 * ((n + 2) / 3) + 1);
    size_t j = 0;
    if (o == NULL)
        return NULL;
    for (size_t i = 0; i < n; i += 3) {
        unsigned v = (unsigned)b[i] << 16 | (i + 1 < n ? (unsigned)b[i + 1] << 8 : 0) |
                     (i + 2 < n ? b[i + 2] : 0);
        o[j++] = t[v >> 18];
        o[j++] = t[(v >> 12) & 63];
        o[j++] = i + 1 < n ? t[(v >> 6) & 63] : '=';
        o[j++] = i + 2 < n ? t[v & 63] : '=';
    }
    o[j] = '\0';
    return o;
}

int etcd_put_raw(const struct etcd_srv *s, const char *key, const void *value, size_t len)
{
    char *k = b64(key, strlen(key)), *v = b64(value, len), *body = NULL;
    int rc = -1;
    if (k && v && (body = malloc(strlen(k) + strlen(v) + 64)) != NULL) {
        sprintf(body, "{\"key\":\"%s\",\"value\":\"%s\"}", k, v);
        char out[512];
        rc = etcd_http(s, "POST", "/v3/kv/put", body, out, sizeof(out), 10000) == 200 ? 0 : -1;
        if (rc != 0)
            fprintf(stderr, "etcd_put_raw %s: %s\n", key, out);
    }
    free(body);
    free(v);
    free(k);
    return rc;
}

int etcd_key_exists(const struct etcd_srv *s, const char *key)
{
    char *k = b64(key, strlen(key));
    char body[1024], out[4096];
    if (k == NULL || strlen(k) > 900) {
        free(k);
        return -1;
    }
    snprintf(body, sizeof(body), "{\"key\":\"%s\",\"count_only\":true}", k);
    free(k);
    if (etcd_http(s, "POST", "/v3/kv/range", body, out, sizeof(out), 5000) != 200)
        return -1;
    return strstr(out, "\"count\"") != NULL;
}
