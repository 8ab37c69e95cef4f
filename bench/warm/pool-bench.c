/* pool-bench: the library's warm slots (ab_pool_*) driven over stdin/stdout by
 * bench/warm/bench.cjs, so that their round trips are timed interleaved with the other
 * configurations. One line in, one line out:
 *
 *   add NAME LANG SLOTS PRE   a class: {"language": LANG, "code": "", "env": {"AB_BENCH": NAME}},
 *                             SLOTS slots, PRE the pre-imports (a comma list, or -)  -> ok
 *   ready                     wait until every class has its slots                   -> ok
 *   run NAME                  one trivial run of class NAME ("pass" / "0"), waited   -> ok WARM
 *   tput NAME N CONC [cold]   N trivial runs of NAME, at most CONC at once            -> ok WARM
 *                             SECONDS (cold: the same runs of no class, all cold)
 * SECONDS info                      ab_pool_info on one line                               -> ok
 * JSON
 *
 * A failure answers "err MESSAGE". Built by bench/warm/run against the build's libagentbox. */
#include <agentbox/agentbox.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define MAX_CONC 16

static ab_pool *pool;
static char names[8][32], langs[8][16];
static int n_classes;
static int cold_mode; /* tput ... cold */

static double
now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double) ts.tv_sec + (double) ts.tv_nsec / 1e9;
}

static ab_spec *
class_spec(const char *name, const char *lang, const char *code)
{
	char json[512];
	ab_error *e = NULL;
	ab_spec *s;

	snprintf(json, sizeof(json),
		 "{\"language\":\"%s\",\"code\":\"%s\",\"rm\":true,\"quiet\":true,"
		 "\"env\":{\"AB_BENCH\":\"%s\"}}",
		 lang, code, name);
	s = ab_spec_from_json(json, (size_t) -1, &e);
	if (!s)
		printf("err %s\n", ab_error_message(e));
	ab_error_free(e);
	return s;
}

static const char *
lang_of(const char *name)
{
	for (int i = 0; i < n_classes; i++)
		if (strcmp(names[i], name) == 0)
			return langs[i];
	return NULL;
}

static const char *
trivial(const char *lang)
{
	return strcmp(lang, "node") == 0 ? "0" : "pass";
}

/* starts one run of class name; NULL on error (printed) */
static ab_run_handle *
start(const char *name)
{
	const char *lang = lang_of(name);
	char other[64];
	ab_spec *s;

	/* cold: the same run but of no class (its env differs), so never in a slot */
	snprintf(other, sizeof(other), "%s-cold", name);
	s = lang ? class_spec(cold_mode ? other : name, lang, trivial(lang)) : NULL;
	ab_error *e = NULL;
	ab_run_handle *h = s ? ab_pool_run_start(pool, s, NULL, &e) : NULL;

	if (s && !h)
		printf("err %s\n", ab_error_message(e));
	else if (!lang)
		printf("err no class %s\n", name);
	ab_error_free(e);
	ab_spec_free(s);
	return h;
}

/* waits for h; 1 warm, 0 cold, -1 failed */
static int
finish(ab_run_handle *h)
{
	ab_result *r = NULL;
	ab_error *e = NULL;
	int warm = -1;

	if (ab_run_wait(h, &r, &e) == 0 && strcmp(ab_result_status(r), "exited") == 0)
		warm = strstr(ab_result_json(r), "\"warm\": true") != NULL;
	ab_result_free(r);
	ab_error_free(e);
	return warm;
}

static void
tput(const char *name, int n, int conc)
{
	ab_run_handle *run[MAX_CONC] = { 0 };
	int started = 0, done = 0, warm = 0, failed = 0;
	double t0 = now_s();

	if (conc < 1 || conc > MAX_CONC) {
		printf("err bad concurrency\n");
		return;
	}
	while (done < n) {
		struct pollfd pfd[MAX_CONC + 1];

		for (int i = 0; i < conc && started < n; i++)
			if (!run[i]) {
				run[i] = start(name);
				if (!run[i])
					return;
				started++;
			}
		for (int i = 0; i < conc; i++)
			pfd[i] = (struct pollfd){ .fd = run[i] ? ab_run_fd(run[i]) : -1,
						  .events = POLLIN };
		pfd[conc] = (struct pollfd){ .fd = ab_pool_fd(pool), .events = POLLIN };
		(void) poll(pfd, (nfds_t) conc + 1, ab_pool_tick(pool));
		for (int i = 0; i < conc; i++)
			if (run[i] && pfd[i].revents) {
				int w = finish(run[i]);

				run[i] = NULL;
				done++;
				warm += w == 1;
				failed += w < 0;
			}
		if (pfd[conc].revents)
			(void) ab_pool_tick(pool);
	}
	if (failed)
		printf("err %d runs failed\n", failed);
	else
		printf("ok %d %.4f\n", warm, now_s() - t0);
}

