/* farmtool: the phone's Android tools (getprop, dumpsys, cmd, su, logcat...) as one small client.
 *
 * /system/bin/<tool> links here. The tools' code runs in the phone's init (tools/init.py, the
 * phone's root, started once per boot), so a call costs a connect and a fork instead of a Python
 * start-up. The client sends its argv, environment and working directory with its stdin, stdout
 * and stderr (SCM_RIGHTS) over /dev/.farm/tools.sock; init checks who is calling (SO_PEERCRED:
 * a process of this phone, and its uid), runs the tool as that user on those descriptors and
 * answers the exit status. Signals the client gets (hang-up of an adb stream, ^C) are forwarded.
 *
 * Request: "FARM1\n" u32 argc, u32 envc, then argv, env and cwd as NUL-terminated strings.
 * Reply: 4 bytes, the exit status (little endian). Without a reply (init gone): exit 1.
 * An exec reply ('X' in the top byte, tools/toolexec.py) names an index N of argv instead: the
 * tool (`taskset MASK cmd`) did its part for this process, which now execs argv[N..] itself, so
 * the command keeps this pid, as with toybox.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#define SOCKET_PATH "/dev/.farm/tools.sock"
#define MAX_REQUEST_BYTES (1 << 20)
#define EXEC_TAG 0x58

extern char **environ;
static int server = -1;

static void forward(int sig) {
    char line[16];
    int len = snprintf(line, sizeof line, "%d\n", sig);
    if (server >= 0 && len > 0) (void)!send(server, line, (size_t)len, MSG_NOSIGNAL);
}

static int append(char *buf, size_t *len, const char *text) {
    size_t n = strlen(text) + 1;
    if (*len + n > MAX_REQUEST_BYTES) return -1;
    memcpy(buf + *len, text, n);
    *len += n;
    return 0;
}

int main(int argc, char **argv) {
    const char *slash = strrchr(argv[0], '/');
    const char *name = slash ? slash + 1 : argv[0];
    if (!strcmp(name, "farmtool") && argc > 1) {
        argv++;
        argc--;
        slash = strrchr(argv[0], '/');
        name = slash ? slash + 1 : argv[0];
    }
    server = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    struct sockaddr_un addr = {.sun_family = AF_UNIX};
    strncpy(addr.sun_path, SOCKET_PATH, sizeof addr.sun_path - 1);
    if (server < 0 || connect(server, (struct sockaddr *)&addr, sizeof addr) != 0) {
        fprintf(stderr, "%s: the phone's services are not running (%s)\n", name, strerror(errno));
        return 1;
    }
    char *buf = malloc(MAX_REQUEST_BYTES);
    char cwd[4096];
    if (buf == NULL) return 1;
    if (getcwd(cwd, sizeof cwd) == NULL) strcpy(cwd, "/");
    uint32_t envc = 0;
    while (environ[envc] != NULL) envc++;
    size_t len = 6 + 8;
    memcpy(buf, "FARM1\n", 6);
    uint32_t counts[2] = {(uint32_t)argc, envc};
    memcpy(buf + 6, counts, 8);
    int too_big = append(buf, &len, name);
    for (int i = 1; i < argc; i++) too_big |= append(buf, &len, argv[i]);
    for (uint32_t i = 0; i < envc; i++) too_big |= append(buf, &len, environ[i]);
    too_big |= append(buf, &len, cwd);
    if (too_big) {
        fprintf(stderr, "%s: argument list too long\n", name);
        return 7;
    }
    int fds[3] = {0, 1, 2};
    char control[CMSG_SPACE(sizeof fds)];
    memset(control, 0, sizeof control);
    struct iovec iov = {buf, len};
    struct msghdr msg = {.msg_iov = &iov, .msg_iovlen = 1, .msg_control = control,
                         .msg_controllen = sizeof control};
    struct cmsghdr *cmsg = CMSG_FIRSTHDR(&msg);
    cmsg->cmsg_level = SOL_SOCKET;
    cmsg->cmsg_type = SCM_RIGHTS;
    cmsg->cmsg_len = CMSG_LEN(sizeof fds);
    memcpy(CMSG_DATA(cmsg), fds, sizeof fds);
    /* The descriptors go with the first part; the rest of a long request follows as plain bytes. */
    size_t first = len < 65536 ? len : 65536;
    iov.iov_len = first;
    if (sendmsg(server, &msg, MSG_NOSIGNAL) != (ssize_t)first) return 1;
    for (size_t off = first; off < len;) {
        ssize_t n = send(server, buf + off, len - off, MSG_NOSIGNAL);
        if (n <= 0) return 1;
        off += (size_t)n;
    }
    free(buf);
    struct sigaction sa = {.sa_handler = forward};
    sigemptyset(&sa.sa_mask);
    int signals[] = {SIGHUP, SIGINT, SIGTERM, SIGQUIT};
    for (size_t i = 0; i < sizeof signals / sizeof signals[0]; i++) sigaction(signals[i], &sa, NULL);
    signal(SIGPIPE, SIG_IGN);
    unsigned char status[4];
    size_t got = 0;
    while (got < sizeof status) {
        ssize_t n = recv(server, status + got, sizeof status - got, 0);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) return 1;
        got += (size_t)n;
    }
    int word = status[0] | status[1] << 8;
    if (status[3] == EXEC_TAG) {
        if (word < 1 || word >= argc) return 1;
        signal(SIGPIPE, SIG_DFL); /* ignored dispositions survive exec: give cmd the default */
        execvp(argv[word], argv + word);
        int error = errno;
        fprintf(stderr, "%s: exec %s: %s\n", name, argv[word], strerror(error));
        return error == ENOENT ? 127 : 126;
    }
    return word;
}
