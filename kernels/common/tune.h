/*
 * Per-device tuning of GPU kernel parameters and the on-device cache of what was chosen.
 *
 * Cache file: DIR/<program>-<device key>-<source key>.tune next to the program binaries (DIR is
 * --cl-cache), keyed like them: the device key hashes platform, device, device version and driver,
 * the source key the program's OpenCL sources, so an edited kernel never reuses old choices. Text:
 *   farm-tune 1 <program> <device key> <source key>
 *   <workload>\t<params>\t<kernel_ms>\t<default_ms>\t<check>
 * one line per tuned workload ("m=1024 n=1024 k=1024 precision=fp32"), <check> being FNV-1a of the
 * line before it. A file that does not parse is ignored with a warning (never a crash) and
 * rewritten by the next --tune. Written atomically (temp file + rename).
 */
#ifndef FARM_TUNE_H
#define FARM_TUNE_H

#include "farm.h"

typedef enum {
    FARM_TUNE_DEFAULT,  /* built-in defaults (nothing cached, or --tuned=ignore) */
    FARM_TUNE_CACHE,    /* cached entry for exactly this workload */
    FARM_TUNE_NEAREST,  /* cached entry of the nearest workload of the same kind */
    FARM_TUNE_TUNED,    /* chosen by --tune in this run */
    FARM_TUNE_EXPLICIT, /* set on the command line */
    FARM_TUNE_PARTIAL   /* several workloads (cnn layers): some from the cache, the rest defaults */
} farm_tune_source;

typedef struct {
    farm_tune_source source;
    char path[1024];      /* cache file ("" without a cache directory) */
    char params[1024];    /* parameters that ran */
    char workload[256];   /* this run's workload */
    char entry[256];      /* workload of the cache entry used (FARM_TUNE_CACHE / _NEAREST) */
    double kernel_ms;     /* measured by the tuner for params (NaN when not known) */
    double default_ms;    /* measured by the tuner for the defaults (NaN when not known) */
    int candidates;       /* --tune: candidates measured */
    double tune_s;        /* --tune: wall time spent tuning */
    char warning[1200];   /* why a cache file was ignored ("" when none) */
    char header[256];     /* first line of the cache file */
} farm_tune_state;

/* Options of every program with tunable GPU kernels; put into the option table. */
#define FARM_OPTS_TUNE(c)                                                                          \
    {"tune", FARM_OPT_FLAG, &(c)->tune,                                                            \
     "gpu: search kernel parameters within --tune-budget-s, verify each against the cpu path, "   \
     "keep the best in the cache",                                                                 \
     0, 0, NULL},                                                                                  \
    {"tune-budget-s", FARM_OPT_DOUBLE, &(c)->tune_budget_s, "gpu: time budget of --tune in seconds", 0.1, 86400, NULL}, \
    {"tuned", FARM_OPT_CHOICE, &(c)->tuned, "gpu: use tuned parameters from the cache, or ignore them", 0, 0,   \
     farm_tuned_choices}

extern const char *const farm_tuned_choices[]; /* use, ignore */

/* Starts a state: cache path from the device, program, source key and cache directory. */
void farm_tune_begin(farm_tune_state *st, const farm_cl *cl, const char *program, uint64_t source_key,
                     const char *cache_dir, const char *workload);
/* Hash of a program's OpenCL sources (chain over several with FARM_HASH_INIT). */
uint64_t farm_tune_source_key(const char *const *sources, int n);
/* Looks up the cache: fills params/source/entry/kernel_ms/default_ms and returns 1 when an entry for
 * this workload (or the nearest of the same kind: same non-numeric fields, closest numbers in
 * log scale) exists; 0 otherwise. A damaged file sets `warning`, prints it on stderr and returns 0. */
int farm_tune_lookup(farm_tune_state *st);
/* Records params (kernel_ms, default_ms) for st->workload, replacing an entry of the same workload.
 * Returns 0, or -1 with st->warning set (an unwritable cache only loses the result). */
