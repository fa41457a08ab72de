/* vphone-exec: how every process gets into a virtual phone, confined (vphone/src/vphone/sandbox.py).
 *
 *   vphone-exec launch --uid-base B --id-count N --state-dir DIR [--cgroup FILE]... [--nproc N]
 *                      [--notify-sock PATH] -- PROG ARG...
 *       (host root) join the cgroups, bind DIR at /mnt/vphone in a private mount namespace,
 *       create a user namespace mapping phone ids 0..N-1 to host ids B..B+N-1, become its uid 0
 *       and exec PROG (bwrap, which makes the phone's other namespaces, all owned by this one:
 *       the phone's root is root only there).
 *   vphone-exec enter --pid P --uid U --gid G [--cgroup FILE]... [--nproc N]
 *                     [--cwd DIR] [--notify-sock PATH] (-- PROG ARG... | --serve-files FD)
 *       join the cgroups, then the user, ipc, uts, net, cgroup, pid and mount namespaces of the
 *       phone whose init is host pid P, its root, fork (the child is in the phone's PID
 *       namespace), become U/G, bound the capabilities to what the phone's root needs (none for
 *       other users), set no_new_privs, load the seccomp filter and exec PROG, or serve file
 *       requests on FD (the sync service's file access, done by the phone's own user). The
 *       parent waits and exits as the child did, so the caller sees one process.
 *   vphone-exec noexec --pid P PATH
 *       remount PATH in the phone's mount namespace noexec (with the phone's own mount rights:
 *       its user namespace), as Android mounts shared storage; bwrap binds have no such option.
 *   vphone-exec bind --pid P (--view SRC | --host-file FILE) DST [--host-file FILE DST]...
 *       a mount the phone asked for, done in its mount namespace with its own mount rights, as
 *       its kernel would (the phone's root itself may not mount: seccomp, no CAP_SYS_ADMIN).
 *       --view: SRC is a cgroup view of the phone (/dev/cpuset...), made a shared mount and
 *       bound recursively at DST (`mount -t cgroup` of that hierarchy; shared, so that files
 *       bound into the view later show at DST too). --host-file: the host's FILE (a cgroup's
 *       tasks or cgroup.procs of this phone's own host cgroup, chosen by the daemon) is bound
 *       over the phone's file DST (a new cpuset group's membership files; the daemon's FUSE clock
 *       nodes, fusenodes.py, many in one call). Paths in the phone
 *       resolve inside its root (chroot), so no path it gives can name a host file.
 *   --notify-sock PATH (launch, enter): the daemon's datagram socket for this phone's affinity
 *       listeners. After the phone's filter, a second one (AFFINITY_FILTER) is loaded with
 *       SECCOMP_FILTER_FLAG_NEW_LISTENER: the program's sched_setaffinity/sched_getaffinity go to
 *       the daemon (vphone/src/vphone/affinitynotify.py), which answers them in the phone's CPU
 *       numbers. The listener goes to the daemon by SCM_RIGHTS and is closed here before PROG
 *       runs: no phone process holds one. The socket is connected while we are still host root
 *       in the host's mount namespace, and closed before PROG as well.
 *   vphone-exec seccomp-bpf
 *       write the seccomp filter as BPF on stdout (for bwrap --seccomp, which starts init). The
 *       filter is compiled in (bin/seccomp_filter.h, from seccomp-gen.c).
 *
 * Errors: one line on stderr "vphone-exec: WHAT: strerror", exit 126 (127: PROG not found).
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <linux/capability.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/types.h>
#include <sys/uio.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include "seccomp_filter.h"

#define MAX_CGROUPS 16
#define EXIT_FAIL 126

/* What the phone's fake root keeps: file ownership and modes inside its own tree, signals,
 * users, low ports and raw sockets in its own network namespace, priorities and its own limits.
 * Everything else (mount, modules, raw I/O, ptrace bypass, net admin, bpf, time, boot...) goes. */
