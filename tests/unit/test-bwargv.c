/* Unit tests for bwargv.c: the bwrap command line, golden-tested per plan. Regenerate the
 * golden files with AB_UPDATE_GOLDEN=1 and review the diff like code. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "src/supervisor/bwargv.h"
#include "src/util/xalloc.h"
#include "tests/tap.h"

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

static void
base_plan(struct ab_plan *p)
{
	memset(p, 0, sizeof(*p));
	p->lang = AB_LANG_PYTHON;
	p->interp = xstrdup("/usr/bin/python3.11");
	p->script_sandbox = xstrdup("/work/agent_script.py");
	p->work_src = xstrdup("/var/tmp/agentbox-1000/run-AbCdEf/mnt");
	p->etc_src = xstrdup("/var/tmp/agentbox-1000/run-AbCdEf/etc");
	strv_push(&p->env, "PATH=/usr/local/bin:/usr/bin:/bin");
	strv_push(&p->env, "HOME=/work");
	strv_push(&p->env, "TMPDIR=/tmp");
	strv_push(&p->env, "LANG=C.UTF-8");
	strv_push(&p->env, "PYTHONDONTWRITEBYTECODE=1");
	p->usr_links[0] = p->usr_links[1] = p->usr_links[2] = p->usr_links[3] = true;
	p->disable_userns = true;
	p->seccomp = true;
	p->landlock = p->landlock_scope = true;
	p->tmp_src = xstrdup("/var/tmp/agentbox-1000/.mnt/tmp");
	p->shm_src = xstrdup("/var/tmp/agentbox-1000/.mnt/shm");
	p->pts_src = xstrdup("/var/tmp/agentbox-1000/.mnt/pts");
	p->netns_not = 4026531840ULL;
}

static void
golden(const char *name, const struct ab_plan *p)
{
	struct strv opts = { 0 }, cmd = { 0 };
	char *got, *joined_o, *joined_c, *want, *path;
	const char *dir = getenv("AB_TESTDIR");

	bwargv_build(&opts, &cmd, p);
	joined_o = strv_join(&opts, "\n");
	joined_c = strv_join(&cmd, "\n");
	got = xasprintf("%s\n%s\n", joined_o, joined_c);
	path = xasprintf("%s/data/bwargv-%s.argv", dir ? dir : "tests", name);
	if (getenv("AB_UPDATE_GOLDEN")) {
		FILE *f = fopen(path, "we");

		if (f) {
			fputs(got, f);
			fclose(f);
		}
	}
	want = read_file(path);
	TAP_OK(want != NULL, "golden file %s exists", path);
	TAP_OK(want && strcmp(got, want) == 0, "argv for '%s' matches its golden file", name);
	if (want && strcmp(got, want) != 0)
		printf("# got:\n%s", got);
	{
		/* what a prestarted bwrap gets first (run_prestart): bwargv_head's options, a
		 * prefix of the whole, and bwargv_cmd's command, the same */
		struct strv head = { 0 }, cmd2 = { 0 };
		bool prefix, same;

		bwargv_head(&head, p);
		bwargv_cmd(&cmd2, p);
		prefix = head.n > 0 && head.n < opts.n;
		for (size_t i = 0; prefix && i < head.n; i++)
			prefix = strcmp(head.v[i], opts.v[i]) == 0;
		same = cmd2.n == cmd.n;
		for (size_t i = 0; same && i < cmd.n; i++)
			same = strcmp(cmd2.v[i], cmd.v[i]) == 0;
		TAP_OK(prefix && strcmp(opts.v[head.n], "--ro-bind") == 0,
		       "'%s': bwargv_head is the options before the first mount", name);
		TAP_OK(same, "'%s': bwargv_cmd is bwargv_build's command", name);
		strv_done(&head);
		strv_done(&cmd2);
	}
	free(got);
	free(joined_o);
	free(joined_c);
	free(want);
	free(path);
	strv_done(&opts);
	strv_done(&cmd);
}

