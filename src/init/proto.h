/* proto.h: records agentbox-init (the sandbox's PID 1) writes to agentbox on the status fd.
 * Each record is written with one write(2) of sizeof(struct ab_init_msg) < PIPE_BUF bytes,
 * so records never interleave or tear. */
#pragma once

#include <stdint.h>

#define AB_INIT_MAGIC 0xAB1A1702u /* changes with the layout */

enum ab_init_kind {
	AB_INIT_STARTED = 1,      /* hardening applied, about to start the interpreter */
	AB_INIT_EXEC_FAILED = 2,  /* execve of the interpreter failed: err */
	AB_INIT_EXITED = 3,       /* the interpreter ended: wstatus, rusage */
	AB_INIT_SETUP_FAILED = 4, /* a hardening step failed: err, text; nothing ran */
};

/* fsize_hit: after the interpreter ends, agentbox-init looks (bounded) for a regular file that
 * changed since it started the interpreter and whose size reached RLIMIT_FSIZE. CPython and
 * Node ignore SIGXFSZ, so a write past --file-size is otherwise only an EFBIG the script may
 * swallow. /tmp and /dev/shm are the sandbox's own tmpfs, which the host never sees. */
#define AB_FSIZE_WORK    (1u << 0) /* under /work */
#define AB_FSIZE_TMP     (1u << 1) /* under /tmp */
#define AB_FSIZE_SHM     (1u << 2) /* under /dev/shm */
#define AB_FSIZE_PARTIAL (1u << 8) /* the scan stopped at its entry cap */

struct ab_init_msg {
	uint32_t magic;
	uint32_t kind;
	int32_t err;          /* errno for EXEC_FAILED / SETUP_FAILED */
	int32_t wstatus;      /* EXITED: the interpreter's wait status */
	int32_t landlock_abi; /* STARTED: ABI in force (0 = none) */
	int32_t pid;          /* STARTED: the interpreter's pid inside the sandbox */
	uint32_t fsize_hit;   /* EXITED: AB_FSIZE_* bits, where a file reached RLIMIT_FSIZE */
	uint32_t reserved;
	int64_t utime_us; /* EXITED: user CPU of the interpreter and its reaped children */
	int64_t stime_us;
	int64_t maxrss_kib;
	char text[160]; /* SETUP_FAILED: what failed */
};
