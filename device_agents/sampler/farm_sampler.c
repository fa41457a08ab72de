/* farm-sampler: sample sysfs/procfs telemetry files at a fixed rate into a compact trace.
 *
 *   farm-sampler --out=FILE --rate-hz=100 --source=gpu_busy=/sys/class/kgsl/kgsl-3d0/gpubusy:kgsl
 *                [--source=NAME=PATH[:FORMAT[@HZ]]]... [--watch-pid=PID] [--mem-rate-hz=50]
 *                [--duration-s=S] [--linger-s=S] [--flush-ms=100]
 *
 * The trace format is documented in device_agents/README.md (one JSON header line, then
 * fixed-size little-endian records); farm/telemetry/trace.py parses it. Design choices, why:
 *  - files stay open and are re-read with pread(fd, 0): sysfs regenerates the value on every read
 *    at offset 0, and open/close per sample would triple the syscalls at 1 kHz;
 *  - a read error closes the file and re-opens it at most once a second. A sysfs/procfs node is
 *    never replaced, but a plain file (virtual phones, tests) may be swapped by rename: for those
 *    our inode is checked every tick (st_nlink == 0 means replaced) and re-opened;
 *  - ticks are scheduled on absolute CLOCK_MONOTONIC deadlines so the rate does not drift, and a
 *    tick that is late is skipped (counted), never bunched up;
 *  - records are buffered and written at most every --flush-ms, so kill -9 loses at most that
 *    much, and a cut file always parses up to the last whole record;
 *  - a source may be read less often than the tick rate (FORMAT@HZ): fuel gauges update about
 *    once a second and each read can be a slow bus transaction on the PMIC, so reading them at
 *    1 kHz only costs CPU and power; ticks that skip a source hold NaN for it;
 *  - SIGHUP is ignored so a USB drop that kills the adb shell does not end the trace; the host
 *    stops us with SIGTERM (or --duration-s / --linger-s bound the run).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <sys/types.h>
#include <time.h>
#include <unistd.h>

#include "../common/errname.h"
#include "../common/jsonw.h"

#define MAX_SOURCES 64
#define MAX_COLUMNS (2 * MAX_SOURCES)
#define READ_BUF_BYTES 128
#define REOPEN_INTERVAL_NS 1000000000LL
#define TRACE_VERSION 1

enum fmt { FMT_INT, FMT_FLOAT, FMT_PCT, FMT_KGSL, FMT_PAIR };
static const char *FMT_NAMES[] = {"int", "float", "pct", "kgsl", "pair"};

enum stop_reason { STOP_SIGNAL = 1, STOP_DURATION = 2, STOP_LINGER = 3 };

typedef struct {
    const char *name;
    const char *path;
    enum fmt fmt;
    int fd;
    int col; /* first column of this source in a sample record */
    double rate_hz; /* 0: every tick */
    long every;     /* read on ticks k with k % every == 0 */
    int open_errno;
    int plain_file; /* not sysfs/procfs: can be replaced by rename, so check the inode */
    long long next_reopen_ns;
} source;

typedef struct {
    source src[MAX_SOURCES];
    int nsrc;
    int ncols;
    double rate_hz;
    double mem_rate_hz;
    double duration_s;
    double linger_s;
    long flush_ms;
    const char *out_path;
    long watch_pid;
} config;

static volatile sig_atomic_t g_stop = 0;

static void on_signal(int sig) {
    (void)sig;
    g_stop = 1;
}

static long long now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (long long)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

