/* session.c: `agentbox session` (docs/sessions.md): a session for a person (cells from a
 * terminal, or a file of cells separated by `%%` lines) or for a program (--jsonl: JSON lines
 * both ways, what the Python and Node clients drive). A client of the library only. */
#include "session.h"

#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../spec/options.h"
#include "../spec/spec.h"
#include "../util/fdutil.h"
#include "../util/macro.h"
#include "../util/strv.h"
#include "../util/xalloc.h"
#include "agentbox/agentbox.h"

static const char session_help[] =
	"usage: agentbox session [--lang python|node] [RUN OPTIONS] [--cells FILE]\n"
	"       agentbox session --spec FILE [--cells FILE]\n"
	"       agentbox session --jsonl [--spec FILE | RUN OPTIONS]\n"
	"\n"
	"Starts a session: one sandbox and one interpreter kept alive in it, where cells run\n"
	"one after another in one namespace (Python) or context (Node), as in a notebook:\n"
	"variables, imports and files stay from cell to cell; the last expression's value is\n"
	"shown. docs/sessions.md says what persists and what is bounded.\n"
	"\n"
	"At a terminal: type a cell, end it with an empty line; Ctrl-C interrupts a running\n"
	"cell; Ctrl-D ends the session. From a file or a pipe: cells separated by lines\n"
	"`%%`.\n"
	"\n"
	"  --lang L            python (the default) or node\n"
	"  --cells FILE        read the cells from FILE instead of stdin\n"
	"  --idle-timeout D    end the session after D without a cell (default 10m)\n"
	"  --max-lifetime D    end it after D in all (default 1h)\n"
	"  --spec FILE|-       the session as a JSON spec (docs/spec.md: a run spec with\n"
	"                      \"session\", without script and code)\n"
	"  --jsonl             JSON lines on stdin and stdout, for programs: the first line may "
	"be\n"
	"                      {\"spec\": {...}}; then {\"cell\": {\"code\", \"timeout_ms\"}},\n"
	"                      {\"interrupt\": {}}, {\"restart\": {}}, {\"close\": {}}; answers\n"
	"                      {\"ready\"}, {\"cell\"}, {\"error\"}, {\"ended\"}, {\"closed\"}\n"
	"  RUN OPTIONS         those of `agentbox run` (--memory, --timeout: each cell's,\n"
	"                      --input, --env-dir, --without...; agentbox run --help)\n"
	"  --help              this text\n"
	"\n"
	"Exit status: 0 the session was closed, 1 it ended on its own (a crash, a limit, idle),\n"
	"2 usage error, 3 the sandbox cannot be built here, 125 agentbox failed.\n";

struct ses_cli {
	bool jsonl, have_flags;
	const char *cells, *spec_path;
	json_t *session; /* the spec's "session" */
	struct strv run_argv;
};

static int
usage(const char *msg, const char *fix)
{
	fprintf(stderr, "agentbox session: %s%s%s%s\n", msg, fix ? " (fix: " : "", fix ? fix : "",
		fix ? ")" : "");
	fprintf(stderr, "Try 'agentbox session --help' for more information.\n");
	return AB_EXIT_USAGE;
}

/* Our own options out of argv; the rest is `agentbox run`'s. Returns 0, 1 (--help), or an
 * exit status. */
static int
split_args(int argc, char **argv, struct ses_cli *c)
{
	strv_push(&c->run_argv, "run");
	c->session = json_object();
	for (int i = 2; i < argc; i++) {
		const char *a = argv[i];
		bool more = i + 1 < argc;

		if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0)
			return 1;
		if (strcmp(a, "--jsonl") == 0) {
			c->jsonl = true;
		} else if (strcmp(a, "--cells") == 0 && more) {
			c->cells = argv[++i];
		} else if (strcmp(a, "--spec") == 0 && more) {
			c->spec_path = argv[++i];
		} else if ((strcmp(a, "--idle-timeout") == 0 || strcmp(a, "--max-lifetime") == 0) &&
			   more) {
			json_object_set_new(c->session,
					    a[2] == 'i' ? "idle_timeout" : "max_lifetime",
					    json_string(argv[++i]));
		} else if (strcmp(a, "--jsonl") != 0 && strncmp(a, "--", 2) == 0 && !more &&
			   strchr(a, '=') == NULL && strcmp(a, "--quiet") != 0 &&
			   strcmp(a, "--net-strict") != 0 && strcmp(a, "--rm") != 0) {
			return usage("a value is needed after an option",
				     "agentbox session --help");
		} else {
			strv_push(&c->run_argv, a);
			c->have_flags = true;
		}
	}
	return 0;
}

