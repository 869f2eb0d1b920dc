/*
 * An S3 server for tests, started and stopped by the test process on 127.0.0.1 with an
 * ephemeral port (the server binds port 0), in a temporary data directory under /tmp.
 *
 * By default the server is s3rver (npm, tests/s3/package-lock.json, installed by
 * tests/s3/setup.sh into $IXL_S3RVER_DIR or ~/.cache/ixl/s3rver). Another server (the SigV4-
 * checking test server, say) is run instead when IXL_S3_SERVER names a command line: it is run
 * through /bin/sh with " --port 0 --address 127.0.0.1 --directory DIR --bucket BUCKET" appended
 * and must print a line ending in "listening on 127.0.0.1:PORT" on stdout or stderr once it
 * serves, with BUCKET created.
 *
 *   struct s3_srv s;
 *   s3_require();                 // exit 77 (CI=true: 1) when node or s3rver is missing
 *   if (s3_start(&s, "bkt") != 0) ...   // s.endpoint = "http://127.0.0.1:<port>"
 *   ...
 *   s3_stop(&s);                  // SIGTERM, SIGKILL after 3 s; removes the directory
 *
 * A server still running at exit() is stopped by an atexit handler of the process that started
 * it; it dies with that process's starting thread (PR_SET_PDEATHSIG), so a test killed by
 * ctest's timeout leaves none behind. Start and stop servers from one thread.
 */
#ifndef IXL_TEST_S3_SERVER_H
#define IXL_TEST_S3_SERVER_H

#include <stdint.h>
#include <sys/types.h>

struct s3_srv {
    pid_t pid;         /* 0 when not running */
    char dir[128];     /* temporary directory: data/ and server.log */
    char endpoint[64]; /* "http://127.0.0.1:<port>" */
    uint16_t port;
};

/* The s3rver script (".../node_modules/s3rver/bin/s3rver.js") when node and it are installed,
 * else NULL with the reason in why. With IXL_S3_SERVER set: that command. */
const char *s3_find(char *why, size_t cap);
/* Skips the test (exit 77; under CI=true exit 1, since the project installs node and s3rver)
 * when s3_find() finds nothing. */
void s3_require(void);
/* Starts the server with bucket created and waits (at most 30 s) until it listens. 0, or -1 with
 * the reason and the log's tail on stderr. */
int s3_start(struct s3_srv *s, const char *bucket);
/* Stops it (SIGTERM; SIGKILL after 3 s) and removes its directory. Accepts a stopped server. */
void s3_stop(struct s3_srv *s);
/* SIGSTOPs / SIGCONTs it: a server that stalls. */
void s3_pause(struct s3_srv *s, int on);

#endif
