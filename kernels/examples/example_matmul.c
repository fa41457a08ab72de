/* example-matmul: an external benchmark program that speaks farm's jsonl contract.
 *
 * Not one of farm's own programs: it stands for a program a researcher brings, written without
 * farm's C library, to show everything the contract asks (kernels/README.md "Output"): one JSON
 * object a line on stdout, CLOCK_MONOTONIC nanoseconds, `info` first, `phase` warmup/measure,
 * one `iter` per measured iteration, `result` last, `error` before a non-zero exit.
 *
 *   example-matmul [--n=128] [--iters=10] [--warmup=2] [--seconds=0] [--input=FILE]
 *
 * C = A x B with n x n float matrices on one CPU thread. --seconds keeps measuring at least that
 * long (after --iters). --input seeds the matrices from a file's bytes (FNV-1a), so a run can
 * depend on a pushed asset; its size and hash are in `info`. Exit codes: 0 ok, 2 bad argument,
 * 5 other error (unreadable input, out of memory).
 */
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define PROGRAM "example-matmul"

static int64_t now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

/* A JSON string body: quotes, backslashes and control characters escaped. */
static void put_json_string(const char *s) {
    putchar('"');
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        if (c == '"' || c == '\\') printf("\\%c", c);
        else if (c < 0x20) printf("\\u%04x", c);
        else putchar(c);
    }
    putchar('"');
}

/* One line on stderr, the same message as an `error` event on stdout, then exit. */
static void fail(int code, const char *fmt, ...) {
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    fprintf(stderr, PROGRAM ": %s\n", msg);
    printf("{\"event\":\"error\",\"message\":");
    put_json_string(msg);
    printf(",\"exit_code\":%d}\n", code);
    fflush(stdout);
    exit(code);
}

static long parse_long(const char *name, const char *text, long lo, long hi) {
    char *end;
    errno = 0;
    long v = strtol(text, &end, 10);
    if (errno || end == text || *end || v < lo || v > hi)
        fail(2, "--%s: expected an integer in %ld..%ld, got '%s'", name, lo, hi, text);
    return v;
}

static double parse_double(const char *name, const char *text, double lo, double hi) {
    char *end;
    errno = 0;
    double v = strtod(text, &end);
    if (errno || end == text || *end || !(v >= lo && v <= hi))
        fail(2, "--%s: expected a number in %g..%g, got '%s'", name, lo, hi, text);
    return v;
}

typedef struct {
    long n, iters, warmup;
    double seconds;
    const char *input;
} options;

static void usage(void) {
    printf("usage: " PROGRAM " [--n=128] [--iters=10] [--warmup=2] [--seconds=0] [--input=FILE]\n"
           "  C = A x B (n x n floats, one thread); prints farm's JSON Lines events.\n"
           "  --n=N        matrix size, 1..1024\n"
           "  --iters=N    measured iterations, at least (1..1000000)\n"
           "  --warmup=N   iterations before measuring (0..1000000)\n"
           "  --seconds=X  keep measuring at least X seconds (0..3600)\n"
           "  --input=FILE seed the matrices from FILE's bytes\n"
           "example: " PROGRAM " --n=64 --iters=20\n");
}

static options parse_args(int argc, char **argv) {
    options o = {128, 10, 2, 0.0, NULL};
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        const char *eq = strchr(a, '=');
        if (strcmp(a, "--help") == 0) {
            usage();
            exit(0);
        }
        if (strncmp(a, "--", 2) != 0 || !eq) fail(2, "unknown argument '%s' (see --help)", a);
        size_t len = (size_t)(eq - a - 2);
        const char *v = eq + 1;
        if (len == 1 && strncmp(a + 2, "n", len) == 0) o.n = parse_long("n", v, 1, 1024);
        else if (len == 5 && strncmp(a + 2, "iters", len) == 0) o.iters = parse_long("iters", v, 1, 1000000);
        else if (len == 6 && strncmp(a + 2, "warmup", len) == 0) o.warmup = parse_long("warmup", v, 0, 1000000);
        else if (len == 7 && strncmp(a + 2, "seconds", len) == 0) o.seconds = parse_double("seconds", v, 0, 3600);
        else if (len == 5 && strncmp(a + 2, "input", len) == 0) o.input = v;
        else fail(2, "unknown argument '%s' (see --help)", a);
    }
    return o;
}

