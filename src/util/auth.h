/*
 * Trust primitives of the core (docs/security.md): the cluster key and its MACs, and what the
 * kernel says about the process at the other end of a socket. No cryptography is written
 * here: MACs are OpenSSL's HMAC-SHA-256, comparisons CRYPTO_memcmp, nonces getrandom.
 */
#ifndef IXL_UTIL_AUTH_H
#define IXL_UTIL_AUTH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <ixl/ixl_plugin.h> /* enum ixl_auth_mode */

#define IXL_AUTH_KEY_MIN 16  /* bytes of a cluster key, at least */
#define IXL_AUTH_KEY_MAX 256 /* and at most */
#define IXL_AUTH_MAC 32      /* bytes of a MAC */
#define IXL_AUTH_NONCE 16    /* bytes of a challenge */

/* An agent's trust settings, fixed at creation. */
struct ixl_auth {
    enum ixl_auth_mode mode;
    uint8_t key[IXL_AUTH_KEY_MAX];
    size_t key_len;
};

/*
 * Fills a from the agent's params (key: NULL when the params set none; insecure: -1 when
 * the params say nothing) and the configuration (IXL_AUTH_KEY, IXL_AUTH_KEY_FILE,
 * IXL_INSECURE_REMOTE). IXL_OK, or IXL_ERR_INVALID_ARG with the reason in why: a key shorter
 * than IXL_AUTH_KEY_MIN or longer than IXL_AUTH_KEY_MAX, a key file that another user could
 * read or write, that is not a regular file of this process's user, or cannot be read.
 */
int ixl_auth_setup(struct ixl_auth *a, const char *key, int insecure, char *why, size_t why_len);

/* Wipes the key. */
void ixl_auth_clear(struct ixl_auth *a);

/* HMAC-SHA-256 under a's key of label (its NUL included) then parts[0..n): IXL_OK, or
 * IXL_ERR_NOT_ALLOWED when a has no key, IXL_ERR_SYSTEM when libcrypto failed. */
int ixl_auth_mac(const struct ixl_auth *a, const char *label, const void *const *parts,
                 const size_t *lens, size_t n, uint8_t out[IXL_AUTH_MAC]);

/* 1 when equal, in time independent of the contents. */
int ixl_auth_equal(const void *x, const void *y, size_t n);

/* n random bytes from the kernel: IXL_OK or IXL_ERR_SYSTEM. */
int ixl_auth_nonce(void *out, size_t n);

/*
 * The kernel's word on the peer of connected socket fd: IXL_OK when it runs as this process's
 * effective uid (AF_UNIX: SO_PEERCRED; TCP over loopback, IPv4 or IPv6: the uid of the peer's
 * socket found through NETLINK_SOCK_DIAG by the connection's four-tuple); IXL_ERR_AUTH when
 * another user; IXL_ERR_NOT_SUPPORTED for TCP from a non-loopback address or another socket
 * family; IXL_ERR_SYSTEM when asking failed. why gets the reason; *pid_out the peer's pid
 * for AF_UNIX, 0 otherwise (either may be NULL).
 */
int ixl_peer_check(int fd, int32_t *pid_out, char *why, size_t why_len);

#endif
