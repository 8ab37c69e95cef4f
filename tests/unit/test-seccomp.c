/* test-seccomp: the default filter, for real.
 *
 *  1. The program fd: non-empty, a multiple of 8, sealed memfd at offset 0, arch check first.
 *  2. The cache: a hit returns the cache file itself with identical bytes; bad entries (wrong
 *     length, empty, group/other-writable, symlink, FIFO, not ours, directory) are ignored.
 *  3. Behaviour: a forked child loads the program (no_new_privs + PR_SET_SECCOMP) and execs
 *     ab-probe try-syscall; every errno is checked, plus the 32-bit and x32 ABIs being killed.
 *     The same probe without a filter shows that each blocked call does reach the kernel with
 *     these arguments and gets a different answer there.
 *  4. The same under a real bwrap --seccomp, plus Python (asyncio, multiprocessing,
 *     subprocess, threading) and Node (child_process, worker_threads, net) under the filter.
 *
 * Environment: AB_PROBE (required: the static ab-probe helper), and optionally BWRAP,
 * AB_PYTHON3 and AB_NODE (default /usr/bin/bwrap, /usr/bin/python3, /usr/bin/node). Anything
 * missing is a failure, never a silent pass.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <linux/filter.h>
#include <linux/seccomp.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>

/* libseccomp's header (for seccomp_version()); ours is src/supervisor/filter.h. */
#include <seccomp.h>

#include "config.h"
#include "src/supervisor/filter.h"
#include "src/util/fdutil.h"
#include "src/util/macro.h"
#include "src/util/strv.h"
#include "src/util/xalloc.h"
#include "tests/tap.h"

#define BLK_DEFAULT (1u << AB_SECCOMP_DEFAULT)
#define BLK_STRICT  (1u << AB_SECCOMP_STRICT)
#define BLK_ALL     (BLK_DEFAULT | BLK_STRICT)

/* What ab-probe try-syscall must print for each name under each policy. blocked says under
 * which policies the answer comes from the filter; priv marks calls the kernel itself refuses
 * with EPERM to a caller without capabilities (only conclusive as root in the control run). */
struct expect {
	const char *name;
	const char *want[AB_SECCOMP_COUNT];
	unsigned blocked;
	bool priv;
};

#define ALLOWED(n, e)                 \
	{                             \
		n, { e, e }, 0, false \
	}
#define BLOCKED(n, e)                       \
	{                                   \
		n, { e, e }, BLK_ALL, false \
	}
#define PRIV(n, e)                         \
	{                                  \
		n, { e, e }, BLK_ALL, true \
	}
#define STRICT(n, d, s)                        \
	{                                      \
		n, { d, s }, BLK_STRICT, false \
	}

