/* filter.c: the default syscall filter (issue 4). Named filter_*, not seccomp_*: that
 * namespace is libseccomp's.
 *
 * A block-list on top of a default ALLOW action, as Flatpak does (flatpak-run.c setup_seccomp),
 * widened with Docker's "significant syscalls blocked" list. It is compiled with libseccomp,
 * exported as raw BPF and handed to bwrap by fd (bwrap --seccomp FD); bwrap installs it just
 * before it execs the sandbox's PID 1, so everything inside (our init, the interpreter, its
 * children) runs under it. Threat ids refer to docs/threats.md.
 *
 * Rule classes, both policies:
 *  - Architecture: only native x86_64. Any other audit arch (32-bit int 0x80 / sysenter calls)
 *    is killed (SCMP_FLTATR_ACT_BADARCH = KILL_PROCESS). x32 is never added, and libseccomp's
 *    x86_64 prologue sends syscall numbers with the x32 bit (nr & 0x40000000) to the same
 *    bad-arch action; test-seccomp checks both.
 *  - EPERM: Flatpak's block-list, Flatpak's non-devel list (perf_event_open, ptrace,
 *    personality other than PER_LINUX or the 0xffffffff query) and Docker's additions
 *    (module, kexec, swap, clock, reboot, bpf, userfaultfd, process_vm_*, kcmp, ...).
 *  - EPERM: clone() with any CLONE_NEW* flag, by masked compare on the flags argument.
 *  - EPERM: ioctl TIOCSTI and TIOCLINUX, compared on the low 32 bits only (the kernel ignores
 *    the upper half of the command), so TIOCSTI | 1 << 32 is caught (CVE-2019-10063).
 *    TIOCSCTTY is allowed (issue 15: forkpty, pty.spawn, pexpect need it): no terminal of the
 *    host ever reaches the sandbox (--stdin takes regular files, agentbox-init refuses to
 *    start with a terminal on fds 0-2 and closes the rest), so the only terminals a script
 *    can adopt are the ptys of its own private /dev/pts.
 *  - ENOSYS: clone3, io_uring_* and the new mount API. ENOSYS, not EPERM, because it means
 *    "this kernel has no such call": glibc then falls back from clone3 to clone (pthreads,
 *    posix_spawn) and libuv (Node >= 20.3) from io_uring to its epoll/thread-pool paths,
 *    while EPERM would surface as a hard error.
 *  - EPERM: setting S_ISUID or S_ISGID (issue 12, T27): chmod, fchmod, fchmodat and fchmodat2
 *    with either bit in the mode; open/openat that create (O_CREAT or O_TMPFILE) with either
 *    bit; creat, mkdir(at) and mknod(at) with either bit. Masked compares on the mode argument
 *    (and the flags argument for open), ANDed in one rule. Nothing else sets these bits: chown
 *    and writes clear them, ACLs do not carry them, io_uring is ENOSYS. Only x86_64 numbers are
 *    needed, since every other ABI is killed (above). Plain modes (0755, 0644, 01777) pass.
 *  - ENOSYS: openat2, whose mode sits in a struct behind a pointer that seccomp cannot read;
 *    glibc, CPython and Node never call it (checked with strace), libc wrappers fall back.
 *  - EAFNOSUPPORT: socket() and socketpair() with any family but AF_UNIX, AF_INET, AF_INET6
 *    (the whole 64-bit argument must equal an allowed value). AF_NETLINK is refused too, so
 *    getifaddrs() (Node os.networkInterfaces(), psutil) fails; glibc's getaddrinfo() copes.
 *
 * The strict policy adds:
 *  - socket()/socketpair(): AF_UNIX only (AF_INET/AF_INET6 -> EAFNOSUPPORT), so nothing can
 *    talk IP even if a later change shares a network namespace (T11).
 *  - EPERM for the remaining calls that act on other processes or peek at them:
 *    get_robust_list (reads another task's futex list), process_madvise (acts on another
 *    process's memory through a pidfd) and sched_setaffinity (placement stays the
 *    supervisor's business, Docker T31 note).
 *  - EMFILE for inotify_init/inotify_init1: instances are charged to the host uid (T24);
 *    EMFILE is what an exhausted quota returns, which watchers already handle (polling).
 *
 * With AB_FILTER_NO_HIDDEN_MEM (the memory limit is agentbox's watchdog, memwatch.h):
 *  - ENOSYS for memfd_create, memfd_secret and shmget: their pages need not be mapped by any
 *    process nor live in a tmpfs the watchdog can see. ENOSYS makes callers fall back to a
 *    file in /dev/shm or /tmp (glibc's shm_open, CPython's multiprocessing), which is counted.
 *  - ENOSYS for msgget and semget (issue 24): SysV message queues and semaphore arrays are
 *    kernel memory no process maps (480 MiB of queued messages at the kernel's defaults).
 *    Their limits live in the IPC namespace and only its root may lower them: unprivileged,
 *    that would be the caller's uid, the script's own. Neither Python's nor Node's standard
 *    library uses them (multiprocessing's semaphores are POSIX ones, futexes in /dev/shm).
 *  - EPERM for F_SETPIPE_SZ above 64 KiB (a pipe's default), and for SO_SNDBUF and
 *    SO_SNDBUFFORCE: the watchdog charges a pipe at 64 KiB and bounds what a closed AF_UNIX
 *    sender leaves queued by net.core.wmem_default (memwatch.h).
 *
 * With AB_FILTER_NO_INOTIFY (unprivileged where the run's user namespace cannot cap inotify,
 * limitplan.h limits_cap_inotify: a read-only /proc/sys in a container):
 *  - EMFILE for inotify_init/inotify_init1, as in the strict policy: the sandbox runs as the
 *    caller's uid, and its instances would come out of the caller's own quota (T24).
 */