static const int ROOT_CAPS[] = {
    CAP_CHOWN, CAP_DAC_OVERRIDE, CAP_DAC_READ_SEARCH, CAP_FOWNER, CAP_FSETID, CAP_KILL,
    CAP_SETGID, CAP_SETUID, CAP_SETPCAP, CAP_NET_BIND_SERVICE, CAP_NET_RAW, CAP_IPC_LOCK,
    CAP_IPC_OWNER, CAP_SYS_NICE, CAP_SYS_RESOURCE, CAP_AUDIT_WRITE, CAP_LEASE,
};

/* In the order nsenter uses: the user namespace first gives the rights for the others. */
static const char *const NAMESPACES[] = {"user", "ipc", "uts", "net", "cgroup", "pid", "mnt"};
#define N_NAMESPACES (sizeof NAMESPACES / sizeof NAMESPACES[0])

static void die(const char *fmt, ...) {
    int saved = errno;
    va_list ap;
    fputs("vphone-exec: ", stderr);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fprintf(stderr, ": %s\n", strerror(saved));
    _exit(EXIT_FAIL);
}

static long parse_long(const char *text, const char *what) {
    char *end;
    errno = 0;
    long value = strtol(text, &end, 10);
    if (errno || *end || end == text || value < 0) {
        errno = EINVAL;
        die("bad %s %s", what, text);
    }
    return value;
}

static void write_file(const char *path, const char *text) {
    int fd = open(path, O_WRONLY | O_CLOEXEC);
    if (fd < 0) die("open %s", path);
    ssize_t len = (ssize_t)strlen(text);
    if (write(fd, text, (size_t)len) != len) die("write %s", path);
    close(fd);
}

static void join_cgroups(char **files, int count) {
    char pid[32];
    snprintf(pid, sizeof pid, "%d\n", (int)getpid());
    for (int i = 0; i < count; i++) write_file(files[i], pid);
}

/* The filter seccomp-gen compiled at build time (seccomp-gen.c says what it refuses). */
static const struct sock_fprog PHONE_PROG = {
    .len = sizeof PHONE_FILTER / sizeof PHONE_FILTER[0],
    .filter = (struct sock_filter *)PHONE_FILTER,
};

static const struct sock_fprog AFFINITY_PROG = {
    .len = sizeof AFFINITY_FILTER / sizeof AFFINITY_FILTER[0],
    .filter = (struct sock_filter *)AFFINITY_FILTER,
};

static int NOTIFY_SOCK = -1; /* --notify-sock, connected */

/* One message of `len` bytes on `sock`, with descriptor `fd` by SCM_RIGHTS when fd >= 0. */
static ssize_t send_with_fd(int sock, void *data, size_t len, int fd) {
    struct iovec iov = {data, len};
    struct msghdr msg = {0};
    char control[CMSG_SPACE(sizeof(int))];
    msg.msg_iov = &iov;
    msg.msg_iovlen = 1;
    if (fd >= 0) {
        memset(control, 0, sizeof control);
        msg.msg_control = control;
        msg.msg_controllen = sizeof control;
        struct cmsghdr *cmsg = CMSG_FIRSTHDR(&msg);
        cmsg->cmsg_level = SOL_SOCKET;
        cmsg->cmsg_type = SCM_RIGHTS;
        cmsg->cmsg_len = CMSG_LEN(sizeof(int));
        memcpy(CMSG_DATA(cmsg), &fd, sizeof(int));
    }
    return sendmsg(sock, &msg, MSG_NOSIGNAL);
}

/* Connect to the daemon's listener socket (host root, host paths). A daemon that is not there
 * leaves the phone's programs with the host's affinity calls, nothing worse. */
static void connect_notify(const char *path) {
    struct sockaddr_un addr = {.sun_family = AF_UNIX};
    if (strlen(path) >= sizeof addr.sun_path) return;
    strcpy(addr.sun_path, path);
    int fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    if (fd < 0) return;
    if (connect(fd, (struct sockaddr *)&addr, sizeof addr) != 0) {
        close(fd);
        return;
    }
    NOTIFY_SOCK = fd;
}

/* Load AFFINITY_FILTER with a listener and hand the listener to the daemon: message "L" with
 * the descriptor, or "N" and the errno's text when this kernel has no user notification (the
 * daemon logs that the phone's affinity calls see the host's CPUs). Closes both descriptors. */
