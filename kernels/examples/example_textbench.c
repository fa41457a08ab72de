/* example-textbench: an external benchmark program that prints plain text, not JSON.
 *
 * It stands for the many tools farm cannot change (MNN's and ncnn's benchmarks, a lab's own
 * binary): read with the `regex` adapter (--format=text) or, imitating TensorFlow Lite's
 * benchmark_model as its documentation shows it, with the `tflite` adapter (--format=tflite).
 *
 *   example-textbench [--iters=10] [--work-us=2000] [--format=text|tflite] [--fail-after=K]
 *
 * Each iteration spins on the CPU for --work-us microseconds. --format=text prints
 *   iter 3: 2.004 ms
 *   summary: iterations=10 mean_ms=2.005 min_ms=2.001 max_ms=2.013
 *   peak rss: 1420 kB
 * --fail-after=K stops after K measured iterations with exit code 5 and no summary, as a
 * crashing program would (for tests of truncated output). Exit codes: 0 ok, 2 bad argument, 5
 * stopped by --fail-after.
 */
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define PROGRAM "example-textbench"
#define WARMUP_ITERS 3

static int64_t now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

static long parse_long(const char *name, const char *text, long lo, long hi) {
    char *end;
    errno = 0;
    long v = strtol(text, &end, 10);
    if (errno || end == text || *end || v < lo || v > hi) {
        fprintf(stderr, PROGRAM ": --%s: expected an integer in %ld..%ld, got '%s'\n", name, lo, hi, text);
        exit(2);
    }
    return v;
}

/* Spins until `us` microseconds have passed; returns a value that depends on the work done. */
static double spin(long us) {
    volatile double x = 1.0;
    int64_t until = now_ns() + (int64_t)us * 1000;
    while (now_ns() < until)
        for (int i = 0; i < 64; i++) x = x * 1.0000001 + 1e-9;
    return x;
}

/* VmHWM of this process in kB, -1 when /proc cannot tell. */
static long peak_rss_kb(void) {
    FILE *f = fopen("/proc/self/status", "r");
    if (!f) return -1;
    char line[256];
    long kb = -1;
    while (fgets(line, sizeof line, f))
        if (strncmp(line, "VmHWM:", 6) == 0) kb = strtol(line + 6, NULL, 10);
    fclose(f);
    return kb;
}

typedef struct {
    long count;
    double first, last, min, max, sum, sumsq;
} stat;

static void stat_add(stat *s, double us) {
    if (s->count == 0) s->first = s->min = s->max = us;
    s->last = us;
    s->min = us < s->min ? us : s->min;
    s->max = us > s->max ? us : s->max;
    s->sum += us, s->sumsq += us * us, s->count++;
}

static double stat_mean(const stat *s) { return s->count ? s->sum / (double)s->count : 0; }

static double stat_std(const stat *s) {
    double m = stat_mean(s), var = s->count ? s->sumsq / (double)s->count - m * m : 0;
    return var > 0 ? sqrt(var) : 0;
}

/* benchmark_model's statistics line: microseconds, integers where it prints integers */
static void print_stat(const stat *s) {
    printf("count=%ld first=%.0f curr=%.0f min=%.0f max=%.0f avg=%.1f std=%.0f\n", s->count, s->first, s->last,
           s->min, s->max, stat_mean(s), stat_std(s));
}

int main(int argc, char **argv) {
    long iters = 10, work_us = 2000, fail_after = -1;
    int tflite = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *eq = strchr(a, '=');
        if (strcmp(a, "--help") == 0) {
            printf("usage: " PROGRAM " [--iters=10] [--work-us=2000] [--format=text|tflite] [--fail-after=K]\n"
                   "  spins --work-us per iteration; prints per-iteration times and a summary as text\n"
                   "  (--format=text, for the regex adapter) or as TFLite benchmark_model does (tflite)\n"
                   "example: " PROGRAM " --iters=20 --work-us=500\n");
            return 0;
        }
        if (!eq || strncmp(a, "--", 2) != 0) {
            fprintf(stderr, PROGRAM ": unknown argument '%s' (see --help)\n", a);
            return 2;
        }
        size_t len = (size_t)(eq - a);
        if (len == 7 && strncmp(a, "--iters", len) == 0) iters = parse_long("iters", eq + 1, 1, 1000000);
        else if (len == 9 && strncmp(a, "--work-us", len) == 0) work_us = parse_long("work-us", eq + 1, 0, 10000000);
        else if (len == 12 && strncmp(a, "--fail-after", len) == 0)
            fail_after = parse_long("fail-after", eq + 1, 0, 1000000);
        else if (len == 8 && strncmp(a, "--format", len) == 0 && strcmp(eq + 1, "text") == 0) tflite = 0;
        else if (len == 8 && strncmp(a, "--format", len) == 0 && strcmp(eq + 1, "tflite") == 0) tflite = 1;
        else {
            fprintf(stderr, PROGRAM ": unknown argument '%s' (see --help)\n", a);
            return 2;
        }
    }

    long rss_start = peak_rss_kb();
    int64_t t_start = now_ns();
    double sink = spin(work_us / 4 + 1); /* "loading the model" */
    double init_us = (double)(now_ns() - t_start) / 1e3;
    long rss_init = peak_rss_kb();
    if (tflite) {
        printf("STARTING!\nNum runs: [%ld]\nGraph: [example-textbench]\nLoaded model example-textbench\n", iters);
        printf("Initialized session in %.3fms.\n", init_us / 1e3);
        printf("Running benchmark for at least %d iterations and at least 0 seconds but terminate if "
               "exceeding 150 seconds.\n", WARMUP_ITERS);
    } else {
        printf(PROGRAM " 1.0: busy loop of %ld us per iteration, %ld iterations\n", work_us, iters);
    }
    stat warm = {0}, run = {0};
    for (int i = 0; i < WARMUP_ITERS; i++) {
        int64_t t0 = now_ns();
        sink += spin(work_us);
        stat_add(&warm, (double)(now_ns() - t0) / 1e3);
    }
    if (tflite) {
        print_stat(&warm);
        printf("\nRunning benchmark for at least %ld iterations and at least 0 seconds but terminate if "
               "exceeding 150 seconds.\n", iters);
    }
    fflush(stdout);
    for (long i = 0; i < iters; i++) {
        if (i == fail_after) {
            fprintf(stderr, PROGRAM ": stopping after %ld iterations as --fail-after asks\n", i);
            return 5;
        }
        int64_t t0 = now_ns();
        sink += spin(work_us);
        double us = (double)(now_ns() - t0) / 1e3;
        stat_add(&run, us);
        if (!tflite) printf("iter %ld: %.3f ms\n", i, us / 1e3);
        fflush(stdout);
    }
    long rss_peak = peak_rss_kb();
    if (tflite) {
        print_stat(&run);
        printf("\nInference timings in us: Init: %.0f, First inference: %.0f, Warmup (avg): %.1f, "
               "Inference (avg): %.1f\n", init_us, warm.first, stat_mean(&warm), stat_mean(&run));
        printf("Memory footprint delta from the start of the tool (MB): init=%.4f overall=%.4f\n",
               (rss_init - rss_start) / 1024.0, (rss_peak - rss_start) / 1024.0);
    } else {
        printf("summary: iterations=%ld mean_ms=%.3f min_ms=%.3f max_ms=%.3f\n", run.count, stat_mean(&run) / 1e3,
               run.min / 1e3, run.max / 1e3);
        printf("peak rss: %ld kB\n", rss_peak);
    }
    return sink > 0 ? 0 : 1; /* always 0: sink keeps the spin's work from being optimised away */
}
