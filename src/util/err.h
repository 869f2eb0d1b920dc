/*
 * Per-agent last-error text. Each thread keeps the message of the last error an ixl call on
 * a given agent reported to it, so concurrent threads never read each other's half-written
 * text. The slots are thread-local and keyed by the agent's unique id (not its address, which
 * may be reused after destroy).
 */
#ifndef IXL_UTIL_ERR_H
#define IXL_UTIL_ERR_H

#include <stdarg.h>
#include <stdint.h>

/* The id under which ixl_agent_create() records why it failed (agent ids start at 1). */
#define IXL_ERR_NO_AGENT 0

/* Records fmt as the calling thread's last error for agent id, logs it at ERROR level, and
 * returns status. */
int ixl_err_set(uint64_t agent_id, int status, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
int ixl_err_vset(uint64_t agent_id, int status, int log, const char *fmt, va_list ap);
/* Records without logging: for errors the caller is expected to handle (not found, busy). */
int ixl_err_quiet(uint64_t agent_id, int status, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* Clears the calling thread's text for agent id (start of each API call). */
void ixl_err_clear(uint64_t agent_id);
const char *ixl_err_get(uint64_t agent_id);
/* Text of errno e as "strerror (ENAME)". */
const char *ixl_errno_text(int e, char *buf, unsigned cap);

#endif
