/* Unit tests for cli.c: option parsing into struct ab_run_opts, and its errors. */
#include <string.h>

#include "src/spec/options.h"
#include "src/spec/spec.h"
#include "src/spec/words.h"
#include "src/util/macro.h"
#include "tests/tap.h"

#define ARGV(...)                        \
	(char *[])                       \
	{                                \
		"run", __VA_ARGS__, NULL \
	}

static int
parse(char **argv, struct ab_run_opts *o, struct ab_err *err)
{
	int argc = 0;

	while (argv[argc])
		argc++;
	run_opts_init(o);
	memset(err, 0, sizeof(*err));
	return cli_parse_run(argc, argv, o, err);
}

int
main(void)
{
	struct ab_run_opts o;
	struct ab_err err;
	int r;

	r = parse(ARGV("s.py"), &o, &err);
	TAP_OK(r == 0, "plain script parses");
	TAP_STREQ(o.script, "s.py", "script recorded");
	TAP_OK(o.limits[AB_LIM_TIMEOUT_MS].value == 60000 && !o.limits[AB_LIM_TIMEOUT_MS].set,
	       "default timeout 60s, not explicit");
	TAP_OK(o.limits[AB_LIM_MEMORY].value == 1ULL << 30, "default memory 1G");
	TAP_OK(o.limits[AB_LIM_PIDS].value == 256, "default pids 256");
	TAP_OK(o.limits[AB_LIM_DISK].value == 512ULL << 20, "default disk 512M");
	TAP_OK(o.limits[AB_LIM_INODES].value == 16384, "default inodes 16384");
	TAP_OK(o.limits[AB_LIM_FILE_SIZE].value == 256ULL << 20, "default file size 256M");
	TAP_OK(o.limits[AB_LIM_OUTPUT].value == 1ULL << 20, "default output 1M");
	run_opts_done(&o);

	r = parse(ARGV("--timeout", "90s", "--memory", "512M", "--cpus", "1.5", "--pids", "64",
		       "--report", "r.json", "--input", "a.csv", "--input", "b", "--env",
		       "FOO=bar=baz", "--lang", "node", "s", "--", "x", "--y"),
		  &o, &err);
	TAP_OK(r == 0, "full command line parses");
	TAP_OK(o.limits[AB_LIM_TIMEOUT_MS].value == 90000 && o.limits[AB_LIM_TIMEOUT_MS].set,
	       "--timeout 90s explicit");
	TAP_OK(o.limits[AB_LIM_MEMORY].value == 512ULL << 20, "--memory 512M");
	TAP_OK(o.limits[AB_LIM_CPUS_MILLI].value == 1500, "--cpus 1.5");
	TAP_OK(o.limits[AB_LIM_PIDS].value == 64 && o.limits[AB_LIM_PIDS].set, "--pids 64");
	TAP_OK(o.inputs.n == 2, "two inputs");
	TAP_OK(o.env.n == 1 && strcmp(o.env.v[0], "FOO=bar=baz") == 0, "--env kept whole");
	TAP_OK(o.lang == AB_LANG_NODE, "--lang node");
	TAP_OK(o.script_args.n == 2 && strcmp(o.script_args.v[0], "x") == 0 &&
		       strcmp(o.script_args.v[1], "--y") == 0,
	       "script args after -- pass through, option-looking ones included");
	run_opts_done(&o);

	r = parse(ARGV("s.py", "a", "--timeout", "5"), &o, &err);
	TAP_OK(r == 0 && o.script_args.n == 3 && !o.limits[AB_LIM_TIMEOUT_MS].set,
	       "options after SCRIPT belong to the script");
	run_opts_done(&o);

	r = parse(ARGV("--memory", "lots", "s.py"), &o, &err);
	TAP_OK(r < 0 && err.exit == AB_EXIT_USAGE, "bad --memory is a usage error");
	TAP_OK(strstr(err.msg, "--memory") && strstr(err.msg, "lots"),
	       "message names option+value");
	run_opts_done(&o);

	r = parse(ARGV("--timeout", "0", "s.py"), &o, &err);
	TAP_OK(r < 0 && err.exit == AB_EXIT_USAGE, "zero timeout rejected");
	run_opts_done(&o);

	r = parse(ARGV("--lang", "ruby", "s.rb"), &o, &err);
	TAP_OK(r < 0 && strstr(err.msg, "ruby"), "unknown --lang rejected");
	run_opts_done(&o);

	r = parse(ARGV("--bogus", "s.py"), &o, &err);
	TAP_OK(r < 0 && strstr(err.msg, "--bogus"), "unknown option named");
	run_opts_done(&o);

	r = parse(ARGV("--bind=/:/x", "s.py"), &o, &err);
	TAP_OK(r < 0 && err.exit == AB_EXIT_USAGE, "an injected bwrap option is not accepted");
	run_opts_done(&o);

	r = parse(ARGV("--", "--bind=x.py"), &o, &err);
	TAP_OK(r == 0 && strcmp(o.script, "--bind=x.py") == 0,
	       "after --, an option-looking name is the script");
	run_opts_done(&o);

	r = parse(ARGV("--env", "NOEQUALS", "s.py"), &o, &err);
	TAP_OK(r < 0, "--env without = rejected");
	run_opts_done(&o);

	r = parse(ARGV("--env", "1BAD=x", "s.py"), &o, &err);
	TAP_OK(r < 0, "--env with a bad name rejected");
	run_opts_done(&o);

	r = parse(ARGV("--timeout"), &o, &err);
	TAP_OK(r < 0 && strstr(err.msg, "needs a value"), "missing option value");
	run_opts_done(&o);

	{
		char *argv[] = { "run", NULL };

		r = parse(argv, &o, &err);
		TAP_OK(r < 0 && strstr(err.msg, "no SCRIPT"), "missing script");
		run_opts_done(&o);
	}

	r = parse(ARGV("--workspace", "d", "--input", "x", "s.py"), &o, &err);
	TAP_OK(r < 0, "--workspace with --input rejected");
	run_opts_done(&o);

	r = parse(ARGV("--without", "landlock", "--without", "seccomp", "s.py"), &o, &err);
	TAP_OK(r == 0 && o.without[AB_PROT_LANDLOCK] && o.without[AB_PROT_SECCOMP] &&
		       !o.without[AB_PROT_CGROUP],
	       "--without by name");
	run_opts_done(&o);

	r = parse(ARGV("--without", "everything", "s.py"), &o, &err);
	TAP_OK(r < 0, "--without unknown name rejected");
	run_opts_done(&o);

	r = parse(ARGV("--seccomp-policy", "strict", "s.py"), &o, &err);
	TAP_OK(r == 0 && o.seccomp_policy == AB_SECCOMP_STRICT, "--seccomp-policy strict");
	TAP_OK(!o.net_strict, "the loopback is the script's by default");
	run_opts_done(&o);

	r = parse(ARGV("--net-strict", "s.py"), &o, &err);
	TAP_OK(r == 0 && o.net_strict, "--net-strict");
	TAP_OK(strstr(cli_run_help(), "--net-strict") != NULL, "help lists --net-strict");
	run_opts_done(&o);

	r = parse(ARGV("s.py"), &o, &err);
	/* issue 25: a chatty script runs on by default; kill stays an option */
	TAP_OK(r == 0 && o.inline_output == 64 * 1024 && !o.inline_output_set && o.output_truncate,
	       "default --inline-output 64K, --on-output-limit truncate");
	TAP_OK(strstr(cli_run_help(), "(truncate, the\n") != NULL,
	       "--help says truncate is the default");
	run_opts_done(&o);
	r = parse(ARGV("--inline-output", "1K", "--on-output-limit", "truncate", "s.py"), &o, &err);
	TAP_OK(r == 0 && o.inline_output == 1024 && o.inline_output_set && o.output_truncate,
	       "--inline-output 1K --on-output-limit truncate");
	run_opts_done(&o);
	r = parse(ARGV("--inline-output", "0", "--on-output-limit", "kill", "s.py"), &o, &err);
	TAP_OK(r == 0 && o.inline_output == 0 && !o.output_truncate,
	       "--inline-output 0 (nothing inline) and --on-output-limit kill");
	run_opts_done(&o);
	r = parse(ARGV("--inline-output", "65M", "s.py"), &o, &err);
	TAP_OK(r < 0 && err.exit == 2 && strstr(err.fix, "from 0 to 64M"),
	       "--inline-output 65M: usage error whose fix gives the range");
	run_opts_done(&o);
	r = parse(ARGV("--on-output-limit", "stop", "s.py"), &o, &err);
	TAP_OK(r < 0 && err.exit == 2 && strstr(err.msg, "expected kill or truncate"),
	       "--on-output-limit stop: usage error naming the choices");
	run_opts_done(&o);

	/* issue 25: every usage error says how to fix it */
	{
		char *const *bad[] = {
			ARGV("--memory", "lots", "s.py"),
			ARGV("--memory", "5", "s.py"),
			ARGV("--timeout", "0", "s.py"),
			ARGV("--lang", "ruby", "s.rb"),
			ARGV("--bogus", "s.py"),
			ARGV("--env", "NOEQUALS", "s.py"),
			ARGV("--env", "1BAD=x", "s.py"),
			ARGV("--timeout"),
			ARGV("--without", "all", "s.py"),
			ARGV("--inline-output", "65M", "s.py"),
			ARGV("--on-output-limit", "stop", "s.py"),
			ARGV("--summary=loud", "s.py"),
			ARGV("--report-fd", "1", "s.py"),
			ARGV("--seccomp-policy", "lax", "s.py"),
			ARGV("--workspace", "d", "--input", "x", "s.py"),
			ARGV("--spec", "-", "s.py"),
			ARGV(""),
		};

		for (size_t i = 0; i < ARRAY_SIZE(bad); i++) {
			r = parse((char **) bad[i], &o, &err);
			TAP_OK(r < 0 && err.exit == AB_EXIT_USAGE && err.fix[0],
			       "usage error %zu (%s) has a fix: '%s'", i, err.msg, err.fix);
			run_opts_done(&o);
		}
		r = parse(ARGV("--memory", "5", "s.py"), &o, &err);
		TAP_OK(r < 0 && strstr(err.fix, "a bare number is bytes") &&
			       strstr(err.fix, "512M"),
		       "--memory 5: the fix says a bare number is bytes and shows a size");
		run_opts_done(&o);
		r = parse(ARGV("s.py"), &o, &err);
		TAP_OK(r == 0 && o.flag_words, "flags parsed: messages name the flags");
		run_opts_done(&o);
	}

	/* issue 25: a spec's caller reads the spec's keys, never a flag it did not use */
	{
		static const struct {
			const char *in, *out;
		} w[] = {
			{ "raise --timeout (now 1.0 s)", "raise limits.timeout (now 1.0 s)" },
			{ "raise --memory above 768M, or lower --disk or --tmp-size",
			  "raise limits.memory above 768M, or lower limits.disk or "
			  "limits.tmp-size" },
			{ "opted out with --without seccomp",
			  "opted out with \"without\": [\"seccomp\"]" },
			{ "drop --rm, or raise --inline-output",
			  "drop \"rm\": true, or raise inline_output" },
			{ "pass --lang python or --lang node",
			  "pass \"language\": \"python\" or \"language\": \"node\"" },
			{ "copy in with --input DIR --collect OUT",
			  "copy in with inputs DIR collect OUT" },
			{ "--node-modules and --node and --env-dir and --env",
			  "node_modules and node and env_dir and env" },
			{ "the environment (prepare --disk 3G) and --disk",
			  "the environment (prepare --disk 3G) and limits.disk" },
			{ "no flag here -- at all, --bogus stays, a--memory too",
			  "no flag here -- at all, --bogus stays, a--memory too" },
			{ "--cpu-time and --cpus", "limits.cpu-time and limits.cpus" },
		};

		for (size_t i = 0; i < ARRAY_SIZE(w); i++) {
			char *t = words_for_spec(w[i].in);

			TAP_STREQ(t, w[i].out, "words_for_spec: %s", w[i].in);
			free(t);
		}
		TAP_OK(words_for_spec(NULL) == NULL, "words_for_spec(NULL) is NULL");
	}
	{
		static const char *const specs[] = {
			"{\"code\": \"1\", \"limits\": {\"memory\": \"5\"}}",
			"{\"code\": \"1\", \"limits\": {\"timeout\": \"soon\"}}",
			"{\"code\": \"1\", \"language\": \"ruby\"}",
			"{\"code\": \"1\", \"without\": [\"all\"]}",
			"{\"code\": \"1\", \"inputs\": [\"a\"], \"workspace\": \"/w\"}",
			"{\"code\": \"1\", \"colour\": true}",
			"{\"code\": 1}",
			"{\"code\": \"1\", \"script\": \"s.py\"}",
			"[1]",
			"{\"code\": \"1\", \"limits\": {\"ram\": 1}}",
			"{\"code\": \"1\", \"on_output_limit\": \"stop\"}",
		};

		for (size_t i = 0; i < ARRAY_SIZE(specs); i++) {
			run_opts_init(&o);
			memset(&err, 0, sizeof(err));
			r = spec_parse_text(specs[i], (size_t) -1, &o, &err);
			TAP_OK(r < 0 && err.exit == AB_EXIT_USAGE && err.fix[0] &&
				       !strstr(err.msg, "--") && !strstr(err.fix, "--"),
			       "spec %s: a usage error in the spec's words, with a fix: %s (fix: "
			       "%s)",
			       specs[i], err.msg, err.fix);
			TAP_OK(!o.flag_words, "a spec's messages name its keys");
			run_opts_done(&o);
		}
	}

	r = parse(ARGV("--help"), &o, &err);
	TAP_OK(r == 1, "--help returns 1");
	TAP_OK(strstr(cli_run_help(), "--output-limit") != NULL, "help lists --output-limit");
	TAP_OK(strstr(cli_run_help(), "--inline-output") &&
		       strstr(cli_run_help(), "--on-output-limit"),
	       "help lists --inline-output and --on-output-limit");
	run_opts_done(&o);
	return tap_done();
}
