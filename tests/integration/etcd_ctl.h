/*
 * A real etcd for tests: a private etcd-server on 127.0.0.1 (free ports, a temporary data
 * directory under /tmp, its log in that directory), started and stopped by the test process.
 * Plain C with raw sockets (no libcurl), so tests that link only libixl can use it.
 *
 *   struct etcd_srv s;
 *   etcd_require();                     // exit 77 (CI=true: 1) when etcd is not installed
 *   if (etcd_start(&s, 0) != 0) ...     // s.endpoint = "http://127.0.0.1:<port>"
 *   ...
 *   etcd_stop(&s);                      // SIGTERM, then SIGKILL after 5 s; removes the directory
 *
 * Servers still running at exit() are stopped by an atexit handler (in the process that started
 * them, not in forked children); the server dies with the thread that started it
 * (PR_SET_PDEATHSIG), so a test killed by ctest's timeout leaves no etcd behind. Not
 * thread-safe: start and stop servers from one thread (the main one).
 */
#ifndef IXL_TEST_ETCD_CTL_H
#define IXL_TEST_ETCD_CTL_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

struct etcd_srv {
    pid_t pid;         /* 0 when not running */
    char dir[128];     /* temporary directory: data/ and etcd.log */
    char endpoint[64]; /* "http://127.0.0.1:<client port>" */
    uint16_t client_port, peer_port;
};

/* The etcd binary: /usr/bin/etcd, else "etcd" found in PATH; NULL when there is none. */
const char *etcd_find(void);
/* Skips the test (exit 77; under CI=true exit 1, since the project installs etcd-server) when
 * etcd_find() finds nothing. */
void etcd_require(void);
/* Starts etcd with --max-request-bytes max_request_bytes (0 = etcd's default, 1.5 MiB) and waits
 * (at most 20 s) until /health answers. 0, or -1 with the reason (and the log's tail) on
 * stderr. */
int etcd_start(struct etcd_srv *s, size_t max_request_bytes);
/* Stops it (SIGTERM; SIGKILL after 5 s), removes the directory. Accepts a stopped server. */
void etcd_stop(struct etcd_srv *s);
/* SIGKILLs it and waits, keeping the directory (etcd_start again is a new, empty server). */
void etcd_kill(struct etcd_srv *s);

/* POSTs body (JSON) to path (e.g. "/v3/kv/put") on s; the answer's body, NUL-terminated, goes
 * to out (cap bytes, truncated). Returns the HTTP status, or -1 when etcd did not answer in
 * timeout_ms. */
int etcd_http(const struct etcd_srv *s, const char *method, const char *path, const char *body,
              char *out, size_t cap, int timeout_ms);
/* Puts key = value (len bytes, any bytes) with no lease; 0 or -1. */
int etcd_put_raw(const struct etcd_srv *s, const char *key, const void *value, size_t len);
/* Whether key exists: 1, 0, or -1 when etcd did not answer. */
int etcd_key_exists(const struct etcd_srv *s, const char *key);

#endif