static void usage(FILE *f) {
    fputs(
        "usage: farm-sampler --out=FILE --rate-hz=HZ --source=NAME=PATH[:FORMAT] [...]\n"
        "  --source=NAME=PATH[:FORMAT[@HZ]]  repeatable; FORMAT int (default) | float | pct (\"NN %\")\n"
        "                               | kgsl (\"busy total\" -> busy/total) | pair (two numbers);\n"
        "                               @HZ reads this source less often than --rate-hz\n"
        "  --rate-hz=HZ                 1..1000 samples per second (default 10)\n"
        "  --watch-pid=PID              also record VmRSS/VmHWM of PID and when it exits\n"
        "  --mem-rate-hz=HZ             memory sampling rate (default min(rate, 50))\n"
        "  --duration-s=S               stop after S seconds (default: until SIGTERM)\n"
        "  --linger-s=S                 stop S seconds after the watched pid exits\n"
        "  --flush-ms=MS                write buffered records at least every MS (default 100)\n"
        "example: farm-sampler --out=/data/local/tmp/farm/runs/r1/trace.bin --rate-hz=100 \\\n"
        "   --source=gpu_busy=/sys/class/kgsl/kgsl-3d0/gpubusy:kgsl --watch-pid=1234 --linger-s=1\n"
        "Trace format: device_agents/README.md. Exit: 0 ok, 2 bad arguments, 5 other error.\n",
        f);
}

static int bad_arg(const char *what, const char *arg) {
    fprintf(stderr, "farm-sampler: %s: %s (see --help)\n", what, arg);
    return 2;
}

static int parse_double(const char *s, double *out) {
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (errno || end == s || *end) return -1;
    *out = v;
    return 0;
}

/* NAME=PATH[:FORMAT[@HZ]]; the format is split off the LAST ':' only when it names a format,
 * so device paths that contain ':' (USB, i2c) still work. */
