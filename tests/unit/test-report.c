/* Unit tests for report.c: the fixed schema, escaping of hostile output, status names, a
 * golden report (tests/data/report-golden.json; regenerate with AB_UPDATE_GOLDEN=1 and review
 * the diff like code), and report_patch_int. */
#include <errno.h>
#include <signal.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config.h"
#include "src/spec/report.h"
#include "src/util/xalloc.h"
#include "tests/tap.h"

static const char *const keys[] = {
	"schema_version", "status", "exit_code",  "signal",    "wall_ms", "cpu_ms",  "max_rss_kib",
	"stdout",         "stderr", "run_dir",    "workspace", "files",   "sandbox", "warnings",
	"limits",         "usage",  "limits_hit", "message",   "fix",     "lang",    "interpreter",
	"agentbox_exit",
};

static char *
read_file(const char *path)
{
	FILE *f = fopen(path, "re");
	char *buf;
	long n;

	if (!f)
		return NULL;
	fseek(f, 0, SEEK_END);
	n = ftell(f);
	fseek(f, 0, SEEK_SET);
	buf = xmalloc((size_t) n + 1);
	if (fread(buf, 1, (size_t) n, f) != (size_t) n)
		n = 0;
	buf[n] = '\0';
	fclose(f);
	return buf;
}

