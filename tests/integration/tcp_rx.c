/* TCP_INFO's bytes_received of a socket, from the kernel's own struct tcp_info (glibc's
 * netinet/tcp.h, which the other test headers include, has an older one without it). */
#include <linux/tcp.h>
#include <netinet/in.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <sys/socket.h>

#include "tcp_rx.h"

int tcp_rx_bytes(int fd, uint64_t *out)
{
    struct tcp_info ti;
    socklen_t len = sizeof(ti);
    memset(&ti, 0, sizeof(ti));
    if (getsockopt(fd, IPPROTO_TCP, TCP_INFO, &ti, &len) != 0 ||
        len < offsetof(struct tcp_info, tcpi_bytes_received) + sizeof(ti.tcpi_bytes_received))
        return -1;
    *out = ti.tcpi_bytes_received;
    return 0;
}
