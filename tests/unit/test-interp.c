/* Unit tests for interp.c's language detection: --lang, then the extension, then the
 * shebang in the first 256 bytes; anything else is a usage error that says how to fix it. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <sys/mman.h>

#include "src/supervisor/interp.h"
#include "tests/tap.h"

/* The script's content in a memfd (interp_detect_lang preads the fd). */
static int
script(const char *text, size_t len)
{
	int fd = memfd_create("script", MFD_CLOEXEC);

	if (fd >= 0 && len && write(fd, text, len) != (ssize_t) len) {
		close(fd);
		fd = -1;
	}
	return fd;
}

static void
detect_is(const char *name, const char *text, size_t len, enum ab_lang forced, enum ab_lang want,
	  const char *what)
{
	struct ab_err err = { 0 };
	enum ab_lang got = AB_LANG_AUTO;
	int fd = text ? script(text, len) : -1; /* -1: the fd must not be read at all */
	int r = interp_detect_lang(name, fd, forced, &got, &err);

	TAP_OK(r == 0 && got == want, "%s: %s", what, lang_name(want));
	if (r != 0 || got != want)
		printf("#   got: %d, %s (%s)\n", r, lang_name(got), err.msg);
	if (fd >= 0)
		close(fd);
}

#define DETECT(name, text, want, what) \
	detect_is(name, text, sizeof(text) - 1, AB_LANG_AUTO, want, what)

static void
unknown_is(const char *name, const char *text, size_t len, const char *what)
{
	struct ab_err err = { 0 };
	enum ab_lang got = AB_LANG_AUTO;
	int fd = script(text, len);
	int r = interp_detect_lang(name, fd, AB_LANG_AUTO, &got, &err);

	TAP_OK(r == -EINVAL && err.exit == AB_EXIT_USAGE && got == AB_LANG_AUTO,
	       "%s: a usage error (exit 2)", what);
	if (r != -EINVAL)
		printf("#   got: %d, %s\n", r, lang_name(got));
	TAP_STREQ(err.msg,
		  "cannot tell the language of the script: no .py/.js/.mjs/.cjs extension and no "
		  "python or node shebang",
		  "%s: the message", what);
	TAP_STREQ(err.fix, "pass --lang python or --lang node", "%s: the fix", what);
	if (fd >= 0)
		close(fd);
}

#define UNKNOWN(name, text, what) unknown_is(name, text, sizeof(text) - 1, what)

