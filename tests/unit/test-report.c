/* Unit tests for report.c: the fixed schema, escaping of hostile output, status names. */
#include <errno.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>

#include "src/report.h"
#include "src/util/xalloc.h"
#include "tests/tap.h"

static const char *const keys[] = {
	"schema_version", "status", "exit_code",  "signal",    "wall_ms", "cpu_ms",  "max_rss_kib",
	"stdout",         "stderr", "run_dir",    "workspace", "files",   "sandbox", "warnings",
	"limits",         "usage",  "limits_hit", "message",   "fix",     "lang",    "interpreter",
	"agentbox_exit",
};

/* agentbox_max_rss_kib is patched into the serialised report (main.c write_report). */
static void
test_patch(void)
{
	struct ab_run_opts o;
	struct ab_result r;
	json_t *j, *back;
	char *text;
	size_t len = 0;

	run_opts_init(&o);
	result_init(&r, &o);
	r.status = AB_STATUS_EXITED;
	/* a script that prints what looks like the key on a line of its own */
	r.out.buf = xstrdup("\n  \"agentbox_max_rss_kib\": 1,\n");
	r.out.len = strlen(r.out.buf);
	r.supervisor_max_rss_kib = INT64_MAX;
	j = report_build(&r);
	text = report_dumps(j, &len);
	json_decref(j);
	TAP_OK(text && len == strlen(text) && text[len - 1] == '\n', "report_dumps: text, newline");
	TAP_OK(report_patch_int(&text, &len, "agentbox_max_rss_kib", 123456) == 0 &&
		       len == strlen(text),
	       "report_patch_int: patched");
	back = json_loads(text, 0, NULL);
	TAP_OK(back && json_integer_value(json_object_get(back, "agentbox_max_rss_kib")) == 123456,
	       "report_patch_int: the report parses, with the new value");
	TAP_OK(back && strstr(json_string_value(
				      json_object_get(json_object_get(back, "stdout"), "text")),
			      "\"agentbox_max_rss_kib\": 1,"),
	       "report_patch_int: the look-alike in the script's output is untouched");
	json_decref(back);
	TAP_OK(report_patch_int(&text, &len, "agentbox_max_rss_kib", -1) == 0 &&
		       (back = json_loads(text, 0, NULL)) &&
		       json_is_null(json_object_get(back, "agentbox_max_rss_kib")),
	       "report_patch_int: -1 becomes null");
	json_decref(back);
	TAP_OK(report_patch_int(&text, &len, "agentbox_max_rss_kib", 9876543210LL) == 0 &&
		       (back = json_loads(text, 0, NULL)) &&
		       json_integer_value(json_object_get(back, "agentbox_max_rss_kib")) ==
			       9876543210LL,
	       "report_patch_int: a longer value grows the text");
	json_decref(back);
	TAP_OK(report_patch_int(&text, &len, "no_such_key", 1) == -ENOENT,
	       "report_patch_int: a missing key is -ENOENT");
	free(text);
	result_done(&r);
	run_opts_done(&o);
}

int
main(void)
{
	struct ab_run_opts o;
	struct ab_result r;
	json_t *j, *s;
	char *text;

	run_opts_init(&o);
	result_init(&r, &o);
	r.status = AB_STATUS_SIGNALED;
	r.signal = SIGKILL;
	r.wall_ms = 12;
	r.out.buf = xstrdup("ok \x1b]52;c;aGk=\x07 \xff\xfe end\n");
	r.out.len = strlen(r.out.buf);
	r.out.bytes = 5000;
	r.out.truncated = true;
	r.out.relayed = true;
	r.out.relay_dropped = 4000;
	r.err.buf = xmalloc(3);
	memcpy(r.err.buf, "a\0b", 3);
	r.err.len = 3;
	r.err.bytes = 3;
	r.run_dir = xstrdup("/var/tmp/agentbox-1/run-aaaaaa");
	result_warn(&r, "default %s limit not enforced", "memory");
	result_protect(&r, "seccomp", true, "policy %s", "default");
	r.limits[AB_LIM_MEMORY] =
		(struct ab_limit_result){ true, 1 << 30, "cgroup v1", true, NULL };

	j = report_build(&r);
	TAP_OK(j != NULL, "report builds");
	for (size_t i = 0; i < sizeof(keys) / sizeof(keys[0]); i++)
		TAP_OK(json_object_get(j, keys[i]) != NULL, "has key '%s'", keys[i]);
	TAP_OK(json_integer_value(json_object_get(j, "schema_version")) == AB_REPORT_SCHEMA_VERSION,
	       "schema_version");
	TAP_STREQ(json_string_value(json_object_get(j, "status")), "signaled", "status name");
	TAP_OK(json_integer_value(json_object_get(j, "signal")) == 9, "signal 9");
	TAP_STREQ(json_string_value(json_object_get(j, "signal_name")), "KILL", "signal name");
	TAP_OK(json_is_null(json_object_get(j, "exit_code")), "exit_code null when signaled");
	s = json_object_get(j, "stdout");
	TAP_OK(json_is_true(json_object_get(s, "truncated")), "truncated flag");
	TAP_OK(json_integer_value(json_object_get(s, "bytes")) == 5000, "total bytes kept");
	TAP_OK(json_is_true(json_object_get(s, "text_lossy")), "invalid UTF-8 flagged lossy");
	TAP_OK(json_integer_value(json_object_get(s, "relay_dropped_bytes")) == 4000,
	       "stdout.relay_dropped_bytes: what the live relay did not pass on");
	TAP_OK(strstr(json_string_value(json_object_get(s, "text")), "\xEF\xBF\xBD") != NULL,
	       "invalid bytes replaced with U+FFFD");
	text = json_dumps(j, JSON_COMPACT);
	TAP_OK(text && strstr(text, "\\u001B]52") != NULL, "ESC is JSON-escaped in the text");
	TAP_OK(text && strchr(text, 0x1b) == NULL && strchr(text, 0x07) == NULL,
	       "no raw control bytes in the JSON");
	free(text);
	s = json_object_get(j, "stderr");
	TAP_OK(json_is_true(json_object_get(s, "text_lossy")), "embedded NUL handled");
	TAP_OK(json_is_null(json_object_get(s, "relay_dropped_bytes")),
	       "stderr.relay_dropped_bytes is null when nothing was relayed (--quiet)");
	TAP_OK(json_array_size(json_object_get(j, "warnings")) == 1, "warnings listed");
	TAP_OK(json_is_true(json_object_get(
		       json_object_get(json_object_get(j, "sandbox"), "seccomp"), "enforced")),
	       "protection recorded");
	TAP_STREQ(json_string_value(json_object_get(
			  json_object_get(json_object_get(j, "limits"), "memory"), "mechanism")),
		  "cgroup v1", "limit mechanism recorded");
	json_decref(j);

	for (int st = 0; st < AB_STATUS_COUNT; st++)
		TAP_OK(strcmp(result_status_name((enum ab_status) st), "unknown") != 0 &&
			       result_status_name((enum ab_status) st) != NULL,
		       "status %d has a name (%s)", st, result_status_name((enum ab_status) st));
	result_done(&r);
	run_opts_done(&o);
	test_patch();
	return tap_done();
}