/* Every field set, every optional object present: an OOM-killed run of a root caller. */
static void
golden_result(struct ab_record *r, struct ab_run_opts *o)
{
	static const char *const prots[][3] = {
		{ "namespaces", "1", "user, mount, pid, net, ipc, uts, cgroup" },
		{ "network", "1", "own network namespace: loopback only" },
		{ "readonly_base", "1", "/usr and generated /etc read-only; / read-only" },
		{ "writable", "1", "only /work (capped tmpfs), /tmp and /dev/shm" },
		{ "new_session", "1", "no controlling terminal (TIOCSTI)" },
		{ "die_with_parent", "1", NULL },
		{ "cap_drop_all", "1", NULL },
		{ "clearenv", "1", "5 variables" },
		{ "disable_userns", "0", "bwrap lacks --disable-userns" },
		{ "seccomp", "1", "policy default" },
		{ "landlock", "1",
		  "ABI 6, TCP bind/connect denied, abstract sockets and signals "
		  "scoped" },
		{ "fresh_keyring", "1", "new anonymous session keyring" },
		{ "no_host_root", "1", "started as root: runs as uid 64000" },
		{ "pid1_nondumpable", "1", "agentbox-init is PID 1" },
		{ "cgroup", "1", "cgroup v1" },
	};
	static const char *const mechanisms[AB_LIM_COUNT] = {
		[AB_LIM_TIMEOUT_MS] = "agentbox monotonic deadline + SIGKILL",
		[AB_LIM_CPU_TIME_MS] = "cgroup v1 cpuacct.usage polled + RLIMIT_CPU",
		[AB_LIM_DISK] = "tmpfs size= on the workspace",
		[AB_LIM_INODES] = "tmpfs nr_inodes= on the workspace",
		[AB_LIM_TMP_SIZE] = "tmpfs size= and nr_inodes= on /tmp and /dev/shm",
		[AB_LIM_FILE_SIZE] = "rlimit RLIMIT_FSIZE",
		[AB_LIM_NOFILE] = "rlimit RLIMIT_NOFILE",
		[AB_LIM_OUTPUT] = "agentbox pipe capture",
	};
	static const char out[] = "h\xc3\xa9llo \x1b[31mred\x1b[0m \xff\n\"quoted\" \\ tab\t\n";

	run_opts_init(o);
	o->flag_words = true; /* asked for with flags: the golden text names them */
	o->limits[AB_LIM_MEMORY] = (struct ab_limit){ 64ULL << 20, true };
	o->limits[AB_LIM_CPU_TIME_MS] = (struct ab_limit){ 5000, true };
	o->limits[AB_LIM_TIMEOUT_MS] = (struct ab_limit){ 30000, true };
	result_init(r, o);
	r->status = AB_STATUS_OOM;
	r->signal = SIGKILL;
	r->agentbox_exit = 137;
	r->wall_ms = 1234;
	r->cpu_ms = 987;
	r->max_rss_kib = 65432;
	r->started_unix_ms = 1700000000123LL;
	r->kill_to_reaped_ms = 17;
	r->supervisor_max_rss_kib = 20480;
	r->supervisor_fds_left = 0;
	r->run_id = xstrdup("AbC123");
	r->warm = true;
	r->out.inline_max = r->err.inline_max = AB_INLINE_OUTPUT_DEFAULT;
	stream_keep(&r->out, out, sizeof(out) - 1);
	r->out.bytes = 1 << 20;
	r->out.truncated = true;
	r->out.relayed = true;
	r->out.relay_dropped = 12;
	stream_keep(&r->err, "Killed\n", 7);
	r->err.bytes = r->err.captured;
	r->message = xstrdup("memory limit reached: 1 process(es) OOM-killed");
	r->fix = xstrdup("raise --memory");
	r->run_dir = xstrdup("/var/tmp/agentbox-0/run-AbC123");
	r->run_dir_kept = true;
	r->workspace = xstrdup("/var/tmp/agentbox-0/run-AbC123/work");
	r->script = xstrdup("agent.py");
	r->lang = AB_LANG_PYTHON;
	r->interpreter = xstrdup("/usr/bin/python3.11");
	r->files = json_pack("[{s:s, s:s, s:I, s:I, s:s, s:s, s:[], s:b}, "
			     "{s:s, s:s, s:I, s:I, s:s, s:s, s:[s], s:b}]",
			     "path", "agent.py", "type", "file", "size", (json_int_t) 12,
			     "blocks_bytes", (json_int_t) 4096, "mode", "0644", "sha256",
			     "6b86b273ff34fce19d6b804eff5a3f5747ada4eaa22f1d49c01e52ddb7875b4b",
			     "flags", "collected", 1, "path", "big\\x0a", "type", "file", "size",
			     (json_int_t) (1LL << 30), "blocks_bytes", (json_int_t) 0, "mode",
			     "0600", "reason", "sparse: hashing would read its holes", "flags",
			     "sparse", "collected", 0);
	r->files_summary = json_pack(
		"{s:I, s:I, s:I, s:b, s:[], s:I, s:I, s:I, s:I, s:I, s:I, "
		"s:I, s:I}",
		"listed", (json_int_t) 2, "entries", (json_int_t) 2, "unlisted", (json_int_t) 0,
		"truncated", 0, "truncated_by", "list_bytes", (json_int_t) 640, "hashed_bytes",
		(json_int_t) 12, "hashes_reused", (json_int_t) 0, "unhashed", (json_int_t) 1,
		"stripped", (json_int_t) 0, "strip_failed", (json_int_t) 0, "walk_ms",
		(json_int_t) 3, "skipped", (json_int_t) 0);
	r->inputs = json_pack("[{s:s, s:s, s:I, s:I, s:[], s:b}]", "path", "/srv/data.csv", "type",
			      "file", "bytes", (json_int_t) 100, "entries", (json_int_t) 1,
			      "skipped", "truncated", 0);
	r->collected =
		json_pack("{s:s, s:I, s:I, s:[], s:{}}", "dir", "/srv/out", "bytes",
			  (json_int_t) 12, "skipped_count", (json_int_t) 0, "files", "summary");
	r->environment = json_pack("{s:I, s:I, s:I, s:[], s:b}", "bytes", (json_int_t) 4096,
				   "entries", (json_int_t) 3, "skipped_count", (json_int_t) 0,
				   "skipped", "truncated", 0);
	for (int i = 0; i < AB_LIM_COUNT; i++)
		r->limits[i] = (struct ab_limit_result){ true, o->limits[i].value, mechanisms[i],
							 true, NULL };
	r->limits[AB_LIM_MEMORY] = (struct ab_limit_result){
		true, 64ULL << 20, "cgroup v1 memory.limit_in_bytes (+memsw)", true,
		xstrdup("tmpfs and memfd pages (the workspace included) count")
	};
	r->limits[AB_LIM_PIDS] =
		(struct ab_limit_result){ true, 0, NULL, false, xstrdup("not enforced") };
	r->limits[AB_LIM_CPUS_MILLI] = (struct ab_limit_result){
		true, 2000, "cpu affinity (whole cores)", false,
		xstrdup("fallback: pinned to whole cores; the script can change its own "
			"affinity")
	};
	r->usage = (struct ab_usage){ .memory_peak_bytes = 67108864,
				      .cpu_ms = 950,
				      .tasks_peak = 3,
				      .workspace_bytes = 8192,
				      .workspace_entries = 2,
				      .oom_kills = 1,
				      .pids_refused = 0 };
	for (size_t i = 0; i < sizeof(prots) / sizeof(prots[0]); i++)
		if (prots[i][2])
			result_protect(r, prots[i][0], prots[i][1][0] == '1', "%s", prots[i][2]);
		else
			result_protect(r, prots[i][0], prots[i][1][0] == '1', NULL);
	r->sandbox_host_uid = 64000;
	r->workspace_mode = "tmpfs";
	result_default_unapplied(
		r, "pids", "default pids limit not enforced: no writable pids cgroup (fix: %s)",
		"run as root");
	result_warn(r, "a second warning with \"quotes\" and \\ backslashes");
	strv_push(&r->limits_hit, "memory");
	strv_push(&r->limits_hit, "file-size");
}