int
main(void)
{
	char long_line[400];

	/* extensions decide without reading the script */
	detect_is("main.py", NULL, 0, AB_LANG_AUTO, AB_LANG_PYTHON, ".py");
	detect_is("dir.d/main.js", NULL, 0, AB_LANG_AUTO, AB_LANG_NODE, ".js");
	detect_is("main.mjs", NULL, 0, AB_LANG_AUTO, AB_LANG_NODE, ".mjs");
	detect_is("main.cjs", NULL, 0, AB_LANG_AUTO, AB_LANG_NODE, ".cjs");
	DETECT("tool.py", "#!/usr/bin/node\n", AB_LANG_PYTHON, ".py outranks a node shebang");
	DETECT("tool.js", "#!/usr/bin/python3\n", AB_LANG_NODE, ".js outranks a python shebang");

	/* shebangs */
	DETECT("tool", "#!/usr/bin/env python3\nprint(1)\n", AB_LANG_PYTHON,
	       "shebang /usr/bin/env python3");
	DETECT("tool", "#!/usr/bin/python3\n", AB_LANG_PYTHON, "shebang /usr/bin/python3");
	DETECT("tool", "#!/usr/bin/python\n", AB_LANG_PYTHON, "shebang /usr/bin/python");
	DETECT("tool", "#!/usr/bin/node\nconsole.log(1)\n", AB_LANG_NODE, "shebang /usr/bin/node");
	DETECT("tool", "#!/usr/bin/env node\n", AB_LANG_NODE, "shebang /usr/bin/env node");
	DETECT("tool", "#! /usr/bin/env python3\n", AB_LANG_PYTHON,
	       "a space after the shebang's mark");
	DETECT("tool", "#!/usr/bin/python3 -u -X dev\n", AB_LANG_PYTHON, "python with args");
	DETECT("tool", "#!/usr/bin/env -S node --max-old-space-size=64\n", AB_LANG_NODE,
	       "env -S node with args");
	DETECT("tool", "#!/usr/bin/env python3\r\nprint(1)\r\n", AB_LANG_PYTHON,
	       "python, CRLF line ends");
	DETECT("tool", "#!/usr/bin/env node\r\n", AB_LANG_NODE, "node, CRLF line ends");
	DETECT("tool", "#!/usr/bin/env python3", AB_LANG_PYTHON, "python, no newline at all");
	DETECT("tool", "#!/usr/bin/node", AB_LANG_NODE, "node, no newline at all");
	DETECT("tool.txt", "#!/usr/bin/env python3\n", AB_LANG_PYTHON,
	       "another extension: the shebang decides");
	DETECT("tool.PY", "#!/usr/bin/node\n", AB_LANG_NODE,
	       "extensions are case-sensitive: .PY goes by the shebang");
	DETECT("tool.py.bak", "#!/usr/bin/node\n", AB_LANG_NODE, ".py.bak is not .py");

	/* issue 25: code given as text (--code, SCRIPT -, a spec's "code") is Python unless a
	 * shebang or --lang says otherwise */
	DETECT("", "print(6 * 7)\n", AB_LANG_PYTHON, "code without a shebang: Python");
	DETECT("", "", AB_LANG_PYTHON, "empty code: Python");
	DETECT("", "#!/usr/bin/env node\nconsole.log(1)\n", AB_LANG_NODE,
	       "code with a node shebang: Node");
	DETECT("", "#!/usr/bin/python3\n", AB_LANG_PYTHON, "code with a python shebang: Python");
	DETECT("", "#!/bin/sh\nprint(1)\n", AB_LANG_PYTHON,
	       "code with another shebang: Python (the line is a comment there)");
	detect_is("", "print(1)\n", 9, AB_LANG_NODE, AB_LANG_NODE, "--lang node on code: Node");

	/* --lang outranks everything, and reads nothing */
	detect_is("main.js", NULL, 0, AB_LANG_PYTHON, AB_LANG_PYTHON, "--lang python on a .js");
	detect_is("main.py", NULL, 0, AB_LANG_NODE, AB_LANG_NODE, "--lang node on a .py");
	detect_is("tool", "#!/usr/bin/python3\n", sizeof("#!/usr/bin/python3\n") - 1, AB_LANG_NODE,
		  AB_LANG_NODE, "--lang node on a python shebang");
	detect_is("-", NULL, 0, AB_LANG_PYTHON, AB_LANG_PYTHON, "--lang python on stdin's code");

	/* nothing to go by */
	UNKNOWN("tool", "", "an empty file");
	UNKNOWN("tool", "\n", "an empty first line");
	UNKNOWN("tool", "#!/bin/sh\necho python node\n", "a sh shebang");
	UNKNOWN("tool", "print('python')\n", "python code, no shebang");
	UNKNOWN("tool", "# python\n", "a comment, not a shebang");
	UNKNOWN("tool", "\n#!/usr/bin/python3\n", "a shebang on the second line");
	UNKNOWN("tool", " #!/usr/bin/python3\n", "a shebang after a space");
	UNKNOWN("tool.ts", "console.log(1)\n", ".ts");
	UNKNOWN("tool.pyc", "\x6f\x0d\x0d\x0a", ".pyc");
	UNKNOWN("py", "x\n", "a script named py");
	UNKNOWN("js", "x\n", "a script named js");
	/* only the first 256 bytes are read */
	memset(long_line, ' ', sizeof(long_line));
	memcpy(long_line, "#!/usr/bin/env", 14);
	memcpy(long_line + 300, "python3\n", 8);
	unknown_is("tool", long_line, 308, "a shebang whose interpreter is past 256 bytes");

	{
		struct ab_err err = { 0 };
		enum ab_lang got = AB_LANG_AUTO;
		int r = interp_detect_lang("tool", -1, AB_LANG_AUTO, &got, &err);

		TAP_OK(r == -EBADF && err.exit == AB_EXIT_SETUP,
		       "an unreadable script is a setup error, not a usage error");
	}

	/* The interpreter the shebang names decides, not a word in its arguments. */
	{
		static const char text[] = "#!/usr/bin/node --title=python-bridge\n";
		struct ab_err err = { 0 };
		enum ab_lang got = AB_LANG_AUTO;
		int fd = script(text, sizeof(text) - 1);

		(void) interp_detect_lang("tool", fd, AB_LANG_AUTO, &got, &err);
		TAP_OK(got == AB_LANG_NODE,
		       "shebang /usr/bin/node with an argument that says python: node");
		if (fd >= 0)
			close(fd);
	}
	return tap_done();
}
