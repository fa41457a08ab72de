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
    FARM_TUNE_EXPLICIT  /* set on the command line */
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
const char *farm_tune_source_name(farm_tune_source s);

/* The search. Candidate 0 is the default; the evaluator builds and times candidate i and says
 * whether its result matched the cpu path. Candidates run best-first until the budget is spent
 * (the default always runs). One `tune` event per candidate: candidate, params, kernel_ms,
 * verified, elapsed_s. Returns the index of the fastest verified candidate (0 if none beat it),
 * with its time and the default's in *best_ms / *default_ms. */
typedef int (*farm_tune_eval_fn)(void *user, int index, double *kernel_ms, int *verified);
int farm_tune_search(const char *const *params, int n, farm_tune_eval_fn eval, void *user, double budget_s,
                     double *best_ms, double *default_ms, int *evaluated);

/* Median kernel time (ms) of `reps` calls of fn after one warm-up call, reps shrunk so that the
 * total stays near `max_s`. fn returns the kernel time of one call in ns (0 on failure). */
typedef uint64_t (*farm_tune_time_fn)(void *user);
double farm_tune_time(farm_tune_time_fn fn, void *user, int reps, double max_s);

#endif