static void install_affinity_listener(void) {
    if (NOTIFY_SOCK < 0) return;
    int listener = (int)syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, SECCOMP_FILTER_FLAG_NEW_LISTENER,
                                &AFFINITY_PROG);
    char text[96] = "L";
    size_t len = 1;
    if (listener < 0) {
        len = (size_t)snprintf(text, sizeof text, "N%s", strerror(errno));
        if (len >= sizeof text) len = sizeof text - 1;
    }
    /* A send that fails (the daemon gone) closes the listener: the calls then fail ENOSYS. */
    (void)send_with_fd(NOTIFY_SOCK, text, len, listener);
    if (listener >= 0) close(listener);
    close(NOTIFY_SOCK);
    NOTIFY_SOCK = -1;
}

static int last_cap(void) {
    int fd = open("/proc/sys/kernel/cap_last_cap", O_RDONLY | O_CLOEXEC);
    char buf[16] = {0};
    if (fd >= 0) {
        ssize_t n = read(fd, buf, sizeof buf - 1);
        close(fd);
        if (n > 0) return atoi(buf);
    }
    return CAP_LAST_CAP;
}

static int kept(int cap, int root) {
    if (!root) return 0;
    for (size_t i = 0; i < sizeof ROOT_CAPS / sizeof ROOT_CAPS[0]; i++)
        if (ROOT_CAPS[i] == cap) return 1;
    return 0;
}

/* Become uid/gid, keep only the phone's capabilities, no_new_privs, seccomp. */
static void confine(uid_t uid, gid_t gid, long nproc) {
    int root = uid == 0;
    if (setgroups(1, &gid) != 0) die("setgroups");
    if (setresgid(gid, gid, gid) != 0) die("setresgid %u", gid);
    int top = last_cap();
    for (int cap = 0; cap <= top; cap++)
        if (!kept(cap, root) && prctl(PR_CAPBSET_DROP, cap, 0, 0, 0) != 0 && errno != EINVAL)
            die("drop capability %d", cap);
    if (prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0) != 0 && errno != EINVAL)
        die("clear ambient capabilities");
    if (nproc > 0) {
        struct rlimit limit = {(rlim_t)nproc, (rlim_t)nproc};
        if (setrlimit(RLIMIT_NPROC, &limit) != 0) die("setrlimit NPROC");
    }
    if (setresuid(uid, uid, uid) != 0) die("setresuid %u", uid);
    struct __user_cap_header_struct header = {_LINUX_CAPABILITY_VERSION_3, 0};
    struct __user_cap_data_struct data[2];
    memset(data, 0, sizeof data);
    for (int cap = 0; cap <= top && cap < 64; cap++)
        if (kept(cap, root)) {
            data[cap / 32].effective |= 1u << (cap % 32);
            data[cap / 32].permitted |= 1u << (cap % 32);
        }
    if (syscall(SYS_capset, &header, data) != 0) die("capset");
    if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0) die("no_new_privs");
    if (prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &PHONE_PROG, 0, 0) != 0) die("load the seccomp filter");
    install_affinity_listener();
}

static void reset_signals(void) {
    sigset_t none;
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, NULL);
    for (int sig = 1; sig < NSIG; sig++) signal(sig, SIG_DFL);
}

/* Exit as the child did: its code, or the same signal. */
static void mirror(pid_t child) {
    int status;
    while (waitpid(child, &status, 0) < 0)
        if (errno != EINTR) die("waitpid");
    if (WIFSIGNALED(status)) {
        int sig = WTERMSIG(status);
        signal(sig, SIG_DFL);
        prctl(PR_SET_DUMPABLE, 0, 0, 0, 0); /* no core file of ours */
        kill(getpid(), sig);
        _exit(128 + sig);
    }
    _exit(WEXITSTATUS(status));
}