/* The session's spec from the run options (with a placeholder code, dropped again). */
static ab_spec *
spec_from_flags(struct ses_cli *c, ab_error **e)
{
	struct ab_run_opts o;
	struct ab_err err = { 0 };
	ab_spec *spec;
	json_t *j;
	int r;

	strv_push_n(&c->run_argv, 2, "--code", "pass");
	run_opts_init(&o);
	r = cli_parse_run((int) c->run_argv.n, c->run_argv.v, &o, &err);
	if (r == 1) {
		run_opts_done(&o);
		fputs(session_help, stdout);
		exit(0);
	}
	if (r < 0) {
		fprintf(stderr, "agentbox session: %s%s%s%s\n", err.msg,
			err.fix[0] ? " (fix: " : "", err.fix, err.fix[0] ? ")" : "");
		run_opts_done(&o);
		exit(AB_EXIT_USAGE);
	}
	j = spec_build(&o);
	run_opts_done(&o);
	json_object_del(j, "code");
	json_object_set(j, "session", c->session);
	spec = ab_spec_from_jansson(j, e);
	json_decref(j);
	return spec;
}

static ab_spec *
spec_from_file(struct ses_cli *c, ab_error **e)
{
	cleanup_free char *text = NULL;
	cleanup_fd int fd = strcmp(c->spec_path, "-") == 0
				    ? fcntl(0, F_DUPFD_CLOEXEC, 3)
				    : open(c->spec_path, O_RDONLY | O_CLOEXEC);
	json_error_t je;
	json_t *j;
	ab_spec *spec;

	if (fd < 0 || read_all_capped(fd, 64 << 20, &text) < 0) {
		fprintf(stderr,
			"agentbox session: --spec '%s': %s (fix: pass a readable JSON file)\n",
			c->spec_path, fd < 0 ? strerror(errno) : "cannot read it");
		exit(AB_EXIT_USAGE);
	}
	j = json_loads(text, 0, &je);
	if (!j) {
		fprintf(stderr, "agentbox session: --spec '%s' is not JSON: %s\n", c->spec_path,
			je.text);
		exit(AB_EXIT_USAGE);
	}
	if (!json_object_get(j, "session"))
		json_object_set(j, "session", c->session);
	spec = ab_spec_from_jansson(j, e);
	json_decref(j);
	return spec;
}

/* ---- --jsonl ----------------------------------------------------------------------------- */

/* stdin, read with read(2) (poll sees what stdio would hide in its buffer) */
struct lines {
	char *buf;
	size_t len, cap;
	bool eof;
};

/* Reads what stdin has now, never blocking. */
static void
lines_fill(struct lines *l)
{
	struct pollfd p = { .fd = 0, .events = POLLIN };
	ssize_t n;

	if (l->eof || poll(&p, 1, 0) <= 0)
		return;
	if (l->cap - l->len < 65536)
		l->buf = xrealloc(l->buf, l->cap = l->cap ? 2 * l->cap : 131072);
	n = read(0, l->buf + l->len, l->cap - l->len - 1);
	if (n < 0 && (errno == EINTR || errno == EAGAIN))
		return;
	if (n <= 0)
		l->eof = true;
	else
		l->len += (size_t) n;
}

/* A whole line is waiting in l->buf. */
static bool
lines_whole(const struct lines *l)
{
	return l->buf && memchr(l->buf, '\n', l->len) != NULL;
}

/* The next whole line (in l->buf, NUL instead of its newline; lines_drop() it after) or
 * NULL: read with read(2) (poll sees what stdio would hide in its buffer), blocking when
 * wait, else only what is there (the session's deadlines go on meanwhile). */
static char *
lines_next(struct lines *l, bool wait)
{
	for (;;) {
		char *nl = l->buf ? memchr(l->buf, '\n', l->len) : NULL;
		size_t before = l->len;
		ssize_t n;

		if (nl) {
			*nl = '\0';
			return l->buf;
		}
		if (l->eof)
			return NULL;
		if (!wait) {
			lines_fill(l);
			if (l->len == before)
				return NULL;
			continue;
		}
		if (l->cap - l->len < 65536)
			l->buf = xrealloc(l->buf, l->cap = l->cap ? 2 * l->cap : 131072);
		n = read(0, l->buf + l->len, l->cap - l->len - 1);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0) {
			l->eof = true;
			return NULL;
		}
		l->len += (size_t) n;
	}
}

