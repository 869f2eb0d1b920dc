/* The agent's sub-tables (registry, remotes, requests) are created and torn down here, so
 * agent.c stays independent of their layout. */
#ifndef IXL_CORE_HOOKS_H
#define IXL_CORE_HOOKS_H

struct ixl_agent;

int ixl_agent_hooks_init(struct ixl_agent *agent);
/* Releases requests and prepared lists, unloads remotes, deregisters regions. */
void ixl_agent_hooks_fini(struct ixl_agent *agent);

#endif
