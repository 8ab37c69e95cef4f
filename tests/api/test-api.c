/* test-api.c: libagentbox from a program that has a life of its own (issue 14). This process
 * has its own child, a SIGCHLD handler, a blocked signal and a SIGPIPE disposition; it runs
 * four sandboxed scripts at once through the asynchronous API and cancels a fifth mid-run,
 * then checks every result and that the library left the process as it found it: its child
 * not reaped, handlers and mask unchanged, no fd leaked, no namespace changed, the cwd and
 * environment as they were. Linked against the installed-style shared library only. */
#include <agentbox/agentbox.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <sys/wait.h>

#include "tests/tap.h"

static volatile sig_atomic_t sigchld_seen;

static void
on_sigchld(int s)
{
	(void) s;
	sigchld_seen++;
}

static int
count_fds(void)
{
	DIR *d = opendir("/proc/self/fd");
	struct dirent *de;
	int n = 0;

	if (!d)
		return -1;
	while ((de = readdir(d)))
		if (de->d_name[0] != '.')
			n++;
	closedir(d);
	return n - 1; /* the one opendir holds */
}

/* the links in /proc/self/ns, as one string */
static void
namespaces(char *buf, size_t size)
{
	static const char *const ns[] = { "mnt", "user", "pid", "net", "ipc", "uts", "cgroup" };
	size_t off = 0;

	buf[0] = '\0';
	for (size_t i = 0; i < sizeof(ns) / sizeof(ns[0]); i++) {
		char path[64], link[128];
		ssize_t n;

		snprintf(path, sizeof(path), "/proc/self/ns/%s", ns[i]);
		n = readlink(path, link, sizeof(link) - 1);
		link[n > 0 ? n : 0] = '\0';
		off += (size_t) snprintf(buf + off, size - off, "%s ", link);
	}
}

static ab_spec *
spec(const char *json)
{
	ab_error *e = NULL;
	ab_spec *s = ab_spec_from_json(json, (size_t) -1, &e);

	if (!s) {
		printf("# spec refused: %s\n", ab_error_message(e));
		ab_error_free(e);
	}
	return s;
}

static void
test_specs(void)
{
	ab_error *e = NULL;
	ab_spec *s;
	char *j;

	s = ab_spec_from_json("{\"language\":\"python\",\"code\":\"print(1)\",\"bogus\":1}",
			      (size_t) -1, &e);
	TAP_OK(!s && e && ab_error_exit_status(e) == 2 && strstr(ab_error_message(e), "bogus"),
	       "an unknown key is a usage error naming it (%s)", e ? ab_error_message(e) : "");
	ab_error_wrap(e, "outer");
	TAP_OK(e && strncmp(ab_error_message(e), "outer: ", 7) == 0 &&
		       strstr(ab_error_message(e), "bogus"),
	       "ab_error_wrap keeps the inner message after the outer context");
	ab_error_free(e);
	e = NULL;
	s = ab_spec_from_json("{\"code\":\"x\",\"script\":\"/y.py\"}", (size_t) -1, &e);
	TAP_OK(!s && e && ab_error_exit_status(e) == 2, "script and code together are refused");
	ab_error_free(e);
	e = NULL;
	s = ab_spec_from_json("{\"code\":\"x\",\"limits\":{\"memory\":\"lots\"}}", (size_t) -1, &e);
	TAP_OK(!s && e && strstr(ab_error_message(e), "memory"),
	       "a limit that does not parse is refused");
	/* issue 25: in the spec's words (no flag this caller never used), with a fix */
	TAP_OK(e && strstr(ab_error_message(e), "limits.memory") &&
		       !strstr(ab_error_message(e), "--") && *ab_error_fix(e) &&
		       !strstr(ab_error_fix(e), "--"),
	       "... naming limits.memory, with a fix in the spec's words (%s; fix: %s)",
	       e ? ab_error_message(e) : "", e ? ab_error_fix(e) : "");
	ab_error_free(e);
	e = NULL;
	s = ab_spec_new();
	TAP_OK(ab_spec_set_language(s, "python", NULL) == 0 &&
		       ab_spec_set_code(s, "print(2)", (size_t) -1, NULL) == 0 &&
		       ab_spec_add_arg(s, "a", NULL) == 0 &&
		       ab_spec_set_limit(s, "timeout", "10s", NULL) == 0 &&
		       ab_spec_set_env(s, "X", "1", NULL) == 0 && ab_spec_set_rm(s, 1, NULL) == 0,
	       "the setters build a spec");
	TAP_OK(ab_spec_set_limit(s, "timeout", "soon", &e) < 0 && e && ab_error_exit_status(e) == 2,
	       "a setter refuses a bad value at once");
	ab_error_free(e);
	e = NULL;
	TAP_OK(ab_spec_set_language(s, "ruby", &e) < 0, "a setter refuses an unknown language");
	TAP_OK(e && *ab_error_fix(e) && !strstr(ab_error_fix(e), "--"),
	       "... and says how to fix it in the spec's words (%s)", e ? ab_error_fix(e) : "");
	ab_error_free(e);
	j = ab_spec_to_json(s);
	TAP_OK(j && strstr(j, "\"timeout\":\"10s\"") && strstr(j, "\"args\":[\"a\"]"),
	       "the spec comes back as JSON (%s)", j ? j : "");
	free(j);
	j = ab_spec_get_json(s, "args");
	TAP_OK(j && strcmp(j, "[\"a\"]") == 0, "ab_spec_get_json gives one key's value (%s)",
	       j ? j : "NULL");
	free(j);
	j = ab_spec_get_json(s, "stdin_fd");
	TAP_OK(!j, "... and NULL for a key the spec does not set");
	free(j);
	ab_spec_free(s);
}

