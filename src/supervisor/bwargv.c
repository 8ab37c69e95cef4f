#include "bwargv.h"

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../init/netcheck.h"
#include "../util/xalloc.h"
#include "../warm/warm.h"

static void
push_env(struct strv *av, const char *kv)
{
	const char *eq = strchr(kv, '=');
	char *name;

	if (!eq)
		return;
	name = xstrndup(kv, (size_t) (eq - kv));
	strv_push_n(av, 3, "--setenv", name, eq + 1);
	free(name);
}

void
bwargv_head(struct strv *av, const struct ab_plan *p)
{
	/* Namespaces: all of them, network included (T9, T11, T12). --unshare-user is explicit
	 * so that a setuid bwrap would still map us, and --disable-userns needs it. */
	strv_push(av, "--unshare-all");
	if (p->share_net)
		strv_push(av, "--share-net"); /* prepare: agentbox's own, see netproxy.h */
	strv_push(av, "--unshare-user");
	if (p->disable_userns)
		strv_push(av, "--disable-userns"); /* T32: no nested user namespaces */
	strv_push(av, "--die-with-parent");        /* T13: the sandbox dies with agentbox */
	strv_push(av, "--new-session");            /* T10: no controlling tty, no TIOCSTI */
	/* agentbox-init is PID 1: non-dumpable, it reports the exact wait status (T6, T13). */
	strv_push(av, "--as-pid-1");
	strv_push_n(av, 2, "--cap-drop", "ALL"); /* T34 */
	strv_pushf(av, "--uid");
	strv_pushf(av, "%d", AB_SANDBOX_UID);
	strv_pushf(av, "--gid");
	strv_pushf(av, "%d", AB_SANDBOX_GID);
	if (!p->no_hostname)
		strv_push_n(av, 2, "--hostname", AB_SANDBOX_HOSTNAME); /* T35 */

	/* Environment: nothing inherited (T6); the plan holds the whole allow-list. */
	strv_push(av, "--clearenv");
	STRV_FOREACH (kv, &p->env)
		push_env(av, *kv);
}

void
bwargv_build(struct strv *av, struct strv *cmd, const struct ab_plan *p)
{
	static const char *const usr_links[4][2] = {
		{ "usr/bin", "/bin" },
		{ "usr/sbin", "/sbin" },
		{ "usr/lib", "/lib" },
		{ "usr/lib64", "/lib64" },
	};

	bwargv_head(av, p);
	/* Read-only base: /usr and the merged-usr links, generated /etc (T1, T2). */
	strv_push_n(av, 3, "--ro-bind", "/usr", "/usr");
	for (int i = 0; i < 4; i++)
		if (p->usr_links[i])
			strv_push_n(av, 3, "--symlink", usr_links[i][0], usr_links[i][1]);
	if (p->lib32)
		strv_push_n(av, 3, "--symlink", "usr/lib32", "/lib32");
	if (p->libx32)
		strv_push_n(av, 3, "--symlink", "usr/libx32", "/libx32");
	strv_push_n(av, 3, "--ro-bind", p->etc_src, "/etc");

	/* Fresh /proc with /proc/sys read-only (T30), minimal /dev, size-capped tmpfs (T18). */
	strv_push_n(av, 2, "--proc", "/proc");
	strv_push_n(av, 3, "--ro-bind", "/proc/sys", "/proc/sys");
	/* /proc/keys lists the key names of every keyring the uid can view (T8, T24) */
	strv_push_n(av, 3, "--ro-bind", "/dev/null", "/proc/keys");
	strv_push_n(av, 3, "--ro-bind", "/dev/null", "/proc/key-users");
	strv_push_n(av, 2, "--dev", "/dev");
	/* agentbox's own tmpfs, capped in size and inodes (workspace.c ws_mount_scratch) */
	strv_push_n(av, 3, "--bind", p->shm_src, "/dev/shm");
	/* a devpts instance with max=: bwrap's has no cap on the ptys a run can take */
	strv_push_n(av, 3, "--dev-bind", p->pts_src, "/dev/pts"); /* its ptys are devices */
	/* /dev itself is bwrap's tmpfs with no size or inode cap: nothing is written there */
	strv_push_n(av, 2, "--remount-ro", "/dev");
	strv_push_n(av, 3, "--bind", p->tmp_src, "/tmp");

	/* Extra read-only binds (interpreter outside /usr, venv, node_modules). */
	for (size_t i = 0; i < p->n_ro_binds; i++)
		strv_push_n(av, 3, "--ro-bind", p->ro_binds[i].src, p->ro_binds[i].dest);

	/* The only writable paths: the workspace, and for `prepare` the environment. */
	strv_push_n(av, 3, "--bind", p->work_src, AB_SANDBOX_WORK);
	if (p->rw_bind)
		strv_push_n(av, 3, "--bind", p->rw_bind_src ? p->rw_bind_src : p->rw_bind,
			    p->rw_bind);
	strv_push_n(av, 2, "--remount-ro", "/"); /* the root tmpfs itself: no stray writes */
	strv_push_n(av, 2, "--chdir", AB_SANDBOX_WORK);
	if (p->seccomp) {
		strv_push(av, "--seccomp");
		strv_pushf(av, "%d", AB_FD_SECCOMP);
	}
	/* The namespace is what keeps the script off the network (its loopback is its own):
	 * agentbox-init checks it holds lo only and is not agentbox's (src/init/netcheck.h).
	 * In its environment, not its argv: the script can read /proc/1/cmdline. */
	strv_push(av, "--setenv");
	strv_push(av, AB_NETCHECK_ENV);
	strv_pushf(av, "%llu", p->netns_not);
	bwargv_cmd(cmd, p);
}