int
main(void)
{
	char line[4096];
	ab_error *e = NULL;

	setvbuf(stdout, NULL, _IOLBF, 0);
	pool = ab_pool_new(NULL, &e);
	if (!pool) {
		fprintf(stderr, "pool-bench: %s\n", ab_error_message(e));
		return 1;
	}
	while (fgets(line, sizeof(line), stdin)) {
		char a[64] = "", b[64] = "", c[64] = "", d[64] = "", f[1024] = "";
		int k = sscanf(line, "%63s %63s %63s %63s %1023s", a, b, c, d, f);

		if (k == 5 && strcmp(a, "add") == 0 && n_classes < 8) {
			ab_spec *s;
			char opts[1200], *q = opts;

			q += sprintf(q, "{\"preimport\":[");
			for (char *save = NULL,
				  *m = strcmp(f, "-") ? strtok_r(f, ",", &save) : NULL;
			     m; m = strtok_r(NULL, ",", &save))
				q += sprintf(q, "%s\"%s\"", q[-1] == '[' ? "" : ",", m);
			sprintf(q, "]}");
			snprintf(names[n_classes], sizeof(names[0]), "%s", b);
			snprintf(langs[n_classes], sizeof(langs[0]), "%s", c);
			s = class_spec(b, c, "");
			if (s && ab_pool_add(pool, s, (unsigned) atoi(d), opts, &e) == 0) {
				n_classes++;
				printf("ok\n");
			} else if (s) {
				printf("err %s\n", ab_error_message(e));
			}
			ab_spec_free(s);
		} else if (strcmp(a, "ready") == 0) {
			if (ab_pool_wait_ready(pool, 120000, &e) == 0)
				printf("ok\n");
			else
				printf("err %s\n", ab_error_message(e));
		} else if (strcmp(a, "run") == 0) {
			ab_run_handle *h = start(b);
			int w = h ? finish(h) : -1;

			if (h)
				printf(w < 0 ? "err the run failed\n" : "ok %d\n", w);
		} else if (strcmp(a, "start") == 0 && lang_of(b) &&
			   strcmp(lang_of(b), "python") == 0) {
			/* from the request to the script's first statement (CLOCK_REALTIME both) */
			ab_spec *s = class_spec(b, "python", "import time; print(time.time_ns())");
			struct timespec t0;
			ab_run_handle *h;
			ab_result *r = NULL;

			clock_gettime(CLOCK_REALTIME, &t0);
			h = s ? ab_pool_run_start(pool, s, NULL, &e) : NULL;
			if (h && ab_run_wait(h, &r, &e) == 0 && ab_result_stdout(r, NULL)) {
				long long at = atoll(ab_result_stdout(r, NULL));
				int warm = strstr(ab_result_json(r), "\"warm\": true") != NULL;

				printf("ok %d %.3f\n", warm,
				       (double) (at - (t0.tv_sec * 1000000000LL + t0.tv_nsec)) /
					       1e6);
			} else {
				printf("err %s\n", e ? ab_error_message(e) : "no run");
			}
			ab_result_free(r);
			ab_spec_free(s);
		} else if (strcmp(a, "tput") == 0) {
			cold_mode = k == 5 && strcmp(f, "cold") == 0;
			tput(b, atoi(c), atoi(d));
			cold_mode = 0;
		} else if (strcmp(a, "info") == 0) {
			char *t = ab_pool_info(pool);

			for (char *p = t; p && *p; p++)
				if (*p == '\n')
					*p = ' ';
			printf("ok %s\n", t ? t : "{}");
			free(t);
		} else {
			printf("err unknown command\n");
		}
		ab_error_free(e);
		e = NULL;
	}
	ab_pool_free(pool);
	return 0;
}