/* issue 25: a run asked for with a spec reads the spec's keys in every text for people; one
 * asked for with flags reads the flags */
static void
test_words(void)
{
	for (int flags = 0; flags < 2; flags++) {
		struct ab_run_opts o;
		struct ab_record r;
		json_t *j;
		const char *what = flags ? "flags" : "a spec";
		const char *t;

		run_opts_init(&o);
		o.flag_words = flags;
		result_init(&r, &o);
		r.status = AB_STATUS_TIMEOUT;
		r.message = xstrdup("wall-clock limit of 1000 ms reached");
		r.fix = xstrdup("raise --timeout (now 1.0 s), or make the script faster");
		result_warn(&r, "the report has only the first and last bytes (drop --rm, or raise "
				"--inline-output)");
		result_protect(&r, "landlock", false, "opted out with --without landlock");
		r.limits[AB_LIM_DISK] = (struct ab_limit_result){
			true, 1 << 20, "tmpfs size= on the workspace", true,
			xstrdup("the workspace is RAM: its bytes also count against --memory")
		};
		j = report_build(&r);
		t = json_string_value(json_object_get(j, "fix"));
		TAP_STREQ(t,
			  flags ? "raise --timeout (now 1.0 s), or make the script faster"
				: "raise limits.timeout (now 1.0 s), or make the script faster",
			  "%s: the fix names %s", what, flags ? "--timeout" : "limits.timeout");
		t = json_string_value(json_array_get(json_object_get(j, "warnings"), 0));
		TAP_OK(t && (flags ? strstr(t, "--rm") && strstr(t, "--inline-output")
				   : strstr(t, "\"rm\": true") &&
					     strstr(t, "raise inline_output") && !strstr(t, "--")),
		       "%s: a warning in its words: %s", what, t);
		t = json_string_value(json_object_get(
			json_object_get(json_object_get(j, "sandbox"), "landlock"), "detail"));
		TAP_OK(t && (flags ? strstr(t, "--without landlock") != NULL
				   : strstr(t, "\"without\": [\"landlock\"]") != NULL),
		       "%s: a protection's detail in its words: %s", what, t);
		t = json_string_value(json_object_get(
			json_object_get(json_object_get(j, "limits"), "disk"), "note"));
		TAP_OK(t && (flags ? strstr(t, "--memory") != NULL
				   : strstr(t, "limits.memory") != NULL),
		       "%s: a limit's note in its words: %s", what, t);
		json_decref(j);
		result_done(&r);
		run_opts_done(&o);
	}
}

static void
test_golden(void)
{
	struct ab_run_opts o;
	struct ab_record r;
	const char *dir = getenv("AB_TESTDIR");
	char *path, *text, *want;
	json_t *j, *back;
	size_t len = 0;

	golden_result(&r, &o);
	j = report_build(&r);
	TAP_STREQ(json_string_value(json_object_get(j, "agentbox_version")), AB_VERSION,
		  "golden: agentbox_version is the build's");
	/* the golden file does not change with the version number */
	json_object_set_new(j, "agentbox_version", json_string("@VERSION@"));
	text = report_dumps(j, &len);
	path = xasprintf("%s/data/report-golden.json", dir ? dir : "tests");
	if (getenv("AB_UPDATE_GOLDEN")) {
		FILE *f = fopen(path, "we");

		if (f) {
			fwrite(text, 1, len, f);
			fclose(f);
		}
	}
	want = read_file(path);
	TAP_OK(want != NULL, "golden file %s exists", path);
	TAP_OK(want && strlen(want) == len && memcmp(text, want, len) == 0,
	       "the report of a fully populated result matches its golden file byte for byte");
	if (want && (strlen(want) != len || memcmp(text, want, len) != 0))
		printf("# got:\n%s", text);
	back = json_loads(text, 0, NULL);
	TAP_OK(back && json_equal(back, j), "golden: the text parses back to the same object");
	json_decref(back);
	free(want);
	free(path);
	free(text);
	json_decref(j);
	result_done(&r);
	run_opts_done(&o);
}