static void
lines_drop(struct lines *l)
{
	size_t used = strlen(l->buf) + 1;

	l->len -= used;
	memmove(l->buf, l->buf + used, l->len);
}

static void
emit(const char *key, json_t *v)
{
	json_t *j = json_object();
	char *text;

	json_object_set_new(j, key, v);
	text = json_dumps(j, JSON_COMPACT);
	json_decref(j);
	if (text) {
		fputs(text, stdout);
		fputc('\n', stdout);
		fflush(stdout);
		free(text);
	}
}

static void
emit_text(const char *key, const char *json_text)
{
	json_t *v = json_loads(json_text, 0, NULL);

	emit(key, v ? v : json_null());
}

static void
emit_error(ab_error *e)
{
	emit("error", json_pack("{s:s, s:s, s:i}", "message", ab_error_message(e), "fix",
				ab_error_fix(e) ? ab_error_fix(e) : "", "code", ab_error_code(e)));
	ab_error_free(e);
}

static void
emit_info(const char *key, const ab_session *s)
{
	cleanup_free char *info = ab_session_info(s);

	emit_text(key, info);
}

/* The next whole line already read is an interrupt (read more first, never blocking). */
static bool
next_is_interrupt(struct lines *l)
{
	char *nl;

	lines_fill(l);
	nl = l->buf ? memchr(l->buf, '\n', l->len) : NULL;
	return nl && memmem(l->buf, (size_t) (nl - l->buf), "\"interrupt\"", 11) != NULL;
}

/* A line from the client. Returns 1 when the session is to close. */
static int
jsonl_line(ab_session *s, const char *line)
{
	json_t *j = json_loads(line, 0, NULL), *cell;
	ab_error *e = NULL;
	int r = 0;

	if (!json_is_object(j)) {
		emit("error", json_pack("{s:s, s:s}", "message", "a line that is not a JSON object",
					"fix", "send one JSON object a line"));
	} else if ((cell = json_object_get(j, "cell"))) {
		const char *code = json_string_value(json_object_get(cell, "code"));
		json_int_t t = json_integer_value(json_object_get(cell, "timeout_ms"));

		if (!code)
			emit("error", json_pack("{s:s, s:s}", "message", "the cell has no code",
						"fix", "send {\"cell\": {\"code\": \"...\"}}"));
		else if (ab_session_cell_start(s, code,
					       json_string_length(json_object_get(cell, "code")), t,
					       &e) < 0)
			emit_error(e);
	} else if (json_object_get(j, "interrupt")) {
		(void) ab_session_interrupt(s);
	} else if (json_object_get(j, "restart")) {
		if (ab_session_restart(s, &e) < 0)
			emit_error(e);
		else
			emit_info("ready", s);
	} else if (json_object_get(j, "close")) {
		r = 1;
	} else {
		emit("error", json_pack("{s:s, s:s}", "message", "an unknown request", "fix",
					"send cell, interrupt, restart or close"));
	}
	json_decref(j);
	return r;
}

static int
close_and_report(ab_session *s)
{
	ab_result *res = NULL;
	ab_error *e = NULL;

	if (ab_session_close(s, &res, &e) < 0) {
		emit_error(e);
		return 125;
	}
	emit_text("closed", res ? ab_result_json(res) : "null");
	ab_result_free(res);
	return 0;
}