static int parse_source(char *spec, source *s) {
    /* validate first, cut the string (NULs) only on success: errors quote the whole argument */
    char *eq = strchr(spec, '=');
    if (!eq || eq == spec || eq[1] != '/') return -1;
    for (const char *p = spec; p < eq; p++) {
        if (!(*p == '_' || *p == '.' || *p == '-' || (*p >= 'a' && *p <= 'z') ||
              (*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9')))
            return -1;
    }
    enum fmt fmt = FMT_INT;
    double rate_hz = 0;
    char *colon = strrchr(eq + 1, ':');
    int has_format = 0;
    if (colon) {
        char *at = strchr(colon + 1, '@');
        size_t flen = at ? (size_t)(at - colon - 1) : strlen(colon + 1);
        for (int f = 0; f < (int)(sizeof(FMT_NAMES) / sizeof(FMT_NAMES[0])); f++) {
            if (strlen(FMT_NAMES[f]) == flen && strncmp(colon + 1, FMT_NAMES[f], flen) == 0) {
                if (at && (parse_double(at + 1, &rate_hz) || rate_hz <= 0 || rate_hz > 1000))
                    return -1;
                fmt = (enum fmt)f;
                has_format = 1;
                break;
            }
        }
    }
    if (has_format) *colon = '\0';
    *eq = '\0';
    s->name = spec;
    s->path = eq + 1;
    s->fmt = fmt;
    s->rate_hz = rate_hz;
    s->fd = -1;
    return 0;
}

static int parse_args(int argc, char **argv, config *c) {
    memset(c, 0, sizeof(*c));
    c->rate_hz = 10;
    c->mem_rate_hz = -1;
    c->duration_s = -1;
    c->linger_s = -1;
    c->flush_ms = 100;
    c->watch_pid = -1;
    for (int i = 1; i < argc; i++) {
        char *a = argv[i];
        char *v = strchr(a, '=');
        if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
            usage(stdout);
            exit(0);
        }
        if (!v || strncmp(a, "--", 2) != 0) return bad_arg("expected --name=value", a);
        v++;
        size_t klen = (size_t)(v - a - 1);
#define IS(k) (klen == strlen(k) && strncmp(a, k, klen) == 0)
        if (IS("--source")) {
            if (c->nsrc >= MAX_SOURCES) return bad_arg("too many sources (max 64)", a);
            /* a copy: cutting argv in place would garble the command line `ps` shows */
            char *copy = strdup(v);
            if (!copy || parse_source(copy, &c->src[c->nsrc]) != 0)
                return bad_arg("bad source, expected NAME=/abs/path[:FORMAT[@HZ]]", a);
            c->nsrc++;
        } else if (IS("--rate-hz")) {
            if (parse_double(v, &c->rate_hz) || c->rate_hz < 1 || c->rate_hz > 1000)
                return bad_arg("rate must be 1..1000 Hz", a);
        } else if (IS("--mem-rate-hz")) {
            if (parse_double(v, &c->mem_rate_hz) || c->mem_rate_hz <= 0 || c->mem_rate_hz > 1000)
                return bad_arg("memory rate must be in (0, 1000] Hz", a);
        } else if (IS("--duration-s")) {
            if (parse_double(v, &c->duration_s) || c->duration_s <= 0)
                return bad_arg("duration must be > 0 s", a);
        } else if (IS("--linger-s")) {
            if (parse_double(v, &c->linger_s) || c->linger_s < 0)
                return bad_arg("linger must be >= 0 s", a);
        } else if (IS("--flush-ms")) {
            double ms;
            if (parse_double(v, &ms) || ms < 1 || ms > 60000)
                return bad_arg("flush interval must be 1..60000 ms", a);
            c->flush_ms = (long)ms;
        } else if (IS("--watch-pid")) {
            double pid;
            if (parse_double(v, &pid) || pid < 1 || pid != (double)(long)pid)
                return bad_arg("pid must be a positive integer", a);
            c->watch_pid = (long)pid;
        } else if (IS("--out")) {
            if (!*v) return bad_arg("empty output path", a);
            c->out_path = v;
        } else {
            return bad_arg("unknown argument", a);
        }
#undef IS
    }
    if (!c->out_path) return bad_arg("missing argument", "--out=FILE");
    if (c->nsrc == 0 && c->watch_pid < 0)
        return bad_arg("nothing to sample", "give --source=... and/or --watch-pid=...");
    if (c->linger_s >= 0 && c->watch_pid < 0) return bad_arg("--linger-s needs", "--watch-pid");
    if (c->mem_rate_hz < 0) c->mem_rate_hz = c->rate_hz < 50 ? c->rate_hz : 50;
    for (int i = 0; i < c->nsrc; i++) {
        source *s = &c->src[i];
        if (s->rate_hz > c->rate_hz) return bad_arg("source rate above --rate-hz", s->name);
        s->every = s->rate_hz > 0 ? (long)(c->rate_hz / s->rate_hz + 0.5) : 1;
        for (int j = 0; j < i; j++)
            if (strcmp(c->src[i].name, c->src[j].name) == 0)
                return bad_arg("duplicate source name", c->src[i].name);
        c->src[i].col = c->ncols;
        c->ncols += c->src[i].fmt == FMT_PAIR ? 2 : 1;
    }
    return 0;
}

/* ---- output: header line + fixed-size records --------------------------------------------- */

typedef struct {
    int fd;
    char *buf;
    size_t len, cap;
    size_t record_bytes;
    int write_errno;
} out_t;

static void out_flush(out_t *o) {
    size_t off = 0;
    while (off < o->len) {
        ssize_t n = write(o->fd, o->buf + off, o->len - off);
        if (n < 0) {
            if (errno == EINTR) continue;
            o->write_errno = errno;
            break;
        }
        off += (size_t)n;
    }
    o->len = 0;
}

/* Record: u32 kind (ASCII), u32 aux, i64 t_ns, f64 values[max(ncols, 2)], little-endian
 * (every Android ABI is little-endian, so the native layout is the file layout). */
static void out_record(out_t *o, char kind, uint32_t aux, long long t_ns, const double *vals,
                       int nvals) {
    if (o->len + o->record_bytes > o->cap) out_flush(o);
    char *r = o->buf + o->len;
    memset(r, 0, o->record_bytes);
    uint32_t k = (uint32_t)(unsigned char)kind;
    int64_t t = t_ns;
    memcpy(r, &k, 4);
    memcpy(r + 4, &aux, 4);
    memcpy(r + 8, &t, 8);
    double nan_ = NAN;
    size_t nslots = (o->record_bytes - 16) / 8;
    for (size_t i = 0; i < nslots; i++)
        memcpy(r + 16 + 8 * i, (int)i < nvals ? &vals[i] : &nan_, 8);
    o->len += o->record_bytes;
}

static int write_header(out_t *o, const config *c, long long start_ns) {
    jsonw w;
    jw_init(&w);
    jw_obj_open(&w, NULL);
    jw_str(&w, "format", "farm-trace");
    jw_int(&w, "version", TRACE_VERSION);
    jw_str(&w, "clock", "CLOCK_MONOTONIC");
    jw_int(&w, "start_ns", start_ns);
    jw_num(&w, "rate_hz", c->rate_hz);
    jw_num(&w, "mem_rate_hz", c->watch_pid > 0 ? c->mem_rate_hz : 0);
    jw_int(&w, "record_bytes", (long long)o->record_bytes);
    jw_int(&w, "columns", c->ncols);
    if (c->watch_pid > 0)
        jw_int(&w, "watch_pid", c->watch_pid);
    else
        jw_null(&w, "watch_pid");
    jw_int(&w, "pid", getpid());
    jw_arr_open(&w, "sources");
    for (int i = 0; i < c->nsrc; i++) {
        const source *s = &c->src[i];
        jw_obj_open(&w, NULL);
        jw_str(&w, "name", s->name);
        jw_str(&w, "path", s->path);
        jw_str(&w, "format", FMT_NAMES[s->fmt]);
        jw_int(&w, "column", s->col);
        jw_int(&w, "width", s->fmt == FMT_PAIR ? 2 : 1);
        jw_num(&w, "rate_hz", c->rate_hz / (double)s->every);
        if (s->open_errno)
            jw_str(&w, "open_error", errno_name(s->open_errno));
        else
            jw_null(&w, "open_error");
        jw_obj_close(&w);
    }
    jw_arr_close(&w);
    jw_obj_close(&w);
    if (w.failed) {
        jw_free(&w);
        return -1;
    }
    size_t off = 0;
    while (off < w.len) { /* header goes out at once: a parser needs it to read anything */
        ssize_t n = write(o->fd, w.buf + off, w.len - off);
        if (n < 0 && errno == EINTR) continue;
        if (n < 0) {
            jw_free(&w);
            return -1;
        }
        off += (size_t)n;
    }
    jw_free(&w);
    return write(o->fd, "\n", 1) == 1 ? 0 : -1;
}

/* ---- reading sources ----------------------------------------------------------------------- */

#define SYSFS_MAGIC_ 0x62656572
#define PROC_MAGIC_ 0x9fa0
#define DEBUGFS_MAGIC_ 0x64626720

static void source_open(source *s, long long t_ns) {
    s->fd = open(s->path, O_RDONLY | O_CLOEXEC);
    s->open_errno = s->fd < 0 ? errno : 0;
    s->next_reopen_ns = t_ns + REOPEN_INTERVAL_NS;
    struct statfs sf;
    s->plain_file = 0;
    if (s->fd >= 0 && fstatfs(s->fd, &sf) == 0)
        s->plain_file = !(sf.f_type == SYSFS_MAGIC_ || sf.f_type == PROC_MAGIC_ ||
                          sf.f_type == DEBUGFS_MAGIC_);
}

static void source_close(source *s, long long t_ns) {
    if (s->fd >= 0) close(s->fd);
    s->fd = -1;
    s->next_reopen_ns = t_ns + REOPEN_INTERVAL_NS;
}

/* Parses one reading into out[0] (and out[1] for pair). Returns 0 or -1 (unparsable). */
static int parse_value(enum fmt f, const char *text, double *out) {
    char *end;
    double a, b;
    switch (f) {
        case FMT_INT: {
            errno = 0;
            long long v = strtoll(text, &end, 10);
            if (end == text || errno) return -1;
            out[0] = (double)v;
            return 0;
        }
        case FMT_FLOAT:
        case FMT_PCT: /* "NN %" or "NN%": the leading number */
            a = strtod(text, &end);
            if (end == text) return -1;
            out[0] = a;
            return 0;
        case FMT_KGSL:
        case FMT_PAIR:
            a = strtod(text, &end);
            if (end == text) return -1;
            text = end;
            b = strtod(text, &end);
            if (end == text) return -1;
            if (f == FMT_PAIR) {
                out[0] = a;
                out[1] = b;
            } else {
                /* total 0: the GPU was powered down for the whole window, so it was idle */
                out[0] = b > 0 ? a / b : 0.0;
            }
            return 0;
    }
    return -1;
}

static void read_source(source *s, long long t_ns, double *out) {
    out[0] = NAN;
    if (s->fmt == FMT_PAIR) out[1] = NAN;
    if (s->fd < 0) {
        if (t_ns < s->next_reopen_ns) return;
        source_open(s, t_ns);
        if (s->fd < 0) return;
    }
    struct stat st;
    if (s->plain_file && fstat(s->fd, &st) == 0 && st.st_nlink == 0) {
        close(s->fd); /* replaced by rename: our inode is the old, unlinked one */
        source_open(s, t_ns);
        if (s->fd < 0) return;
    }
    char buf[READ_BUF_BYTES];
    ssize_t n = pread(s->fd, buf, sizeof(buf) - 1, 0);
    if (n < 0) {
        if (errno != EAGAIN && errno != EINTR) source_close(s, t_ns);
        return;
    }
    buf[n] = '\0';
    parse_value(s->fmt, buf, out);
}

/* ---- watched process ---------------------------------------------------------------------- */

typedef struct {
    long pid;
    int fd;
    int exited;
    double last_hwm_kb;
} watch_t;

static double status_field_kb(const char *text, const char *key) {
    const char *p = strstr(text, key);
    if (!p) return NAN;
    return strtod(p + strlen(key), NULL);
}

/* Returns 1 when the process is gone (or a zombie), else fills rss/hwm (NaN if not shown). */
static int watch_read(watch_t *w, double *rss_kb, double *hwm_kb) {
    static char buf[8192];
    if (w->fd < 0) return 1;
    ssize_t n = pread(w->fd, buf, sizeof(buf) - 1, 0);
    if (n <= 0) return 1;
    buf[n] = '\0';
    const char *state = strstr(buf, "\nState:");
    if (state) {
        state += 7;
        while (*state == ' ' || *state == '\t') state++;
        if (*state == 'Z' || *state == 'X') return 1;
    }
    *rss_kb = status_field_kb(buf, "\nVmRSS:");
    *hwm_kb = status_field_kb(buf, "\nVmHWM:");
    if (!isnan(*hwm_kb)) w->last_hwm_kb = *hwm_kb;
    return 0;
}

/* ---- main loop ---------------------------------------------------------------------------- */

int main(int argc, char **argv) {
    config c;
    int rc = parse_args(argc, argv, &c);
    if (rc) return rc;

    struct sigaction sa;
    memset(&sa, 0, sizeof(sa));
    sa.sa_handler = on_signal;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGINT, &sa, NULL);
    signal(SIGHUP, SIG_IGN);
    signal(SIGPIPE, SIG_IGN);
    /* The default 50 us timer slack would make every tick that late; 1 us keeps wake-ups on the
     * deadline at no measurable cost at these rates. */
    prctl(PR_SET_TIMERSLACK, 1000UL, 0UL, 0UL, 0UL);

    out_t o;
    memset(&o, 0, sizeof(o));
    o.fd = open(c.out_path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (o.fd < 0) {
        fprintf(stderr, "farm-sampler: cannot write %s: %s\n", c.out_path, strerror(errno));
        return 5;
    }
    o.record_bytes = 16 + 8 * (size_t)(c.ncols > 2 ? c.ncols : 2);
    o.cap = o.record_bytes * 512;
    o.buf = malloc(o.cap);
    if (!o.buf) return 5;

    long long start_ns = now_ns();
    for (int i = 0; i < c.nsrc; i++) source_open(&c.src[i], start_ns);
    watch_t w = {c.watch_pid, -1, 0, NAN};
    if (c.watch_pid > 0) {
        char p[64];
        snprintf(p, sizeof(p), "/proc/%ld/status", c.watch_pid);
        w.fd = open(p, O_RDONLY | O_CLOEXEC);
    }
    if (write_header(&o, &c, start_ns) != 0) {
        fprintf(stderr, "farm-sampler: cannot write %s: %s\n", c.out_path, strerror(errno));
        return 5;
    }

    const long long period_ns = (long long)(1e9 / c.rate_hz + 0.5);
    const long long mem_period_ns = (long long)(1e9 / c.mem_rate_hz + 0.5);
    const long long flush_ns = c.flush_ms * 1000000LL;
    const long long end_ns = c.duration_s > 0 ? start_ns + (long long)(c.duration_s * 1e9) : -1;
    long long linger_end_ns = -1;
    long long next_ns = start_ns, next_mem_ns = start_ns, next_flush_ns = start_ns + flush_ns;
    long long ticks = 0, missed = 0;
    double vals[MAX_COLUMNS];
    enum stop_reason why = STOP_SIGNAL;

    for (;;) {
        struct timespec ts = {(time_t)(next_ns / 1000000000LL), (long)(next_ns % 1000000000LL)};
        while (!g_stop && clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL) == EINTR) {
        }
        if (g_stop) break;
        long long t = now_ns();
        if (end_ns > 0 && t >= end_ns) {
            why = STOP_DURATION;
            break;
        }
        if (linger_end_ns > 0 && t >= linger_end_ns) {
            why = STOP_LINGER;
            break;
        }
        if (c.nsrc > 0) {
            long long k = (next_ns - start_ns) / period_ns; /* scheduled tick index */
            for (int i = 0; i < c.nsrc; i++) {
                source *src = &c.src[i];
                if (k % src->every == 0) {
                    read_source(src, t, &vals[src->col]);
                } else {
                    vals[src->col] = NAN;
                    if (src->fmt == FMT_PAIR) vals[src->col + 1] = NAN;
                }
            }
            long long dur = now_ns() - t;
            out_record(&o, 'S', (uint32_t)(dur > 0xffffffffLL ? 0xffffffffLL : dur), t, vals,
                       c.ncols);
            ticks++;
        }
        if (w.pid > 0 && !w.exited && t >= next_mem_ns) {
            double m[2] = {NAN, NAN};
            if (watch_read(&w, &m[0], &m[1])) {
                double e[1] = {w.last_hwm_kb};
                w.exited = 1;
                out_record(&o, 'E', (uint32_t)w.pid, t, e, 1);
                if (c.linger_s >= 0) linger_end_ns = t + (long long)(c.linger_s * 1e9);
                if (c.linger_s == 0) {
                    why = STOP_LINGER;
                    break;
                }
            } else {
                out_record(&o, 'M', (uint32_t)w.pid, t, m, 2);
            }
            next_mem_ns += mem_period_ns;
            if (next_mem_ns <= t) next_mem_ns = t + mem_period_ns;
        }
        if (t >= next_flush_ns) {
            out_flush(&o);
            next_flush_ns = t + flush_ns;
        }
        next_ns += period_ns;
        long long after = now_ns();
        if (next_ns <= after) { /* overran: skip the ticks we missed instead of bunching up */
            long long behind = (after - next_ns) / period_ns + 1;
            missed += behind;
            next_ns += behind * period_ns;
        }
    }
    double x[2] = {(double)ticks, (double)missed};
    out_record(&o, 'X', (uint32_t)why, now_ns(), x, 2);
    out_flush(&o);
    int werr = o.write_errno;
    close(o.fd);
    free(o.buf);
    if (werr) {
        fprintf(stderr, "farm-sampler: writing %s failed: %s\n", c.out_path, strerror(werr));
        return 5;
    }
    return 0;
}
