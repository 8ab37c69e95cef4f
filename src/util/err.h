/* err.h: the one internal error type (the library turns it into the public ab_error).
 * Library code fills it and returns a negative errno; only main.c prints it and picks the
 * exit status. */
#pragma once

#include <stdbool.h>

/* Exit statuses agentbox uses for its own failures (documented in README "Exit status"). */
enum ab_exit {
	AB_EXIT_USAGE = 2,         /* the command line is wrong; nothing ran */
	AB_EXIT_UNAVAILABLE = 3,   /* a network resource agentbox needs is unreachable (prepare:
				    * the package index); nothing was installed */
	AB_EXIT_TIMEOUT = 124,     /* the wall-clock limit ended the run */
	AB_EXIT_SETUP = 125,       /* agentbox failed or refused; nothing ran */
	AB_EXIT_CANNOT_EXEC = 126, /* the interpreter exists but could not be executed */
	AB_EXIT_NOT_FOUND = 127,   /* the interpreter was not found */
};

struct ab_err {
	int code;      /* negative errno; 0 while unset */
	int exit;      /* enum ab_exit to leave with; 0 means AB_EXIT_SETUP */
	char msg[512]; /* what went wrong, for people; never parsed */
	char fix[512]; /* how to fix it, may be empty */
};

/* Records the first (innermost) error and returns code (negative), so callers can write
 * `return ab_err_set(err, -errno, ...)`. A NULL err is allowed. Later calls are ignored
 * once an error is recorded, so the innermost cause wins. */
int ab_err_set(struct ab_err *err, int code, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

/* Puts the outer context before an error already set, as a failure travels up (crun's
 * crun_error_wrap): "collect" + "copy out x/y: Permission denied" reads "collect: copy out
 * x/y: Permission denied". The innermost cause sets the code, the exit status and the fix;
 * each level that knows where it was adds its words. Returns err->code (no-op when unset). */
int ab_err_wrap(struct ab_err *err, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Adds the "how to fix it" text to an error already set. Returns err->code. */
int ab_err_fix(struct ab_err *err, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Like ab_err_set, for command-line mistakes: exit status 2. */
int ab_err_usage(struct ab_err *err, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

bool ab_err_is_set(const struct ab_err *err);
