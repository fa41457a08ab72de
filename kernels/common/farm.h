/*
 * farm common runtime for the OpenCL benchmark programs (gemm, lstm, cnn, train, gpuload).
 *
 * One header, several small implementation files (one per role):
 *   util.c   clock, errors/exit, RNG, fp16 conversion, hashing, comparison, checksum
 *   args.c   `--name=value` argument parsing and `--help`
 *   json.c   JSON Lines event writer (stdout)
 *   clload.c OpenCL loaded at run time from a candidate list (no program links -lOpenCL)
 *   clrt.c   OpenCL platform/device selection, context and queue, errors, buffers
 *   clbuild.c  program build with an on-disk program-binary cache
 *   clevents.c event profiling split into host-to-device / kernel / device-to-host
 *   bench.c  warm-up and measurement loop (count and seconds bounds), phase/iter events, stats
 *   npy.c    tiny .npy reader/writer (float32 out; float16/32/64 in)
 *   pool.c   persistent pthread pool for the `cpu-mt` backends
 *
 * Contract (architecture.md section 4): JSON Lines on stdout, CLOCK_MONOTONIC ns, exit codes
 * below. Every fatal path goes through farm_die(), which prints one `error` event on stdout and
 * one line on stderr, then exits with the given code.
 *
 * Build (kernels/Makefile): a program is a directory with main.c; all its .c files and
 * the common/ sources are linked into build/<abi>/<program>; each DIR/NAME.cl is embedded at build time
 * as the generated header NAME_cl.h defining `static const char NAME_cl_source[]`
 * (#include "NAME_cl.h", then farm_cl_build(cl, "NAME", NAME_cl_source, options, cache_dir, &p)).
 *
 * Typical main():  farm_common c; farm_common_defaults(&c); farm_parse_args(...);
 *   if (c.list_devices) return farm_cl_list_devices();  farm_common_check(&c);
 *   gpu: farm_cl_open(&cl, c.cl_device); farm_cl_build(..., farm_cl_cache_dir(c.cl_cache), &prog);
 *   `info` event (farm_cl_info_fields), farm_bench_run(&c, iter_fn, ctx, has_split, &stats),
 *   `result` event (farm_json_stats + program fields), release everything, return 0.
 *
 * The API is kept stable; extend it compatibly (new functions, new fields at the end of structs).
 */
#ifndef FARM_H
#define FARM_H

#ifndef CL_TARGET_OPENCL_VERSION
#define CL_TARGET_OPENCL_VERSION 120
#endif
#include <CL/cl.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

/* ---------------------------------------------------------------- exit codes */
enum {
    FARM_EXIT_OK = 0,
    FARM_EXIT_USAGE = 2,     /* bad arguments or unreadable/ill-shaped input files */
    FARM_EXIT_NO_DEVICE = 3, /* no usable OpenCL platform/device (message names what was sought) */
    FARM_EXIT_VERIFY = 4,    /* --verify: OpenCL result differs from the CPU reference */
    FARM_EXIT_ERROR = 5      /* anything else (OpenCL error, out of memory, I/O) */
};

/* ---------------------------------------------------------------- util.c */
/* Name used as prefix of stderr lines ("gemm: ..."); set by farm_parse_args. */
void farm_set_prog(const char *name);
const char *farm_prog(void);

/* Prints {"event":"error","message":...,"exit_code":N} on stdout, "prog: message" on stderr,
 * runs the registered cleanup hook (if any) and exits with `code`. */
