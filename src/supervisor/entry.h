/* entry.h: the supervisor's entry point (entry.c): the program agentbox-supervisor's main, and
 * what the command line calls for its run (api.c inline_supervisor, "supervisor_inline"). */
#pragma once

/* argv: {"agentbox-supervisor", MODE}; fds 0-6 as entry.c says. Returns the exit status. */
int supervisor_main(int argc, char **argv);
