/* Unit tests for plan.c: the decisions about a run, from options and made-up host facts. No
 * sandbox, no host: the planner looks at nothing but its arguments. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "src/supervisor/netproxy.h"
#include "src/supervisor/plan.h"
#include "src/supervisor/run.h"
#include "src/util/xalloc.h"
#include "src/warm/warm.h"
#include "tests/tap.h"

/* A host where everything works: bwrap, /proc, --disable-userns, --hostname, Landlock ABI 6. */
static void
good_host(struct ab_host *h)
{
	memset(h, 0, sizeof(*h));
	snprintf(h->bwrap_path, sizeof(h->bwrap_path), "/usr/bin/bwrap");
	snprintf(h->init_path, sizeof(h->init_path), "/usr/libexec/agentbox/agentbox-init");
	h->bwrap_runs = h->has_disable_userns = h->proc_mountable = h->hostname_ok = true;
	h->landlock_abi = 6;
}

static bool
env_has(const struct ab_plan *p, const char *kv)
{
	STRV_FOREACH (e, &p->env)
		if (strcmp(*e, kv) == 0)
			return true;
	return false;
}

static void
test_helpers(void)
{
	struct ab_host h;
	struct ab_err err = { 0 };

	good_host(&h);
	TAP_OK(plan_helpers(&h, NULL, &err) == 0 && !ab_err_is_set(&err), "bwrap and init found");
	h.bwrap_path[0] = '\0';
	TAP_OK(plan_helpers(&h, NULL, &err) == -ENOENT && strstr(err.msg, "not installed") &&
		       strstr(err.fix, "apt-get install bubblewrap"),
	       "no bwrap: install it");
	err = (struct ab_err){ 0 };
	TAP_OK(plan_helpers(&h, "/opt/bw", &err) == -ENOENT &&
		       strstr(err.msg, "AGENTBOX_BWRAP='/opt/bw'") &&
		       strstr(err.fix, "unset AGENTBOX_BWRAP"),
	       "AGENTBOX_BWRAP not a bwrap: names it");
	good_host(&h);
	h.init_path[0] = '\0';
	err = (struct ab_err){ 0 };
	TAP_OK(plan_helpers(&h, NULL, &err) == -ENOENT && strstr(err.msg, "agentbox-init"),
	       "no agentbox-init: refused");
}

static void
test_environment(void)
{
	struct ab_run_opts o;
	struct ab_plan p = { 0 };
	struct ab_err err = { 0 };

	run_opts_init(&o);
	o.venv = "/home/u/venv";
	o.node_modules = "/home/u/nm";
	p.lang = AB_LANG_PYTHON;
	TAP_OK(plan_environment(&p, &o, NULL, NULL, &err) == 0, "no --env-dir: planned");
	TAP_STREQ(p.venv_given, "/home/u/venv", "--venv is the virtualenv asked for");
	TAP_STREQ(p.node_modules_given, "/home/u/nm", "--node-modules is kept as given");
	TAP_OK(plan_environment(&p, &o, "/env/venv", NULL, &err) == 0, "a Python environment");
	TAP_STREQ(p.venv_given, "/env/venv", "--env-dir's virtualenv wins over --venv");
	TAP_STREQ(o.venv, "/home/u/venv", "the options are not changed");
	TAP_OK(plan_environment(&p, &o, NULL, "/env/node_modules", &err) < 0 &&
		       err.exit == AB_EXIT_USAGE && strstr(err.msg, "is a Node environment") &&
		       strstr(err.msg, "script is python") && strstr(err.fix, "--lang node"),
	       "a Node environment for a Python script: a usage error with the fix");
	p.lang = AB_LANG_NODE;
	err = (struct ab_err){ 0 };
	TAP_OK(plan_environment(&p, &o, "/env/venv", NULL, &err) < 0 &&
		       strstr(err.msg, "is a Python environment") &&
		       strstr(err.fix, "--lang python"),
	       "a Python environment for a Node script: a usage error with the fix");
	err = (struct ab_err){ 0 };
	TAP_OK(plan_environment(&p, &o, NULL, "/env/node_modules", &err) == 0 &&
		       strcmp(p.node_modules_given, "/env/node_modules") == 0,
	       "--env-dir's node_modules for a Node script");
	plan_done(&p);
	run_opts_done(&o);
}