/* --- file service (sync) ------------------------------------------------------------------
 * Requests on FD (a SOCK_SEQPACKET socket), one per datagram-like message: 1 byte op, u32 arg, then a NUL-terminated
 * path (and for 'Y' a second one, the link's target, before it). Reply: i32 errno (0: ok), then
 * for 'S'/'L' the stat fields as 10 x u64, and for 'O'/'C'/'D' the descriptor by SCM_RIGHTS.
 *   O flags path   open an existing file (flags: 0 read, 1 write)
 *   C mode path    replace: unlink, create O_EXCL with exactly `mode`, open for writing
 *   D 0 path       open a directory (O_DIRECTORY) for listing
 *   S 0 path / L 0 path   stat / lstat
 *   M mode path    mkdir, then chmod to exactly `mode`
 *   Y 0 target path   symlink (an existing non-directory at path is replaced)
 *   U 0 path       unlink
 * The kernel checks every one against this process's phone user: no path is resolved outside. */
static int FILES_FD = 3; /* --serve-files FD */
#define REQUEST_MAX 8200

static void reply(int err, const uint64_t *fields, int nfields, int fd) {
    char buf[4 + 10 * 8];
    int32_t code = err;
    memcpy(buf, &code, 4);
    size_t len = 4;
    if (fields != NULL) {
        memcpy(buf + 4, fields, (size_t)nfields * 8);
        len += (size_t)nfields * 8;
    }
    if (send_with_fd(FILES_FD, buf, len, fd) < 0) _exit(0);
    if (fd >= 0) close(fd);
}

static void reply_stat(int rc, const struct stat *st) {
    if (rc != 0) {
        reply(errno, NULL, 0, -1);
        return;
    }
    uint64_t f[10] = {st->st_dev, st->st_ino, st->st_mode, st->st_nlink, st->st_uid, st->st_gid,
                      (uint64_t)st->st_size, (uint64_t)st->st_atime, (uint64_t)st->st_mtime,
                      (uint64_t)st->st_ctime};
    reply(0, f, 10, -1);
}

static void serve_files(void) {
    char buf[REQUEST_MAX + 1];
    umask(0);
    for (;;) {
        ssize_t n = recv(FILES_FD, buf, REQUEST_MAX, 0);
        if (n <= 0) _exit(0);
        buf[n] = 0;
        if (n < 6) {
            reply(EINVAL, NULL, 0, -1);
            continue;
        }
        char op = buf[0];
        uint32_t arg;
        memcpy(&arg, buf + 1, 4);
        const char *path = buf + 5;
        const char *second = path + strlen(path) + 1;
        struct stat st;
        int fd;
        switch (op) {
        case 'O':
            fd = open(path, (arg ? O_WRONLY : O_RDONLY) | O_CLOEXEC | O_NOCTTY);
            reply(fd < 0 ? errno : 0, NULL, 0, fd);
            break;
        case 'C':
            if (unlink(path) != 0 && errno != ENOENT) {
                reply(errno, NULL, 0, -1);
                break;
            }
            fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOCTTY, arg & 07777);
            if (fd >= 0 && fchmod(fd, arg & 07777) != 0) {
                int err = errno;
                close(fd);
                unlink(path);
                reply(err, NULL, 0, -1);
                break;
            }
            reply(fd < 0 ? errno : 0, NULL, 0, fd);
            break;
        case 'D':
            fd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
            reply(fd < 0 ? errno : 0, NULL, 0, fd);
            break;
        case 'S':
            reply_stat(stat(path, &st), &st);
            break;
        case 'L':
            reply_stat(lstat(path, &st), &st);
            break;
        case 'M':
            if (mkdir(path, arg & 07777) != 0 || chmod(path, arg & 07777) != 0)
                reply(errno, NULL, 0, -1);
            else
                reply(0, NULL, 0, -1);
            break;
        case 'Y':
            /* path is the target here, second the link */
            if (second >= buf + n) {
                reply(EINVAL, NULL, 0, -1);
                break;
            }
            if (lstat(second, &st) == 0 && !S_ISDIR(st.st_mode) && unlink(second) != 0) {
                reply(errno, NULL, 0, -1);
                break;
            }
            reply(symlink(path, second) != 0 ? errno : 0, NULL, 0, -1);
            break;
        case 'U':
            reply(unlink(path) != 0 ? errno : 0, NULL, 0, -1);
            break;
        default:
            reply(EINVAL, NULL, 0, -1);
        }
    }
}

