/* test-pool.c: the library's warm slots (ab_pool_*, docs/api.md "Warm slots") from a program
 * with a life of its own, as test-api.c does for runs: real slots and runs. A class is kept
 * ready; its runs are warm, each slot is used once and replaced; runs of no class, or whose
 * slot declines, are cold; two warm runs at once; a warm run cancelled; an idle class lets its
 * slots go and refills on the next run; templates that cannot have slots are refused; and
 * a slot serves one run, and its state (a pre-imported module, /tmp) never reaches the next;
 * a ready slot that dies is replaced after a back-off; and after ab_pool_free no process, fd,
 * SIGCHLD or reaped child of ours is left behind. Linked against the shared library only. */
#include <agentbox/agentbox.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
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
	return n - 1;
}

/* processes whose command line starts with "agentbox-supervisor slot" */
static pid_t ppid_of(pid_t pid);

/* The slots ab_pool_free must end: in our process tree when it is called (a supervisor
 * under the library's intermediate). */
static pid_t ours[64];
static int n_ours;

static bool
descends_from_us(pid_t pid)
{
	for (int up = 0; up < 8 && pid > 1; up++) {
		pid = ppid_of(pid);
		if (pid == getpid())
			return true;
	}
	return false;
}

static bool
note_ours(pid_t pid)
{
	if (!descends_from_us(pid) || n_ours >= (int) (sizeof(ours) / sizeof(ours[0])))
		return false;
	ours[n_ours++] = pid;
	return true;
}

static bool
was_ours(pid_t pid)
{
	for (int i = 0; i < n_ours; i++)
		if (ours[i] == pid)
			return true;
	return descends_from_us(pid);
}

static int
count_slots(bool (*mine)(pid_t pid))
{
	DIR *d = opendir("/proc");
	struct dirent *de;
	int n = 0;

	if (!d)
		return -1;
	while ((de = readdir(d))) {
		char path[300], buf[64] = "";
		FILE *f;
		size_t k;

		if (de->d_name[0] < '0' || de->d_name[0] > '9')
			continue;
		snprintf(path, sizeof(path), "/proc/%s/cmdline", de->d_name);
		f = fopen(path, "re");
		if (!f)
			continue;
		k = fread(buf, 1, sizeof(buf) - 1, f);
		fclose(f);
		for (size_t i = 0; i < k; i++)
			if (buf[i] == '\0')
				buf[i] = ' ';
		if (strstr(buf, "agentbox-supervisor slot") != buf)
			continue;
		/* ours only: other tests on this machine may hold slots of their own */
		if (mine && !mine((pid_t) atoi(de->d_name)))
			continue;
		n++;
	}
	closedir(d);
	return n;
}

/* the parent pid of pid (from /proc/PID/stat), or -1 */
static pid_t
ppid_of(pid_t pid)
{
	char path[64], buf[512], *rp;
	FILE *f;
	size_t k;
	int ppid = -1;

	snprintf(path, sizeof(path), "/proc/%d/stat", (int) pid);
	f = fopen(path, "re");
	if (!f)
		return -1;
	k = fread(buf, 1, sizeof(buf) - 1, f);
	fclose(f);
	buf[k] = '\0';
	rp = strrchr(buf, ')');
	if (!rp || sscanf(rp + 2, "%*c %d", &ppid) != 1)
		return -1;
	return ppid;
}

/* A process under one of our slots' supervisors (our children) whose command line's
 * second word is /work/script.py and whose environment has AB_CLASS=2: the waiting
 * interpreter of a slot of the second class. 0 when there is none. */
