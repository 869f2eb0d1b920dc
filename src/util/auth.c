/*
 * The cluster key, its MACs, and the kernel's word on a socket's peer (auth.h). Why each
 * mechanism, and what it does not stop: docs/security.md.
 */
#include "util/auth.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/inet_diag.h>
#include <linux/netlink.h>
#include <linux/sock_diag.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <openssl/core_names.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/params.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "util/config.h"
#include "util/sys.h"

/* ---- the key -------------------------------------------------------------------------------- */

static int read_key_file(const char *path, struct ixl_auth *a, char *why, size_t why_len)
{
    int fd = sys_open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW, 0);
    if (fd < 0) {
        snprintf(why, why_len, "IXL_AUTH_KEY_FILE='%s': %s", path, strerror(errno));
        return IXL_ERR_INVALID_ARG;
    }
    struct stat st;
    int rc = IXL_ERR_INVALID_ARG;
    if (fstat(fd, &st) != 0) {
        snprintf(why, why_len, "IXL_AUTH_KEY_FILE='%s': fstat: %s", path, strerror(errno));
        goto close_fd;
    }
    /* The kernel's record of the file, not its contents, says who else could know the key. */
    if (!S_ISREG(st.st_mode) || st.st_uid != geteuid() || (st.st_mode & 077) != 0) {
        snprintf(why, why_len,
                 "IXL_AUTH_KEY_FILE='%s': refused: a key file must be a regular file owned by "
                 "uid %u with no access for group or others (chmod 600); it is %s, uid %u, mode "
                 "%04o",
                 path, (unsigned)geteuid(), S_ISREG(st.st_mode) ? "a regular file" : "not a file",
                 (unsigned)st.st_uid, (unsigned)(st.st_mode & 07777));
        goto close_fd;
    }
    uint8_t buf[IXL_AUTH_KEY_MAX + 2];
    ssize_t n = read(fd, buf, sizeof(buf));
    if (n < 0) {
        snprintf(why, why_len, "IXL_AUTH_KEY_FILE='%s': read: %s", path, strerror(errno));
        goto close_fd;
    }
    while (n > 0 && (buf[n - 1] == '\n' || buf[n - 1] == '\r'))
        n--;
    if (n < IXL_AUTH_KEY_MIN || n > IXL_AUTH_KEY_MAX) {
        snprintf(why, why_len, "IXL_AUTH_KEY_FILE='%s': the key must be %d to %d bytes (it is %zd)",
                 path, IXL_AUTH_KEY_MIN, IXL_AUTH_KEY_MAX, n);
        goto wipe;
    }
    memcpy(a->key, buf, (size_t)n);
    a->key_len = (size_t)n;
    rc = IXL_OK;
wipe:
    OPENSSL_cleanse(buf, sizeof(buf));
close_fd:
    close(fd);
    return rc;
}

int ixl_auth_setup(struct ixl_auth *a, const char *key, int insecure, char *why, size_t why_len)
{
    memset(a, 0, sizeof(*a));
    const char *src = "auth_key";
    if (key == NULL) {
        key = ixl_cfg_get(IXL_CFG_AUTH_KEY);
        src = "IXL_AUTH_KEY";
    }
    if (key[0] != '\0') {
        size_t n = strlen(key);
        if (n < IXL_AUTH_KEY_MIN || n > IXL_AUTH_KEY_MAX) {
            snprintf(why, why_len, "%s: the key must be %d to %d bytes (it is %zu)", src,
                     IXL_AUTH_KEY_MIN, IXL_AUTH_KEY_MAX, n);
            return IXL_ERR_INVALID_ARG;
        }
        memcpy(a->key, key, n);
        a->key_len = n;
    } else if (src[0] == 'I' && ixl_cfg_get(IXL_CFG_AUTH_KEY_FILE)[0] != '\0') {
        int rc = read_key_file(ixl_cfg_get(IXL_CFG_AUTH_KEY_FILE), a, why, why_len);
        if (rc != IXL_OK)
            return rc;
    }
    if (a->key_len > 0) {
        a->mode = IXL_AUTH_KEY;
        return IXL_OK;
    }
    if (insecure < 0) {
        uint64_t v = 0;
        if (ixl_cfg_num(IXL_CFG_INSECURE_REMOTE, &v, why, why_len) != IXL_OK)
            return IXL_ERR_INVALID_ARG;
        insecure = v != 0;
    }
    a->mode = insecure ? IXL_AUTH_OPEN : IXL_AUTH_LOCAL;
    return IXL_OK;
}