/* plan_protections on h; returns its result with err filled. */
static int
protections(struct ab_plan *p, const struct ab_run_opts *o, const struct ab_host *h,
	    struct ab_err *err)
{
	plan_done(p);
	*err = (struct ab_err){ 0 };
	return plan_protections(p, o, h, err);
}

static void
test_protections(void)
{
	struct ab_run_opts o;
	struct ab_plan p = { 0 };
	struct ab_host h;
	struct ab_err err;

	run_opts_init(&o);
	good_host(&h);
	TAP_OK(protections(&p, &o, &h, &err) == 0, "every layer applies on a good host");
	TAP_OK(p.disable_userns && p.landlock && p.landlock_scope && p.seccomp && !p.landlock_net &&
		       !p.no_hostname && !p.share_net && !p.rw_bind,
	       "the defaults: disable-userns, Landlock with scoping, seccomp");

	h.bwrap_runs = false;
	snprintf(h.bwrap_error, sizeof(h.bwrap_error), "setting up uid map: Permission denied");
	TAP_OK(protections(&p, &o, &h, &err) == -EPERM &&
		       strstr(err.msg, "cannot create a sandbox here: setting up uid map") &&
		       err.fix[0],
	       "bwrap cannot start: refused with bwrap's words and a fix");
	good_host(&h);
	h.proc_mountable = false;
	snprintf(h.container, sizeof(h.container), "docker");
	TAP_OK(protections(&p, &o, &h, &err) == -EPERM &&
		       strstr(err.msg, "fresh /proc here (in a docker container)"),
	       "no /proc: refused, naming the container");

	good_host(&h);
	h.has_disable_userns = false;
	TAP_OK(protections(&p, &o, &h, &err) == -ENOTSUP && strstr(err.fix, "--without"),
	       "no --disable-userns: refused");
	o.without[AB_PROT_DISABLE_USERNS] = true;
	TAP_OK(protections(&p, &o, &h, &err) == 0 && !p.disable_userns, "... unless opted out");
	o.without[AB_PROT_DISABLE_USERNS] = false;

	good_host(&h);
	h.hostname_ok = false;
	h.landlock_abi = 0;
	TAP_OK(protections(&p, &o, &h, &err) == -ENOTSUP && strstr(err.msg, "no Landlock") &&
		       p.no_hostname,
	       "no Landlock: refused; the refused hostname is decided before it");
	o.without[AB_PROT_LANDLOCK] = true;
	TAP_OK(protections(&p, &o, &h, &err) == 0 && !p.landlock && !p.landlock_scope &&
		       p.no_hostname,
	       "--without landlock: runs without, and without a hostname");
	o.without[AB_PROT_LANDLOCK] = false;

	good_host(&h);
	o.net_strict = true;
	TAP_OK(protections(&p, &o, &h, &err) == 0 && p.landlock_net && !p.landlock_connect_port,
	       "--net-strict: TCP denied by Landlock");
	h.landlock_abi = 3;
	TAP_OK(protections(&p, &o, &h, &err) == -ENOTSUP && strstr(err.msg, "an older ABI"),
	       "--net-strict on Landlock ABI 3: refused");
	o.share_net = true;
	TAP_OK(protections(&p, &o, &h, &err) == 0 && !p.landlock_net && p.share_net,
	       "--net-strict means nothing with the network shared");
	o.share_net = o.net_strict = false;

	good_host(&h);
	{
		struct ab_netproxy np = { 0 };

		o.netproxy = &np;
		o.env_path = "/opt/env";
		TAP_OK(protections(&p, &o, &h, &err) == 0 && p.landlock_net &&
			       p.landlock_connect_port == AB_NETPROXY_PORT &&
			       strcmp(p.rw_bind, "/opt/env") == 0,
		       "prepare: TCP only to the registry proxy, the environment writable");
		o.netproxy = NULL;
		o.env_path = NULL;
	}
	o.without[AB_PROT_SECCOMP] = true;
	TAP_OK(protections(&p, &o, &h, &err) == 0 && !p.seccomp, "--without seccomp");
	plan_done(&p);
	run_opts_done(&o);
}

