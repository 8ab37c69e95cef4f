#include "err.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

static int
err_vset(struct ab_err *err, int code, int exit_status, const char *fmt, va_list ap)
{
	if (code == 0)
		code = -EINVAL;
	if (!err || err->code != 0)
		return code;
	err->code = code;
	err->exit = exit_status;
	vsnprintf(err->msg, sizeof(err->msg), fmt, ap);
	err->fix[0] = '\0';
	return code;
}

int
ab_err_set(struct ab_err *err, int code, const char *fmt, ...)
{
	va_list ap;
	int r;

	va_start(ap, fmt);
	r = err_vset(err, code, AB_EXIT_SETUP, fmt, ap);
	va_end(ap);
	return r;
}

int
ab_err_usage(struct ab_err *err, const char *fmt, ...)
{
	va_list ap;
	int r;

	va_start(ap, fmt);
	r = err_vset(err, -EINVAL, AB_EXIT_USAGE, fmt, ap);
	va_end(ap);
	return r;
}

int
ab_err_fix(struct ab_err *err, const char *fmt, ...)
{
	va_list ap;

	if (!err)
		return -EINVAL;
	if (err->fix[0] == '\0') {
		va_start(ap, fmt);
		vsnprintf(err->fix, sizeof(err->fix), fmt, ap);
		va_end(ap);
	}
	return err->code;
}

int
ab_err_wrap(struct ab_err *err, const char *fmt, ...)
{
	char inner[sizeof(err->msg)];
	size_t n;
	va_list ap;

	if (!err || err->code == 0)
		return err ? err->code : -EINVAL;
	memcpy(inner, err->msg, sizeof(inner));
	va_start(ap, fmt);
	(void) vsnprintf(err->msg, sizeof(err->msg), fmt, ap);
	va_end(ap);
	n = strlen(err->msg);
	if (n + 2 < sizeof(err->msg)) {
		memcpy(err->msg + n, ": ", 3);
		n += 2;
		(void) strncat(err->msg + n, inner, sizeof(err->msg) - n - 1);
	}
	return err->code;
}

bool
ab_err_is_set(const struct ab_err *err)
{
	return err && err->code != 0;
}