/* Every word that came from the caller sits after "--" or as an option's value. */
static void
test_injection(void)
{
	struct ab_plan p;
	struct strv opts = { 0 }, cmd = { 0 };
	bool opt_ok = true;

	base_plan(&p);
	free(p.script_sandbox);
	p.script_sandbox = xstrdup("/work/--bind=x.py");
	strv_push(&p.script_args, "--bind");
	strv_push(&p.script_args, "/");
	strv_push(&p.script_args, "/host");
	strv_push(&p.env, "EVIL=--bind / /host");
	bwargv_build(&opts, &cmd, &p);
	TAP_STREQ(cmd.v[0], "--", "the command starts with --");
	for (size_t i = 0; i < opts.n; i++) {
		if (strcmp(opts.v[i], "--bind") == 0 && strcmp(opts.v[i + 2], "/work") != 0 &&
		    strcmp(opts.v[i + 2], "/tmp") != 0 && strcmp(opts.v[i + 2], "/dev/shm") != 0)
			opt_ok = false;
		if (strcmp(opts.v[i], "--dev-bind") == 0 && strcmp(opts.v[i + 2], "/dev/pts") != 0)
			opt_ok = false;
	}
	TAP_OK(opt_ok, "the only --binds in the options are the workspace, /tmp and /dev/shm, "
		       "the only --dev-bind /dev/pts");
	TAP_OK(strcmp(cmd.v[cmd.n - 3], "--bind") == 0,
	       "script args stay at the end of the command");
	strv_done(&opts);
	strv_done(&cmd);
	plan_done(&p);
}

static void
test_quote(void)
{
	char *q;

	q = bwargv_shell_quote("/usr/bin");
	TAP_STREQ(q, "/usr/bin", "plain word unquoted");
	free(q);
	q = bwargv_shell_quote("a b'c");
	TAP_STREQ(q, "'a b'\\''c'", "quote with embedded quote");
	free(q);
	q = bwargv_shell_quote("");
	TAP_STREQ(q, "''", "empty word quoted");
	free(q);
}

static void
test_serialize(void)
{
	struct strv av = { 0 };
	size_t len;
	char *buf;

	strv_push(&av, "--a");
	strv_push(&av, "b c");
	buf = bwargv_serialize(&av, &len);
	TAP_OK(len == 8 && memcmp(buf, "--a\0b c\0", 8) == 0,
	       "--args serialization is NUL-separated");
	free(buf);
	strv_done(&av);
}

int
main(void)
{
	struct ab_plan p;

	base_plan(&p);
	golden("default", &p);
	plan_done(&p);

	/* --net-strict: Landlock also denies TCP bind and connect on the sandbox's loopback */
	base_plan(&p);
	p.landlock_net = true;
	golden("net-strict", &p);
	plan_done(&p);

	base_plan(&p);
	p.disable_userns = false;
	p.seccomp = false;
	p.landlock = p.landlock_net = p.landlock_scope = false;
	p.usr_links[1] = false;
	golden("weak-host", &p);
	plan_done(&p);

	/* inside a container (issue 18): sethostname refused, memory by the watchdog */
	base_plan(&p);
	p.no_hostname = true;
	p.memwatch = true;
	golden("container", &p);
	plan_done(&p);

	base_plan(&p);
	free(p.interp);
	p.interp = xstrdup("/opt/node-v20/bin/node");
	free(p.script_sandbox);
	p.script_sandbox = xstrdup("/work/main.mjs");
	plan_add_ro_bind(&p, "/opt/node-v20", "/opt/node-v20");
	strv_push(&p.script_args, "--flag");
	strv_push(&p.script_args, "x y");
	golden("node-outside-usr", &p);
	plan_done(&p);

	/* agentbox prepare: the install shares agentbox's own network namespace (netproxy.h),
	 * writes the environment, and may connect() only to the registry proxy's port */
	base_plan(&p);
	p.share_net = true;
	p.rw_bind = xstrdup("/var/tmp/agentbox-1000/envs/0123456789abcdef");
	p.landlock_net = true;
	p.landlock_connect_port = 3128;
	strv_push(&p.env, "HTTPS_PROXY=http://127.0.0.1:3128");
	golden("prepare", &p);
	plan_done(&p);

	test_injection();
	test_quote();
	test_serialize();
	return tap_done();
}