_Noreturn void farm_die(int code, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* CLOCK_MONOTONIC in nanoseconds (same clock as every other farm program on the device). */
uint64_t farm_now_ns(void);
/* Sleeps for ns nanoseconds (restarts after signals unless *stop becomes non-zero; stop may be NULL). */
void farm_sleep_ns(uint64_t ns, volatile int *stop);

/* Seeded pseudo-random numbers (splitmix64): identical on every ABI for the same seed. */
uint64_t farm_rng_next(uint64_t *state);
float farm_rng_uniform(uint64_t *state, float lo, float hi);
void farm_fill_uniform(float *x, size_t n, uint64_t seed, float lo, float hi);

/* IEEE half <-> float, round to nearest even (host side of the fp16 paths). */
uint16_t farm_f32_to_f16(float f);
float farm_f16_to_f32(uint16_t h);
/* Rounds every element through fp16 and back (what fp16 storage does to a value). */
void farm_round_f16(float *x, size_t n);

/* FNV-1a 64-bit; chain calls starting from FARM_HASH_INIT. */
#define FARM_HASH_INIT 0xcbf29ce484222325ULL
uint64_t farm_hash64(uint64_t h, const void *data, size_t n);

/* Sum of elements in double: the `checksum` of result events. */
double farm_checksum(const float *x, size_t n);

/* Elementwise comparison: element i passes when |got-ref| <= atol + rtol*|ref|. */
typedef struct {
    int ok;
    size_t mismatches;
    size_t first_bad;   /* index of first failing element (valid when !ok) */
    double max_abs_err;
    double max_rel_err; /* |got-ref| / max(|ref|, 1e-30) */
} farm_cmp;
farm_cmp farm_compare(const float *got, const float *ref, size_t n, double rtol, double atol);

/* Online CPU count (>= 1). */
int farm_cpu_count(void);
/* xmalloc-style allocation: dies with FARM_EXIT_ERROR on failure; memory is zeroed. */
void *farm_alloc(size_t bytes);

/* ---------------------------------------------------------------- args.c */
typedef enum {
    FARM_OPT_INT,    /* target: long*;  range [min, max] */
    FARM_OPT_DOUBLE, /* target: double*; range [min, max] */
    FARM_OPT_STRING, /* target: const char** (points into argv) */
    FARM_OPT_FLAG,   /* target: int*; `--x` or `--x=1|0|true|false` */
    FARM_OPT_CHOICE  /* target: const char** set to the matching entry of `choices` */
} farm_opt_kind;

typedef struct {
    const char *name; /* without leading "--"; NULL terminates an option table */
    farm_opt_kind kind;
    void *target;
    const char *help;
    double min, max;             /* INT / DOUBLE range, inclusive */
    const char *const *choices;  /* CHOICE: NULL-terminated list */
} farm_opt;

/* Parses argv against `opts` (terminated by an entry with name == NULL). `--help` prints the
 * summary, every option with its default (the target's value before parsing) and `example`,
 * then exits 0. Unknown or invalid arguments: one line on stderr, exit 2. */
void farm_parse_args(int argc, char **argv, const char *prog, const char *summary,
                     const char *example, const farm_opt *opts);

/* Options every benchmark program shares (see FARM_OPTS_* below). */
typedef struct {
    const char *backend;   /* "cpu" | "cpu-mt" | "gpu"             (default "gpu") */
    long threads;          /* cpu-mt threads                         (default: online CPUs) */
    long warmup;           /* warm-up iterations                     (default 2) */
    long iters;            /* minimum measured iterations            (default 10) */
    double min_seconds;    /* keep measuring at least this long      (default 0) */
    double max_seconds;    /* stop warm-up/measurement after this    (default 60) */
    const char *precision; /* "fp32" | "fp16"                        (default "fp32") */
    long seed;             /* data seed                              (default 1) */
    int verify;            /* compare the gpu result with the cpu path; exit 4 on mismatch */
    const char *cl_device; /* NULL: first GPU, else first device; "P:D" indices, or a name substring */
    const char *cl_cache;  /* NULL: $FARM_CL_CACHE or ./.clcache */
    int list_devices;      /* print one `device` event per OpenCL device and exit */
    const char *dump_output; /* NULL or path of an .npy file receiving the output */
    int tune;              /* --tune: search GPU kernel parameters, keep the best (common/tune.h) */
    double tune_budget_s;  /* --tune-budget-s                         (default 30) */
    const char *tuned;     /* --tuned=use|ignore: tuned parameters from the cache (default use) */
    long iteration_events; /* --iteration-events: `iter` events for the first N measured iterations,
                            * then a sample and a summary (0 = every iteration) (default 2000) */
    long exact_iterations; /* --exact-iterations: iterations whose times are kept for exact result
                            * quantiles; past it, quantiles from a log histogram (default 65536) */
} farm_common;

/* Default of --iteration-events: bounds a time-bound run of a fast kernel to ~2 x 2000 lines. */
#ifndef FARM_ITERATION_EVENTS_DEFAULT
#define FARM_ITERATION_EVENTS_DEFAULT 2000
#endif
/* Default of --exact-iterations: 8 bytes per kept time and statistic (512 kB each at most). */
#ifndef FARM_EXACT_ITERATIONS_DEFAULT
#define FARM_EXACT_ITERATIONS_DEFAULT 65536
#endif
/* Wall-time histogram of the `iter_summary` event: bin k holds [2^(k/B), 2^((k+1)/B)) ns. */
#define FARM_HIST_BINS_PER_OCTAVE 64
#define FARM_HIST_BINS (64 * FARM_HIST_BINS_PER_OCTAVE)
/* The bin of a wall time of `ns` nanoseconds (0 for ns < 1). */
int farm_hist_bin(uint64_t ns);

extern const char *const farm_backend_choices[];   /* cpu, cpu-mt, gpu */
extern const char *const farm_precision_choices[]; /* fp32, fp16 */

void farm_common_defaults(farm_common *c);

/* Option-table fragments; use inside a farm_opt array initialiser, e.g.
 *   farm_opt opts[] = { FARM_OPTS_BENCH(&common), FARM_OPTS_CL(&common),
 *                       {"m", FARM_OPT_INT, &m, "rows of A and C", 1, 65536, NULL}, {0} }; */
#define FARM_OPTS_BENCH(c)                                                                        \
    {"backend", FARM_OPT_CHOICE, &(c)->backend, "cpu (1 thread), cpu-mt (pthreads) or gpu (OpenCL)", \
     0, 0, farm_backend_choices},                                                                 \
    {"threads", FARM_OPT_INT, &(c)->threads, "threads of the cpu-mt backend", 1, 1024, NULL},     \
    {"warmup", FARM_OPT_INT, &(c)->warmup, "warm-up iterations (not reported as iter)", 0, 1e9, NULL}, \
    {"iters", FARM_OPT_INT, &(c)->iters, "measured iterations (at least)", 1, 1e9, NULL},         \
    {"min-seconds", FARM_OPT_DOUBLE, &(c)->min_seconds, "measure at least this long", 0, 1e6, NULL}, \
    {"max-seconds", FARM_OPT_DOUBLE, &(c)->max_seconds,                                           \
     "stop warm-up and measurement after this long (>= 1 measured iteration)", 0, 1e6, NULL},     \
    {"precision", FARM_OPT_CHOICE, &(c)->precision, "fp32, or fp16 storage", 0, 0,                 \
     farm_precision_choices},                                                                     \
    {"seed", FARM_OPT_INT, &(c)->seed, "seed of generated inputs", 0, 9.2e18, NULL},              \
    {"verify", FARM_OPT_FLAG, &(c)->verify, "check the result against the cpu path (exit 4 on mismatch)", \
     0, 0, NULL},                                                                                 \
    {"dump-output", FARM_OPT_STRING, &(c)->dump_output, "write the output as .npy to this file", 0, 0, NULL}, \
    {"iteration-events", FARM_OPT_INT, &(c)->iteration_events,                                    \
     "iter events for the first N measured iterations, then a sample and a summary (0: all)", 0, 1e9, NULL}, \
    {"exact-iterations", FARM_OPT_INT, &(c)->exact_iterations,                                    \
     "iterations whose times are kept for exact result quantiles (more: from a log histogram, within 0.54%)", \
     1, 1e9, NULL}

#define FARM_OPTS_CL(c)                                                                           \
    {"cl-device", FARM_OPT_STRING, &(c)->cl_device,                                               \
     "OpenCL device: P:D indices or a name substring (default: first GPU, else first device)", 0, 0, NULL}, \
    {"cl-cache", FARM_OPT_STRING, &(c)->cl_cache,                                                 \
     "program-binary cache dir (default $FARM_CL_CACHE or ./.clcache)", 0, 0, NULL},              \
    {"list-devices", FARM_OPT_FLAG, &(c)->list_devices, "print the OpenCL devices and exit", 0, 0, NULL}

/* Validates cross-option rules shared by all programs (e.g. --verify needs the gpu backend).
 * Dies with exit 2 on violation. */
void farm_common_check(const farm_common *c);

/* ---------------------------------------------------------------- json.c */
/* One JSON object per line on stdout. Usage:
 *   farm_json j; farm_json_begin(&j, "result"); farm_json_int(&j, "iterations", n);
 *   farm_json_end(&j);    // prints the line and flushes stdout */
typedef struct {
    char *buf;
    size_t len, cap;
} farm_json;

void farm_json_begin(farm_json *j, const char *event);
void farm_json_str(farm_json *j, const char *key, const char *val); /* val NULL -> null */
void farm_json_int(farm_json *j, const char *key, long long v);
void farm_json_u64(farm_json *j, const char *key, uint64_t v);
void farm_json_num(farm_json *j, const char *key, double v); /* non-finite -> null */
void farm_json_bool(farm_json *j, const char *key, int v);
void farm_json_raw(farm_json *j, const char *key, const char *json_text); /* already-valid JSON */
void farm_json_end(farm_json *j);
/* Discards an object begun but not printed. */
void farm_json_abort(farm_json *j);

/* ---------------------------------------------------------------- clrt.c, clbuild.c, clevents.c */
typedef struct {
    cl_platform_id platform;
    cl_device_id device;
    cl_context context;
    cl_command_queue queue; /* in-order, profiling enabled */
    cl_device_type device_type;
    char platform_name[256];
    char device_name[256];
    char device_version[256];
    char driver_version[128];
    int has_fp16;           /* cl_khr_fp16: half arithmetic available in kernels */
    size_t max_wg_size;
    cl_uint compute_units;
    cl_ulong local_mem_bytes; /* CL_DEVICE_LOCAL_MEM_SIZE */
} farm_cl;

typedef struct {
    cl_program program;
    double build_ms;       /* wall time to build or load the program (compile time, apart from iterations) */
    int cache_hit;         /* 1: loaded from the on-disk binary cache */
    char cache_path[1024]; /* cache file used ("" when caching was impossible) */
} farm_cl_program;

/* Loads the phone's OpenCL library (first of $FARM_OPENCL_LIBRARY, libOpenCL.so, the Pixel wrapper
 * libOpenCL-pixel.so with enableOpenCL + loadOpenCLPointer, libGLES_mali.so, libmali.so, under
 * the vendor and system library directories) and every entry point the programs call. 0 when
 * loaded (at once after the first success); -1 with `why` saying what was tried. Only the gpu
 * paths call it (through farm_cl_open / farm_cl_list_devices): cpu backends never load OpenCL. */
int farm_cl_load(char *why, size_t cap);
/* The library farm_cl_load loaded (as named in its list), NULL before. */
const char *farm_cl_library(void);

/* Prints one {"event":"device","index":"P:D","platform":...,"name":...,"type":...} per device
 * and returns FARM_EXIT_OK, or dies with FARM_EXIT_NO_DEVICE when there is none. */
int farm_cl_list_devices(void);

/* Selects platform+device (selector as in farm_common.cl_device), creates context and queue.
 * Dies with FARM_EXIT_NO_DEVICE naming what was looked for when nothing matches. */
void farm_cl_open(farm_cl *cl, const char *selector);
/* Releases queue and context (kernels, buffers and programs are released by their owners). */
void farm_cl_close(farm_cl *cl);

/* Resolves the cache directory: `opt` if non-NULL, else $FARM_CL_CACHE, else "./.clcache". */
const char *farm_cl_cache_dir(const char *opt);

/* Builds `source` with `options`; first looks for a cached binary under cache_dir keyed by
 * (platform, device, driver, options, source) hash, and stores the binary after a fresh build.
 * A cache that cannot be read or written only costs time (never fails the build).
 * Dies with FARM_EXIT_ERROR and the build log's first line on a compile error. */
void farm_cl_build(farm_cl *cl, const char *name, const char *source, const char *options,
                   const char *cache_dir, farm_cl_program *out);
void farm_cl_program_release(farm_cl_program *p);
/* Concatenation of n OpenCL sources (a program built from shared parts, e.g. common/tiled_types.cl,
 * a program's hooks, common/gemm_tiled.cl); free() the result. */
char *farm_cl_concat(const char *const *parts, int n);

/* Dies with FARM_EXIT_ERROR ("what: CL_ERROR_NAME (code)") when err != CL_SUCCESS. */
void farm_cl_check(cl_int err, const char *what);
const char *farm_cl_error_name(cl_int err);

cl_kernel farm_cl_kernel(const farm_cl_program *p, const char *name);
cl_mem farm_cl_buffer(const farm_cl *cl, cl_mem_flags flags, size_t bytes, void *host);

/* Adds the common `info` fields: platform, device, device_version, driver_version, build_ms,
 * cache_hit, cache_path. p may be NULL (no program). */
void farm_cl_info_fields(farm_json *j, const farm_cl *cl, const farm_cl_program *p);

/* Host-to-device / kernel / device-to-host split of one iteration. */
typedef struct {
    uint64_t h2d_ns, kernel_ns, d2h_ns;
} farm_split;

typedef enum { FARM_H2D = 0, FARM_KERNEL = 1, FARM_D2H = 2 } farm_xfer;

/* Events of one iteration, summed per kind by farm_ev_collect. Usage:
 *   clEnqueueWriteBuffer(..., 0, NULL, farm_ev_slot(&evs, FARM_H2D));
 *   clEnqueueNDRangeKernel(..., 0, NULL, farm_ev_slot(&evs, FARM_KERNEL));
 *   clFinish(q); farm_ev_collect(&evs, &split);   // sums profiling times, releases events */
typedef struct {
    cl_event *ev;
    unsigned char *kind;
    size_t n, cap;
} farm_evlist;

cl_event *farm_ev_slot(farm_evlist *l, farm_xfer kind);
void farm_ev_collect(farm_evlist *l, farm_split *out); /* adds into *out */
void farm_ev_free(farm_evlist *l);

/* ---------------------------------------------------------------- bench.c */
/* One iteration: do the work (blocking until finished) and, when known, fill *split.
 * Return FARM_EXIT_OK or an exit code (the loop stops and returns it). */
typedef int (*farm_iter_fn)(void *user, farm_split *split);

typedef struct {
    long iterations;   /* measured iterations */
    double median_ms, mean_ms, min_ms, max_ms, p90_ms;
    double median_h2d_ms, median_kernel_ms, median_d2h_ms; /* NaN when not measured */
    double measure_s;  /* wall time of the measure phase */
    const char *quantiles; /* "exact" (every measured iteration kept) | "histogram" (--exact-iterations) */
} farm_stats;

/* Runs `warmup` iterations (bounded by max_seconds), then measures until at least `iters`
 * iterations and `min_seconds` have passed, or max_seconds (always >= 1 iteration).
 * Emits `phase` events (warmup, measure) and one `iter` event per measured iteration up to
 * --iteration-events (0: all); with has_split, iter events carry h2d_ns, kernel_ns, d2h_ns. After
 * the last iteration: `iter_sample` events (a uniform sample of the iterations past the first N,
 * as many as N, in order) and one `iter_summary` event over all measured iterations (exact count,
 * window, mean, std, min, max, split sums, wall-time histogram); kernels/README.md "Output". */
int farm_bench_run(const farm_common *c, farm_iter_fn fn, void *user, int has_split, farm_stats *out);
/* Same, with `fields` (may be NULL) adding program-specific fields to every measured `iter` event
 * (e.g. train's loss); it is called with `user` right after that iteration's fn returned. */
typedef void (*farm_iter_fields_fn)(void *user, farm_json *j);
int farm_bench_run_fields(const farm_common *c, farm_iter_fn fn, void *user, int has_split,
                          farm_iter_fields_fn fields, farm_stats *out);
/* Same, with `after` (may be NULL) called after every iteration's end time is taken, warm-up
 * included, before its `iter` event: work that is measurement, not the workload (reading a
 * program's per-kernel profiling events); it may add to the split and fail like fn. */
int farm_bench_run_after(const farm_common *c, farm_iter_fn fn, farm_iter_fn after, void *user, int has_split,
                         farm_iter_fields_fn fields, farm_stats *out);

/* ---------------------------------------------------------------- quant.c */
/* Quantiles of a stream of nanosecond times in bounded memory: the first `cap` values are kept
 * and sorted (exact quantiles); past cap every value goes into a log histogram (the iter_summary
 * bins, plus one for exact zeros) and an order statistic is its bin's geometric midpoint, within
 * 2^(1/(2 FARM_HIST_BINS_PER_OCTAVE)) - 1 = 0.54% of the exact one. At most 8 cap bytes, or
 * 8 (FARM_HIST_BINS + 1) = 32 kB once past cap. */
typedef struct {
    uint64_t *v;    /* the values while exact */
    uint64_t *hist; /* NULL while exact */
    size_t n, cap, alloc;
    int sorted;
} farm_quant;
void farm_quant_init(farm_quant *q, size_t cap); /* allocates nothing yet */
void farm_quant_add(farm_quant *q, uint64_t ns);
int farm_quant_exact(const farm_quant *q);        /* every value added is still kept */
const char *farm_quant_kind(const farm_quant *q); /* "exact" | "histogram" */
double farm_quant_median(farm_quant *q);          /* ns; mean of the two middle ones for even n; NaN if empty */
double farm_quant_nearest_rank(farm_quant *q, double p); /* ns; the ceil(p n)-th smallest; NaN if empty */
void farm_quant_free(farm_quant *q);

/* Same, with every hook in one place and `measure` (may be NULL) called once when the measure
 * phase begins, after the warm-up: a program keeping its own per-iteration statistics (cnn's
 * layer times) starts them there instead of storing every call to drop the warm-up ones later. */
typedef struct {
    farm_iter_fn fn;
    farm_iter_fn after;         /* may be NULL */
    farm_iter_fields_fn fields; /* may be NULL */
    void (*measure)(void *user); /* may be NULL */
} farm_bench_hooks;
int farm_bench_run_hooks(const farm_common *c, const farm_bench_hooks *h, void *user, int has_split,
                         farm_stats *out);

/* Adds iterations, median_ms, mean_ms, min_ms, max_ms, p90_ms and the split medians. */
void farm_json_stats(farm_json *j, const farm_stats *s);

/* ---------------------------------------------------------------- npy.c */
#define FARM_NPY_MAX_DIMS 8
typedef struct {
    float *data;   /* C order, converted to float32 */
    size_t shape[FARM_NPY_MAX_DIMS];
    int ndim;
    size_t count;
} farm_array;

/* Reads a little-endian C-order .npy of dtype <f2, <f4 or <f8 (converted to float32).
 * Returns 0, or -1 with a one-line reason in err. */
int farm_npy_read(const char *path, farm_array *out, char *err, size_t errlen);
/* Writes a float32 .npy (version 1.0). Returns 0 or -1 with reason in err. */
int farm_npy_write(const char *path, const float *data, const size_t *shape, int ndim, char *err,
                   size_t errlen);
void farm_array_free(farm_array *a);

/* ---------------------------------------------------------------- pool.c */
/* fn runs once on every pool thread (tid 0 is the caller's thread). */
typedef void (*farm_task_fn)(void *user, int tid, int nthreads);
typedef struct farm_pool farm_pool;

farm_pool *farm_pool_create(int nthreads);
void farm_pool_run(farm_pool *p, farm_task_fn fn, void *user); /* returns when all threads are done */
int farm_pool_size(const farm_pool *p);
void farm_pool_destroy(farm_pool *p);
/* Static split of [0, n) for thread tid of nthreads. */
void farm_range(size_t n, int tid, int nthreads, size_t *begin, size_t *end);

#endif /* FARM_H */