#include "filter.h"

#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <linux/filter.h>
#include <linux/sched.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>

/* libseccomp's header; ours is filter.h, so <seccomp.h> cannot resolve to it. */
#include <seccomp.h>

#include "../util/fdutil.h"
#include "../util/macro.h"
#include "../util/xalloc.h"
#include "config.h"

/* Syscalls newer than libseccomp 2.5.4's table: added by number (x86_64). */
#define AB_NR_QUOTACTL_FD    443 /* Linux 5.14 */
#define AB_NR_MEMPOLICY_HOME 450 /* Linux 5.17 */
#define AB_NR_FCHMODAT2      452 /* Linux 6.6 */
#define AB_NR_OPEN_TREE_ATTR 467 /* Linux 6.15 */
#define AB_NR_MEMFD_SECRET   447 /* Linux 5.14 */

/* The bit the kernel tests for O_TMPFILE (O_TMPFILE itself also has O_DIRECTORY). */
#ifdef __O_TMPFILE
#define AB_O_TMPFILE __O_TMPFILE
#else
#define AB_O_TMPFILE 020000000
#endif

#define POL_DEFAULT (1u << AB_SECCOMP_DEFAULT)
#define POL_STRICT  (1u << AB_SECCOMP_STRICT)
#define POL_ALL     (POL_DEFAULT | POL_STRICT)

struct ab_rule {
	const char *name; /* for error messages */
	int nr;           /* x86_64 syscall number */
	int errnum;       /* returned as -errnum */
	unsigned policies;
	unsigned n_cmp;             /* 0-2 argument comparisons, all of which must match */
	struct scmp_arg_cmp cmp[2]; /* on different arguments (libseccomp ANDs them) */
};

/* A whole syscall, by libseccomp name or by number. */
#define R(sys, e, pol)                                                              \
	{                                                                           \
		.name = #sys, .nr = SCMP_SYS(sys), .errnum = (e), .policies = (pol) \
	}
#define RN(sys, nr_, e, pol)                                                \
	{                                                                   \
		.name = #sys, .nr = (nr_), .errnum = (e), .policies = (pol) \
	}
/* (argument argn & mask) == value, compared on all 64 bits of the argument. */
#define MASKED(argn, mask, value)                                                              \
	{                                                                                      \
		.arg = (argn), .op = SCMP_CMP_MASKED_EQ, .datum_a = (mask), .datum_b = (value) \
	}
/* Both policies: one masked compare. */
#define RM(sys, e, argn, mask, value)                                                              \
	{                                                                                          \
		.name = #sys, .nr = SCMP_SYS(sys), .errnum = (e), .policies = POL_ALL, .n_cmp = 1, \
		.cmp = { MASKED(argn, mask, value) }                                               \
	}
#define RCLONE(flag) RM(clone, EPERM, 0, (flag), (flag))
#define RIOCTL(cmd)  RM(ioctl, EPERM, 1, 0xffffffffu, (cmd))