void ixl_auth_clear(struct ixl_auth *a)
{
    OPENSSL_cleanse(a->key, sizeof(a->key));
    a->key_len = 0;
}

/* ---- MACs ----------------------------------------------------------------------------------- */

static EVP_MAC *hmac;
static pthread_once_t hmac_once = PTHREAD_ONCE_INIT;

static void hmac_fetch(void)
{
    hmac = EVP_MAC_fetch(NULL, "HMAC", NULL);
}

int ixl_auth_mac(const struct ixl_auth *a, const char *label, const void *const *parts,
                 const size_t *lens, size_t n, uint8_t out[IXL_AUTH_MAC])
{
    if (a == NULL || a->key_len == 0)
        return IXL_ERR_NOT_ALLOWED;
    pthread_once(&hmac_once, hmac_fetch);
    if (hmac == NULL)
        return IXL_ERR_SYSTEM;
    EVP_MAC_CTX *c = EVP_MAC_CTX_new(hmac);
    if (c == NULL)
        return IXL_ERR_NO_MEMORY;
    char digest[] = "SHA256";
    OSSL_PARAM params[] = {OSSL_PARAM_construct_utf8_string(OSSL_MAC_PARAM_DIGEST, digest, 0),
                           OSSL_PARAM_construct_end()};
    int ok = EVP_MAC_init(c, a->key, a->key_len, params) &&
             EVP_MAC_update(c, (const unsigned char *)label, strlen(label) + 1);
    for (size_t i = 0; ok && i < n; i++)
        ok = EVP_MAC_update(c, parts[i], lens[i]);
    size_t got = 0;
    ok = ok && EVP_MAC_final(c, out, &got, IXL_AUTH_MAC) && got == IXL_AUTH_MAC;
    EVP_MAC_CTX_free(c);
    return ok ? IXL_OK : IXL_ERR_SYSTEM;
}

int ixl_auth_equal(const void *x, const void *y, size_t n)
{
    return CRYPTO_memcmp(x, y, n) == 0;
}

int ixl_auth_nonce(void *out, size_t n)
{
    return sys_getrandom(out, n, 0) == (ssize_t)n ? IXL_OK : IXL_ERR_SYSTEM;
}

/* ---- the kernel's word on a peer ------------------------------------------------------------ */

static int is_loopback(const struct sockaddr_storage *s)
{
    if (s->ss_family == AF_INET) {
        const struct sockaddr_in *i = (const struct sockaddr_in *)s;
        return (ntohl(i->sin_addr.s_addr) >> 24) == 127;
    }
    if (s->ss_family == AF_INET6) {
        const struct in6_addr *a = &((const struct sockaddr_in6 *)s)->sin6_addr;
        if (IN6_IS_ADDR_LOOPBACK(a))
            return 1;
        return IN6_IS_ADDR_V4MAPPED(a) && a->s6_addr[12] == 127;
    }
    return 0;
}

/* The uid of the socket whose local end is peer and remote end is self (the other end of our
 * connection), through sock_diag's exact lookup: IXL_OK, or an error with why. */