static int
run_jsonl(ab_session *s, struct lines *in)
{
	bool ready_said = false, ended_said = false, in_eof = false;

	for (;;) {
		struct pollfd p[2] = { { .fd = in_eof ? -1 : 0, .events = POLLIN },
				       { .fd = ab_session_fd(s), .events = POLLIN } };
		char *cell = NULL, *line;
		ab_error *e = NULL;

		if (ab_session_step(s, &cell, &e) == 1) {
			emit_text("cell", cell);
			free(cell);
		} else if (e) {
			emit_error(e);
		}
		if (!ready_said && strcmp(ab_session_state(s), "ready") == 0) {
			emit_info("ready", s);
			ready_said = true;
		}
		if (!ended_said && strcmp(ab_session_state(s), "ended") == 0) {
			emit_info("ended", s); /* on its own: a restart or a close may follow */
			ended_said = true;
		}
		if (in_eof && strcmp(ab_session_state(s), "busy") != 0)
			return close_and_report(s);
		/* one request at a time: the next waits while a cell runs (but an interrupt) */
		line = strcmp(ab_session_state(s), "starting") == 0 ||
				       (strcmp(ab_session_state(s), "busy") == 0 &&
					!next_is_interrupt(in))
			       ? NULL
			       : lines_next(in, false);
		if (line) {
			int r = line[0] ? jsonl_line(s, line) : 0;

			lines_drop(in);
			if (r == 1)
				return close_and_report(s);
			if (strcmp(ab_session_state(s), "ended") != 0)
				ended_said = false; /* restarted */
			continue;
		}
		in_eof = in->eof && !lines_whole(in);
		if (in_eof && strcmp(ab_session_state(s), "busy") != 0)
			continue; /* closed above */
		/* stdin is watched but at its end, while starting, and while a cell runs once a
		 * whole line waits (until then, for an interrupt) */
		if (in->eof || strcmp(ab_session_state(s), "starting") == 0 ||
		    (strcmp(ab_session_state(s), "busy") == 0 && lines_whole(in)))
			p[0].fd = -1;
		/* an ended session's fd may stay readable: only a request can change it now */
		if (strcmp(ab_session_state(s), "ended") == 0)
			p[1].fd = -1;
		if (poll(p, 2, ab_session_timeout_ms(s)) < 0 && errno != EINTR)
			return 125;
		if (p[0].revents & (POLLIN | POLLHUP))
			lines_fill(in);
	}
}

/* ---- for a person ------------------------------------------------------------------------ */

static void
print_cell(const char *text)
{
	json_t *c = json_loads(text, 0, NULL);
	const char *status = json_string_value(json_object_get(c, "status"));
	const json_t *err = json_object_get(c, "error"), *v = json_object_get(c, "result");
	size_t i;
	json_t *x;

	fputs(json_string_value(json_object_get(json_object_get(c, "stdout"), "text")) ?: "",
	      stdout);
	fflush(stdout);
	fputs(json_string_value(json_object_get(json_object_get(c, "stderr"), "text")) ?: "",
	      stderr);
	if (json_is_object(v))
		printf("%s\n", json_string_value(json_object_get(v, "text")) ?: "");
	json_array_foreach(json_object_get(c, "images"), i, x)
		printf("[figure %zu: image/png, %zu bytes of base64]\n", i + 1,
		       json_string_length(json_object_get(x, "data")));
	if (json_is_object(err)) {
		json_array_foreach(json_object_get(err, "traceback"), i, x)
			fputs(json_string_value(x) ?: "", stderr);
	}
	if (status && strcmp(status, "ok") != 0 && strcmp(status, "error") != 0)
		fprintf(stderr, "agentbox: %s\n",
			json_string_value(json_object_get(c, "message")) ?: status);
	fflush(stdout);
	json_decref(c);
}

/* The next cell from f: lines up to a `%%` line (a file) or an empty line (a terminal). */
static char *
next_cell(FILE *f, bool tty)
{
	cleanup_free char *line = NULL;
	size_t cap = 0, len = 0;
	char *cell = xstrdup("");
	bool any = false;
	ssize_t n;

	if (tty)
		fputs(">>> ", stderr);
	while ((n = getline(&line, &cap, f)) >= 0) {
		bool sep = tty ? strcmp(line, "\n") == 0 : strncmp(line, "%%", 2) == 0;

		any = true;
		if (sep) {
			if (len > 0 || !tty)
				break;
			fputs(">>> ", stderr);
			continue;
		}
		cell = xrealloc(cell, len + (size_t) n + 1);
		memcpy(cell + len, line, (size_t) n + 1);
		len += (size_t) n;
		if (tty)
			fputs("... ", stderr);
	}
	if (!any) {
		free(cell);
		return NULL;
	}
	return cell;
}

static volatile sig_atomic_t interrupted;

static void
on_sigint(int sig)
{
	(void) sig;
	interrupted = 1;
}

/* One cell to its result; Ctrl-C interrupts it (KeyboardInterrupt) rather than ending us. */
static int
run_one(ab_session *s, const char *code, char **ret, ab_error **e)
{
	int r = ab_session_cell_start(s, code, strlen(code), 0, e);

	interrupted = 0;
	while (r == 0) {
		struct pollfd p = { .fd = ab_session_fd(s), .events = POLLIN };

		r = ab_session_step(s, ret, e);
		if (r != 0 || strcmp(ab_session_state(s), "ended") == 0)
			break;
		if (poll(&p, 1, ab_session_timeout_ms(s)) < 0 && errno == EINTR && interrupted) {
			interrupted = 0;
			(void) ab_session_interrupt(s);
		}
	}
	return r < 0 ? r : 0;
}