static const struct ab_rule ab_rules[] = {
	/* Flatpak's block-list (always on in Flatpak). */
	R(syslog, EPERM, POL_ALL),     /* T31: kernel log leaks addresses (KASLR) */
	R(uselib, EPERM, POL_ALL),     /* T31: obsolete a.out loader */
	R(acct, EPERM, POL_ALL),       /* T31: process accounting is host-global */
	R(modify_ldt, EPERM, POL_ALL), /* T31: old attack surface, not needed by 64-bit code */
	R(quotactl, EPERM, POL_ALL),   /* T31: quotas are host-global */
	RN(quotactl_fd, AB_NR_QUOTACTL_FD, EPERM, POL_ALL), /* T31: same as quotactl */
	R(add_key, EPERM, POL_ALL),                         /* T8: keyring is not namespaced */
	R(keyctl, EPERM, POL_ALL),                          /* T8: keyring is not namespaced */
	R(request_key, EPERM, POL_ALL),                     /* T8: keyring is not namespaced */
	R(move_pages, EPERM, POL_ALL),    /* T31: NUMA, leaks other processes' layout */
	R(mbind, EPERM, POL_ALL),         /* T31: NUMA policy, host topology */
	R(get_mempolicy, EPERM, POL_ALL), /* T31: NUMA policy, host topology */
	R(set_mempolicy, EPERM, POL_ALL), /* T31: NUMA policy, host topology */
	RN(set_mempolicy_home_node, AB_NR_MEMPOLICY_HOME, EPERM, POL_ALL), /* T31: NUMA policy */
	R(migrate_pages, EPERM, POL_ALL), /* T31: NUMA, acts on other processes */
	R(unshare, EPERM, POL_ALL),       /* T32/T3: no new namespaces inside the sandbox */
	R(setns, EPERM, POL_ALL),         /* T32/T3: no joining other namespaces */
	R(mount, EPERM, POL_ALL),         /* T3: mount breakouts */
	R(umount2, EPERM, POL_ALL),       /* T3: unmounting the sandbox's binds */
	R(pivot_root, EPERM, POL_ALL),    /* T3: mount breakouts */
	R(chroot, EPERM, POL_ALL),        /* T3: classic chroot escape */
	/* Flatpak's non-devel list. */
	R(perf_event_open, EPERM, POL_ALL), /* T31: perf is a large exploit surface */
	R(ptrace, EPERM, POL_ALL),          /* T12: PID 1 runs as the same uid and is dumpable */
	/* Docker's additions. */
	R(process_vm_readv, EPERM, POL_ALL),  /* T12: reads another process's memory */
	R(process_vm_writev, EPERM, POL_ALL), /* T12: writes another process's memory */
	R(kcmp, EPERM, POL_ALL),              /* T12: inspects other processes' kernel objects */
	R(pidfd_getfd, EPERM, POL_ALL),       /* T12: steals fds from another process */
	R(userfaultfd, EPERM, POL_ALL),       /* T31: makes kernel races reliable */
	R(bpf, EPERM, POL_ALL),               /* T31: verifier bugs */
	R(kexec_load, EPERM, POL_ALL),        /* T31: replaces the running kernel */
	R(kexec_file_load, EPERM, POL_ALL),   /* T31: replaces the running kernel */
	R(init_module, EPERM, POL_ALL),       /* T31: loads kernel code */
	R(finit_module, EPERM, POL_ALL),      /* T31: loads kernel code */
	R(delete_module, EPERM, POL_ALL),     /* T31: unloads kernel code */
	R(open_by_handle_at, EPERM, POL_ALL), /* T3: "shocker" escape past the mount tree */
	R(name_to_handle_at, EPERM, POL_ALL), /* T3: mints handles for open_by_handle_at */
	R(lookup_dcookie, EPERM, POL_ALL),    /* T31: profiling interface, host paths */
	R(swapon, EPERM, POL_ALL),            /* T31: swap is host-global */
	R(swapoff, EPERM, POL_ALL),           /* T31: swap is host-global */
	R(reboot, EPERM, POL_ALL),            /* T31: host-global */
	R(settimeofday, EPERM, POL_ALL),      /* T31: the clock is host-global */
	R(clock_settime, EPERM, POL_ALL),     /* T31: the clock is host-global */
	R(clock_adjtime, EPERM, POL_ALL),     /* T31: may set the clock; mode is behind a pointer */
	R(adjtimex, EPERM, POL_ALL),          /* T31: may set the clock; mode is behind a pointer */
	R(iopl, EPERM, POL_ALL),              /* T31: raw port I/O */
	R(ioperm, EPERM, POL_ALL),            /* T31: raw port I/O */
	R(vhangup, EPERM, POL_ALL),           /* T10: hangs up a terminal */
	R(nfsservctl, EPERM, POL_ALL),        /* T31: removed from Linux; keep it dead */
	R(fanotify_init, EPERM, POL_ALL),     /* T31: watches filesystems beyond the sandbox */
	/* ENOSYS so that callers fall back to older interfaces (see the top comment). */
	R(clone3, ENOSYS, POL_ALL), /* T32: flags sit behind a pointer seccomp cannot read */
	R(io_uring_setup, ENOSYS, POL_ALL),    /* T31: io_uring ops bypass seccomp */
	R(io_uring_enter, ENOSYS, POL_ALL),    /* T31: io_uring ops bypass seccomp */
	R(io_uring_register, ENOSYS, POL_ALL), /* T31: io_uring ops bypass seccomp */
	R(open_tree, ENOSYS, POL_ALL),         /* T3: new mount API (CVE-2021-41133) */
	RN(open_tree_attr, AB_NR_OPEN_TREE_ATTR, ENOSYS, POL_ALL), /* T3: new mount API */
	R(move_mount, ENOSYS, POL_ALL),                            /* T3: new mount API */
	R(fsopen, ENOSYS, POL_ALL),                                /* T3: new mount API */
	R(fsconfig, ENOSYS, POL_ALL),      /* T3/T32: new mount API (CVE-2022-0185) */
	R(fsmount, ENOSYS, POL_ALL),       /* T3: new mount API */
	R(fspick, ENOSYS, POL_ALL),        /* T3: new mount API */
	R(mount_setattr, ENOSYS, POL_ALL), /* T3: new mount API */
	R(openat2, ENOSYS, POL_ALL), /* T27: its mode is behind a pointer (see ab_mode_rules) */
	/* ioctl: the kernel uses the low 32 bits of the command, so compare only those. */
	RIOCTL(TIOCSTI),   /* T10: keystroke injection (CVE-2017-5226, CVE-2019-10063) */
	RIOCTL(TIOCLINUX), /* T10: console injection (CVE-2023-28100) */
	/* clone() with a namespace flag. CLONE_NEWTIME (0x80) is absent on purpose: for clone()
	 * that bit is part of the exit-signal byte (CSIGNAL), so the kernel only takes it from
	 * clone3 (ENOSYS above) and unshare (EPERM above). */
	RCLONE(CLONE_NEWUSER),   /* T32: nested user namespaces re-grant capabilities */
	RCLONE(CLONE_NEWNS),     /* T3: a private mount tree to remount binds in */
	RCLONE(CLONE_NEWPID),    /* T32: namespace surface, only with NEWUSER anyway */
	RCLONE(CLONE_NEWNET),    /* T32: nf_tables and friends (CVE-2023-32233, CVE-2024-1086) */
	RCLONE(CLONE_NEWUTS),    /* T32: namespace surface, only with NEWUSER anyway */
	RCLONE(CLONE_NEWIPC),    /* T32: namespace surface, only with NEWUSER anyway */
	RCLONE(CLONE_NEWCGROUP), /* T32: cgroup v1 release_agent (CVE-2022-0492) */
	/* strict only */
	R(get_robust_list, EPERM, POL_STRICT),   /* T12: reads another task's futex list */
	R(process_madvise, EPERM, POL_STRICT),   /* T12: acts on another process's memory */
	R(sched_setaffinity, EPERM, POL_STRICT), /* T31: CPU placement is the supervisor's */
	R(inotify_init, EMFILE, POL_STRICT),     /* T24: instances count against the host uid */
	R(inotify_init1, EMFILE, POL_STRICT),    /* T24: instances count against the host uid */
};