static const struct expect expects[] = {
	/* allowed: what Python, Node and our PID 1 helper need */
	ALLOWED("getpid", "OK"),
	ALLOWED("fork", "OK"),
	ALLOWED("thread", "OK"),
	ALLOWED("prctl", "OK"),
	ALLOWED("wait4", "ECHILD"),
	ALLOWED("setrlimit", "OK"),
	ALLOWED("landlock_create_ruleset", "OK"),
	ALLOWED("landlock_add_rule", "EBADF"),
	ALLOWED("landlock_restrict_self", "EBADF"),
	/* issue 15: a script may make a pty of its private devpts its controlling terminal */
	ALLOWED("ioctl_tiocsctty", "EBADF"),
	ALLOWED("ioctl_tiocsctty64", "EBADF"),
	ALLOWED("memfd_create", "OK"),
	ALLOWED("pidfd_open", "OK"),
	ALLOWED("ioctl_fionread", "EBADF"),
	ALLOWED("clone_thread", "EINVAL"),
	ALLOWED("socket_unix", "OK"),
	ALLOWED("socketpair_unix", "OK"),
	ALLOWED("personality_query", "OK"),
	ALLOWED("personality_linux", "OK"),
	ALLOWED("chmod_plain", "OK"),
	ALLOWED("chmod_plain_hi", "OK"),
	ALLOWED("chmod_sticky", "OK"),
	ALLOWED("fchmod_plain", "OK"),
	ALLOWED("fchmodat_plain", "OK"),
	ALLOWED("fchmodat2_plain", "OK"),
	ALLOWED("creat_plain", "OK"),
	ALLOWED("open_creat_plain", "OK"),
	ALLOWED("open_nocreat_suid", "OK"),
	ALLOWED("open_tmpfile_plain", "OK"),
	ALLOWED("openat_creat_plain", "OK"),
	ALLOWED("openat_tmpfile_plain", "OK"),
	ALLOWED("mkdir_plain", "OK"),
	ALLOWED("mkdir_sticky", "OK"),
	ALLOWED("mkdirat_plain", "OK"),
	ALLOWED("mknod_plain", "OK"),
	ALLOWED("mknodat_plain", "OK"),
	/* strict only */
	STRICT("socket_inet", "OK", "EAFNOSUPPORT"),
	STRICT("socket_inet6", "OK", "EAFNOSUPPORT"),
	STRICT("socket_inet_badtype", "EINVAL", "EAFNOSUPPORT"),
	STRICT("socketpair_inet", "EOPNOTSUPP", "EAFNOSUPPORT"),
	STRICT("inotify_init", "OK", "EMFILE"),
	STRICT("inotify_init1", "OK", "EMFILE"),
	STRICT("get_robust_list", "EFAULT", "EPERM"),
	STRICT("process_madvise", "EBADF", "EPERM"),
	STRICT("sched_setaffinity", "EFAULT", "EPERM"),
	/* socket families */
	BLOCKED("socket_unspec", "EAFNOSUPPORT"),
	BLOCKED("socket_ax25", "EAFNOSUPPORT"),
	BLOCKED("socket_ipx", "EAFNOSUPPORT"),
	BLOCKED("socket_appletalk", "EAFNOSUPPORT"),
	BLOCKED("socket_x25", "EAFNOSUPPORT"),
	BLOCKED("socket_key", "EAFNOSUPPORT"),
	BLOCKED("socket_netlink", "EAFNOSUPPORT"),
	BLOCKED("socket_packet", "EAFNOSUPPORT"),
	BLOCKED("socket_rds", "EAFNOSUPPORT"),
	BLOCKED("socket_can", "EAFNOSUPPORT"),
	BLOCKED("socket_tipc", "EAFNOSUPPORT"),
	BLOCKED("socket_bluetooth", "EAFNOSUPPORT"),
	BLOCKED("socket_alg", "EAFNOSUPPORT"),
	BLOCKED("socket_vsock", "EAFNOSUPPORT"),
	BLOCKED("socket_xdp", "EAFNOSUPPORT"),
	BLOCKED("socket_max", "EAFNOSUPPORT"),
	BLOCKED("socket_1000", "EAFNOSUPPORT"),
	BLOCKED("socket_neg", "EAFNOSUPPORT"),
	BLOCKED("socket_inet_hi", "EAFNOSUPPORT"),
	BLOCKED("socketpair_netlink", "EAFNOSUPPORT"),
	/* EPERM */
	PRIV("syslog", "EPERM"),
	BLOCKED("uselib", "EPERM"),
	PRIV("acct", "EPERM"),
	BLOCKED("modify_ldt", "EPERM"),
	BLOCKED("quotactl", "EPERM"),
	BLOCKED("quotactl_fd", "EPERM"),
	BLOCKED("add_key", "EPERM"),
	BLOCKED("keyctl", "EPERM"),
	BLOCKED("request_key", "EPERM"),
	BLOCKED("move_pages", "EPERM"),
	BLOCKED("mbind", "EPERM"),
	BLOCKED("get_mempolicy", "EPERM"),
	BLOCKED("set_mempolicy", "EPERM"),
	BLOCKED("set_mempolicy_home_node", "EPERM"),
	BLOCKED("migrate_pages", "EPERM"),
	BLOCKED("unshare", "EPERM"),
	BLOCKED("setns", "EPERM"),
	BLOCKED("mount", "EPERM"),
	BLOCKED("umount2", "EPERM"),
	PRIV("pivot_root", "EPERM"),
	BLOCKED("chroot", "EPERM"),
	BLOCKED("perf_event_open", "EPERM"),
	BLOCKED("ptrace", "EPERM"),
	BLOCKED("process_vm_readv", "EPERM"),
	BLOCKED("process_vm_writev", "EPERM"),
	BLOCKED("kcmp", "EPERM"),
	BLOCKED("pidfd_getfd", "EPERM"),
	BLOCKED("userfaultfd", "EPERM"),
	BLOCKED("bpf", "EPERM"),
	BLOCKED("kexec_load", "EPERM"),
	BLOCKED("kexec_file_load", "EPERM"),
	BLOCKED("init_module", "EPERM"),
	BLOCKED("finit_module", "EPERM"),
	BLOCKED("delete_module", "EPERM"),
	BLOCKED("open_by_handle_at", "EPERM"),
	BLOCKED("name_to_handle_at", "EPERM"),
	BLOCKED("lookup_dcookie", "EPERM"),
	BLOCKED("swapon", "EPERM"),
	PRIV("swapoff", "EPERM"),
	PRIV("reboot", "EPERM"),
	BLOCKED("settimeofday", "EPERM"),
	BLOCKED("clock_settime", "EPERM"),
	BLOCKED("clock_adjtime", "EPERM"),
	BLOCKED("adjtimex", "EPERM"),
	BLOCKED("iopl", "EPERM"),
	BLOCKED("ioperm", "EPERM"),
	PRIV("vhangup", "EPERM"),
	BLOCKED("nfsservctl", "EPERM"),
	PRIV("fanotify_init", "EPERM"),
	BLOCKED("personality_rie", "EPERM"),
	BLOCKED("personality_hi", "EPERM"),
	BLOCKED("ioctl_tiocsti", "EPERM"),
	BLOCKED("ioctl_tiocsti64", "EPERM"),
	BLOCKED("ioctl_tioclinux", "EPERM"),
	BLOCKED("ioctl_tioclinux64", "EPERM"),
	BLOCKED("clone_newuser", "EPERM"),
	BLOCKED("clone_newns", "EPERM"),
	BLOCKED("clone_newpid", "EPERM"),
	BLOCKED("clone_newnet", "EPERM"),
	BLOCKED("clone_newuts", "EPERM"),
	BLOCKED("clone_newipc", "EPERM"),
	BLOCKED("clone_newcgroup", "EPERM"),
	BLOCKED("chmod_suid", "EPERM"),
	BLOCKED("chmod_sgid", "EPERM"),
	BLOCKED("chmod_suid_hi", "EPERM"),
	BLOCKED("fchmod_suid", "EPERM"),
	BLOCKED("fchmod_sgid", "EPERM"),
	BLOCKED("fchmodat_suid", "EPERM"),
	BLOCKED("fchmodat_sgid", "EPERM"),
	BLOCKED("fchmodat2_suid", "EPERM"),
	BLOCKED("fchmodat2_sgid", "EPERM"),
	BLOCKED("creat_suid", "EPERM"),
	BLOCKED("creat_sgid", "EPERM"),
	BLOCKED("open_creat_suid", "EPERM"),
	BLOCKED("open_creat_sgid", "EPERM"),
	BLOCKED("open_tmpfile_suid", "EPERM"),
	BLOCKED("open_tmpfile_sgid", "EPERM"),
	BLOCKED("openat_creat_suid", "EPERM"),
	BLOCKED("openat_creat_sgid", "EPERM"),
	BLOCKED("openat_tmpfile_suid", "EPERM"),
	BLOCKED("openat_tmpfile_sgid", "EPERM"),
	BLOCKED("mkdir_suid", "EPERM"),
	BLOCKED("mkdir_sgid", "EPERM"),
	BLOCKED("mkdirat_suid", "EPERM"),
	BLOCKED("mkdirat_sgid", "EPERM"),
	BLOCKED("mknod_suid", "EPERM"),
	BLOCKED("mknod_sgid", "EPERM"),
	BLOCKED("mknodat_suid", "EPERM"),
	BLOCKED("mknodat_sgid", "EPERM"),
	/* ENOSYS */
	BLOCKED("clone3", "ENOSYS"),
	BLOCKED("io_uring_setup", "ENOSYS"),
	BLOCKED("io_uring_enter", "ENOSYS"),
	BLOCKED("io_uring_register", "ENOSYS"),
	BLOCKED("open_tree", "ENOSYS"),
	BLOCKED("open_tree_attr", "ENOSYS"),
	BLOCKED("move_mount", "ENOSYS"),
	BLOCKED("fsopen", "ENOSYS"),
	BLOCKED("fsconfig", "ENOSYS"),
	BLOCKED("fsmount", "ENOSYS"),
	BLOCKED("fspick", "ENOSYS"),
	BLOCKED("mount_setattr", "ENOSYS"),
	BLOCKED("openat2", "ENOSYS"),
};