/* --- modes --------------------------------------------------------------------------------- */

/* The phone's root must reach its state dir for bwrap's binds, but not the daemon's directories
 * above it (a 0700 tmp dir, a home): in a private mount namespace of our own, the state dir is
 * bound on a tmpfs over /mnt, so bwrap finds it at STAGE_DIR whatever the modes above it. */
#define STAGE_PARENT "/mnt"
#define STAGE_DIR "/mnt/vphone"

/* mountinfo escapes blanks and backslashes as \ooo: decode in place. */
static void unescape_octal(char *s) {
    char *out = s;
    for (; *s; s++) {
        if (s[0] == '\\' && s[1] >= '0' && s[1] <= '7' && s[2] >= '0' && s[2] <= '7' && s[3] >= '0' &&
            s[3] <= '7') {
            *out++ = (char)((s[1] - '0') * 64 + (s[2] - '0') * 8 + (s[3] - '0'));
            s += 3;
        } else {
            *out++ = *s;
        }
    }
    *out = '\0';
}

/* Other phones' userdata partitions (userdata.py: ext4 on a loop device, at <phone>/.userdata and
 * bound at its data, sdcard, ctl) were copied into this new mount namespace; left here, they would
 * keep those loop devices (and filesystems) alive after their own daemon unmounted them, for as
 * long as this phone runs. Detach every such mount outside our own state dir. */
static void detach_foreign_userdata(const char *state_dir) {
    char own[4096];
    if (!realpath(state_dir, own)) return; /* mountinfo has canonical paths */
    FILE *f = fopen("/proc/self/mountinfo", "re");
    if (!f) return;
    size_t own_len = strlen(own);
    char line[8192];
    while (fgets(line, sizeof line, f)) {
        char root[4096], point[4096], fstype[64], source[4096];
        char *dash = strstr(line, " - ");
        if (!dash || sscanf(line, "%*s %*s %*s %4095s %4095s", root, point) != 2) continue;
        if (sscanf(dash + 3, "%63s %4095s", fstype, source) != 2) continue;
        unescape_octal(root);
        unescape_octal(point);
        if (strcmp(fstype, "ext4") != 0 || strncmp(source, "/dev/loop", 9) != 0) continue;
        size_t len = strlen(point);
        int partition = len >= 10 && strcmp(point + len - 10, "/.userdata") == 0;
        int bound = !strcmp(root, "/data") || !strcmp(root, "/media") || !strcmp(root, "/ctl");
        if (!partition && !bound) continue;
        if (strncmp(point, own, own_len) == 0 && (point[own_len] == '/' || point[own_len] == '\0'))
            continue;
        umount2(point, MNT_DETACH); /* best effort: a mount we cannot detach only lingers */
    }
    fclose(f);
}

static void stage_state_dir(const char *state_dir) {
    if (unshare(CLONE_NEWNS) != 0) die("unshare mount namespace");
    if (mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) != 0) die("make mounts private");
    detach_foreign_userdata(state_dir);
    if (mount("vphone-stage", STAGE_PARENT, "tmpfs", MS_NOSUID | MS_NODEV, "mode=0755") != 0)
        die("mount a tmpfs on " STAGE_PARENT);
    if (mkdir(STAGE_DIR, 0755) != 0) die("mkdir " STAGE_DIR);
    /* MS_REC: the phone's userdata partition is mounted under the state dir (userdata.py) */
    if (mount(state_dir, STAGE_DIR, NULL, MS_BIND | MS_REC, NULL) != 0) die("bind %s on " STAGE_DIR, state_dir);
}