/* T27, issue 12: the calls whose mode argument can put S_ISUID or S_ISGID on a file or
 * directory. No such file is ever made in the sandbox, so none can reach the host through
 * --workspace DIR (a host directory) or anything else. */
struct ab_mode_rule {
	const char *name;
	int nr;
	unsigned mode_arg;
	int flags_arg; /* -1: the call always creates or sets; else only with O_CREAT/O_TMPFILE */
};

static const struct ab_mode_rule ab_mode_rules[] = {
	{ "chmod", SCMP_SYS(chmod), 1, -1 },
	{ "fchmod", SCMP_SYS(fchmod), 1, -1 },
	{ "fchmodat", SCMP_SYS(fchmodat), 2, -1 },
	{ "fchmodat2", AB_NR_FCHMODAT2, 2, -1 },
	{ "creat", SCMP_SYS(creat), 1, -1 },
	{ "open", SCMP_SYS(open), 2, 1 },
	{ "openat", SCMP_SYS(openat), 3, 2 },
	{ "mkdir", SCMP_SYS(mkdir), 1, -1 }, /* the kernel drops both bits; refused all the same */
	{ "mkdirat", SCMP_SYS(mkdirat), 2, -1 },
	{ "mknod", SCMP_SYS(mknod), 1, -1 }, /* S_IFREG needs no CAP_MKNOD */
	{ "mknodat", SCMP_SYS(mknodat), 2, -1 },
};