static int
run_person(ab_session *s, const char *cells)
{
	struct sigaction sa = { .sa_handler = on_sigint };
	FILE *f = cells ? fopen(cells, "re") : stdin;
	bool tty = !cells && isatty(0);
	int status = 0;
	char *code;

	sigemptyset(&sa.sa_mask);
	(void) sigaction(SIGINT, &sa, NULL);
	if (!f) {
		fprintf(stderr, "agentbox session: --cells '%s': %s\n", cells, strerror(errno));
		(void) ab_session_close(s, NULL, NULL);
		return AB_EXIT_USAGE;
	}
	while ((code = next_cell(f, tty))) {
		cleanup_free char *result = NULL;
		ab_error *e = NULL;

		if (run_one(s, code, &result, &e) < 0) {
			free(code);
			fprintf(stderr, "agentbox: %s\n", ab_error_message(e));
			ab_error_free(e);
			status = 1;
			break;
		}
		free(code);
		if (result)
			print_cell(result);
		if (strcmp(ab_session_state(s), "ended") == 0) {
			status = 1;
			break;
		}
	}
	if (cells)
		fclose(f);
	(void) ab_session_close(s, NULL, NULL);
	return status;
}

int
cmd_session(int argc, char **argv)
{
	struct ses_cli c = { 0 };
	struct lines in = { 0 };
	ab_context *ctx = NULL;
	ab_spec *spec = NULL;
	ab_session *s;
	ab_error *e = NULL;
	int r;

	r = split_args(argc, argv, &c);
	if (r == 1) {
		fputs(session_help, stdout);
		return 0;
	}
	if (r != 0)
		return r;
	if (c.spec_path && c.have_flags)
		return usage("--spec and run options cannot be combined",
			     "put the options in the spec");
	if (c.jsonl && c.cells)
		return usage("--jsonl reads its cells from stdin", "drop --cells");
	if (c.jsonl && !c.spec_path && !c.have_flags) {
		/* the first line: {"spec": {...}} */
		char *line = lines_next(&in, true);
		json_t *j = line ? json_loads(line, 0, NULL) : NULL;

		if (line)
			lines_drop(&in);
		if (!json_is_object(json_object_get(j, "spec"))) {
			json_decref(j);
			emit("error", json_pack("{s:s, s:s}", "message",
						"the first line is not {\"spec\": {...}}", "fix",
						"send the session's spec first"));
			return AB_EXIT_USAGE;
		}
		if (!json_object_get(json_object_get(j, "spec"), "session"))
			json_object_set(json_object_get(j, "spec"), "session", c.session);
		spec = ab_spec_from_jansson(json_object_get(j, "spec"), &e);
		json_decref(j);
	} else if (c.spec_path) {
		spec = spec_from_file(&c, &e);
	} else {
		spec = spec_from_flags(&c, &e);
	}
	json_decref(c.session);
	strv_done(&c.run_argv);
	if (!spec) {
		int code = ab_error_exit_status(e);

		if (c.jsonl)
			emit_error(e);
		else
			fprintf(stderr, "agentbox session: %s (fix: %s)\n", ab_error_message(e),
				ab_error_fix(e) ? ab_error_fix(e) : "docs/sessions.md"),
				ab_error_free(e);
		return code;
	}
	ctx = ab_context_new(&e);
	if (ctx && !c.jsonl && !c.spec_path)
		(void) ab_context_set(ctx, "words", "flags");
	s = ctx ? (c.jsonl ? ab_session_start(ctx, spec, &e) : ab_session_new(ctx, spec, &e))
		: NULL;
	ab_spec_free(spec);
	if (!s) {
		int code = ab_error_exit_status(e);

		if (c.jsonl)
			emit_error(e);
		else
			fprintf(stderr, "agentbox session: %s%s%s%s\n", ab_error_message(e),
				ab_error_fix(e) ? " (fix: " : "", ab_error_fix(e) ?: "",
				ab_error_fix(e) ? ")" : ""),
				ab_error_free(e);
		ab_context_free(ctx);
		return code;
	}
	r = c.jsonl ? run_jsonl(s, &in) : run_person(s, c.cells);
	free(in.buf);
	ab_context_free(ctx);
	return r;
}