/* Python and Node workloads; argv[1] is "inet" (TCP on 127.0.0.1) or "unix". */
static const char python_script[] =
	"import asyncio, multiprocessing, subprocess, sys, threading\n"
	"def sq(x):\n"
	"    return x * x\n"
	"async def echo(r, w):\n"
	"    w.write(await r.readline())\n"
	"    await w.drain()\n"
	"    w.close()\n"
	"async def amain(kind):\n"
	"    if kind == 'inet':\n"
	"        srv = await asyncio.start_server(echo, '127.0.0.1', 0)\n"
	"        port = srv.sockets[0].getsockname()[1]\n"
	"        r, w = await asyncio.open_connection('127.0.0.1', port)\n"
	"    else:\n"
	"        srv = await asyncio.start_unix_server(echo, '/tmp/py.sock')\n"
	"        r, w = await asyncio.open_unix_connection('/tmp/py.sock')\n"
	"    w.write(b'ping\\n')\n"
	"    await w.drain()\n"
	"    assert await r.readline() == b'ping\\n'\n"
	"    w.close()\n"
	"    srv.close()\n"
	"    await srv.wait_closed()\n"
	"    p = await asyncio.create_subprocess_exec('/usr/bin/echo', 'sub',\n"
	"                                             stdout=asyncio.subprocess.PIPE)\n"
	"    out, _ = await p.communicate()\n"
	"    assert out == b'sub\\n', out\n"
	"asyncio.run(amain(sys.argv[1]))\n"
	"with multiprocessing.Pool(2) as pool:\n"
	"    assert pool.map(sq, range(8)) == [x * x for x in range(8)]\n"
	"out = subprocess.run(['/usr/bin/echo', 'hi'], capture_output=True, check=True).stdout\n"
	"assert out == b'hi\\n', out\n"
	"seen = []\n"
	"t = threading.Thread(target=lambda: seen.append(1))\n"
	"t.start()\n"
	"t.join()\n"
	"assert seen == [1]\n"
	"print('PYOK')\n";

static const char node_script[] =
	"const cp = require('child_process'), wt = require('worker_threads');\n"
	"const net = require('net'), fs = require('fs');\n"
	"const addr = process.argv[1] === 'inet' ? { host: '127.0.0.1', port: 0 }\n"
	"                                        : { path: '/tmp/node.sock' };\n"
	"(async () => {\n"
	"  const out = cp.execFileSync('/usr/bin/echo', ['hi']).toString();\n"
	"  if (out !== 'hi\\n') throw new Error('execFileSync: ' + out);\n"
	"  await fs.promises.writeFile('/tmp/f', 'data');\n"
	"  if ((await fs.promises.readFile('/tmp/f', 'utf8')) !== 'data') throw new Error('fs');\n"
	"  const m = await new Promise((res, rej) => {\n"
	"    const w = new wt.Worker(\n"
	"      'require(\"worker_threads\").parentPort.postMessage(6 * 7)', { eval: true });\n"
	"    w.on('message', res);\n"
	"    w.on('error', rej);\n"
	"  });\n"
	"  if (m !== 42) throw new Error('worker: ' + m);\n"
	"  const srv = net.createServer((s) => s.pipe(s));\n"
	"  await new Promise((res) => srv.listen(addr, res));\n"
	"  const a = srv.address();\n"
	"  const to = typeof a === 'string' ? { path: a } : { host: '127.0.0.1', port: a.port };\n"
	"  const got = await new Promise((res, rej) => {\n"
	"    const c = net.connect(to, () => c.write('ping'));\n"
	"    c.on('data', (d) => { c.end(); res(String(d)); });\n"
	"    c.on('error', rej);\n"
	"  });\n"
	"  srv.close();\n"
	"  if (got !== 'ping') throw new Error('echo: ' + got);\n"
	"  console.log('NODEOK');\n"
	"})().catch((e) => { console.error(e); process.exit(1); });\n";

static const char *probe_path;
static const char *bwrap_path;
static const char *python_path;
static const char *node_path;

struct run {
	int wstatus;
	char *out; /* stdout and stderr together */
};

static const char *
env_or(const char *name, const char *fallback)
{
	const char *v = getenv(name);

	return v && *v ? v : fallback;
}

/* The whole content of fd from offset 0. */
static char *
read_fd_all(int fd, size_t *ret_len)
{
	struct stat st;
	char *buf;
	ssize_t n;

	if (fstat(fd, &st) < 0 || st.st_size <= 0)
		return NULL;
	buf = xmalloc((size_t) st.st_size);
	n = pread(fd, buf, (size_t) st.st_size, 0);
	if (n != st.st_size) {
		free(buf);
		return NULL;
	}
	*ret_len = (size_t) n;
	return buf;
}