static int cmd_launch(int argc, char **argv) {
    long base = -1, count = 65536, nproc = 0;
    const char *state_dir = NULL;
    char *cgroups[MAX_CGROUPS];
    int ncg = 0, i = 0;
    for (; i < argc && strcmp(argv[i], "--") != 0; i++) {
        if (!strcmp(argv[i], "--uid-base") && i + 1 < argc) base = parse_long(argv[++i], "uid base");
        else if (!strcmp(argv[i], "--id-count") && i + 1 < argc) count = parse_long(argv[++i], "id count");
        else if (!strcmp(argv[i], "--nproc") && i + 1 < argc) nproc = parse_long(argv[++i], "nproc");
        else if (!strcmp(argv[i], "--state-dir") && i + 1 < argc) state_dir = argv[++i];
        else if (!strcmp(argv[i], "--notify-sock") && i + 1 < argc) connect_notify(argv[++i]);
        else if (!strcmp(argv[i], "--cgroup") && i + 1 < argc && ncg < MAX_CGROUPS) cgroups[ncg++] = argv[++i];
        else {
            errno = EINVAL;
            die("launch: unknown option %s", argv[i]);
        }
    }
    if (base <= 0 || state_dir == NULL || i + 1 >= argc) {
        errno = EINVAL;
        die("launch: needs --uid-base, --state-dir and -- PROG");
    }
    char **prog = argv + i + 1;
    join_cgroups(cgroups, ncg);
    stage_state_dir(state_dir);
    int ready[2];
    if (pipe2(ready, O_CLOEXEC) != 0) die("pipe");
    pid_t self = getpid();
    pid_t writer = fork();
    if (writer < 0) die("fork");
    if (writer == 0) {
        /* Writes the maps of its parent once the parent has its new user namespace. */
        char c, path[64], map[64];
        close(ready[1]);
        if (read(ready[0], &c, 1) != 1) _exit(1);
        snprintf(map, sizeof map, "0 %ld %ld\n", base, count);
        snprintf(path, sizeof path, "/proc/%d/uid_map", (int)self);
        write_file(path, map);
        snprintf(path, sizeof path, "/proc/%d/gid_map", (int)self);
        write_file(path, map);
        _exit(0);
    }
    close(ready[0]);
    if (unshare(CLONE_NEWUSER) != 0) die("unshare user namespace");
    if (write(ready[1], "x", 1) != 1) die("signal the map writer");
    close(ready[1]);
    int status;
    if (waitpid(writer, &status, 0) < 0 || !WIFEXITED(status) || WEXITSTATUS(status) != 0) {
        errno = EPERM;
        die("write uid_map/gid_map");
    }
    if (setgroups(0, NULL) != 0) die("setgroups");
    if (setresgid(0, 0, 0) != 0) die("setresgid 0");
    if (nproc > 0) {
        struct rlimit limit = {(rlim_t)nproc, (rlim_t)nproc};
        if (setrlimit(RLIMIT_NPROC, &limit) != 0) die("setrlimit NPROC");
    }
    if (setresuid(0, 0, 0) != 0) die("setresuid 0");
    /* Loadable without no_new_privs: we hold CAP_SYS_ADMIN in the new user namespace. bwrap and
     * init inherit it (bwrap adds the phone's filter), so do all of init's descendants. */
    install_affinity_listener();
    execvp(prog[0], prog);
    die("exec %s", prog[0]);
    return EXIT_FAIL;
}