/* FNV-1a 64 over a file's bytes; *size gets its length. */
static uint64_t hash_file(const char *path, long long *size) {
    FILE *f = fopen(path, "rb");
    if (!f) fail(5, "--input: cannot open '%s': %s", path, strerror(errno));
    uint64_t h = 1469598103934665603ULL;
    unsigned char buf[65536];
    size_t got;
    *size = 0;
    while ((got = fread(buf, 1, sizeof buf, f)) > 0) {
        for (size_t i = 0; i < got; i++) h = (h ^ buf[i]) * 1099511628211ULL;
        *size += (long long)got;
    }
    int bad = ferror(f);
    fclose(f);
    if (bad) fail(5, "--input: cannot read '%s'", path);
    return h;
}

static void matmul(const float *a, const float *b, float *c, long n) {
    memset(c, 0, sizeof(float) * (size_t)(n * n));
    for (long i = 0; i < n; i++)
        for (long k = 0; k < n; k++) {
            float aik = a[i * n + k];
            for (long j = 0; j < n; j++) c[i * n + j] += aik * b[k * n + j];
        }
}

static int cmp_double(const void *x, const void *y) {
    double a = *(const double *)x, b = *(const double *)y;
    return (a > b) - (a < b);
}

int main(int argc, char **argv) {
    options o = parse_args(argc, argv);
    long long input_bytes = 0;
    uint64_t input_fnv = o.input ? hash_file(o.input, &input_bytes) : 0;
    uint64_t seed = 0x9e3779b97f4a7c15ULL ^ input_fnv;

    size_t cells = (size_t)(o.n * o.n);
    float *a = malloc(cells * sizeof(float)), *b = malloc(cells * sizeof(float));
    float *c = malloc(cells * sizeof(float));
    if (!a || !b || !c) fail(5, "out of memory for n=%ld", o.n);
    for (size_t i = 0; i < cells; i++) { /* xorshift64: the same matrices on every ABI */
        seed ^= seed << 13, seed ^= seed >> 7, seed ^= seed << 17;
        a[i] = (float)((seed >> 40) % 2001) / 1000.0f - 1.0f;
        b[i] = (float)((seed >> 20) % 2001) / 1000.0f - 1.0f;
    }

    printf("{\"event\":\"info\",\"program\":\"" PROGRAM "\",\"n\":%ld,\"backend\":\"cpu\",\"threads\":1", o.n);
    if (o.input) {
        printf(",\"input\":");
        put_json_string(o.input);
        printf(",\"input_bytes\":%lld,\"input_fnv\":\"%016" PRIx64 "\"", input_bytes, input_fnv);
    }
    printf("}\n");
    printf("{\"event\":\"phase\",\"phase\":\"warmup\",\"t_ns\":%" PRId64 "}\n", now_ns());
    for (long i = 0; i < o.warmup; i++) matmul(a, b, c, o.n);
    int64_t measure_start = now_ns();
    printf("{\"event\":\"phase\",\"phase\":\"measure\",\"t_ns\":%" PRId64 "}\n", measure_start);
    fflush(stdout);

    size_t cap = (size_t)o.iters, count = 0;
    double *ms = malloc(cap * sizeof(double));
    if (!ms) fail(5, "out of memory for %ld iterations", o.iters);
    int64_t min_end = measure_start + (int64_t)(o.seconds * 1e9);
    for (;;) {
        int64_t t0 = now_ns();
        matmul(a, b, c, o.n);
        int64_t t1 = now_ns();
        if (count == cap) {
            double *grown = realloc(ms, 2 * cap * sizeof(double));
            if (!grown) fail(5, "out of memory after %zu iterations", count);
            ms = grown, cap *= 2;
        }
        ms[count] = (double)(t1 - t0) / 1e6;
        printf("{\"event\":\"iter\",\"i\":%zu,\"t_start_ns\":%" PRId64 ",\"t_end_ns\":%" PRId64 "}\n", count,
               t0, t1);
        fflush(stdout); /* per line: a program killed mid-run leaves whole events */
        count++;
        if ((long)count >= o.iters && t1 >= min_end) break;
    }

    double sum = 0, checksum = 0;
    for (size_t i = 0; i < count; i++) sum += ms[i];
    for (size_t i = 0; i < cells; i++) checksum += c[i];
    qsort(ms, count, sizeof(double), cmp_double);
    double median = count % 2 ? ms[count / 2] : (ms[count / 2 - 1] + ms[count / 2]) / 2;
    double gflops = median > 0 ? 2.0 * (double)o.n * (double)o.n * (double)o.n / (median * 1e6) : 0;
    printf("{\"event\":\"result\",\"iterations\":%zu,\"inferences\":%zu,\"median_ms\":%.6f,\"mean_ms\":%.6f,"
           "\"min_ms\":%.6f,\"max_ms\":%.6f,\"gflops\":%.6f,\"checksum\":%.6f}\n",
           count, count, median, sum / (double)count, ms[0], ms[count - 1], gflops, checksum);
    free(ms), free(a), free(b), free(c);
    return 0;
}