/* Forks and execs argv with stdout+stderr captured. With prog, the child loads it first;
 * with seccomp_fd >= 0, the child gets it as fd 3 (for bwrap --seccomp 3). */
static int
run_cmd(char **argv, const struct sock_fprog *prog, int seccomp_fd, struct run *ret)
{
	int pfd[2];
	pid_t pid;
	ssize_t n;

	memset(ret, 0, sizeof(*ret));
	/* The child's fd 3 shares our file offset, and bwrap reads the program from there. */
	if (seccomp_fd >= 0 && lseek(seccomp_fd, 0, SEEK_SET) < 0)
		return -errno;
	if (pipe2(pfd, O_CLOEXEC) < 0)
		return -errno;
	fflush(stdout);
	pid = fork();
	if (pid < 0)
		return -errno;
	if (pid == 0) {
		int null = open("/dev/null", O_RDONLY | O_CLOEXEC);

		if (null < 0 || dup2(null, 0) < 0 || dup2(pfd[1], 1) < 0 || dup2(pfd[1], 2) < 0)
			_exit(126);
		if (seccomp_fd == 3) {
			if (fcntl(3, F_SETFD, 0) < 0)
				_exit(126);
		} else if (seccomp_fd >= 0 && dup2(seccomp_fd, 3) < 0) {
			_exit(126);
		}
		alarm(120); /* survives exec: nothing here may hang the suite */
		if (prog && (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0 ||
			     prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, prog) < 0)) {
			dprintf(2, "loading the filter: %s\n", strerror(errno));
			_exit(126);
		}
		execv(argv[0], argv);
		dprintf(2, "exec %s: %s\n", argv[0], strerror(errno));
		_exit(127);
	}
	(void) close(pfd[1]);
	n = read_all_capped(pfd[0], 1 << 20, &ret->out);
	(void) close(pfd[0]);
	if (n < 0)
		ret->out = xstrdup("");
	while (waitpid(pid, &ret->wstatus, 0) < 0)
		if (errno != EINTR)
			return -errno;
	return 0;
}

static bool
exited_ok(const struct run *r)
{
	return WIFEXITED(r->wstatus) && WEXITSTATUS(r->wstatus) == 0;
}

/* Prints captured output as TAP comments. */
static void
diag(const char *out)
{
	const char *p = out;

	while (p && *p) {
		const char *nl = strchr(p, '\n');
		int len = nl ? (int) (nl - p) : (int) strlen(p);

		printf("#   | %.*s\n", len, p);
		p = nl ? nl + 1 : NULL;
	}
}

/* The word printed after "name " in ab-probe output, or NULL. */
static const char *
result_of(const char *out, const char *name, char *buf, size_t size)
{
	size_t nlen = strlen(name);

	for (const char *p = out; p && *p; p = strchr(p, '\n') ? strchr(p, '\n') + 1 : NULL) {
		if (strncmp(p, name, nlen) == 0 && p[nlen] == ' ') {
			size_t len = strcspn(p + nlen + 1, "\n");

			if (len >= size)
				len = size - 1;
			memcpy(buf, p + nlen + 1, len);
			buf[len] = '\0';
			return buf;
		}
	}
	return NULL;
}

/* argv for ab-probe try-syscall with every name in expects[]. */
static void
push_probe_names(struct strv *av)
{
	strv_push(av, "try-syscall");
	for (size_t i = 0; i < ARRAY_SIZE(expects); i++)
		strv_push(av, expects[i].name);
}

/* bwrap as in the brief, with the program as fd 3 and the probe at /probe; then cmd. */
static void
push_bwrap(struct strv *av)
{
	strv_push_n(av, 14, bwrap_path, "--ro-bind", "/usr", "/usr", "--symlink", "usr/lib", "/lib",
		    "--symlink", "usr/lib64", "/lib64", "--symlink", "usr/bin", "/bin", "--proc");
	strv_push_n(av, 13, "/proc", "--dev", "/dev", "--tmpfs", "/tmp", "--unshare-all",
		    "--die-with-parent", "--new-session", "--clearenv", "--setenv", "PATH",
		    "/usr/bin", "--seccomp");
	strv_push_n(av, 5, "3", "--ro-bind", probe_path, "/probe", "--");
}

static void
check_results(const char *how, enum ab_seccomp_policy p, const struct run *r)
{
	TAP_OK(exited_ok(r), "%s %s: ab-probe try-syscall exits 0", how, filter_policy_name(p));
	if (!exited_ok(r))
		diag(r->out);
	for (size_t i = 0; i < ARRAY_SIZE(expects); i++) {
		char buf[64];
		const char *got = result_of(r->out, expects[i].name, buf, sizeof(buf));

		TAP_STREQ(got, expects[i].want[p], "%s %s: %s -> %s", how, filter_policy_name(p),
			  expects[i].name, expects[i].want[p]);
	}
}

static struct sock_fprog
fprog_of(const char *bytes, size_t len)
{
	return (struct sock_fprog){ .len = (unsigned short) (len / sizeof(struct sock_filter)),
				    .filter = (struct sock_filter *) bytes };
}

static void
test_parse(void)
{
	enum ab_seccomp_policy p = AB_SECCOMP_COUNT;

	TAP_OK(filter_policy_parse("default", &p) == 0 && p == AB_SECCOMP_DEFAULT,
	       "parse 'default'");
	TAP_OK(filter_policy_parse("strict", &p) == 0 && p == AB_SECCOMP_STRICT, "parse 'strict'");
	TAP_OK(filter_policy_parse("Strict", &p) == -EINVAL, "parse is case-sensitive");
	TAP_OK(filter_policy_parse("", &p) == -EINVAL, "parse '' fails");
	TAP_OK(filter_policy_parse(NULL, &p) == -EINVAL, "parse NULL fails");
	TAP_STREQ(filter_policy_name(AB_SECCOMP_DEFAULT), "default", "name of default");
	TAP_STREQ(filter_policy_name(AB_SECCOMP_STRICT), "strict", "name of strict");
}