/* socket() families that stay reachable, sorted ascending. */
static const int ab_families_default[] = { AF_UNIX, AF_INET, AF_INET6 };
static const int ab_families_strict[] = { AF_UNIX };

/* The libseccomp context as a cleanup attribute. */
static void
filter_ctx_releasep(scmp_filter_ctx *ctx)
{
	if (*ctx)
		seccomp_release(*ctx);
}
#define cleanup_seccomp __attribute__((cleanup(filter_ctx_releasep)))

static int
add_rule(scmp_filter_ctx ctx, const struct ab_rule *r, struct ab_err *err)
{
	int k;

	k = seccomp_rule_add_exact_array(ctx, SCMP_ACT_ERRNO(r->errnum), r->nr, r->n_cmp, r->cmp);
	if (k < 0)
		return ab_err_set(err, k, "seccomp: cannot add the rule for '%s' (nr %d)", r->name,
				  r->nr);
	return 0;
}

/* Refuses every value of argument 0 of nr that is not in allowed[] (sorted): below the first,
 * each gap value between two allowed ones, and above the last. The compare is on all 64 bits,
 * so a family with junk in the upper half never matches an allowed value. */
static int
add_family_allowlist(scmp_filter_ctx ctx, const char *name, int nr, const int *allowed, size_t n,
		     struct ab_err *err)
{
	struct ab_rule r = { .name = name, .nr = nr, .errnum = EAFNOSUPPORT, .n_cmp = 1 };
	int k;

	r.cmp[0] = (struct scmp_arg_cmp){ .arg = 0, .op = SCMP_CMP_LT, .datum_a = allowed[0] };
	if (allowed[0] > 0 && (k = add_rule(ctx, &r, err)) < 0)
		return k;
	for (size_t i = 0; i + 1 < n; i++) {
		for (int v = allowed[i] + 1; v < allowed[i + 1]; v++) {
			r.cmp[0] =
				(struct scmp_arg_cmp){ .arg = 0, .op = SCMP_CMP_EQ, .datum_a = v };
			if ((k = add_rule(ctx, &r, err)) < 0)
				return k;
		}
	}
	r.cmp[0] = (struct scmp_arg_cmp){ .arg = 0, .op = SCMP_CMP_GT, .datum_a = allowed[n - 1] };
	return add_rule(ctx, &r, err);
}

/* EPERM for each call of ab_mode_rules[] whose mode has S_ISUID or S_ISGID set: one masked
 * compare per bit (the kernel reads the mode as a umode_t, and the mask looks at that one bit
 * only, so junk in the upper bits changes nothing). open/openat only refuse when they create:
 * the mode is ignored otherwise. The flags test and the mode test are two comparisons on two
 * arguments of one rule, which libseccomp ANDs. */
static int
add_mode_rules(scmp_filter_ctx ctx, struct ab_err *err)
{
	static const unsigned bits[] = { S_ISUID, S_ISGID };
	static const unsigned creates[] = { O_CREAT, AB_O_TMPFILE };
	int k;

	for (size_t i = 0; i < ARRAY_SIZE(ab_mode_rules); i++) {
		const struct ab_mode_rule *m = &ab_mode_rules[i];

		for (size_t b = 0; b < ARRAY_SIZE(bits); b++) {
			struct ab_rule r = { .name = m->name, .nr = m->nr, .errnum = EPERM };
			struct scmp_arg_cmp mode = { .arg = m->mode_arg,
						     .op = SCMP_CMP_MASKED_EQ,
						     .datum_a = bits[b],
						     .datum_b = bits[b] };

			if (m->flags_arg < 0) {
				r.n_cmp = 1;
				r.cmp[0] = mode;
				if ((k = add_rule(ctx, &r, err)) < 0)
					return k;
				continue;
			}
			for (size_t c = 0; c < ARRAY_SIZE(creates); c++) {
				r.n_cmp = 2;
				r.cmp[0] = (struct scmp_arg_cmp){ .arg = (unsigned) m->flags_arg,
								  .op = SCMP_CMP_MASKED_EQ,
								  .datum_a = creates[c],
								  .datum_b = creates[c] };
				r.cmp[1] = mode;
				if ((k = add_rule(ctx, &r, err)) < 0)
					return k;
			}
		}
	}
	return 0;
}

