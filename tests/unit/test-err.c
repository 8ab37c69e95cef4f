/* Unit tests for util/err.c: the innermost cause sets code, exit and fix; ab_err_wrap adds
 * the outer context as a failure travels up (issue 26). */
#include <errno.h>
#include <string.h>

#include "src/util/err.h"
#include "tests/tap.h"

static int
inner(struct ab_err *err)
{
	return ab_err_set(err, -EACCES, "open 'x/y': %s", strerror(EACCES)),
	       ab_err_fix(err, "make it readable");
}

static int
middle(struct ab_err *err)
{
	int r = inner(err);

	return r < 0 ? ab_err_wrap(err, "copy out '%s'", "x") : 0;
}

int
main(void)
{
	struct ab_err e = { 0 };
	int r;

	r = middle(&e);
	r = r < 0 ? ab_err_wrap(&e, "collect") : r;
	TAP_OK(r == -EACCES && e.code == -EACCES, "the code is the innermost one's");
	TAP_STREQ(e.msg, "collect: copy out 'x': open 'x/y': Permission denied",
		  "each level adds its context, outermost first");
	TAP_STREQ(e.fix, "make it readable", "the fix is the innermost one's");
	TAP_OK(e.exit == AB_EXIT_SETUP, "the exit status is the innermost one's");

	ab_err_set(&e, -ENOENT, "a later error");
	TAP_OK(e.code == -EACCES && strncmp(e.msg, "collect: ", 9) == 0,
	       "a later ab_err_set does not replace the cause");

	memset(&e, 0, sizeof(e));
	TAP_OK(ab_err_wrap(&e, "collect") == 0 && e.msg[0] == '\0', "wrapping no error is a no-op");
	TAP_OK(ab_err_wrap(NULL, "x") == -EINVAL, "a NULL err is allowed");

	memset(&e, 0, sizeof(e));
	ab_err_usage(&e, "bad flag");
	ab_err_wrap(&e, "run");
	TAP_OK(e.exit == AB_EXIT_USAGE && strcmp(e.msg, "run: bad flag") == 0,
	       "a usage error stays one when wrapped");

	memset(&e, 0, sizeof(e));
	{
		char long_msg[600];

		memset(long_msg, 'a', sizeof(long_msg) - 1);
		long_msg[sizeof(long_msg) - 1] = '\0';
		ab_err_set(&e, -EIO, "%s", long_msg);
		ab_err_wrap(&e, "outer");
		TAP_OK(strlen(e.msg) == sizeof(e.msg) - 1 && strncmp(e.msg, "outer: aaa", 10) == 0,
		       "a long message is cut, the context kept");
	}
	return tap_done();
}