/* Checks the uncached program fd for p and returns its bytes. */
static char *
test_program_fd(enum ab_seccomp_policy p, size_t *ret_len)
{
	const char *name = filter_policy_name(p);
	struct ab_err err = { 0 };
	cleanup_fd int fd = -1;
	cleanup_free char *again = NULL;
	size_t len = 0, len2 = 0;
	struct sock_filter first;
	char *bytes;
	int fd2;

	fd = filter_program_fd(p, -1, &err);
	TAP_OK(fd >= 0, "%s: program fd (%s)", name, err.msg);
	if (fd < 0)
		return NULL;
	bytes = read_fd_all(fd, &len);
	TAP_OK(bytes && len > 0 && len % 8 == 0, "%s: %zu bytes, a non-zero multiple of 8", name,
	       len);
	if (!bytes)
		return NULL;
	TAP_OK(len / 8 <= BPF_MAXINSNS, "%s: %zu instructions, within BPF_MAXINSNS", name, len / 8);
	TAP_OK(lseek(fd, 0, SEEK_CUR) == 0, "%s: offset 0", name);
	TAP_OK(fcntl(fd, F_GETFD) & FD_CLOEXEC, "%s: close-on-exec", name);
	TAP_OK(fcntl(fd, F_GET_SEALS) == (F_SEAL_WRITE | F_SEAL_GROW | F_SEAL_SHRINK | F_SEAL_SEAL),
	       "%s: memfd sealed against write, grow, shrink and more seals", name);
	TAP_OK(pwrite(fd, "x", 1, 0) < 0, "%s: the program cannot be rewritten", name);
	memcpy(&first, bytes, sizeof(first));
	TAP_OK(first.code == (BPF_LD | BPF_W | BPF_ABS) && first.k == 4,
	       "%s: the first instruction loads seccomp_data.arch", name);
	fd2 = filter_program_fd(p, -1, NULL);
	again = fd2 >= 0 ? read_fd_all(fd2, &len2) : NULL;
	TAP_OK(again && len2 == len && memcmp(again, bytes, len) == 0,
	       "%s: compiling twice gives the same bytes", name);
	if (fd2 >= 0)
		(void) close(fd2);
	*ret_len = len;
	return bytes;
}

static int
count_temp_files(const char *dir)
{
	DIR *d = opendir(dir);
	struct dirent *de;
	int n = 0;

	if (!d)
		return -1;
	while ((de = readdir(d)))
		if (strncmp(de->d_name, ".seccomp-", 9) == 0)
			n++;
	closedir(d);
	return n;
}

/* filter_program_fd with the cache directory at path dir (a missing one: no cache). */
static int
program_fd_in(enum ab_seccomp_policy p, const char *dir, struct ab_err *err)
{
	cleanup_fd int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);

	return filter_program_fd(p, dfd, err);
}

static char *
cache_path(enum ab_seccomp_policy p, const char *dir)
{
	cleanup_free char *name = filter_cache_name(p);

	return xasprintf("%s/%s", dir, name);
}

/* Calls filter_program_fd with the cache; true when it returned a fresh memfd whose bytes
 * are ref (i.e. the cache entry was not used). */
static bool
compiled_fresh(const char *dir, const char *ref, size_t ref_len)
{
	struct ab_err err = { 0 };
	cleanup_fd int fd = program_fd_in(AB_SECCOMP_DEFAULT, dir, &err);
	cleanup_free char *b = NULL;
	size_t len = 0;

	if (fd < 0)
		return false;
	b = read_fd_all(fd, &len);
	return fcntl(fd, F_GET_SEALS) >= 0 && b && len == ref_len && memcmp(b, ref, len) == 0;
}

/* The cache entry at path holds exactly ref, as a 0600 regular file. */
static bool
cache_holds(const char *path, const char *ref, size_t ref_len)
{
	cleanup_fd int fd = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
	cleanup_free char *b = NULL;
	struct stat st;
	size_t len = 0;

	if (fd < 0 || fstat(fd, &st) < 0 || !S_ISREG(st.st_mode) || (st.st_mode & 07777) != 0600)
		return false;
	b = read_fd_all(fd, &len);
	return b && len == ref_len && memcmp(b, ref, len) == 0;
}

static void
write_file(const char *path, const void *buf, size_t len, mode_t mode)
{
	cleanup_fd int fd = -1;

	(void) unlink(path);
	fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
	if (fd >= 0) {
		(void) write_all(fd, buf, len);
		(void) fchmod(fd, mode);
	}
}

