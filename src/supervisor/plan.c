/* plan.c: the decisions about one run, from the options and the facts run.c found on the
 * host. Pure: nothing here looks at the host, starts, opens or changes anything, so every
 * decision is unit-tested without a sandbox (tests/unit/test-plan.c). */
#include "plan.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../util/macro.h"
#include "../util/xalloc.h"
#include "../warm/warm.h"
#include "config.h"
#include "netproxy.h"

int
plan_helpers(const struct ab_host *h, const char *bwrap_env, struct ab_err *err)
{
	if (!h->bwrap_path[0]) {
		if (bwrap_env) {
			ab_err_set(err, -ENOENT, "AGENTBOX_BWRAP='%s' is not an executable bwrap",
				   bwrap_env);
			return ab_err_fix(err, "unset AGENTBOX_BWRAP or point it at bwrap");
		}
		ab_err_set(err, -ENOENT, "bubblewrap (bwrap) is not installed");
		return ab_err_fix(err, "apt-get install bubblewrap");
	}
	if (!h->init_path[0]) {
		ab_err_set(err, -ENOENT, "agentbox-init was not found next to agentbox or in %s",
			   AB_LIBEXECDIR);
		return ab_err_fix(err, "reinstall agentbox (meson install), or set AGENTBOX_INIT");
	}
	return 0;
}

int
plan_environment(struct ab_plan *p, const struct ab_run_opts *o, const char *env_venv,
		 const char *env_nm, struct ab_err *err)
{
	if (env_venv && p->lang != AB_LANG_PYTHON) {
		ab_err_usage(err, "--env-dir '%s' is a Python environment but the script is %s",
			     o->env_dir, lang_name(p->lang));
		return ab_err_fix(err, "pass a Node environment (agentbox prepare --node), or "
				       "--lang python");
	}
	if (env_nm && p->lang != AB_LANG_NODE) {
		ab_err_usage(err, "--env-dir '%s' is a Node environment but the script is %s",
			     o->env_dir, lang_name(p->lang));
		return ab_err_fix(err, "pass a Python environment (agentbox prepare --python), or "
				       "--lang node");
	}
	free(p->venv_given);
	free(p->node_modules_given);
	if (!env_venv)
		env_venv = o->venv;
	if (!env_nm)
		env_nm = o->node_modules;
	p->venv_given = env_venv ? xstrdup(env_venv) : NULL;
	p->node_modules_given = env_nm ? xstrdup(env_nm) : NULL;
	return 0;
}

int
plan_protections(struct ab_plan *p, const struct ab_run_opts *o, const struct ab_host *h,
		 struct ab_err *err)
{
	if (!h->bwrap_runs) {
		ab_err_set(err, -EPERM, "bubblewrap cannot create a sandbox here: %s",
			   h->bwrap_error[0] ? h->bwrap_error : "unknown error");
		return ab_err_fix(err, "%s", host_userns_fix(h));
	}
	if (!h->proc_mountable) {
		ab_err_set(err, -EPERM, "bubblewrap cannot mount a fresh /proc here%s%s%s%s%s",
			   h->container[0] ? " (in a " : "", h->container,
			   h->container[0] ? " container)" : "", h->proc_error[0] ? ": " : "",
			   h->proc_error);
		return ab_err_fix(err, "%s", host_proc_fix(h));
	}
	if (!h->has_disable_userns && !o->without[AB_PROT_DISABLE_USERNS]) {
		ab_err_set(err, -ENOTSUP,
			   "this bwrap cannot disable nested user namespaces "
			   "(--disable-userns)%s%s",
			   h->disable_error[0] ? ": " : "", h->disable_error);
		return ab_err_fix(err, "install bubblewrap >= 0.8, or pass --without "
				       "disable-userns");
	}
	/* The hostname hides the host's name (T35); the UTS namespace is private either way.
	 * A container's seccomp profile may refuse sethostname: run without, and say so. */
	p->no_hostname = !h->hostname_ok;
	if (h->landlock_abi <= 0 && !o->without[AB_PROT_LANDLOCK]) {
		ab_err_set(err, -ENOTSUP,
			   "this kernel has no Landlock (needs Linux >= 5.13 with "
			   "CONFIG_SECURITY_LANDLOCK and lsm=landlock)");
		return ab_err_fix(err, "boot with landlock in lsm=, or pass --without landlock");
	}
	p->disable_userns = h->has_disable_userns && !o->without[AB_PROT_DISABLE_USERNS];
	p->landlock = h->landlock_abi > 0 && !o->without[AB_PROT_LANDLOCK];
	/* The sandbox's own loopback is the script's by default: the network namespace keeps it
	 * off the network (agentbox-init checks it: netcheck.h). --net-strict also denies TCP
	 * bind and connect there. */
	if (o->net_strict && !o->share_net && (!p->landlock || h->landlock_abi < 4)) {
		ab_err_set(err, -ENOTSUP,
			   "--net-strict needs Landlock ABI 4 (Linux >= 6.7) for its TCP rules; "
			   "this host has %s",
			   p->landlock ? "an older ABI" : "no Landlock in force");
		return ab_err_fix(err, "drop --net-strict: the sandbox's network namespace "
				       "already holds nothing but its own loopback");
	}
	p->landlock_net = p->landlock && h->landlock_abi >= 4 && o->net_strict && !o->share_net;
	if (o->netproxy && p->landlock && h->landlock_abi >= 4) {
		/* prepare: TCP connect only to the registry proxy, no bind (netproxy.h) */
		p->landlock_net = true;
		p->landlock_connect_port = AB_NETPROXY_PORT;
	}
	p->landlock_scope = p->landlock && h->landlock_abi >= 6;
	p->share_net = o->share_net;
	free(p->rw_bind);
	p->rw_bind = o->env_path ? xstrdup(o->env_path) : NULL;
	p->seccomp = !o->without[AB_PROT_SECCOMP];
	return 0;
}

