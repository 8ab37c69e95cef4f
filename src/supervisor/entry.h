/* entry.h: the supervisor's entry point (entry.c): the program agentbox-supervisor's main, and
 * what the command line's child calls in its stead (api-private.h api_context_inprocess). */
#pragma once

/* argv: {"agentbox-supervisor", MODE}; fds 0-6 as entry.c says. Returns the exit status. */
int supervisor_main(int argc, char **argv);