/* personality(2) other than PER_LINUX (0) or the 0xffffffff query -> EPERM (T31:
 * READ_IMPLIES_EXEC, ADDR_NO_RANDOMIZE). libseccomp takes one comparison per argument and rule,
 * so "not 0 and not 0xffffffff" is built as a union: every other 32-bit value has, going round
 * the word, some bit i set whose neighbour bit i+1 is clear, and one masked rule per i catches
 * exactly those. Values above 32 bits (which the kernel would truncate) are refused as well. */
static int
add_personality_rules(scmp_filter_ctx ctx, struct ab_err *err)
{
	struct ab_rule r = { .name = "personality", .nr = SCMP_SYS(personality), .errnum = EPERM };
	int k;

	r.n_cmp = 1;
	r.cmp[0] = (struct scmp_arg_cmp){ .arg = 0, .op = SCMP_CMP_GT, .datum_a = 0xffffffffu };
	if ((k = add_rule(ctx, &r, err)) < 0)
		return k;
	for (unsigned i = 0; i < 32; i++) {
		uint64_t set = 1ull << i, clear = 1ull << ((i + 1) % 32);

		r.cmp[0] = (struct scmp_arg_cmp){
			.arg = 0, .op = SCMP_CMP_MASKED_EQ, .datum_a = set | clear, .datum_b = set
		};
		if ((k = add_rule(ctx, &r, err)) < 0)
			return k;
	}
	return 0;
}

/* (argument argn, as the kernel's 32-bit int) == value */
#define EQ32(argn, value) MASKED(argn, 0xffffffffu, value)

/* AB_FILTER_NO_HIDDEN_MEM: memory the watchdog could not count (see the top comment). */
static const struct ab_rule ab_hidden_mem_rules[] = {
	R(memfd_create, ENOSYS, POL_ALL),
	RN(memfd_secret, AB_NR_MEMFD_SECRET, ENOSYS, POL_ALL),
	R(shmget, ENOSYS, POL_ALL),
	R(msgget, ENOSYS, POL_ALL), /* message queues: kernel memory, msgmni x msgmnb */
	R(semget, ENOSYS, POL_ALL), /* semaphore arrays: kernel memory, semmns of them */
	/* a pipe holds at most its default 64 KiB (16 pages), which the watchdog charges */
	{ .name = "fcntl",
	  .nr = SCMP_SYS(fcntl),
	  .errnum = EPERM,
	  .policies = POL_ALL,
	  .n_cmp = 2,
	  .cmp = { EQ32(1, F_SETPIPE_SZ),
		   { .arg = 2, .op = SCMP_CMP_GT, .datum_a = AB_FILTER_PIPE_MAX } } },
	/* a socket's send queue stays within net.core.wmem_default: what a closed AF_UNIX
	 * sender leaves in its peer's queue is then bounded (memwatch.h) */
	{ .name = "setsockopt",
	  .nr = SCMP_SYS(setsockopt),
	  .errnum = EPERM,
	  .policies = POL_ALL,
	  .n_cmp = 2,
	  .cmp = { EQ32(1, SOL_SOCKET), EQ32(2, SO_SNDBUF) } },
	{ .name = "setsockopt",
	  .nr = SCMP_SYS(setsockopt),
	  .errnum = EPERM,
	  .policies = POL_ALL,
	  .n_cmp = 2,
	  .cmp = { EQ32(1, SOL_SOCKET), EQ32(2, SO_SNDBUFFORCE) } },
};

/* AB_FILTER_NO_INOTIFY (see the top comment); the strict policy has these already. */
static const struct ab_rule ab_inotify_rules[] = {
	R(inotify_init, EMFILE, POL_DEFAULT),
	R(inotify_init1, EMFILE, POL_DEFAULT),
};

