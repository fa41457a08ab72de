/* farm-probe: print ONE JSON object describing the telemetry and capabilities of this phone.
 *
 *   farm-probe [--current-samples=5] [--sample-interval-ms=40] [--no-su] [--sysfs-root=DIR]
 *
 * Runs as the adb shell user (or root) in well under a second. A node it cannot read is
 * reported with "readable": false and its errno name, never as a failure. The document's keys
 * are listed in device_agents/README.md and parsed by farm/telemetry/probe.py.
 * --sysfs-root prefixes every file path (fake trees in host tests; never used on a phone).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/utsname.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "fs.h"
#include "sections.h"

#define PROBE_VERSION 1

static long long now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (long long)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

/* ---- identity: one `getprop` call (a listing), not one per key ------------------------- */

static const char *PROP_KEYS[] = {
    "ro.product.model", "ro.product.manufacturer", "ro.product.brand", "ro.product.name",
    "ro.product.device", "ro.board.platform", "ro.hardware", "ro.soc.manufacturer",
    "ro.soc.model", "ro.build.version.sdk", "ro.build.version.release", "ro.build.fingerprint",
    "ro.product.cpu.abi", "ro.product.cpu.abilist", "ro.serialno", "ro.debuggable",
    "ro.adb.secure", "ro.build.type",
};
#define NPROPS (sizeof(PROP_KEYS) / sizeof(PROP_KEYS[0]))

static char g_props[NPROPS][256];
static int g_have_prop[NPROPS];

/* Runs argv (argv[0] absolute, else looked up in PATH) with stdout captured, for at most
 * timeout_ms; the child gets its own process group so a hung su or getprop is killed whole.
 * We fork/exec instead of popen because the sandboxes we run in need not have /bin/sh. */
static size_t run_capture(char *const argv[], const char *fallback, char *out, size_t cap,
                          int timeout_ms) {
    int fds[2];
    out[0] = '\0';
    if (pipe(fds) != 0) return 0;
    pid_t pid = fork();
    if (pid < 0) {
        close(fds[0]);
        close(fds[1]);
        return 0;
    }
    if (pid == 0) {
        setpgid(0, 0);
        int devnull = open("/dev/null", O_RDWR);
        dup2(devnull, 0);
        dup2(fds[1], 1);
        dup2(devnull, 2);
        close(fds[0]);
        execv(argv[0], argv);
        if (fallback) execvp(fallback, argv);
        _exit(127);
    }
    close(fds[1]);
    size_t len = 0;
    long long deadline = now_ns() + (long long)timeout_ms * 1000000LL;
    for (;;) {
        long long left_ms = (deadline - now_ns()) / 1000000LL;
        if (left_ms <= 0) break;
        struct pollfd pfd = {fds[0], POLLIN, 0};
        if (poll(&pfd, 1, (int)left_ms) <= 0) break;
        ssize_t n = read(fds[0], out + len, cap - 1 - len);
        if (n <= 0) break;
        len += (size_t)n;
        if (len >= cap - 1) break;
    }
    out[len] = '\0';
    close(fds[0]);
    kill(-pid, SIGKILL);
    kill(pid, SIGKILL);
    waitpid(pid, NULL, 0);
    return len;
}

static void read_props(void) {
    static char listing[256 * 1024];
    char *argv[] = {"/system/bin/getprop", NULL};
    run_capture(argv, "getprop", listing, sizeof(listing), 800);
    for (char *line = strtok(listing, "\n"); line; line = strtok(NULL, "\n")) {
        /* [key]: [value] */
        char *k = strchr(line, '['), *ke = k ? strchr(k, ']') : NULL;
        char *v = ke ? strchr(ke, '[') : NULL, *ve = v ? strrchr(v, ']') : NULL;
        if (!ve) continue;
        *ke = '\0';
        *ve = '\0';
        for (size_t i = 0; i < NPROPS; i++) {
            if (strcmp(k + 1, PROP_KEYS[i]) == 0) {
                snprintf(g_props[i], sizeof(g_props[i]), "%s", v + 1);
                g_have_prop[i] = 1;
            }
        }
    }
}

static const char *prop(const char *key) {
    for (size_t i = 0; i < NPROPS; i++)
        if (g_have_prop[i] && strcmp(PROP_KEYS[i], key) == 0) return g_props[i];
    return NULL;
}

static void section_identity(jsonw *w) {
    jw_obj_open(w, "props");
    for (size_t i = 0; i < NPROPS; i++)
        if (g_have_prop[i]) jw_str(w, PROP_KEYS[i], g_props[i]);
    jw_obj_close(w);
    const char *abi = prop("ro.product.cpu.abi");
    struct utsname u;
    const char *machine = uname(&u) == 0 ? u.machine : "";
    if (!abi || !*abi) {
        if (strcmp(machine, "aarch64") == 0) abi = "arm64-v8a";
        else if (strncmp(machine, "armv", 4) == 0) abi = "armeabi-v7a";
        else if (strcmp(machine, "x86_64") == 0) abi = "x86_64";
        else if (strcmp(machine, "i686") == 0) abi = "x86";
        else abi = NULL;
    }
    jw_str(w, "abi", abi);
    jw_str(w, "kernel_machine", machine);
    jw_str(w, "kernel_release", uname(&u) == 0 ? u.release : NULL);
}