static void
test_cache(const char *ref, size_t ref_len, const char *ref_strict, size_t strict_len)
{
	const struct scmp_version *v = seccomp_version();
	char tmpl[] = "/tmp/ab-test-seccomp-XXXXXX";
	cleanup_free char *path = NULL, *spath = NULL, *other = NULL, *missing = NULL;
	struct ab_err err = { 0 };
	cleanup_fd int fd1 = -1, fd2 = -1;
	cleanup_free char *b2 = NULL;
	struct stat st, cst;
	size_t len2 = 0;
	char *dir = mkdtemp(tmpl);
	int rm;

	TAP_OK(dir != NULL, "cache: temporary directory");
	if (!dir)
		return;
	path = cache_path(AB_SECCOMP_DEFAULT, dir);
	spath = cache_path(AB_SECCOMP_STRICT, dir);
	TAP_OK(strstr(path, "seccomp-default-r") && v && strstr(path, AB_VERSION),
	       "cache: the name carries policy, rule revision and versions (%s)",
	       strrchr(path, '/') + 1);
	other = xasprintf("%s/elsewhere.bpf", dir);

	fd1 = program_fd_in(AB_SECCOMP_DEFAULT, dir, &err);
	TAP_OK(fd1 >= 0 && fcntl(fd1, F_GET_SEALS) >= 0, "cache: a miss returns the sealed memfd");
	TAP_OK(cache_holds(path, ref, ref_len), "cache: miss writes '%s' (0600, same bytes)",
	       strrchr(path, '/') + 1);

	fd2 = program_fd_in(AB_SECCOMP_DEFAULT, dir, &err);
	TAP_OK(fd2 >= 0, "cache: a hit returns an fd (%s)", err.msg);
	if (fd2 >= 0) {
		b2 = read_fd_all(fd2, &len2);
		TAP_OK(b2 && len2 == ref_len && memcmp(b2, ref, ref_len) == 0,
		       "cache: the hit has identical bytes");
		TAP_OK(fstat(fd2, &st) == 0 && stat(path, &cst) == 0 && st.st_ino == cst.st_ino &&
			       st.st_dev == cst.st_dev,
		       "cache: the hit is the cache file itself");
		TAP_OK(fcntl(fd2, F_GET_SEALS) < 0, "cache: the hit is not a fresh memfd");
		TAP_OK(lseek(fd2, 0, SEEK_CUR) == 0, "cache: the hit is at offset 0");
		TAP_OK((fcntl(fd2, F_GETFL) & (O_ACCMODE | O_NONBLOCK)) == O_RDONLY,
		       "cache: the hit is read-only and blocking");
		TAP_OK(fcntl(fd2, F_GETFD) & FD_CLOEXEC, "cache: the hit is close-on-exec");
	}

	write_file(path, ref, 7, 0600);
	TAP_OK(compiled_fresh(dir, ref, ref_len), "cache: a 7-byte entry is ignored");
	TAP_OK(cache_holds(path, ref, ref_len), "cache: ... and rewritten");

	write_file(path, ref, ref_len - 4, 0600);
	TAP_OK(compiled_fresh(dir, ref, ref_len), "cache: a length not a multiple of 8 is ignored");

	write_file(path, "", 0, 0600);
	TAP_OK(compiled_fresh(dir, ref, ref_len), "cache: an empty entry is ignored");
	TAP_OK(cache_holds(path, ref, ref_len), "cache: ... and rewritten");

	write_file(path, ref, ref_len, 0620);
	TAP_OK(compiled_fresh(dir, ref, ref_len), "cache: a group-writable entry is ignored");
	TAP_OK(cache_holds(path, ref, ref_len), "cache: ... and rewritten 0600");

	write_file(path, ref, ref_len, 0602);
	TAP_OK(compiled_fresh(dir, ref, ref_len), "cache: an other-writable entry is ignored");

	write_file(other, ref, ref_len, 0600);
	(void) unlink(path);
	TAP_OK(symlink(other, path) == 0 && compiled_fresh(dir, ref, ref_len),
	       "cache: a symlink is not followed");
	TAP_OK(cache_holds(path, ref, ref_len), "cache: ... and replaced by a regular file");

	(void) unlink(path);
	TAP_OK(mkfifo(path, 0600) == 0 && compiled_fresh(dir, ref, ref_len),
	       "cache: a FIFO is ignored without blocking");

	(void) unlink(path);
	if (geteuid() == 0) {
		write_file(path, ref, ref_len, 0600);
		TAP_OK(chown(path, 65534, 65534) == 0 && compiled_fresh(dir, ref, ref_len),
		       "cache: an entry owned by another uid is ignored");
		TAP_OK(cache_holds(path, ref, ref_len) && stat(path, &cst) == 0 && cst.st_uid == 0,
		       "cache: ... and replaced by our own");
	} else {
		TAP_OK(1, "cache: foreign owner # SKIP needs root to chown");
		TAP_OK(1, "cache: foreign owner replaced # SKIP needs root to chown");
	}

	(void) unlink(path);
	TAP_OK(mkdir(path, 0700) == 0 && compiled_fresh(dir, ref, ref_len),
	       "cache: a directory in the way is ignored and the call still works");
	(void) rmdir(path);

	missing = xasprintf("%s/does-not-exist", dir);
	TAP_OK(compiled_fresh(missing, ref, ref_len) && access(missing, F_OK) < 0,
	       "cache: a missing cache directory only disables the cache");

	{
		cleanup_fd int sfd = program_fd_in(AB_SECCOMP_STRICT, dir, &err);

		TAP_OK(sfd >= 0 && cache_holds(spath, ref_strict, strict_len),
		       "cache: strict has its own entry");
	}
	TAP_OK(count_temp_files(dir) == 0, "cache: no temporary files left behind");

	(void) unlink(path);
	(void) unlink(spath);
	(void) unlink(other);
	errno = 0;
	rm = rmdir(dir);
	TAP_OK(rm == 0, "cache: nothing else was created (%s)",
	       rm == 0 ? "empty" : strerror(errno));
}

/* Does this kernel take 32-bit (int 0x80) system calls at all? Some hypervisors' guests
 * fault on the entry itself, filter or no filter: the i386 cases then cannot show what the
 * filter does and are skipped, with the reason (the control test below says it too). */
static int i386_entry = -1;

static bool
i386_entry_works(void)
{
	char *argv[] = { (char *) probe_path, "try-syscall", "i386_getpid", NULL };
	struct run r;

	if (i386_entry < 0) {
		run_cmd(argv, NULL, -1, &r);
		i386_entry = exited_ok(&r) && strstr(r.out, "i386_getpid OK");
		free(r.out);
	}
	return i386_entry;
}