static int diag_uid(const struct sockaddr_storage *self, const struct sockaddr_storage *peer,
                    uint32_t *uid, char *why, size_t why_len)
{
    int nl = socket(AF_NETLINK, SOCK_DGRAM | SOCK_CLOEXEC, NETLINK_SOCK_DIAG);
    if (nl < 0) {
        snprintf(why, why_len, "socket(NETLINK_SOCK_DIAG): %s", strerror(errno));
        return IXL_ERR_SYSTEM;
    }
    struct {
        struct nlmsghdr nh;
        struct inet_diag_req_v2 r;
    } req;
    memset(&req, 0, sizeof(req));
    req.nh.nlmsg_len = sizeof(req);
    req.nh.nlmsg_type = SOCK_DIAG_BY_FAMILY;
    req.nh.nlmsg_flags = NLM_F_REQUEST;
    req.nh.nlmsg_seq = 1;
    req.r.sdiag_family = (uint8_t)peer->ss_family;
    req.r.sdiag_protocol = IPPROTO_TCP;
    req.r.idiag_states = ~0u;
    req.r.id.idiag_cookie[0] = INET_DIAG_NOCOOKIE;
    req.r.id.idiag_cookie[1] = INET_DIAG_NOCOOKIE;
    /* The socket looked up has local address src (the peer's) and remote dst (ours). */
    if (peer->ss_family == AF_INET) {
        const struct sockaddr_in *p = (const void *)peer, *s = (const void *)self;
        req.r.id.idiag_sport = p->sin_port;
        req.r.id.idiag_dport = s->sin_port;
        memcpy(req.r.id.idiag_src, &p->sin_addr, 4);
        memcpy(req.r.id.idiag_dst, &s->sin_addr, 4);
    } else {
        const struct sockaddr_in6 *p = (const void *)peer, *s = (const void *)self;
        req.r.id.idiag_sport = p->sin6_port;
        req.r.id.idiag_dport = s->sin6_port;
        memcpy(req.r.id.idiag_src, &p->sin6_addr, 16);
        memcpy(req.r.id.idiag_dst, &s->sin6_addr, 16);
    }
    struct sockaddr_nl kernel = {.nl_family = AF_NETLINK};
    int rc = IXL_ERR_SYSTEM;
    if (sendto(nl, &req, sizeof(req), 0, (struct sockaddr *)&kernel, sizeof(kernel)) < 0) {
        snprintf(why, why_len, "sock_diag request: %s", strerror(errno));
        goto close_nl;
    }
    struct timeval tv = {2, 0};
    setsockopt(nl, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
    union {
        struct nlmsghdr nh;
        uint8_t b[8192];
    } ans;
    ssize_t n = recv(nl, &ans, sizeof(ans), 0);
    if (n < 0) {
        snprintf(why, why_len, "sock_diag answer: %s", strerror(errno));
        goto close_nl;
    }
    for (struct nlmsghdr *h = &ans.nh; NLMSG_OK(h, (size_t)n); h = NLMSG_NEXT(h, n)) {
        if (h->nlmsg_type == NLMSG_ERROR) {
            const struct nlmsgerr *e = NLMSG_DATA(h);
            int err = e->error < 0 ? -e->error : e->error;
            if (err == ENOENT) {
                snprintf(why, why_len,
                         "the kernel knows no local socket for the peer's end "
                         "(not a process of this host)");
                rc = IXL_ERR_NOT_SUPPORTED;
            } else {
                snprintf(why, why_len, "sock_diag: %s", strerror(err));
            }
            goto close_nl;
        }
        if (h->nlmsg_type == SOCK_DIAG_BY_FAMILY &&
            h->nlmsg_len >= NLMSG_LENGTH(sizeof(struct inet_diag_msg))) {
            const struct inet_diag_msg *m = NLMSG_DATA(h);
            *uid = m->idiag_uid;
            rc = IXL_OK;
            goto close_nl;
        }
    }
    snprintf(why, why_len, "sock_diag gave no answer for the connection");
close_nl:
    close(nl);
    return rc;
}

int ixl_peer_check(int fd, int32_t *pid_out, char *why, size_t why_len)
{
    char tmp[256];
    if (why == NULL || why_len == 0) {
        why = tmp;
        why_len = sizeof(tmp);
    }
    why[0] = '\0';
    if (pid_out)
        *pid_out = 0;
    struct sockaddr_storage self, peer;
    socklen_t sl = sizeof(self), pl = sizeof(peer);
    if (getsockname(fd, (struct sockaddr *)&self, &sl) != 0 ||
        getpeername(fd, (struct sockaddr *)&peer, &pl) != 0) {
        snprintf(why, why_len, "getsockname/getpeername: %s", strerror(errno));
        return IXL_ERR_SYSTEM;
    }
    uint32_t uid;
    if (peer.ss_family == AF_UNIX) {
        struct ucred cred;
        socklen_t cl = sizeof(cred);
        if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &cl) != 0) {
            snprintf(why, why_len, "SO_PEERCRED: %s", strerror(errno));
            return IXL_ERR_SYSTEM;
        }
        uid = cred.uid;
        if (pid_out)
            *pid_out = cred.pid;
    } else if (peer.ss_family == AF_INET || peer.ss_family == AF_INET6) {
        if (!is_loopback(&peer)) {
            snprintf(why, why_len,
                     "a TCP peer from a non-loopback address (only a cluster key "
                     "authenticates it)");
            return IXL_ERR_NOT_SUPPORTED;
        }
        int rc = diag_uid(&self, &peer, &uid, why, why_len);
        if (rc != IXL_OK)
            return rc;
    } else {
        snprintf(why, why_len, "a socket of family %d", (int)peer.ss_family);
        return IXL_ERR_NOT_SUPPORTED;
    }
    if (uid != (uint32_t)geteuid()) {
        snprintf(why, why_len, "the kernel says the peer runs as uid %u, not this process's uid %u",
                 (unsigned)uid, (unsigned)geteuid());
        return IXL_ERR_AUTH;
    }
    return IXL_OK;
}