/* ---- root: adbd uid 0, or a working `su -c id` within the timeout --------------------- */

static const char *SU_PATHS[] = {"/system/bin/su", "/system/xbin/su", "/sbin/su",
                                 "/su/bin/su", "/debug_ramdisk/su", "/product/bin/su"};

static int su_works(const char *su, int timeout_ms) {
    char out[512];
    char *argv[] = {(char *)su, "-c", "id", NULL};
    run_capture(argv, NULL, out, sizeof(out), timeout_ms);
    return strstr(out, "uid=0(") != NULL || strstr(out, "uid=0 ") != NULL;
}

static void section_root(jsonw *w, int check_su, int timeout_ms) {
    jw_obj_open(w, "root");
    jw_int(w, "uid", (long long)getuid());
    jw_bool(w, "adbd_root", getuid() == 0);
    const char *su = NULL;
    for (size_t i = 0; i < sizeof(SU_PATHS) / sizeof(SU_PATHS[0]) && !su; i++)
        if (access(fs_path(SU_PATHS[i]), X_OK) == 0) su = SU_PATHS[i];
    jw_str(w, "su_path", su);
    if (su && check_su)
        jw_bool(w, "su_works", su_works(fs_path(su), timeout_ms));
    else
        jw_null(w, "su_works");
    jw_obj_close(w);
}

/* ---- OpenCL library ----------------------------------------------------------------------- */

static const char *OPENCL_PATHS[] = {
    "/vendor/lib64/libOpenCL.so",          "/system/vendor/lib64/libOpenCL.so",
    "/vendor/lib64/libOpenCL-pixel.so",    "/vendor/lib64/egl/libGLES_mali.so",
    "/system/vendor/lib64/egl/libGLES_mali.so", "/system/lib64/libOpenCL.so",
    "/vendor/lib/libOpenCL.so",            "/system/vendor/lib/libOpenCL.so",
    "/vendor/lib/egl/libGLES_mali.so",     "/system/lib/libOpenCL.so",
};

static void section_opencl(jsonw *w) {
    jw_obj_open(w, "opencl");
    int found = 0;
    jw_arr_open(w, "libraries");
    for (size_t i = 0; i < sizeof(OPENCL_PATHS) / sizeof(OPENCL_PATHS[0]); i++) {
        if (fs_exists(OPENCL_PATHS[i])) {
            jw_str(w, NULL, OPENCL_PATHS[i]);
            found = 1;
        }
    }
    jw_arr_close(w);
    jw_bool(w, "found", found);
    jw_obj_close(w);
}

/* ---- thermal, cpufreq, memory ------------------------------------------------------------- */

const char *temp_unit_from_value(long long v) {
    long long a = v < 0 ? -v : v;
    if (a >= 1000) return "mC"; /* 41200 = 41.2 C, the ABI's unit */
    if (a >= 150) return "dC";  /* 412 = 41.2 C; no zone reads 150 C and survives */
    return "C";
}

static void section_thermal(jsonw *w) {
    char *names[128];
    int n = fs_list("/sys/class/thermal", "thermal_zone", names, 128);
    jw_arr_open(w, "thermal");
    for (int i = 0; i < n; i++) {
        char p[FS_PATH_MAX], type[128], buf[FS_TEXT_MAX];
        snprintf(p, sizeof(p), "/sys/class/thermal/%s/type", names[i]);
        int have_type = fs_read(p, type, sizeof(type)) == 0;
        snprintf(p, sizeof(p), "/sys/class/thermal/%s/temp", names[i]);
        int err = jw_node_begin(w, NULL, p, buf, sizeof(buf));
        jw_str(w, "zone", names[i]);
        jw_str(w, "type", have_type ? type : NULL);
        long long v;
        int ok = !err && fs_read_ll(p, &v) == 0;
        jw_str(w, "unit_hint", ok ? temp_unit_from_value(v) : NULL);
        jw_obj_close(w);
    }
    jw_arr_close(w);
    fs_free_names(names, n);
}

static void cpufreq_policy(jsonw *w, const char *dir, const char *name) {
    static const char *files[] = {"related_cpus",     "scaling_governor", "scaling_cur_freq",
                                  "scaling_min_freq", "scaling_max_freq", "cpuinfo_max_freq"};
    char p[FS_PATH_MAX], buf[FS_TEXT_MAX];
    jw_obj_open(w, NULL);
    jw_str(w, "policy", name);
    jw_str(w, "dir", dir);
    for (size_t i = 0; i < sizeof(files) / sizeof(files[0]); i++) {
        snprintf(p, sizeof(p), "%s/%s", dir, files[i]);
        jw_str(w, files[i], fs_read(p, buf, sizeof(buf)) == 0 ? buf : NULL);
    }
    jw_obj_close(w);
}