void
bwargv_cmd(struct strv *cmd, const struct ab_plan *p)
{
	/* The command always follows "--" (T37). */
	strv_push(cmd, "--");
	strv_push(cmd, AB_SANDBOX_INIT);
	strv_push(cmd, "--status-fd");
	strv_pushf(cmd, "%d", AB_FD_STATUS);
	if (p->memwatch) {
		strv_push(cmd, "--memwatch-fd");
		strv_pushf(cmd, "%d", AB_FD_MEMWATCH);
	}
	if (p->landlock) {
		strv_push(cmd, "--landlock");
		if (p->rw_bind) {
			strv_push(cmd, "--writable");
			strv_push(cmd, p->rw_bind);
		}
		if (p->landlock_net)
			strv_push(cmd, "--landlock-net");
		if (p->landlock_net && p->landlock_connect_port) {
			/* prepare: the registry proxy in the install's network namespace */
			strv_push(cmd, "--landlock-connect");
			strv_pushf(cmd, "%u", (unsigned) p->landlock_connect_port);
		}
		if (p->landlock_scope)
			strv_push(cmd, "--landlock-scope");
	}
	if (p->warm || p->session) {
		/* the slot's socket, for the interpreter's hook alone (warm.h); a session's, for
		 * its driver (session.h): the same fd number */
		strv_push(cmd, "--warm-fd");
		strv_pushf(cmd, "%d", AB_WARM_FD);
	}
	strv_push(cmd, "--");
	strv_push(cmd, p->interp);
	if (p->session && p->lang == AB_LANG_NODE)
		strv_push(cmd, "--expose-internals"); /* top-level await: session.js */
	if (p->warm && p->lang == AB_LANG_NODE)
		strv_push_n(cmd, 2, "--require", AB_WARM_JS_HOOK); /* the hook removes it again */
	strv_push(cmd, p->script_sandbox);
	STRV_FOREACH (a, &p->script_args)
		strv_push(cmd, *a);
}

char *
bwargv_serialize(const struct strv *av, size_t *ret_len)
{
	size_t len = 0;
	char *buf, *q;

	for (size_t i = 0; i < av->n; i++)
		len += strlen(av->v[i]) + 1;
	q = buf = xmalloc(len ? len : 1);
	for (size_t i = 0; i < av->n; i++) {
		size_t l = strlen(av->v[i]) + 1;

		memcpy(q, av->v[i], l);
		q += l;
	}
	*ret_len = len;
	return buf;
}

char *
bwargv_shell_quote(const char *w)
{
	size_t len = 3;
	char *out, *q;
	bool plain = *w != '\0';

	for (const char *s = w; *s; s++) {
		len += *s == '\'' ? 4 : 1;
		if (!strchr("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789/"
			    "._-=:,+@",
			    *s))
			plain = false;
	}
	if (plain)
		return xstrdup(w);
	q = out = xmalloc(len);
	*q++ = '\'';
	for (const char *s = w; *s; s++) {
		if (*s == '\'') {
			memcpy(q, "'\\''", 4);
			q += 4;
		} else {
			*q++ = *s;
		}
	}
	*q++ = '\'';
	*q = '\0';
	return out;
}