static pid_t
slot_interpreter(void)
{
	DIR *d = opendir("/proc");
	struct dirent *de;
	pid_t found = 0;

	if (!d)
		return 0;
	while (!found && (de = readdir(d))) {
		char path[300], buf[256] = "", env[8192];
		size_t k;
		FILE *f;
		pid_t pid = (pid_t) atoi(de->d_name);

		if (pid <= 0)
			continue;
		snprintf(path, sizeof(path), "/proc/%s/cmdline", de->d_name);
		f = fopen(path, "re");
		if (!f)
			continue;
		k = fread(buf, 1, sizeof(buf) - 1, f);
		fclose(f);
		buf[k] = '\0';
		if (k == 0 || strlen(buf) + 1 >= k ||
		    strcmp(buf + strlen(buf) + 1, "/work/script.py"))
			continue;
		/* of the class whose environment has AB_CLASS=2 */
		snprintf(path, sizeof(path), "/proc/%s/environ", de->d_name);
		f = fopen(path, "re");
		if (!f)
			continue;
		k = fread(env, 1, sizeof(env) - 1, f);
		fclose(f);
		env[k] = '\0';
		if (!memmem(env, k, "AB_CLASS=2", 11))
			continue;
		/* ours: one of its ancestors is a child of this process */
		for (pid_t a = pid; a > 1 && !found; a = ppid_of(a))
			if (ppid_of(a) == getpid())
				found = pid;
	}
	closedir(d);
	return found;
}

static ab_spec *
spec(const char *json)
{
	ab_error *e = NULL;
	ab_spec *s = ab_spec_from_json(json, (size_t) -1, &e);

	if (!s)
		printf("# spec refused: %s\n", ab_error_message(e));
	ab_error_free(e);
	return s;
}

/* runs s from the pool and waits; the report's text (malloc'd) or NULL */
static char *
run(ab_pool *p, const char *json, ab_result **ret)
{
	ab_spec *s = spec(json);
	ab_error *e = NULL;
	ab_run_handle *h = s ? ab_pool_run_start(p, s, NULL, &e) : NULL;
	ab_result *r = NULL;
	char *text = NULL;

	if (h && ab_run_wait(h, &r, &e) == 0)
		text = strdup(ab_result_json(r));
	else
		printf("# run failed: %s\n", e ? ab_error_message(e) : "?");
	ab_error_free(e);
	ab_spec_free(s);
	if (ret)
		*ret = r;
	else
		ab_result_free(r);
	return text;
}

static bool
is_warm(const char *report)
{
	return report && strstr(report, "\"warm\": true");
}

/* the integer after "key": in a JSON text (0 when absent) */
static long
num(const char *text, const char *key)
{
	char pat[128];
	const char *p;

	snprintf(pat, sizeof(pat), "\"%s\": ", key);
	p = text ? strstr(text, pat) : NULL;
	return p ? strtol(p + strlen(pat), NULL, 10) : 0;
}

static void
test_refusals(ab_pool *p)
{
	static const char *const bad[] = {
		"{\"language\":\"python\",\"script\":\"/etc/hostname\"}",
		"{\"code\":\"print(1)\"}",
		"{\"language\":\"python\",\"code\":\"x\",\"stdin_data\":\"in\"}",
		"{\"language\":\"python\",\"code\":\"x\",\"limits\":{\"cpu-time\":\"5s\"}}",
		"{\"language\":\"python\",\"code\":\"x\",\"limits\":{\"nofile\":512}}",
	};

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		ab_spec *s = spec(bad[i]);
		ab_error *e = NULL;

		TAP_OK(s && ab_pool_add(p, s, 1, NULL, &e) == -EINVAL && e &&
			       ab_error_exit_status(e) == 2,
		       "no slots for %s (%s)", bad[i], e ? ab_error_message(e) : "accepted");
		ab_error_free(e);
		ab_spec_free(s);
	}
	{
		ab_spec *s = spec("{\"language\":\"python\",\"code\":\"\"}");
		ab_error *e = NULL;

		TAP_OK(ab_pool_add(p, s, 1, "{\"preimport\":[\"os; rm\"]}", &e) == -EINVAL,
		       "a pre-import that is not a module name is refused (%s)",
		       e ? ab_error_message(e) : "accepted");
		ab_error_free(e);
		e = NULL;
		TAP_OK(ab_pool_add(p, s, 1, "{\"slots\":2}", &e) == -EINVAL,
		       "an unknown pool option is refused");
		ab_error_free(e);
		ab_spec_free(s);
	}
}

