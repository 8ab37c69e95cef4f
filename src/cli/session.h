/* session.h: `agentbox session` (session.c). */
#pragma once

int cmd_session(int argc, char **argv);
