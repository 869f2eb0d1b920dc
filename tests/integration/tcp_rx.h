#ifndef IXL_TEST_TCP_RX_H
#define IXL_TEST_TCP_RX_H
#include <stdint.h>
/* The bytes a TCP socket received (TCP_INFO, Linux >= 4.1): 0, or -1 if not told. */
int tcp_rx_bytes(int fd, uint64_t *out);
#endif
