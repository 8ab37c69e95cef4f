/* session.h: the session drivers (docs/sessions.md), embedded by src/warm/embed.py. A
 * session's sandbox runs one of them instead of a script, read-only outside /work; the driver
 * serves the cells the library (src/lib/session.c) sends on fd AB_SESSION_FD. */
#pragma once

#define AB_SESSION_FD 1000 /* agentbox-init keeps it for the interpreter (--warm-fd) */

extern const char ab_session_py[];
extern const char ab_session_js[];