int
main(void)
{
	static const char *const jobs[] = {
		"{\"language\":\"python\",\"code\":\"import sys; print(sum(map(int, "
		"sys.argv[1:])))\","
		"\"args\":[\"1\",\"2\",\"39\"],\"rm\":true}",
		"{\"language\":\"node\",\"code\":\"console.log('node ' + (6*7))\",\"rm\":true}",
		"{\"language\":\"python\",\"code\":\"import sys\\nopen('out.txt','w').write('x')\\n"
		"sys.exit(3)\",\"limits\":{\"memory\":\"100M\"},\"rm\":true}",
		"{\"language\":\"python\",\"code\":\"import time; time.sleep(30)\","
		"\"limits\":{\"timeout\":1.5},\"rm\":true}",
		"{\"language\":\"python\",\"code\":\"import time; print('up', flush=True); "
		"time.sleep(30)\",\"rm\":true}",
	};
	enum {
		N = 5,
		CANCEL = 4
	};
	ab_context *ctx;
	ab_run_handle *runs[N];
	ab_result *res[N] = { 0 };
	ab_spec *specs[N];
	struct sigaction sa = { .sa_handler = on_sigchld }, now_sa;
	sigset_t mask, now_mask;
	char ns_before[1024], ns_after[1024], cwd_before[4096], cwd_after[4096];
	int fds_before, fds_after, own_status;
	pid_t own;
	bool done[N] = { false };
	int left = N;

	test_specs();
	{
		/* the command line's shortcut (issue 29) is not the library's: a caller's process
		 * is never a run's supervisor */
		ab_context *c = ab_context_new(NULL);

		TAP_OK(ab_context_set(c, "supervisor_inline", "1") == -ENOTSUP,
		       "libagentbox refuses \"supervisor_inline\" (-ENOTSUP)");
		TAP_OK(ab_context_set(c, "supervisor_inline", "0") == 0 &&
			       ab_context_set(c, "supervisor_inline", "yes") == -EINVAL,
		       "... takes \"0\" and refuses a value it does not know");
		ab_context_free(c);
	}
	/* under valgrind (tests/meson.build api-valgrind): the library's own code, specs and
	 * errors; valgrind cannot follow the processes a run starts (no clone3, no pidfds) */
	if (getenv("AB_TEST_API_NO_RUNS")) {
		ab_context_free(ab_context_new(NULL));
		return tap_done();
	}

	/* this process's own state */
	sigaction(SIGCHLD, &sa, NULL);
	signal(SIGPIPE, SIG_IGN);
	sigemptyset(&mask);
	sigaddset(&mask, SIGUSR1);
	sigprocmask(SIG_BLOCK, &mask, NULL);
	own = fork();
	if (own == 0) {
		pause();
		_exit(0);
	}
	setenv("AB_TEST_MARK", "kept", 1);
	(void) !getcwd(cwd_before, sizeof(cwd_before));
	namespaces(ns_before, sizeof(ns_before));
	ctx = ab_context_new(NULL);
	fds_before = count_fds();

	for (int i = 0; i < N; i++) {
		ab_error *e = NULL;

		specs[i] = spec(jobs[i]);
		runs[i] = specs[i] ? ab_run_start(ctx, specs[i], NULL, &e) : NULL;
		TAP_OK(runs[i] != NULL, "run %d started (%s)", i, e ? ab_error_message(e) : "ok");
		ab_error_free(e);
		if (!runs[i]) {
			done[i] = true;
			left--;
		}
	}
	/* one poll loop for all of them; cancel the fifth once it has been running a while */
	{
		int waited_ms = 0;
		bool cancelled = false;

		while (left > 0 && waited_ms < 60000) {
			struct pollfd p[N];
			int idx[N], n = 0;

			for (int i = 0; i < N; i++) {
				if (done[i])
					continue;
				p[n] = (struct pollfd){ .fd = ab_run_fd(runs[i]),
							.events = POLLIN };
				idx[n++] = i;
			}
			if (poll(p, (nfds_t) n, 100) < 0 && errno != EINTR)
				break;
			waited_ms += 100;
			if (!cancelled && waited_ms >= 2500 && !done[CANCEL]) {
				TAP_OK(ab_run_cancel(runs[CANCEL]) == 0, "cancel run %d mid-run",
				       CANCEL);
				cancelled = true;
			}
			for (int k = 0; k < n; k++) {
				ab_error *e = NULL;
				int i = idx[k];

				if (!p[k].revents)
					continue;
				TAP_OK(ab_run_wait(runs[i], &res[i], &e) == 0,
				       "run %d finished with a report (%s)", i,
				       e ? ab_error_message(e) : "ok");
				ab_error_free(e);
				done[i] = true;
				left--;
			}
		}
	}
	TAP_OK(left == 0, "every run finished within 60 s");

	TAP_STREQ(ab_result_status(res[0]), "exited", "python: exited");
	TAP_STREQ(ab_result_stdout(res[0], NULL), "42\n", "python: its arguments and output");
	TAP_STREQ(ab_result_stdout(res[1], NULL), "node 42\n", "node: its output");
	TAP_OK(ab_result_exit_code(res[2]) == 3 && ab_result_agentbox_exit(res[2]) == 3,
	       "the script's own exit code 3 (agentbox would exit 3)");
	TAP_OK(res[2] && strstr(ab_result_json(res[2]), "\"out.txt\""),
	       "the report lists the file it wrote");
	{
		const char *w = ab_result_warning(res[2], 0), *d;
		bool listed = true;

		TAP_OK(w && strstr(w, "more than limits.memory 100M") && strstr(w, "(fix: "),
		       "ab_result_warning: the tmpfs-over-memory warning, with its fix (%s)",
		       w ? w : "NULL");
		TAP_OK(!ab_result_warning(res[2], 1) && !ab_result_warning(res[0], 0),
		       "ab_result_warning: NULL past the end, and for a run without warnings");
		for (size_t i = 0; (d = ab_result_default_not_applied(res[0], i)); i++)
			listed = listed && strstr(ab_result_json(res[0]), d);
		TAP_OK(listed && !ab_result_warning(NULL, 0) &&
			       !ab_result_default_not_applied(NULL, 0),
		       "ab_result_default_not_applied: from the report; NULL for no result");
	}
	TAP_STREQ(ab_result_status(res[3]), "timeout", "the 1.5 s timeout ended the sleeper");
	TAP_OK(ab_result_agentbox_exit(res[3]) == 124, "timeout: agentbox exit 124");
	TAP_STREQ(ab_result_fix(res[3]),
		  "raise limits.timeout (now 1.5 s), or make the script faster",
		  "timeout: the fix names the spec's limits.timeout, not a flag");
	TAP_STREQ(ab_result_status(res[CANCEL]), "interrupted", "the cancelled run: interrupted");
	TAP_OK(ab_result_agentbox_exit(res[CANCEL]) == 130, "cancelled: agentbox exit 130");

	/* what the library did to this process: nothing */
	fds_after = count_fds();
	TAP_OK(fds_after == fds_before, "no fd leaked (%d before, %d after)", fds_before,
	       fds_after);
	namespaces(ns_after, sizeof(ns_after));
	TAP_STREQ(ns_after, ns_before, "no namespace changed");
	(void) !getcwd(cwd_after, sizeof(cwd_after));
	TAP_STREQ(cwd_after, cwd_before, "the cwd is unchanged");
	TAP_STREQ(getenv("AB_TEST_MARK"), "kept", "the environment is unchanged");
	sigaction(SIGCHLD, NULL, &now_sa);
	TAP_OK(now_sa.sa_handler == on_sigchld, "the SIGCHLD handler is still ours");
	sigprocmask(SIG_BLOCK, NULL, &now_mask);
	TAP_OK(sigismember(&now_mask, SIGUSR1) && !sigismember(&now_mask, SIGCHLD) &&
		       !sigismember(&now_mask, SIGTERM),
	       "the signal mask is unchanged");
	sigaction(SIGPIPE, NULL, &now_sa);
	TAP_OK(now_sa.sa_handler == SIG_IGN, "SIGPIPE is still ignored");
	TAP_OK(sigchld_seen == 0, "no SIGCHLD reached us from the %d supervisors", N);
	TAP_OK(waitpid(own, &own_status, WNOHANG) == 0 && kill(own, 0) == 0,
	       "our own child was not reaped by the library");
	TAP_OK(waitpid(-1, &own_status, WNOHANG) == 0, "waitpid(-1) sees no supervisor to reap");
	kill(own, SIGKILL);
	TAP_OK(waitpid(own, &own_status, 0) == own && WIFSIGNALED(own_status),
	       "our own child is ours to reap");

	/* issue 25: a stream of this process's as the script's stdin (spec stdin_fd) */
	{
		int p[2];
		char json[256];
		ab_error *e = NULL;
		ab_result *sr = NULL;
		ab_spec *ss;

		if (pipe(p) == 0) {
			(void) !write(p[1], "piped\n", 6);
			(void) close(p[1]);
			snprintf(json, sizeof(json),
				 "{\"code\":\"import sys; print(sys.stdin.read().upper(), "
				 "end='')\",\"stdin_fd\":%d,\"rm\":true}",
				 p[0]);
			ss = spec(json);
			TAP_OK(ss && ab_run(ctx, ss, &sr, &e) == 0, "stdin_fd: the run ran (%s)",
			       e ? ab_error_message(e) : "ok");
			TAP_STREQ(sr ? ab_result_stdout(sr, NULL) : NULL, "PIPED\n",
				  "stdin_fd: the script read the stream");
			ab_result_free(sr);
			ab_error_free(e);
			e = NULL;
			(void) close(p[0]);
			TAP_OK(ss && !ab_run_start(ctx, ss, NULL, &e) && e &&
				       ab_error_exit_status(e) == 2 && *ab_error_fix(e) &&
				       strstr(ab_error_message(e), "is not an open fd"),
			       "stdin_fd of a closed fd: a usage error with a fix (%s)",
			       e ? ab_error_message(e) : "");
			ab_error_free(e);
			ab_spec_free(ss);
		} else {
			TAP_OK(0, "pipe() for the stdin_fd test");
		}
	}

	for (int i = 0; i < N; i++) {
		ab_result_free(res[i]);
		ab_spec_free(specs[i]);
	}
	ab_context_free(ctx);
	return tap_done();
}