static void
test_filtered_probe(enum ab_seccomp_policy p, const char *bytes, size_t len)
{
	struct sock_fprog prog = fprog_of(bytes, len);
	struct strv av = { 0 };
	struct run r;

	strv_push(&av, probe_path);
	push_probe_names(&av);
	TAP_OK(run_cmd(strv_array(&av), &prog, -1, &r) == 0, "prctl %s: run ab-probe",
	       filter_policy_name(p));
	check_results("prctl", p, &r);
	free(r.out);
	strv_done(&av);

	/* Other ABIs die on the arch check (libseccomp's x86_64 prologue for x32 numbers). */
	for (int i = 0; i < 2; i++) {
		const char *what = i == 0 ? "x32_getpid" : "i386_getpid";
		char *argv[] = { (char *) probe_path, "try-syscall", (char *) what, NULL };

		if (i == 1 && !i386_entry_works()) {
			TAP_SKIP("prctl %s: %s: this kernel faults on the 32-bit entry itself",
				 filter_policy_name(p), what);
			continue;
		}
		run_cmd(argv, &prog, -1, &r);
		TAP_OK(WIFSIGNALED(r.wstatus) && WTERMSIG(r.wstatus) == SIGSYS,
		       "prctl %s: %s is killed by SIGSYS", filter_policy_name(p), what);
		if (!WIFSIGNALED(r.wstatus))
			diag(r.out);
		free(r.out);
	}
}

/* Without a filter, each call the filter blocks must get a different answer from the kernel:
 * otherwise the probe's arguments would not show who refused it. */
static void
test_control(void)
{
	char *argv_x[] = { (char *) probe_path, "try-syscall", "i386_getpid", NULL };
	struct strv av = { 0 };
	bool root = geteuid() == 0;
	struct run r;

	strv_push(&av, probe_path);
	push_probe_names(&av);
	TAP_OK(run_cmd(strv_array(&av), NULL, -1, &r) == 0 && exited_ok(&r),
	       "control: ab-probe without a filter");
	for (size_t i = 0; i < ARRAY_SIZE(expects); i++) {
		const struct expect *e = &expects[i];
		char buf[64];
		const char *got = result_of(r.out, e->name, buf, sizeof(buf));
		bool differs = got != NULL;

		if (!e->blocked)
			continue;
		if (!root && e->priv) {
			TAP_OK(got != NULL,
			       "control: %s reached the kernel (%s) # SKIP the kernel "
			       "itself says EPERM to non-root",
			       e->name, got ? got : "?");
			continue;
		}
		for (int p = 0; p < AB_SECCOMP_COUNT; p++)
			if ((e->blocked & (1u << p)) && got && strcmp(got, e->want[p]) == 0)
				differs = false;
		TAP_OK(differs, "control: %s reaches the kernel (%s), not the filter's answer",
		       e->name, got ? got : "no output");
	}
	free(r.out);
	strv_done(&av);

	if (i386_entry_works()) {
		run_cmd(argv_x, NULL, -1, &r);
		TAP_OK(exited_ok(&r) && strstr(r.out, "i386_getpid OK"),
		       "control: the 32-bit entry point works without the filter");
		free(r.out);
	} else {
		TAP_SKIP("control: this kernel faults on the 32-bit entry point without any "
			 "filter (a hypervisor's guest): the i386 cases are skipped");
	}
}

static void
test_bwrap(enum ab_seccomp_policy p, int prog_fd)
{
	const char *name = filter_policy_name(p);
	const char *kind = p == AB_SECCOMP_STRICT ? "unix" : "inet";
	struct strv av = { 0 };
	char buf[64];
	struct run r;

	push_bwrap(&av);
	strv_push(&av, "/probe");
	push_probe_names(&av);
	TAP_OK(run_cmd(strv_array(&av), NULL, prog_fd, &r) == 0, "bwrap %s: run", name);
	check_results("bwrap", p, &r);
	free(r.out);
	strv_done(&av);

	push_bwrap(&av);
	strv_push_n(&av, 2, "/probe", "ids");
	run_cmd(strv_array(&av), NULL, prog_fd, &r);
	TAP_OK(exited_ok(&r) && strstr(r.out, "Seccomp:\t2\n") && strstr(r.out, "NoNewPrivs:\t1\n"),
	       "bwrap %s: the sandbox runs in seccomp filter mode with no_new_privs", name);
	if (!exited_ok(&r))
		diag(r.out);
	free(r.out);
	strv_done(&av);

	for (int i = 0; i < 2; i++) {
		const char *what = i == 0 ? "x32_getpid" : "i386_getpid";

		if (i == 1 && !i386_entry_works()) {
			TAP_SKIP("bwrap %s: %s: this kernel faults on the 32-bit entry itself",
				 name, what);
			continue;
		}
		push_bwrap(&av);
		strv_push_n(&av, 3, "/probe", "try-syscall", what);
		run_cmd(strv_array(&av), NULL, prog_fd, &r);
		TAP_OK(WIFEXITED(r.wstatus) && WEXITSTATUS(r.wstatus) == 128 + SIGSYS &&
			       !result_of(r.out, what, buf, sizeof(buf)),
		       "bwrap %s: %s kills the sandbox (exit %d)", name, what,
		       WIFEXITED(r.wstatus) ? WEXITSTATUS(r.wstatus) : -1);
		free(r.out);
		strv_done(&av);
	}

	push_bwrap(&av);
	strv_push_n(&av, 4, python_path, "-c", python_script, kind);
	run_cmd(strv_array(&av), NULL, prog_fd, &r);
	TAP_OK(exited_ok(&r) && strstr(r.out, "PYOK"),
	       "bwrap %s: python3 asyncio (%s), multiprocessing Pool(2), subprocess, threading",
	       name, kind);
	if (!exited_ok(&r) || !strstr(r.out, "PYOK"))
		diag(r.out);
	free(r.out);
	strv_done(&av);

	push_bwrap(&av);
	strv_push_n(&av, 4, node_path, "-e", node_script, kind);
	run_cmd(strv_array(&av), NULL, prog_fd, &r);
	TAP_OK(exited_ok(&r) && strstr(r.out, "NODEOK"),
	       "bwrap %s: node child_process, fs, worker_threads, net (%s)", name, kind);
	if (!exited_ok(&r) || !strstr(r.out, "NODEOK"))
		diag(r.out);
	free(r.out);
	strv_done(&av);
}