static void section_cpu(jsonw *w) {
    char buf[FS_TEXT_MAX], dir[FS_PATH_MAX];
    jw_obj_open(w, "cpu");
    jw_str(w, "online",
           fs_read("/sys/devices/system/cpu/online", buf, sizeof(buf)) == 0 ? buf : NULL);
    jw_arr_open(w, "policies");
    char *names[32];
    int n = fs_list("/sys/devices/system/cpu/cpufreq", "policy", names, 32);
    for (int i = 0; i < n; i++) {
        snprintf(dir, sizeof(dir), "/sys/devices/system/cpu/cpufreq/%s", names[i]);
        cpufreq_policy(w, dir, names[i]);
    }
    fs_free_names(names, n);
    if (n == 0) { /* older kernels: per-cpu cpufreq directories only */
        n = fs_list("/sys/devices/system/cpu", "cpu", names, 32);
        for (int i = 0; i < n; i++) {
            snprintf(dir, sizeof(dir), "/sys/devices/system/cpu/%s/cpufreq", names[i]);
            if (names[i][3] >= '0' && names[i][3] <= '9' && fs_is_dir(dir))
                cpufreq_policy(w, dir, names[i]);
        }
        fs_free_names(names, n);
    }
    jw_arr_close(w);
    jw_obj_close(w);
}

static void section_memory(jsonw *w) {
    char buf[FS_TEXT_MAX];
    long long total = -1;
    if (fs_read("/proc/meminfo", buf, sizeof(buf)) == 0) {
        const char *p = strstr(buf, "MemTotal:");
        if (p) total = strtoll(p + 9, NULL, 10);
    }
    jw_obj_open(w, "memory");
    if (total >= 0)
        jw_int(w, "total_kb", total);
    else
        jw_null(w, "total_kb");
    jw_obj_close(w);
}

/* ---- main ------------------------------------------------------------------------------- */

static int bad_arg(const char *arg) {
    fprintf(stderr, "farm-probe: unknown or invalid argument: %s (see --help)\n", arg);
    return 2;
}

int main(int argc, char **argv) {
    /* A fresh Magisk install asks on screen before it grants shell root (request timeout 10 s,
     * topjohnwu/Magisk #7769): `su -c id` gets 15 s, or a rooted phone reads as unrooted. */
    probe_opts o = {5, 40, 15000};
    int check_su = 1;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
            puts("usage: farm-probe [--current-samples=N] [--sample-interval-ms=MS] [--su-timeout-ms=MS] [--no-su]\n"
                 "prints one JSON object: identity, abi, root, opencl, battery (unit/sign hints),\n"
                 "charging_control, gpu (family, busy/freq sources), thermal, cpu, memory.\n"
                 "example: adb shell /data/local/tmp/farm/bin/farm-probe > caps.json");
            return 0;
        } else if (strncmp(a, "--current-samples=", 18) == 0) {
            o.current_samples = atoi(a + 18);
            if (o.current_samples < 1 || o.current_samples > 16) return bad_arg(a);
        } else if (strncmp(a, "--su-timeout-ms=", 16) == 0) {
            o.su_timeout_ms = atoi(a + 16);
            if (o.su_timeout_ms < 100 || o.su_timeout_ms > 60000) return bad_arg(a);
        } else if (strncmp(a, "--sample-interval-ms=", 21) == 0) {
            o.sample_interval_ms = atoi(a + 21);
            if (o.sample_interval_ms < 0 || o.sample_interval_ms > 200) return bad_arg(a);
        } else if (strcmp(a, "--no-su") == 0) {
            check_su = 0;
        } else if (strncmp(a, "--sysfs-root=", 13) == 0) {
            fs_set_root(a + 13);
        } else {
            return bad_arg(a);
        }
    }
    signal(SIGPIPE, SIG_IGN);
    long long t0 = now_ns();
    read_props();
    jsonw w;
    jw_init(&w);
    jw_obj_open(&w, NULL);
    jw_int(&w, "probe_version", PROBE_VERSION);
    jw_int(&w, "t_ns", t0);
    section_identity(&w);
    section_root(&w, check_su, o.su_timeout_ms);
    section_opencl(&w);
    section_battery(&w, &o);
    section_charging(&w);
    section_gpu(&w);
    section_thermal(&w);
    section_cpu(&w);
    section_memory(&w);
    jw_int(&w, "elapsed_ms", (now_ns() - t0) / 1000000LL);
    jw_obj_close(&w);
    if (w.failed) {
        fputs("farm-probe: out of memory\n", stderr);
        return 5;
    }
    fwrite(w.buf, 1, w.len, stdout);
    fputc('\n', stdout);
    jw_free(&w);
    return fflush(stdout) == 0 ? 0 : 5;
}