/* The sandbox's whole environment: PATH with the interpreter's directory, the virtualenv,
 * fixed values, then the spec's own (a warm Python slot's PYTHONPATH leads to its hook). */
static void
plan_env(struct ab_plan *p, const struct ab_run_opts *o)
{
	struct strv *e = &p->env;
	const char *path = "/usr/local/bin:/usr/bin:/bin";
	cleanup_free char *interp_dir = xstrdup(p->interp);
	char *slash = strrchr(interp_dir, '/');
	bool warm_py = p->warm && p->lang == AB_LANG_PYTHON;

	*slash = '\0';
	if (strcmp(interp_dir, "/usr/bin") != 0 && strcmp(interp_dir, "/usr/local/bin") != 0)
		strv_pushf(e, "PATH=%s:%s", interp_dir, path);
	else
		strv_pushf(e, "PATH=%s", path);
	if (p->venv)
		strv_pushf(e, "VIRTUAL_ENV=%s", p->venv);
	strv_push(e, "HOME=" AB_SANDBOX_WORK);
	strv_push(e, "TMPDIR=/tmp");
	strv_push(e, "LANG=C.UTF-8");
	strv_push(e, "PYTHONDONTWRITEBYTECODE=1");
	/* Caches go to the sandbox's /tmp, not into the workspace (HOME), so they are not
	 * listed in the report's files or collected: fontconfig's and every XDG-aware library's
	 * (XDG_CACHE_HOME), matplotlib's font list and config (MPLCONFIGDIR), npm's. */
	strv_push(e, "XDG_CACHE_HOME=" AB_SANDBOX_CACHE);
	strv_push(e, "MPLCONFIGDIR=" AB_SANDBOX_CACHE "/matplotlib");
	strv_push(e, "npm_config_cache=" AB_SANDBOX_CACHE "/npm");
	STRV_FOREACH (kv, &o->env) {
		/* a Python slot's hook is found through PYTHONPATH; it restores the spec's */
		if (warm_py && strncmp(*kv, "PYTHONPATH=", 11) == 0) {
			free(p->spec_pythonpath);
			p->spec_pythonpath = xstrdup(*kv + 11);
			continue;
		}
		strv_push(e, *kv);
	}
	if (warm_py)
		strv_pushf(e, "PYTHONPATH=%s%s%s", AB_WARM_DIR, p->spec_pythonpath ? ":" : "",
			   p->spec_pythonpath ? p->spec_pythonpath : "");
}

void
plan_sandbox(struct ab_plan *p, const struct ab_run_opts *o, const struct ab_plan_facts *f,
	     bool memwatch)
{
	p->netns_not = f->netns;
	memcpy(p->usr_links, f->usr_links, sizeof(p->usr_links));
	p->lib32 = f->lib32;
	p->libx32 = f->libx32;
	p->memwatch = memwatch;
	p->warm = o->slot != NULL;
	p->session = o->session;
	/* a slot's interpreter starts without them: the run hands its own over (slot.c) */
	if (!o->slot)
		STRV_FOREACH (a, &o->script_args)
			strv_push(&p->script_args, *a);
	plan_env(p, o);
}

void
plan_add_ro_bind_fd(struct ab_plan *p, int fd, const char *src, const char *dest)
{
	p->ro_binds = xrealloc(p->ro_binds, (p->n_ro_binds + 1) * sizeof(*p->ro_binds));
	p->ro_binds[p->n_ro_binds].src = xstrdup(src);
	p->ro_binds[p->n_ro_binds].dest = xstrdup(dest);
	p->ro_binds[p->n_ro_binds].fd = fd;
	p->ro_binds[p->n_ro_binds].staged = false;
	p->n_ro_binds++;
}

void
plan_add_ro_bind(struct ab_plan *p, const char *src, const char *dest)
{
	plan_add_ro_bind_fd(p, -1, src, dest);
}

static void
binds_done(struct ab_bind *b, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		free(b[i].src);
		free(b[i].dest);
		if (b[i].fd >= 0)
			(void) close(b[i].fd);
	}
	free(b);
}

void
plan_done(struct ab_plan *p)
{
	free(p->interp);
	free(p->venv);
	free(p->venv_given);
	free(p->node_modules_given);
	free(p->script_sandbox);
	strv_done(&p->script_args);
	free(p->work_src);
	free(p->etc_src);
	free(p->tmp_src);
	free(p->shm_src);
	free(p->pts_src);
	free(p->rw_bind);
	free(p->rw_bind_src);
	binds_done(p->ro_binds, p->n_ro_binds);
	binds_done(p->etc_binds, p->n_etc_binds);
	strv_done(&p->env);
	free(p->spec_pythonpath);
	memset(p, 0, sizeof(*p));
}