/* AB_FILTER_NO_HIDDEN_MEM, the memory watchdog's variant (issue 24): what it adds to the
 * default policy, and that the default's own rules still hold. Without a filter each of these
 * calls works (sndbufforce needs CAP_NET_ADMIN, ptrace a pid). */
static void
test_memwatch_variant(void)
{
	static const struct {
		const char *name, *want, *control;
	} calls[] = {
		{ "memfd_create", "ENOSYS", "OK" }, { "shmget", "ENOSYS", "OK" },
		{ "msgget", "ENOSYS", "OK" },       { "semget", "ENOSYS", "OK" },
		{ "setpipe_64k", "OK", "OK" },      { "setpipe_1m", "EPERM", "OK" },
		{ "setpipe_hi", "EPERM", "OK" },    { "sndbuf", "EPERM", "OK" },
		{ "sndbufforce", "EPERM", NULL },   { "rcvbuf", "OK", "OK" },
		{ "ptrace", "EPERM", NULL },        { "inotify_init1", "OK", "OK" },
	};
	struct ab_err err = { 0 };
	cleanup_fd int fd =
		filter_program_fd_flags(AB_SECCOMP_DEFAULT, AB_FILTER_NO_HIDDEN_MEM, -1, &err);
	cleanup_free char *bytes = NULL;
	struct strv av = { 0 };
	struct sock_fprog prog;
	struct run r, c;
	size_t len = 0;

	TAP_OK(fd >= 0, "memwatch variant: program fd (%s)", err.msg);
	bytes = fd >= 0 ? read_fd_all(fd, &len) : NULL;
	if (!bytes || len == 0 || len % 8)
		return;
	prog = fprog_of(bytes, len);
	strv_push_n(&av, 2, probe_path, "try-syscall");
	for (size_t i = 0; i < ARRAY_SIZE(calls); i++)
		strv_push(&av, calls[i].name);
	TAP_OK(run_cmd(strv_array(&av), &prog, -1, &r) == 0 && exited_ok(&r),
	       "memwatch variant: ab-probe try-syscall exits 0");
	TAP_OK(run_cmd(strv_array(&av), NULL, -1, &c) == 0 && exited_ok(&c),
	       "memwatch variant: the control run exits 0");
	for (size_t i = 0; i < ARRAY_SIZE(calls); i++) {
		char buf[64];

		TAP_STREQ(result_of(r.out, calls[i].name, buf, sizeof(buf)), calls[i].want,
			  "memwatch variant: %s -> %s", calls[i].name, calls[i].want);
		if (!calls[i].control)
			continue;
		TAP_STREQ(result_of(c.out, calls[i].name, buf, sizeof(buf)), calls[i].control,
			  "memwatch variant control: %s -> %s without the filter", calls[i].name,
			  calls[i].control);
	}
	free(r.out);
	free(c.out);
	strv_done(&av);
}

static bool
have_exe(const char *what, const char *path)
{
	bool ok = path && path[0] == '/' && access(path, X_OK) == 0;

	TAP_OK(ok, "%s is an executable at '%s'", what, path ? path : "(unset)");
	return ok;
}

int
main(void)
{
	char *prog[AB_SECCOMP_COUNT] = { NULL };
	size_t len[AB_SECCOMP_COUNT] = { 0 };
	struct ab_err err = { 0 };
	bool tools;

	test_parse();
	TAP_OK(filter_program_fd(AB_SECCOMP_COUNT, -1, &err) == -EINVAL && err.code == -EINVAL,
	       "an unknown policy is refused with a message ('%s')", err.msg);
	for (int p = 0; p < AB_SECCOMP_COUNT; p++)
		prog[p] = test_program_fd(p, &len[p]);
	if (!prog[AB_SECCOMP_DEFAULT] || !prog[AB_SECCOMP_STRICT]) {
		TAP_OK(0, "cannot go on without both programs");
		return tap_done();
	}
	TAP_OK(len[0] != len[1] || memcmp(prog[0], prog[1], len[0]) != 0,
	       "default and strict differ");
	test_cache(prog[AB_SECCOMP_DEFAULT], len[AB_SECCOMP_DEFAULT], prog[AB_SECCOMP_STRICT],
		   len[AB_SECCOMP_STRICT]);

	probe_path = getenv("AB_PROBE");
	bwrap_path = env_or("BWRAP", "/usr/bin/bwrap");
	python_path = env_or("AB_PYTHON3", "/usr/bin/python3");
	node_path = env_or("AB_NODE", "/usr/bin/node");
	if (!have_exe("AB_PROBE (the static ab-probe helper; set AB_PROBE=/path/to/ab-probe)",
		      probe_path)) {
		free(prog[0]);
		free(prog[1]);
		return tap_done();
	}
	for (int p = 0; p < AB_SECCOMP_COUNT; p++)
		test_filtered_probe(p, prog[p], len[p]);
	test_control();
	test_memwatch_variant();

	tools = have_exe("bwrap", bwrap_path);
	tools = have_exe("python3", python_path) && tools;
	tools = have_exe("node", node_path) && tools;
	if (tools) {
		for (int p = 0; p < AB_SECCOMP_COUNT; p++) {
			struct ab_err e = { 0 };
			cleanup_fd int fd = filter_program_fd(p, -1, &e);

			TAP_OK(fd >= 0, "bwrap %s: program fd (%s)", filter_policy_name(p), e.msg);
			if (fd >= 0)
				test_bwrap(p, fd);
		}
	}
	free(prog[0]);
	free(prog[1]);
	return tap_done();
}
