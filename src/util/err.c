#include "util/err.h"

#include <stdio.h>
#include <string.h>

#include <ixl/ixl.h>

#include "util/log.h"

#define ERR_SLOTS 4
#define ERR_TEXT 1024

struct err_slot {
    uint64_t agent_id;
    uint64_t stamp;
    char text[ERR_TEXT];
};

static _Thread_local struct err_slot slots[ERR_SLOTS];
static _Thread_local uint64_t clock_now;

/* A thread rarely talks to more than a few agents; the least recently used slot is reused. */
static struct err_slot *slot_for(uint64_t agent_id, int create)
{
    struct err_slot *victim = &slots[0];
    for (int i = 0; i < ERR_SLOTS; i++) {
        if (slots[i].agent_id == agent_id) {
            slots[i].stamp = ++clock_now;
            return &slots[i];
        }
        if (slots[i].stamp < victim->stamp)
            victim = &slots[i];
    }
    if (!create)
        return NULL;
    victim->agent_id = agent_id;
    victim->stamp = ++clock_now;
    victim->text[0] = '\0';
    return victim;
}

int ixl_err_vset(uint64_t agent_id, int status, int log, const char *fmt, va_list ap)
{
    struct err_slot *s = slot_for(agent_id, 1);
    vsnprintf(s->text, sizeof(s->text), fmt, ap);
    if (log)
        ixl_log_write(IXL_LOG_ERROR, "%s (%s)", s->text, ixl_strerror(status));
    else
        ixl_log_write(IXL_LOG_DEBUG, "%s (%s)", s->text, ixl_strerror(status));
    return status;
}

int ixl_err_set(uint64_t agent_id, int status, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    ixl_err_vset(agent_id, status, 1, fmt, ap);
    va_end(ap);
    return status;
}

int ixl_err_quiet(uint64_t agent_id, int status, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    ixl_err_vset(agent_id, status, 0, fmt, ap);
    va_end(ap);
    return status;
}

void ixl_err_clear(uint64_t agent_id)
{
    struct err_slot *s = slot_for(agent_id, 0);
    if (s)
        s->text[0] = '\0';
}

const char *ixl_err_get(uint64_t agent_id)
{
    struct err_slot *s = slot_for(agent_id, 0);
    return s ? s->text : "";
}

const char *ixl_errno_text(int e, char *buf, unsigned cap)
{
    const char *name = strerrorname_np(e);
    snprintf(buf, cap, "%s (%s)", strerror(e), name ? name : "?");
    return buf;
}
