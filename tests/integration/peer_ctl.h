/*
 * Peer processes driven over a line protocol on their stdin/stdout (ixl_peer.c, or ucx_peer.c:
 * ixl_peer with a UCX backend), shared by test_net and test_ucx: start, command, kill, exit,
 * and the metadata exchange with the test's own agents. Failures end the test (check.h).
 */
#ifndef IXL_TEST_PEER_CTL_H
#define IXL_TEST_PEER_CTL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include <ixl/ixl.h>

#define MAX_PEERS 32
#define REPLY_MS 60000 /* longest wait for a peer's answer */

struct peer {
    char name[64];
    pid_t pid;
    int to, from; /* its stdin, its stdout */
    char *rbuf;
    size_t rlen, rcap, used; /* used: bytes of the last line handed out */
    bool gone;
};

/* A registered buffer of a peer. */
struct rbuf {
    struct peer *p;
    int id;
    uint64_t addr, len;
};

extern pid_t main_pid; /* the test process (forked children tell themselves apart by it) */

/* Records the test's name (for the alarm's message) and the peer binary; installs the SIGALRM
 * handler (kills the peers, exits 1) and an atexit handler that kills the peers left. */
void peers_init(const char *test_name, const char *peer_path);
uint64_t now_ms(void);
void sleep_ms(unsigned ms);
void kill_peers(void);
/* Starts a peer named name with extra arguments (NULL-terminated). */
struct peer *peer_start(const char *name, ...);
/* The next line the peer prints (valid until the next call for this peer). */
char *peer_line(struct peer *p, int timeout_ms);
void peer_send(struct peer *p, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Sends a command and returns the text after "ok" of its answer; any other answer fails. */
char *peer_ok_at(const char *file, int line, struct peer *p, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
#define PEER_OK(p, ...) peer_ok_at(__FILE__, __LINE__, (p), __VA_ARGS__)
void peer_ready(struct peer *p);
/* Exits the peer through its protocol and checks it ended cleanly. */
void peer_exit(struct peer *p);
void peer_kill(struct peer *p);
struct rbuf peer_alloc(struct peer *p, int id, size_t len, const char *kind);
/* The peer's metadata (caller frees). */
uint8_t *peer_md(struct peer *p, size_t *len);
void load_peer(struct ixl_agent *a, struct peer *p);
/* Gives a peer this agent's metadata (so it can send notifications to it). */
void load_into_peer(struct peer *p, struct ixl_agent *a);
/* A pattern seed no earlier call returned, whose first byte is neither poison (0x5a, 0xa5). */
uint64_t peer_fresh_seed(void);
/* A WRITE of len fresh bytes from local into rb (poisoned first), checked by the peer, then a
 * READ of fresh peer bytes back into local (poisoned first), checked here. */
void peer_roundtrip(struct ixl_agent *a, uint8_t *local, const struct rbuf *rb, size_t len);

#endif
