/* Internal logging: one sink and level for the process (see ixl_log_set_sink). */
#ifndef IXL_UTIL_LOG_H
#define IXL_UTIL_LOG_H

#include <stdarg.h>

#include <ixl/ixl.h>

void ixl_log_write(enum ixl_log_level level, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
void ixl_log_vwrite(enum ixl_log_level level, const char *fmt, va_list ap);
/* True when a message of this level would be written (to skip formatting). */
int ixl_log_enabled(enum ixl_log_level level);

#define IXL_LOG_ERR(...) ixl_log_write(IXL_LOG_ERROR, __VA_ARGS__)
#define IXL_LOG_WARNING(...) ixl_log_write(IXL_LOG_WARN, __VA_ARGS__)
#define IXL_LOG_INF(...) ixl_log_write(IXL_LOG_INFO, __VA_ARGS__)
#define IXL_LOG_DBG(...) ixl_log_write(IXL_LOG_DEBUG, __VA_ARGS__)

#endif
