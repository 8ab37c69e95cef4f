/* proc.h: facts about processes from /proc. */
#pragma once

#include <signal.h>
#include <stdbool.h>
#include <stdint.h>

#include <sys/types.h>

/* Field 22 (starttime, clock ticks since boot) of a /proc/PID/stat text; comm (field 2)
 * may hold spaces and ')', so parsing starts after the last ')'. Returns 0 or -EINVAL. */
int proc_parse_starttime(const char *stat_text, uint64_t *ret);

/* Fields 14-17 (utime, stime, cutime, cstime: clock ticks) of a /proc/PID/stat text,
 * summed: the CPU the process used and what its children it reaped had used. Returns 0 or
 * -EINVAL. */
int proc_parse_cpu_ticks(const char *stat_text, uint64_t *ret);

/* VmHWM (the peak resident set, KiB) from a /proc/PID/status text, or -1. */
int64_t proc_parse_hwm_kib(const char *status_text);

/* starttime of pid (0 = this process) read from proc_root ("/proc"). Returns 0, -ESRCH when
 * the process is gone, or -errno. */
int proc_pid_starttime(const char *proc_root, pid_t pid, uint64_t *ret);

/* Is the process pid with this starttime still alive (not a recycled pid)? */
bool proc_is_alive(const char *proc_root, pid_t pid, uint64_t starttime);

/* This process's peak resident set (VmHWM, KiB; not getrusage, whose ru_maxrss counts the
 * image our parent had before exec), or -1. */
int64_t proc_self_peak_rss_kib(void);

/* The signals that stop a run (SIGINT, SIGTERM, SIGHUP, SIGQUIT: a caller's cancel, a
 * terminal's ^C, a closed terminal), added to set: the CLI forwards them, the supervisor
 * blocks them from its start and answers them in its loop (docs/design.md, "Signals and time"). */
void proc_add_stop_signals(sigset_t *set);

/* Sets every signal's disposition to SIG_DFL, as a child between fork and exec must: the
 * caught and ignored ones, as /proc/thread-self/status lists them (SigCgt, SigIgn), and every
 * signal when that cannot be read. One read instead of 64 sigaction calls (issue 29: each
 * system call costs about 1 us on a virtual machine). Async-signal-safe (open, read, close,
 * sigaction; no allocation, no stdio): for a child after fork or vfork, which has one thread,
 * so nothing changes a disposition between the read and the resets. */
void proc_reset_signals(void);