static int
build_filter(enum ab_seccomp_policy p, unsigned flags, scmp_filter_ctx *ret, struct ab_err *err)
{
	cleanup_seccomp scmp_filter_ctx ctx = NULL;
	const int *fam;
	size_t nfam;
	int k;

	ctx = seccomp_init(SCMP_ACT_ALLOW); /* a block-list, like Flatpak's */
	if (!ctx)
		return ab_err_set(err, -ENOMEM, "seccomp: cannot create a libseccomp context");
	/* Native arch only; anything else is killed: 32-bit int 0x80 calls would otherwise
	 * reach syscalls under numbers this filter never looks at. */
	if (seccomp_arch_native() != SCMP_ARCH_X86_64)
		return ab_err_set(err, -EOPNOTSUPP, "seccomp: the filter is written for x86_64");
	if (seccomp_arch_exist(ctx, SCMP_ARCH_X32) == 0 &&
	    (k = seccomp_arch_remove(ctx, SCMP_ARCH_X32)) < 0)
		return ab_err_set(err, k, "seccomp: cannot remove the x32 architecture");
	/* libseccomp refuses KILL_PROCESS when it cannot probe seccomp(2) in this process (under
	 * valgrind, or when an outer filter hides seccomp(2)). We only export the program; bwrap
	 * loads it on this kernel, which has KILL_PROCESS since 4.14, and a kernel without it
	 * would make that load fail, i.e. fail closed. So claim API level 3 (KILL_PROCESS). */
	if (seccomp_api_get() < 3)
		(void) seccomp_api_set(3);
	k = seccomp_attr_set(ctx, SCMP_FLTATR_ACT_BADARCH, SCMP_ACT_KILL_PROCESS);
	if (k < 0)
		return ab_err_set(err, k, "seccomp: cannot set the bad-architecture action");
	/* A binary tree instead of a linear scan: every syscall in the sandbox pays for it. */
	(void) seccomp_attr_set(ctx, SCMP_FLTATR_CTL_OPTIMIZE, 2);

	for (size_t i = 0; i < ARRAY_SIZE(ab_rules); i++) {
		if (!(ab_rules[i].policies & (1u << p)))
			continue;
		if ((k = add_rule(ctx, &ab_rules[i], err)) < 0)
			return k;
	}
	if (flags & AB_FILTER_NO_HIDDEN_MEM)
		for (size_t i = 0; i < ARRAY_SIZE(ab_hidden_mem_rules); i++)
			if ((k = add_rule(ctx, &ab_hidden_mem_rules[i], err)) < 0)
				return k;
	if (flags & AB_FILTER_NO_INOTIFY)
		for (size_t i = 0; i < ARRAY_SIZE(ab_inotify_rules); i++)
			if ((ab_inotify_rules[i].policies & (1u << p)) &&
			    (k = add_rule(ctx, &ab_inotify_rules[i], err)) < 0)
				return k;
	if ((k = add_personality_rules(ctx, err)) < 0)
		return k;
	if ((k = add_mode_rules(ctx, err)) < 0)
		return k;

	/* T31/T11: AF_VSOCK, AF_ALG, AF_PACKET, AF_NETLINK... are kernel surface we do not need */
	if (p == AB_SECCOMP_STRICT) {
		fam = ab_families_strict;
		nfam = ARRAY_SIZE(ab_families_strict);
	} else {
		fam = ab_families_default;
		nfam = ARRAY_SIZE(ab_families_default);
	}
	if ((k = add_family_allowlist(ctx, "socket", SCMP_SYS(socket), fam, nfam, err)) < 0)
		return k;
	if ((k = add_family_allowlist(ctx, "socketpair", SCMP_SYS(socketpair), fam, nfam, err)) < 0)
		return k;

	*ret = steal_ptr(&ctx);
	return 0;
}

/* True when size fits a BPF program that bwrap would accept (struct sock_filter[]). */
static bool
program_size_ok(off_t size)
{
	return size > 0 && size % (off_t) sizeof(struct sock_filter) == 0 &&
	       size <= (off_t) (BPF_MAXINSNS * sizeof(struct sock_filter));
}

/* Bump whenever the rule table changes: it is part of the cache key. */
#define AB_SECCOMP_RULES_REV 5

char *
filter_cache_name_flags(enum ab_seccomp_policy p, unsigned flags)
{
	const struct scmp_version *v = seccomp_version();

	return xasprintf("seccomp-%s%s%s-r%d-%u.%u.%u-%s.bpf", filter_policy_name(p),
			 flags & AB_FILTER_NO_HIDDEN_MEM ? "-memwatch" : "",
			 flags & AB_FILTER_NO_INOTIFY ? "-noinotify" : "", AB_SECCOMP_RULES_REV,
			 v ? v->major : 0, v ? v->minor : 0, v ? v->micro : 0, AB_VERSION);
}

char *
filter_cache_name(enum ab_seccomp_policy p)
{
	return filter_cache_name_flags(p, 0);
}

/* Returns an fd on a usable cache entry, or -errno when there is none (or it is not trusted:
 * not a regular file, not ours, writable by group/other, or a length no BPF program has). */