static int cmd_enter(int argc, char **argv) {
    long pid = -1, uid = -1, gid = -1, nproc = 0;
    int files = 0, ncg = 0, i = 0;
    const char *cwd = "/";
    char *cgroups[MAX_CGROUPS];
    for (; i < argc && strcmp(argv[i], "--") != 0; i++) {
        if (!strcmp(argv[i], "--pid") && i + 1 < argc) pid = parse_long(argv[++i], "pid");
        else if (!strcmp(argv[i], "--uid") && i + 1 < argc) uid = parse_long(argv[++i], "uid");
        else if (!strcmp(argv[i], "--gid") && i + 1 < argc) gid = parse_long(argv[++i], "gid");
        else if (!strcmp(argv[i], "--nproc") && i + 1 < argc) nproc = parse_long(argv[++i], "nproc");
        else if (!strcmp(argv[i], "--cwd") && i + 1 < argc) cwd = argv[++i];
        else if (!strcmp(argv[i], "--notify-sock") && i + 1 < argc) connect_notify(argv[++i]);
        else if (!strcmp(argv[i], "--cgroup") && i + 1 < argc && ncg < MAX_CGROUPS) cgroups[ncg++] = argv[++i];
        else if (!strcmp(argv[i], "--serve-files") && i + 1 < argc) {
            files = 1;
            FILES_FD = (int)parse_long(argv[++i], "file service fd");
        }
        else {
            errno = EINVAL;
            die("enter: unknown option %s", argv[i]);
        }
    }
    if (pid <= 0 || uid < 0 || gid < 0 || (!files && i + 1 >= argc)) {
        errno = EINVAL;
        die("enter: needs --pid, --uid, --gid and -- PROG or --serve-files FD");
    }
    char **prog = files ? NULL : argv + i + 1;
    join_cgroups(cgroups, ncg);
    int fds[N_NAMESPACES];
    char path[64];
    for (size_t n = 0; n < N_NAMESPACES; n++) {
        snprintf(path, sizeof path, "/proc/%ld/ns/%s", pid, NAMESPACES[n]);
        fds[n] = open(path, O_RDONLY | O_CLOEXEC);
        if (fds[n] < 0) die("open %s", path);
    }
    snprintf(path, sizeof path, "/proc/%ld/root", pid);
    int root = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (root < 0) die("open %s", path);
    for (size_t n = 0; n < N_NAMESPACES; n++) {
        struct stat mine, theirs;
        char self_ns[64];
        snprintf(self_ns, sizeof self_ns, "/proc/self/ns/%s", NAMESPACES[n]);
        /* setns into the namespace we are already in fails for the user namespace */
        if (stat(self_ns, &mine) == 0 && fstat(fds[n], &theirs) == 0 && mine.st_ino == theirs.st_ino &&
            mine.st_dev == theirs.st_dev) {
            close(fds[n]);
            continue;
        }
        if (setns(fds[n], 0) != 0) die("setns %s of pid %ld", NAMESPACES[n], pid);
        close(fds[n]);
    }
    if (fchdir(root) != 0 || chroot(".") != 0) die("enter the phone's root");
    close(root);
    pid_t child = fork();
    if (child < 0) die("fork");
    if (child > 0) {
        /* Only waits: no capability, no new privileges, the same filter. */
        if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0) die("no_new_privs");
        if (files) close(FILES_FD);
        if (NOTIFY_SOCK >= 0) close(NOTIFY_SOCK);
        mirror(child);
    }
    reset_signals();
    confine((uid_t)uid, (gid_t)gid, nproc);
    if (chdir(cwd) != 0 && chdir("/") != 0) die("chdir");
    if (files) serve_files();
    execvp(prog[0], prog);
    int err = errno;
    fprintf(stderr, "%s: %s\n", prog[0], err == ENOENT ? "inaccessible or not found" : strerror(err));
    _exit(err == ENOENT ? 127 : EXIT_FAIL);
}

static void enter_namespace(long pid, const char *name) {
    char path[64];
    snprintf(path, sizeof path, "/proc/%ld/ns/%s", pid, name);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0 || setns(fd, 0) != 0) die("setns %s", path);
    close(fd);
}

/* Enter the mount namespace of the phone whose init is host pid `pid`, with its user
 * namespace's rights (skipped when we already are in it), and its root directory. */
static void enter_phone_mounts(long pid) {
    char path[64];
    snprintf(path, sizeof path, "/proc/%ld/root", pid);
    int root = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (root < 0) die("open %s", path);
    struct stat mine, theirs;
    snprintf(path, sizeof path, "/proc/%ld/ns/user", pid);
    if (stat("/proc/self/ns/user", &mine) != 0 || stat(path, &theirs) != 0 || mine.st_ino != theirs.st_ino)
        enter_namespace(pid, "user");
    enter_namespace(pid, "mnt");
    if (fchdir(root) != 0 || chroot(".") != 0) die("enter the phone's root");
    close(root);
}