static void
test_sandbox(void)
{
	struct ab_run_opts o;
	struct ab_plan p = { 0 };
	struct ab_plan_facts f = { .netns = 4026531840ULL,
				   .usr_links = { true, true, true, false } };
	struct ab_slot_opts slot = { .ctl_fd = -1 };

	run_opts_init(&o);
	strv_push(&o.script_args, "--x");
	strv_push(&o.env, "PYTHONPATH=/work/lib");
	strv_push(&o.env, "A=1");
	p.lang = AB_LANG_PYTHON;
	p.interp = xstrdup("/opt/py/bin/python3");
	p.venv = xstrdup("/home/u/venv");
	plan_sandbox(&p, &o, &f, true);
	TAP_OK(p.netns_not == 4026531840ULL && p.usr_links[0] && !p.usr_links[3] && !p.lib32,
	       "the host's facts as told");
	TAP_OK(p.memwatch, "agentbox-init hands the watchdog over, as the limits say");
	TAP_OK(p.script_args.n == 1 && strcmp(p.script_args.v[0], "--x") == 0,
	       "the script's arguments");
	TAP_OK(!p.warm && !p.spec_pythonpath, "cold");
	TAP_STREQ(p.env.v[0], "PATH=/opt/py/bin:/usr/local/bin:/usr/bin:/bin",
		  "an interpreter outside /usr leads PATH");
	TAP_OK(env_has(&p, "VIRTUAL_ENV=/home/u/venv") && env_has(&p, "HOME=/work") &&
		       env_has(&p, "XDG_CACHE_HOME=/tmp/.cache"),
	       "the virtualenv, HOME and the caches");
	TAP_STREQ(p.env.v[p.env.n - 2], "PYTHONPATH=/work/lib", "the spec's own variables last");
	TAP_STREQ(p.env.v[p.env.n - 1], "A=1", "... in their order");
	plan_done(&p);

	/* a warm Python slot: no arguments yet, PYTHONPATH leads to the hook */
	o.slot = &slot;
	p.lang = AB_LANG_PYTHON;
	p.interp = xstrdup("/usr/bin/python3");
	plan_sandbox(&p, &o, &f, false);
	TAP_OK(p.warm && p.script_args.n == 0, "a slot starts without the script's arguments");
	TAP_STREQ(p.env.v[0], "PATH=/usr/local/bin:/usr/bin:/bin", "/usr/bin: the plain PATH");
	TAP_STREQ(p.spec_pythonpath, "/work/lib", "the spec's PYTHONPATH kept for the hook");
	TAP_STREQ(p.env.v[p.env.n - 1], "PYTHONPATH=" AB_WARM_DIR ":/work/lib",
		  "PYTHONPATH: the hook first, then the spec's");
	TAP_OK(!env_has(&p, "PYTHONPATH=/work/lib"), "the spec's PYTHONPATH not set as is");
	plan_done(&p);

	/* a Node slot keeps PYTHONPATH as given */
	p.lang = AB_LANG_NODE;
	p.interp = xstrdup("/usr/bin/node");
	plan_sandbox(&p, &o, &f, false);
	TAP_OK(env_has(&p, "PYTHONPATH=/work/lib") && !p.spec_pythonpath,
	       "a Node slot leaves PYTHONPATH alone");
	plan_done(&p);
	o.slot = NULL;
	run_opts_done(&o);
}

int
main(void)
{
	test_helpers();
	test_environment();
	test_protections();
	test_sandbox();
	return tap_done();
}