int
main(void)
{
	const char *py = "{\"language\":\"python\",\"code\":\"\",\"rm\":true}";
	struct sigaction sa = { .sa_handler = on_sigchld };
	ab_context *ctx;
	ab_pool *p;
	ab_spec *tmpl;
	ab_error *e = NULL;
	char *r1, *r2, *info;
	ab_result *res = NULL;
	int fds_before, own_status;
	pid_t own;

	sigaction(SIGCHLD, &sa, NULL);
	signal(SIGPIPE, SIG_IGN);
	own = fork();
	if (own == 0) {
		pause();
		_exit(0);
	}
	ctx = ab_context_new(NULL);
	fds_before = count_fds();
	p = ab_pool_new(ctx, &e);
	TAP_OK(p != NULL && ab_pool_fd(p) >= 0, "a pool, with an fd to poll");
	test_refusals(p);

	/* a Python class with two slots, idle after 1.5 s without a run */
	tmpl = spec(py);
	TAP_OK(ab_pool_add(p, tmpl, 2, "{\"idle_ms\":1500}", &e) == 0, "a class of two slots (%s)",
	       e ? ab_error_message(e) : "ok");
	TAP_OK(ab_pool_add(p, tmpl, 1, NULL, NULL) == -EEXIST, "the same class twice: -EEXIST");
	TAP_OK(ab_pool_wait_ready(p, 60000, &e) == 0, "both slots ready (%s)",
	       e ? ab_error_message(e) : "ok");
	info = ab_pool_info(p);
	TAP_OK(num(info, "ready") == 2 && num(info, "memory_bytes") > (1 << 20),
	       "the pool's info: 2 ready, holding %ld bytes", num(info, "memory_bytes"));
	free(info);

	r1 = run(p,
		 "{\"language\":\"python\",\"code\":\"import sys; print(sys.argv[1:])\","
		 "\"args\":[\"x\"],\"rm\":true,\"limits\":{\"timeout\":\"9s\"}}",
		 &res);
	TAP_OK(is_warm(r1) && strcmp(ab_result_stdout(res, NULL), "['x']\n") == 0,
	       "a run of the class with its own args and timeout is warm");
	TAP_OK(r1 && strstr(r1, "\"enforced\": 9000"), "... and its own timeout is in force");
	ab_result_free(res);
	free(r1);
	r1 = run(p, "{\"language\":\"node\",\"code\":\"console.log(1)\",\"rm\":true}", NULL);
	TAP_OK(r1 && !is_warm(r1) && strstr(r1, "\"status\": \"exited\""),
	       "a run of no class is cold");
	free(r1);
	r1 = run(p,
		 "{\"language\":\"python\",\"code\":\"print(1)\",\"rm\":true,"
		 "\"limits\":{\"memory\":\"300M\"}}",
		 NULL);
	TAP_OK(r1 && !is_warm(r1), "a run whose memory limit differs from the class's is cold");
	free(r1);

	/* two at once: both slots */
	TAP_OK(ab_pool_wait_ready(p, 60000, &e) == 0, "the used slot was replaced");
	{
		/* each leaves a file in its /tmp and then looks: a shared slot would show both */
		ab_spec *a = spec("{\"language\":\"python\",\"code\":\"import os, time; "
				  "open('/tmp/a', 'w').close(); time.sleep(1); "
				  "print(sorted(os.listdir('/tmp')))\",\"rm\":true}");
		ab_spec *b = spec("{\"language\":\"python\",\"code\":\"import os, time; "
				  "open('/tmp/b', 'w').close(); time.sleep(1); "
				  "print(sorted(os.listdir('/tmp')))\",\"rm\":true}");
		ab_run_handle *ha = ab_pool_run_start(p, a, NULL, NULL);
		ab_run_handle *hb = ab_pool_run_start(p, b, NULL, NULL);
		ab_result *ra = NULL, *rb = NULL;

		TAP_OK(ha && hb && ab_run_wait(ha, &ra, NULL) == 0 &&
			       ab_run_wait(hb, &rb, NULL) == 0,
		       "two runs at once");
		TAP_OK(ra && rb && is_warm(ab_result_json(ra)) && is_warm(ab_result_json(rb)) &&
			       strcmp(ab_result_stdout(ra, NULL), "['a']\n") == 0 &&
			       strcmp(ab_result_stdout(rb, NULL), "['b']\n") == 0,
		       "... each in a slot of its own: neither sees the other's /tmp");
		ab_result_free(ra);
		ab_result_free(rb);
		ab_spec_free(a);
		ab_spec_free(b);
	}

	/* a warm run cancelled */
	TAP_OK(ab_pool_wait_ready(p, 60000, &e) == 0, "both slots replaced");
	{
		ab_spec *s = spec("{\"language\":\"python\",\"code\":\"import time; print('up', "
				  "flush=True); time.sleep(30)\",\"rm\":true}");
		int out[2] = { -1, -1 };
		ab_run_handle *h;
		char got[64] = "";
		size_t have = 0;

		/* cancelled once the script has printed 'up' (its relayed stdout): the hand-over
		 * is over then, however loaded the machine */
		if (pipe2(out, O_CLOEXEC) < 0)
			abort();
		h = ab_pool_run_start(p, s, &(ab_io){ out[1], -1 }, NULL);
		(void) close(out[1]);
		while (h && have < sizeof(got) - 1 && !strstr(got, "up")) {
			struct pollfd pin = { .fd = out[0], .events = POLLIN };
			ssize_t n;

			if (poll(&pin, 1, 60000) <= 0)
				break;
			n = read(out[0], got + have, sizeof(got) - 1 - have);
			if (n <= 0)
				break;
			have += (size_t) n;
			got[have] = '\0';
		}
		TAP_OK(h && strstr(got, "up") && ab_run_cancel(h) == 0,
		       "a warm run is cancelled while it runs");
		TAP_OK(ab_run_wait(h, &res, NULL) == 0 &&
			       strcmp(ab_result_status(res), "interrupted") == 0 &&
			       is_warm(ab_result_json(res)),
		       "... and reports interrupted");
		ab_result_free(res);
		ab_spec_free(s);
		(void) close(out[0]);
	}

	/* idle: after 1.5 s without a run the class lets its slots go; a run refills it */
	TAP_OK(ab_pool_wait_ready(p, 60000, &e) == 0, "slots ready again");
	{
		struct timespec t = { .tv_sec = 2, .tv_nsec = 0 };
		int next;

		nanosleep(&t, NULL);
		next = ab_pool_tick(p);
		info = ab_pool_info(p);
		TAP_OK(strstr(info, "\"idle\": true") && num(info, "ready") == 0 &&
			       num(info, "starting") == 0,
		       "an idle class holds no slot (next tick in %d ms)", next);
		free(info);
	}
	r1 = run(p, py, NULL);
	TAP_OK(r1 && !is_warm(r1), "the first run after idling is cold");
	TAP_OK(ab_pool_wait_ready(p, 60000, &e) == 0, "... and the class fills again");
	r2 = run(p, py, NULL);
	TAP_OK(is_warm(r2), "the next run is warm");
	free(r1);
	free(r2);
	info = ab_pool_info(p);
	TAP_OK(num(info, "warm_runs") == 5 && num(info, "cold_runs") == 1 &&
		       num(info, "other_runs") == 2,
	       "the pool counted 5 warm runs, 1 cold run of the class and 2 of none");
	free(info);

	/* Single use (docs/warm.md "Isolation"): a class that pre-imports json, one slot. A run
	 * marks the pre-imported module, its /tmp and its interpreter; the next warm run of the
	 * class sees none of it, and its interpreter is a younger process. */
	{
		ab_spec *t2 = spec("{\"language\":\"python\",\"code\":\"\",\"rm\":true,"
				   "\"env\":{\"AB_CLASS\":\"2\"}}");
		const char *mark =
			"{\"language\":\"python\",\"rm\":true,\"env\":{\"AB_CLASS\":\"2\"},"
			"\"code\":\"import json, os, sys\\n"
			"print(hasattr(json, 'MARK'), os.path.exists('/tmp/mark'), "
			"open('/proc/self/stat').read().rsplit(')', 1)[1].split()[19])\\n"
			"json.MARK = 1; sys.modules['json'].MARK = 1\\n"
			"open('/tmp/mark', 'w').close()\"}";
		char *o1 = NULL, *o2 = NULL;
		long long st1 = 0, st2 = 0;
		pid_t victim;

		TAP_OK(ab_pool_add(p, t2, 1, "{\"preimport\":[\"json\"]}", &e) == 0 &&
			       ab_pool_wait_ready(p, 60000, &e) == 0,
		       "a class pre-importing json, one slot, ready");
		r1 = run(p, mark, &res);
		o1 = res ? strdup(ab_result_stdout(res, NULL)) : NULL;
		ab_result_free(res);
		res = NULL;
		TAP_OK(ab_pool_wait_ready(p, 60000, &e) == 0, "its slot was replaced");
		r2 = run(p, mark, &res);
		o2 = res ? strdup(ab_result_stdout(res, NULL)) : NULL;
		ab_result_free(res);
		res = NULL;
		TAP_OK(is_warm(r1) && is_warm(r2), "both runs warm");
		for (char **o = &o1; o; o = o == &o1 ? &o2 : NULL)
			if (*o && strchr(*o, '\n'))
				*strchr(*o, '\n') = '\0'; /* one line of TAP */
		TAP_OK(o1 && o2 && strncmp(o1, "False False ", 12) == 0 &&
			       strncmp(o2, "False False ", 12) == 0,
		       "the second run sees neither the first's mark on the pre-imported module "
		       "nor its /tmp (%s / %s)",
		       o1 ? o1 : "-", o2 ? o2 : "-");
		if (o1 && o2 && strlen(o1) > 12 && strlen(o2) > 12) {
			st1 = atoll(o1 + 12);
			st2 = atoll(o2 + 12);
		}
		TAP_OK(st1 > 0 && st2 > st1,
		       "the second run's interpreter is another process, started after the first "
		       "run's (start times %lld, %lld ticks)",
		       st1, st2);
		TAP_OK(r1 && r2 && strstr(r1, "\"run_id\"") &&
			       strcmp(strstr(r1, "\"run_id\""), strstr(r2, "\"run_id\"")) != 0,
		       "... and another run, with its own id");
		free(o1);
		free(o2);
		free(r1);
		free(r2);

		/* a used slot's replacement waits for its run, 250 ms at most: it is not built
		 * on the cores the run is using */
		TAP_OK(ab_pool_wait_ready(p, 60000, &e) == 0, "ready for a longer run");
		{
			ab_spec *sl =
				spec("{\"language\":\"python\",\"rm\":true,\"env\":{\"AB_CLASS\":"
				     "\"2\"},\"code\":\"import time; time.sleep(1)\"}");
			ab_run_handle *h = sl ? ab_pool_run_start(p, sl, NULL, NULL) : NULL;
			struct timespec t = { .tv_sec = 0, .tv_nsec = 400 * 1000000L };
			long before, after;

			info = ab_pool_info(p);
			before = num(info, "starting") + num(info, "ready");
			free(info);
			nanosleep(&t, NULL);
			(void) ab_pool_tick(p);
			info = ab_pool_info(p);
			after = num(info, "starting") + num(info, "ready");
			free(info);
			TAP_OK(h && before == 0 && after == 1,
			       "while a warm run goes on, its slot's replacement waits (%ld "
			       "slots), "
			       "then starts at 250 ms (%ld)",
			       before, after);
			TAP_OK(h && ab_run_wait(h, &res, NULL) == 0 && is_warm(ab_result_json(res)),
			       "... and the run was warm");
			ab_result_free(res);
			res = NULL;
			ab_spec_free(sl);
		}

		/* a ready slot that dies before any run takes it is replaced, after a back-off */
		TAP_OK(ab_pool_wait_ready(p, 60000, &e) == 0, "the class is ready again");
		victim = slot_interpreter();
		TAP_OK(victim > 0 && kill(victim, SIGKILL) == 0,
		       "a ready slot's waiting interpreter is killed (pid %d)", (int) victim);
		{
			long lost = 0, retry = 0, starting = 1;

			for (int i = 0; i < 200 && lost == 0; i++) {
				struct pollfd pfd = { .fd = ab_pool_fd(p), .events = POLLIN };

				(void) poll(&pfd, 1, 50);
				(void) ab_pool_tick(p);
				info = ab_pool_info(p);
				lost = num(info, "slots_lost");
				retry = num(info, "retry_in_ms");
				starting = num(info, "starting") + num(info, "ready");
				free(info);
			}
			TAP_OK(lost == 1 && retry > 0 && starting == 0,
			       "the pool counts it lost and waits %ld ms before the replacement",
			       retry);
		}
		TAP_OK(ab_pool_wait_ready(p, 60000, &e) == 0, "... which then becomes ready (%s)",
		       e ? ab_error_message(e) : "ok");
		r1 = run(p, mark, NULL);
		TAP_OK(is_warm(r1), "and takes the next run");
		free(r1);
		ab_spec_free(t2);
	}

	/* a pool builds no more sandboxes at once than its caller has CPUs, two at least (issue
	 * 29): made with one CPU, two runs of its going on hold a new class's slot back until they
	 * ended. Then a caller that runs one thing after another and never ticks still gets its
	 * used slot replaced, beside its next run. */
	{
		cpu_set_t all, one;
		ab_spec *t3 = spec("{\"language\":\"python\",\"code\":\"\",\"rm\":true,"
				   "\"env\":{\"AB_CLASS\":\"3\"}}");
		ab_spec *nap = spec("{\"language\":\"python\",\"rm\":true,"
				    "\"code\":\"import time; time.sleep(0.15)\"}");
		const char *c3 = "{\"language\":\"python\",\"code\":\"pass\",\"rm\":true,"
				 "\"env\":{\"AB_CLASS\":\"3\"}}";
		ab_pool *p2 = NULL;
		ab_run_handle *h = NULL, *h2 = NULL;
		long during = -1;
		int cpu = 0;

		CPU_ZERO(&one);
		if (sched_getaffinity(0, sizeof(all), &all) == 0) {
			while (cpu < CPU_SETSIZE - 1 && !CPU_ISSET(cpu, &all))
				cpu++;
			CPU_SET(cpu, &one);
			if (sched_setaffinity(0, sizeof(one), &one) == 0) {
				p2 = ab_pool_new(ctx, &e);
				(void) sched_setaffinity(0, sizeof(all), &all);
			}
		}
		h = p2 && nap ? ab_pool_run_start(p2, nap, NULL, &e) : NULL;
		h2 = p2 && nap ? ab_pool_run_start(p2, nap, NULL, &e) : NULL;
		if (h && h2 && t3 && ab_pool_add(p2, t3, 1, NULL, &e) == 0) {
			info = ab_pool_info(p2);
			during = num(info, "starting") + num(info, "ready");
			free(info);
		}
		TAP_OK(h && h2 && during == 0,
		       "with one CPU, two runs going on hold a new class's slot back (%ld slots)",
		       during);
		for (int i = 0; i < 2; i++) {
			TAP_OK(h && h2 && ab_run_wait(i ? h2 : h, &res, NULL) == 0 &&
				       strcmp(ab_result_status(res), "exited") == 0,
			       "... run %d ends", i + 1);
			ab_result_free(res);
			res = NULL;
		}
		TAP_OK(p2 && ab_pool_wait_ready(p2, 60000, &e) == 0,
		       "... and then the slot is built (%s)", e ? ab_error_message(e) : "ok");
		if (p2) {
			struct timespec t = { .tv_sec = 2, .tv_nsec = 0 };
			char *w1 = run(p2, c3, NULL), *w2 = run(p2, c3, NULL), *w3;

			nanosleep(&t, NULL); /* no tick: the replacement is made meanwhile */
			w3 = run(p2, c3, NULL);
			TAP_OK(is_warm(w1) && w2 && !is_warm(w2) && is_warm(w3),
			       "runs one after another, never a tick: warm, cold (its slot's "
			       "replacement built beside it), warm");
			free(w1);
			free(w2);
			free(w3);
		}
		ab_pool_free(p2);
		ab_spec_free(t3);
		ab_spec_free(nap);
	}

	/* the pool full again, so there are slots for ab_pool_free to end */
	(void) ab_pool_wait_ready(p, 60000, NULL);
	n_ours = 0;
	(void) count_slots(note_ours);
	ab_pool_free(p);
	ab_spec_free(tmpl);
	TAP_OK(n_ours > 0 && count_slots(was_ours) == 0,
	       "ab_pool_free leaves no slot running (%d of ours before)", n_ours);
	TAP_OK(count_fds() == fds_before, "no fd leaked (%d before, %d after)", fds_before,
	       count_fds());
	TAP_OK(sigchld_seen == 0, "no SIGCHLD reached us from the slots");
	TAP_OK(waitpid(own, &own_status, WNOHANG) == 0 && kill(own, 0) == 0,
	       "our own child was not reaped by the pool");
	kill(own, SIGKILL);
	(void) waitpid(own, &own_status, 0);
	ab_error_free(e);
	ab_context_free(ctx);
	return tap_done();
}