/* report_patch_int(key, v) on the dumped report gives exactly the text a report built with
 * the field at v would have. */
static void
patch_is_rebuild(const char *key, size_t field, int64_t from, int64_t to)
{
	struct ab_run_opts o;
	struct ab_record r;
	json_t *j;
	char *text, *want;
	size_t len = 0, wlen = 0;
	int rc;

	golden_result(&r, &o);
	*(int64_t *) ((char *) &r + field) = from;
	j = report_build(&r);
	text = report_dumps(j, &len);
	json_decref(j);
	*(int64_t *) ((char *) &r + field) = to;
	j = report_build(&r);
	want = report_dumps(j, &wlen);
	json_decref(j);
	rc = report_patch_int(&text, &len, key, to);
	TAP_OK(rc == 0 && len == wlen && strlen(text) == len && strcmp(text, want) == 0,
	       "report_patch_int('%s', %lld -> %lld) is the report built with %lld", key,
	       (long long) from, (long long) to, (long long) to);
	free(text);
	free(want);
	result_done(&r);
	run_opts_done(&o);
}

static void
test_patch_rebuild(void)
{
	static const struct {
		const char *key;
		size_t field;
	} patched[] = {
		{ "agentbox_max_rss_kib", offsetof(struct ab_record, supervisor_max_rss_kib) },
		{ "agentbox_fds_left", offsetof(struct ab_record, supervisor_fds_left) },
		{ "cpu_ms", offsetof(struct ab_record, cpu_ms) }, /* usage.cpu_ms is nested */
		{ "wall_ms", offsetof(struct ab_record, wall_ms) },
		{ "kill_to_reaped_ms", offsetof(struct ab_record, kill_to_reaped_ms) },
	};
	static const int64_t values[][2] = {
		{ -1, 0 },
		{ -1, 123456 },
		{ 123456, -1 },
		{ 9, 1234567890123LL },
		{ 1234567890123LL, 7 },
		{ 0, 0 },
		{ 5, INT64_MAX },
	};

	for (size_t k = 0; k < sizeof(patched) / sizeof(patched[0]); k++)
		for (size_t v = 0; v < sizeof(values) / sizeof(values[0]); v++)
			patch_is_rebuild(patched[k].key, patched[k].field, values[v][0],
					 values[v][1]);
}