int farm_tune_store(farm_tune_state *st);
/* Adds tune_source, tune_params, tune_workload, tune_entry, tune_kernel_ms, tune_default_ms,
 * tune_candidates, tune_seconds, tune_cache_path and tune_warning to an event. */
void farm_tune_info_fields(farm_json *j, const farm_tune_state *st);
/* The same with tune_params = `params` (a run of several workloads lists them all). */
void farm_tune_info_fields_as(farm_json *j, const farm_tune_state *st, const char *params);
const char *farm_tune_source_name(farm_tune_source s);

/* Where this run's parameters come from when it does not search: FARM_TUNE_EXPLICIT when knobs were
 * given on the command line, else the cache (exact or nearest entry) unless --tuned=ignore, else the
 * defaults. Returns 1 when st->params holds a cache entry for the caller to parse and check. */
int farm_tune_resolve(farm_tune_state *st, const farm_common *c, int explicit_knobs);
/* The caller could not use the entry farm_tune_resolve found (`why`): back to the defaults, with a
 * warning on stderr and in st->warning. */
void farm_tune_reject(farm_tune_state *st, const char *why);
/* The source a run of several workloads reports: tuned or explicit when any part was; else default
 * when every part was, cache-partial when some were, cache-nearest when any entry was a neighbour's,
 * else cache. */
farm_tune_source farm_tune_weakest(const farm_tune_state *const *parts, int n);
/* Records what a search chose (FARM_TUNE_TUNED) and stores it in the cache. */
void farm_tune_record(farm_tune_state *st, const char *params, double best_ms, double default_ms, int candidates,
                      double seconds);

/* The search. Candidate 0 is the default; the evaluator builds and times candidate i and says
 * whether its result matched the cpu path. Candidates run best-first until the budget is spent
 * (the default always runs). One `tune` event per candidate: candidate, params, kernel_ms,
 * verified, elapsed_s. Returns the index of the fastest verified candidate (0 if none beat it),
 * with its time and the default's in *best_ms / *default_ms. */
typedef int (*farm_tune_eval_fn)(void *user, int index, double *kernel_ms, int *verified);
int farm_tune_search(const char *const *params, int n, farm_tune_eval_fn eval, void *user, double budget_s,
                     double *best_ms, double *default_ms, int *evaluated);
/* The search one candidate at a time, for callers that interleave several workloads (cnn tries
 * candidate r of every layer before candidate r + 1 of any, so that each configuration's program
 * is built once for all layers): farm_tune_try evaluates candidate `index` (0 = the default, which
 * must come first) and prints its `tune` event; farm_tune_pick returns the winner's index with the
 * 3% rule of farm_tune_search applied. */
typedef struct {
    int best, evaluated;
    double best_ms, default_ms;
    uint64_t t0; /* start of the search (elapsed_s of the events) */
} farm_tune_progress;
void farm_tune_progress_init(farm_tune_progress *p);
void farm_tune_try(farm_tune_progress *p, const char *workload, const char *metric, int index, const char *params,
                   farm_tune_eval_fn eval, void *user);
int farm_tune_pick(farm_tune_progress *p);

/* The same, for one of several workloads a run tunes (cnn: one per layer shape): the events also
 * carry `workload`, and `metric` says what kernel_ms measures ("kernel": OpenCL profiling of the
 * kernels; "wall": the whole call on the host clock, where launch gaps are the cost). */
int farm_tune_search_for(const char *workload, const char *metric, const char *const *params, int n,
                         farm_tune_eval_fn eval, void *user, double budget_s, double *best_ms, double *default_ms,
                         int *evaluated);

/* Median kernel time (ms) of `reps` calls of fn after one warm-up call, reps shrunk so that the
 * total stays near `max_s`. fn returns the kernel time of one call in ns (0 on failure). */
typedef uint64_t (*farm_tune_time_fn)(void *user);
double farm_tune_time(farm_tune_time_fn fn, void *user, int reps, double max_s);

#endif