static int
cache_open(int cache_dirfd, const char *name)
{
	cleanup_fd int fd = -1;
	struct stat st;
	int fl;

	/* O_NONBLOCK: a FIFO planted there must not hang us; cleared again below. */
	fd = openat(cache_dirfd, name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK);
	if (fd < 0)
		return -errno;
	if (fstat(fd, &st) < 0)
		return -errno;
	if (!S_ISREG(st.st_mode) || st.st_uid != geteuid() || (st.st_mode & (S_IWGRP | S_IWOTH)))
		return -EPERM;
	if (!program_size_ok(st.st_size))
		return -EINVAL;
	fl = fcntl(fd, F_GETFL);
	if (fl < 0 || fcntl(fd, F_SETFL, fl & ~O_NONBLOCK) < 0)
		return -errno;
	return steal_fd(&fd);
}

/* Best effort: a cache that cannot be written only costs a recompile next time. */
static void
cache_store(int cache_dirfd, const char *name, const void *buf, size_t len)
{
	cleanup_free char *tmp = xasprintf(".%s.%d.tmp", name, (int) getpid());
	cleanup_fd int fd = -1;

	fd = openat(cache_dirfd, tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
	if (fd < 0)
		return;
	if (write_all(fd, buf, len) < 0 || fdatasync(fd) < 0 ||
	    renameat(cache_dirfd, tmp, cache_dirfd, name) < 0)
		(void) unlinkat(cache_dirfd, tmp, 0);
}

/* Exports ctx into a sealed memfd at offset 0; *ret_buf and *ret_len get a copy of the bytes. */
static int
export_memfd(scmp_filter_ctx ctx, void **ret_buf, size_t *ret_len, struct ab_err *err)
{
	cleanup_fd int fd = -1;
	cleanup_free void *buf = NULL;
	struct stat st;
	size_t got = 0;
	int k;

	fd = memfd_create("agentbox-seccomp", MFD_CLOEXEC | MFD_ALLOW_SEALING);
	if (fd < 0)
		return ab_err_set(err, -errno, "seccomp: memfd_create");
	k = seccomp_export_bpf(ctx, fd);
	if (k < 0)
		return ab_err_set(err, k, "seccomp: cannot export the BPF program");
	if (fstat(fd, &st) < 0)
		return ab_err_set(err, -errno, "seccomp: fstat on the program memfd");
	if (!program_size_ok(st.st_size))
		return ab_err_set(err, -EINVAL, "seccomp: libseccomp produced %jd bytes of BPF",
				  (intmax_t) st.st_size);
	buf = xmalloc((size_t) st.st_size);
	while (got < (size_t) st.st_size) {
		ssize_t n = pread(fd, (char *) buf + got, (size_t) st.st_size - got, (off_t) got);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return ab_err_set(err, n < 0 ? -errno : -EIO,
					  "seccomp: reading back the program memfd");
		got += (size_t) n;
	}
	/* Nobody, bwrap included, can change the program after this. */
	if (fcntl(fd, F_ADD_SEALS, F_SEAL_WRITE | F_SEAL_GROW | F_SEAL_SHRINK | F_SEAL_SEAL) < 0)
		return ab_err_set(err, -errno, "seccomp: sealing the program memfd");
	if (lseek(fd, 0, SEEK_SET) < 0) /* bwrap reads from the current offset */
		return ab_err_set(err, -errno, "seccomp: rewinding the program memfd");
	*ret_len = got;
	*ret_buf = steal_ptr(&buf);
	return steal_fd(&fd);
}

int
filter_program_fd(enum ab_seccomp_policy p, int cache_dirfd, struct ab_err *err)
{
	return filter_program_fd_flags(p, 0, cache_dirfd, err);
}

int
filter_program_fd_flags(enum ab_seccomp_policy p, unsigned flags, int cache_dirfd,
			struct ab_err *err)
{
	cleanup_seccomp scmp_filter_ctx ctx = NULL;
	cleanup_free char *path = NULL;
	cleanup_free void *buf = NULL;
	size_t len = 0;
	int fd, k;

	if ((unsigned) p >= AB_SECCOMP_COUNT)
		return ab_err_set(err, -EINVAL, "seccomp: unknown policy %d", (int) p);
	if (cache_dirfd >= 0) {
		path = filter_cache_name_flags(p, flags);
		fd = cache_open(cache_dirfd, path);
		if (fd >= 0)
			return fd; /* offset 0, read-only, owned by us */
	}
	if ((k = build_filter(p, flags, &ctx, err)) < 0)
		return k;
	fd = export_memfd(ctx, &buf, &len, err);
	if (fd < 0)
		return fd;
	if (path)
		cache_store(cache_dirfd, path, buf, len);
	return fd;
}