/* agentbox_max_rss_kib is patched into the serialised report (main.c write_report). */
static void
test_patch(void)
{
	struct ab_run_opts o;
	struct ab_record r;
	json_t *j, *back;
	char *text;
	size_t len = 0;

	run_opts_init(&o);
	result_init(&r, &o);
	r.status = AB_STATUS_EXITED;
	/* a script that prints what looks like the key on a line of its own */
	r.out.inline_max = AB_INLINE_OUTPUT_DEFAULT;
	stream_keep(&r.out, "\n  \"agentbox_max_rss_kib\": 1,\n",
		    strlen("\n  \"agentbox_max_rss_kib\": 1,\n"));
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

/* stream_keep: the first half of the inline cap, then a ring of the last half, whatever the
 * sizes of the pieces the bytes come in. */
static void
test_stream_keep(void)
{
	static const size_t caps[] = { 0, 1, 2, 7, 100, 4096, 5000 };
	static const size_t pieces[] = { 1, 3, 64, 999, 65536 };
	enum {
		TOTAL = 200000
	};
	char *all = xmalloc(TOTAL);

	for (size_t i = 0; i < TOTAL; i++)
		all[i] = (char) ('a' + (i * 7 + i / 13) % 26);
	for (size_t c = 0; c < sizeof(caps) / sizeof(caps[0]); c++) {
		for (size_t p = 0; p < sizeof(pieces) / sizeof(pieces[0]); p++) {
			struct ab_stream s = { .inline_max = caps[c] };
			size_t head = caps[c] / 2, ring = caps[c] - head, off = 0;
			bool ok;

			while (off < TOTAL) {
				size_t n = TOTAL - off < pieces[p] ? TOTAL - off : pieces[p];

				stream_keep(&s, all + off, n);
				off += n;
			}
			ok = s.captured == TOTAL && s.excerpt && s.len == caps[c] &&
			     (head == 0 || memcmp(s.buf, all, head) == 0);
			/* the ring, oldest first, is the stream's last `ring` bytes */
			for (size_t k = 0; ok && k < ring; k++)
				ok = s.buf[head + (s.ring_pos + k) % ring] == all[TOTAL - ring + k];
			TAP_OK(ok,
			       "stream_keep(cap %zu, pieces of %zu): head and ring hold the first "
			       "%zu and the last %zu bytes",
			       caps[c], pieces[p], head, ring);
			free(s.buf);
		}
	}
	{
		struct ab_stream s = { .inline_max = 100 };

		stream_keep(&s, all, 60);
		stream_keep(&s, all + 60, 40);
		TAP_OK(!s.excerpt && s.len == 100 && s.captured == 100 &&
			       memcmp(s.buf, all, 100) == 0,
		       "stream_keep: exactly the cap is no excerpt");
		free(s.buf);
	}
	free(all);
}

/* The report's excerpt: head, a marker naming what was elided and where it is, the tail; cut
 * at character boundaries so that no U+FFFD appears for bytes that are fine. */
/* issue 25: past --output-limit with truncate, the ring goes on: the report ends with the
 * stream's own last bytes, says how many were dropped, and holds no more than before */
static void
test_past_cap(void)
{
	struct ab_run_opts o;
	struct ab_record r;
	json_t *j, *s;
	const char *t;
	char line[32];

	run_opts_init(&o);
	result_init(&r, &o);
	r.run_dir = xstrdup("/var/tmp/agentbox-1/run-aaaaaa");
	r.out.inline_max = 1000;
	/* 2000 lines of 11 bytes: the first 5500 bytes (500 lines) captured, the rest past it */
	for (int i = 0; i < 2000; i++) {
		snprintf(line, sizeof(line), "line %05d\n", i);
		r.out.bytes += 11;
		if (i < 500)
			stream_keep(&r.out, line, 11);
		else
			stream_keep_past_cap(&r.out, line, 11);
	}
	r.out.truncated = true;
	r.out.file_kept = true;
	memset(r.out.file_sha256, 'b', 64);
	TAP_OK(r.out.buf_cap <= 1000, "past the cap: no more held than the inline cap (%zu)",
	       r.out.buf_cap);
	j = report_build(&r);
	s = json_object_get(j, "stdout");
	t = json_string_value(json_object_get(s, "text"));
	TAP_OK(t && strlen(t) > 500 && strcmp(t + strlen(t) - 11, "line 01999\n") == 0,
	       "past the cap: the text ends with the stream's last line");
	TAP_OK(t && strncmp(t, "line 00000\n", 11) == 0, "... and starts with its first");
	TAP_OK(json_integer_value(json_object_get(s, "captured_bytes")) == 5500 &&
		       json_integer_value(json_object_get(s, "bytes")) == 22000,
	       "past the cap: captured_bytes is the capture (5500), bytes the stream (22000)");
	TAP_OK(json_integer_value(json_object_get(s, "head_bytes")) +
			       json_integer_value(json_object_get(s, "elided_bytes")) +
			       json_integer_value(json_object_get(s, "tail_bytes")) ==
		       22000,
	       "past the cap: head + elided + tail is the whole stream");
	TAP_OK(json_integer_value(json_object_get(s, "dropped_bytes")) ==
		       22000 - 5500 - json_integer_value(json_object_get(s, "tail_bytes")),
	       "past the cap: dropped_bytes is what lies between the capture and the tail (%lld)",
	       (long long) json_integer_value(json_object_get(s, "dropped_bytes")));
	TAP_OK(t && strstr(t, "the first 5500 bytes are in /var/tmp/agentbox-1/run-aaaaaa/stdout, "
			      "the 16000 after them (past the output limit) were dropped]"),
	       "past the cap: the marker says what is in the stream file and what was dropped");
	TAP_OK(json_integer_value(json_object_get(json_object_get(j, "stderr"), "dropped_bytes")) ==
		       0,
	       "a stream under its cap: dropped_bytes 0");
	json_decref(j);
	result_done(&r);
	run_opts_done(&o);
}

static void
test_excerpt(void)
{
	struct ab_run_opts o;
	struct ab_record r;
	json_t *j, *s;
	const char *t;
	size_t n = 100000;
	char *e = xmalloc(2 * n);

	for (size_t i = 0; i < n; i++)
		memcpy(e + 2 * i, "\xc3\xa9", 2); /* e acute */
	run_opts_init(&o);
	result_init(&r, &o);
	r.run_dir = xstrdup("/var/tmp/agentbox-1/run-aaaaaa");
	r.out.inline_max = 1002; /* head 501 bytes, the last a lead byte; ring 501: a split start */
	stream_keep(&r.out, e, 2 * n);
	r.out.bytes = r.out.captured;
	r.out.file_kept = true;
	memset(r.out.file_sha256, 'a', 64);
	r.err.inline_max = 1003;
	stream_keep(&r.err, "short\n", 6);
	r.err.bytes = 6;
	j = report_build(&r);
	s = json_object_get(j, "stdout");
	t = json_string_value(json_object_get(s, "text"));
	TAP_OK(json_is_false(json_object_get(s, "text_lossy")),
	       "excerpt: no character is split at either cut (text_lossy false)");
	TAP_OK(json_integer_value(json_object_get(s, "head_bytes")) == 500 &&
		       json_integer_value(json_object_get(s, "tail_bytes")) == 500 &&
		       json_integer_value(json_object_get(s, "elided_bytes")) ==
			       (json_int_t) (2 * n - 1000),
	       "excerpt: head_bytes 500, tail_bytes 500, elided_bytes the rest");
	TAP_OK(json_integer_value(json_object_get(s, "captured_bytes")) == (json_int_t) (2 * n),
	       "excerpt: captured_bytes counts every captured byte");
	TAP_OK(t && strstr(t, "\n[agentbox: 199000 bytes of stdout elided here; all 200000 "
			      "captured bytes are in /var/tmp/agentbox-1/run-aaaaaa/stdout]\n"),
	       "excerpt: the marker says how much, and where the whole stream is");
	TAP_OK(t && strncmp(t, e, 500) == 0 && strlen(t) > 500 &&
		       memcmp(t + strlen(t) - 500, e, 500) == 0,
	       "excerpt: the text starts with the head and ends with the tail");
	TAP_STREQ(json_string_value(json_object_get(json_object_get(s, "file"), "path")),
		  "/var/tmp/agentbox-1/run-aaaaaa/stdout", "excerpt: file.path");
	TAP_OK(json_integer_value(json_object_get(json_object_get(s, "file"), "bytes")) ==
		       (json_int_t) (2 * n),
	       "excerpt: file.bytes");
	s = json_object_get(j, "stderr");
	TAP_STREQ(json_string_value(json_object_get(s, "text")), "short\n",
		  "no excerpt under the cap: the text is the stream");
	TAP_OK(json_is_null(json_object_get(s, "file")) &&
		       json_integer_value(json_object_get(s, "elided_bytes")) == 0 &&
		       json_integer_value(json_object_get(s, "head_bytes")) == 6,
	       "no excerpt: file null, elided_bytes 0, head_bytes = captured_bytes");
	json_decref(j);
	r.out.file_kept = false;
	j = report_build(&r);
	t = json_string_value(json_object_get(json_object_get(j, "stdout"), "text"));
	TAP_OK(t && strstr(t, "elided here and not kept (see warnings)]") &&
		       json_is_null(json_object_get(json_object_get(j, "stdout"), "file")),
	       "excerpt without a stream file: the marker says the middle was not kept");
	json_decref(j);
	/* --inline-output 0: nothing inline, the marker alone */
	free(r.err.buf);
	r.err = (struct ab_stream){ .inline_max = 0 };
	stream_keep(&r.err, "lost\n", 5);
	j = report_build(&r);
	TAP_STREQ(json_string_value(json_object_get(json_object_get(j, "stderr"), "text")),
		  "[agentbox: 5 bytes of stderr elided here and not kept (see warnings)]\n",
		  "--inline-output 0: the text is the marker alone");
	json_decref(j);
	result_done(&r);
	run_opts_done(&o);
	free(e);
}

int
main(void)
{
	struct ab_run_opts o;
	struct ab_record r;
	json_t *j, *s;
	char *text;

	run_opts_init(&o);
	result_init(&r, &o);
	r.status = AB_STATUS_SIGNALED;
	r.signal = SIGKILL;
	r.wall_ms = 12;
	r.out.inline_max = r.err.inline_max = AB_INLINE_OUTPUT_DEFAULT;
	stream_keep(&r.out, "ok \x1b]52;c;aGk=\x07 \xff\xfe end\n",
		    strlen("ok \x1b]52;c;aGk=\x07 \xff\xfe end\n"));
	r.out.bytes = 5000;
	r.out.truncated = true;
	r.out.relayed = true;
	r.out.relay_dropped = 4000;
	stream_keep(&r.err, "a\0b", 3);
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
	test_patch_rebuild();
	test_golden();
	test_words();
	test_stream_keep();
	test_excerpt();
	test_past_cap();
	return tap_done();
}