static int cmd_noexec(int argc, char **argv) {
    if (argc != 3 || strcmp(argv[0], "--pid") != 0) {
        errno = EINVAL;
        die("noexec: needs --pid P PATH");
    }
    enter_phone_mounts(parse_long(argv[1], "pid"));
    unsigned long flags = MS_REMOUNT | MS_BIND | MS_NOEXEC | MS_NOSUID | MS_NODEV | MS_RELATIME;
    if (mount(NULL, argv[2], NULL, flags, NULL) != 0) die("remount %s noexec", argv[2]);
    return 0;
}

#define MAX_HOST_FILES 128

static int cmd_bind(int argc, char **argv) {
    if (argc < 5 || strcmp(argv[0], "--pid") != 0 ||
        (strcmp(argv[2], "--view") != 0 && strcmp(argv[2], "--host-file") != 0) ||
        (!strcmp(argv[2], "--view") && argc != 5) || (argc - 2) % 3 != 0 || (argc - 2) / 3 > MAX_HOST_FILES) {
        errno = EINVAL;
        die("bind: needs --pid P (--view SRC | --host-file FILE) DST, or --host-file FILE DST repeated");
    }
    long pid = parse_long(argv[1], "pid");
    if (!strcmp(argv[2], "--host-file")) {
        /* Detached copies of the host files' mounts, all taken before we leave the host's view
         * (one process binds every file: the daemon binds a phone's clock nodes at each boot). */
        int trees[MAX_HOST_FILES];
        int count = (argc - 2) / 3;
        for (int i = 0; i < count; i++) {
            const char *flag = argv[2 + 3 * i], *src = argv[3 + 3 * i];
            if (strcmp(flag, "--host-file") != 0) {
                errno = EINVAL;
                die("bind: %s: only --host-file may repeat", flag);
            }
            trees[i] = (int)syscall(SYS_open_tree, AT_FDCWD, src, OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC);
            if (trees[i] < 0) die("open_tree %s", src);
            struct mount_attr attr = {.attr_set = MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV | MOUNT_ATTR_NOEXEC};
            if (syscall(SYS_mount_setattr, trees[i], "", AT_EMPTY_PATH, &attr, sizeof attr) != 0)
                die("mount_setattr %s", src);
        }
        enter_phone_mounts(pid);
        for (int i = 0; i < count; i++) {
            const char *src = argv[3 + 3 * i], *dst = argv[4 + 3 * i];
            if (syscall(SYS_move_mount, trees[i], "", AT_FDCWD, dst, MOVE_MOUNT_F_EMPTY_PATH) != 0)
                die("bind %s over the phone's %s", src, dst);
        }
        return 0;
    }
    const char *src = argv[3], *dst = argv[4];
    enter_phone_mounts(pid);
    if (mount(NULL, src, NULL, MS_SHARED, NULL) != 0) die("make the phone's %s shared", src);
    if (mount(src, dst, NULL, MS_BIND | MS_REC, NULL) != 0) die("bind the phone's %s at %s", src, dst);
    return 0;
}

static int cmd_seccomp_bpf(void) {
    const char *at = (const char *)PHONE_FILTER;
    size_t left = sizeof PHONE_FILTER;
    while (left > 0) {
        ssize_t n = write(STDOUT_FILENO, at, left);
        if (n <= 0) die("write the filter");
        at += n;
        left -= (size_t)n;
    }
    return 0;
}

int main(int argc, char **argv) {
    if (argc >= 2 && !strcmp(argv[1], "launch")) return cmd_launch(argc - 2, argv + 2);
    if (argc >= 2 && !strcmp(argv[1], "enter")) return cmd_enter(argc - 2, argv + 2);
    if (argc >= 2 && !strcmp(argv[1], "noexec")) return cmd_noexec(argc - 2, argv + 2);
    if (argc >= 2 && !strcmp(argv[1], "bind")) return cmd_bind(argc - 2, argv + 2);
    if (argc == 2 && !strcmp(argv[1], "seccomp-bpf")) return cmd_seccomp_bpf();
    fputs("usage: vphone-exec launch|enter|noexec|bind|seccomp-bpf ... (see vphone/src/vphone/native/vphone-exec.c)\n",
          stderr);
    return 2;
}
