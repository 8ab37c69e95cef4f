/* cmds.h: the subcommands besides `run`. Each returns agentbox's exit status. */
#pragma once

int cmd_rm(int argc, char **argv);      /* agentbox rm RUN_DIR... */
int cmd_gc(int argc, char **argv);      /* agentbox gc [--runs-dir DIR] [--older-than DUR] */
int cmd_collect(int argc, char **argv); /* agentbox collect RUN_DIR DIR */
int cmd_doctor(int argc, char **argv);  /* agentbox doctor [--json] */
