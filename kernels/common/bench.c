/* farm common runtime: warm-up / measurement loop and its statistics (see farm.h). */
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "farm.h"

static void phase(const char *name)
{
    farm_json j;
    farm_json_begin(&j, "phase");
    farm_json_str(&j, "phase", name);
    farm_json_u64(&j, "t_ns", farm_now_ns());
    farm_json_end(&j);
}

/* The times whose medians (and wall p90) the result reports, in bounded memory (quant.c). */
typedef struct {
    farm_quant total, h2d, kern, d2h;
    double sum_ms;
} samples;

static void samples_init(samples *s, long cap)
{
    farm_quant *q[] = {&s->total, &s->h2d, &s->kern, &s->d2h};
    for (int i = 0; i < 4; i++)
        farm_quant_init(q[i], (size_t)cap);
    s->sum_ms = 0.0;
}

static void samples_free(samples *s)
{
    farm_quant *q[] = {&s->total, &s->h2d, &s->kern, &s->d2h};
    for (int i = 0; i < 4; i++)
        farm_quant_free(q[i]);
}

static void push(samples *s, uint64_t total_ns, const farm_split *sp, int has_split)
{
    farm_quant_add(&s->total, total_ns);
    s->sum_ms += (double)total_ns / 1e6;
    if (has_split) {
        farm_quant_add(&s->h2d, sp->h2d_ns);
        farm_quant_add(&s->kern, sp->kernel_ns);
        farm_quant_add(&s->d2h, sp->d2h_ns);
    }
}

int farm_bench_run(const farm_common *c, farm_iter_fn fn, void *user, int has_split, farm_stats *out)
{
    return farm_bench_run_fields(c, fn, user, has_split, NULL, out);
}

int farm_bench_run_fields(const farm_common *c, farm_iter_fn fn, void *user, int has_split,
                          farm_iter_fields_fn fields, farm_stats *out)
{
    return farm_bench_run_after(c, fn, NULL, user, has_split, fields, out);
}

int farm_hist_bin(uint64_t ns)
{
    if (ns < 1)
        return 0;
    int k = (int)floor(FARM_HIST_BINS_PER_OCTAVE * log2((double)ns));
    return k < 0 ? 0 : k >= FARM_HIST_BINS ? FARM_HIST_BINS - 1 : k;
}

/* One measured iteration as an event reports it. */
typedef struct {
    long i;
    uint64_t t0, t1;
    farm_split sp;
} iter_rec;

static void iter_event(const char *event, const iter_rec *r, int has_split, farm_iter_fields_fn fields,
                       void *user)
{
    farm_json j;
    farm_json_begin(&j, event);
    farm_json_int(&j, "i", r->i);
    farm_json_u64(&j, "t_start_ns", r->t0);
    farm_json_u64(&j, "t_end_ns", r->t1);
    if (has_split) {
        farm_json_u64(&j, "h2d_ns", r->sp.h2d_ns);
        farm_json_u64(&j, "kernel_ns", r->sp.kernel_ns);
        farm_json_u64(&j, "d2h_ns", r->sp.d2h_ns);
    }
    if (fields)
        fields(user, &j);
    farm_json_end(&j);
}

/* Running statistics of every measured iteration: what `iter_summary` reports, so a host reading
 * only the first --iteration-events iterations still gets exact counts, sums and the window, and
 * quantiles within half a histogram bin (2^(1/128) - 1 = 0.54% of the value). */
typedef struct {
    long n;
    double mean_ms, m2_ms2; /* Welford: no cancellation for narrow distributions */
    uint64_t min_ns, max_ns, t_start_ns, t_end_ns;
    uint64_t h2d_ns, kernel_ns, d2h_ns;
    uint64_t *hist; /* FARM_HIST_BINS counts */
} tally;

static void tally_add(tally *t, const iter_rec *r)
{
    uint64_t ns = r->t1 - r->t0;
    double ms = (double)ns / 1e6;
    if (t->n == 0) {
        t->min_ns = t->max_ns = ns;
        t->t_start_ns = r->t0;
    }
    t->n++;
    double d = ms - t->mean_ms;
    t->mean_ms += d / (double)t->n;
    t->m2_ms2 += d * (ms - t->mean_ms);
    t->min_ns = ns < t->min_ns ? ns : t->min_ns;
    t->max_ns = ns > t->max_ns ? ns : t->max_ns;
    t->t_end_ns = r->t1;
    t->h2d_ns += r->sp.h2d_ns;
    t->kernel_ns += r->sp.kernel_ns;
    t->d2h_ns += r->sp.d2h_ns;
    t->hist[farm_hist_bin(ns)]++;
}

static void summary_event(const tally *t, long events, long samples, int has_split)
{
    farm_json j;
    farm_json_begin(&j, "iter_summary");
    farm_json_int(&j, "iterations", t->n);
    farm_json_int(&j, "iter_events", events);
    farm_json_int(&j, "samples", samples);
    farm_json_u64(&j, "t_start_ns", t->t_start_ns);
    farm_json_u64(&j, "t_end_ns", t->t_end_ns);
    farm_json_num(&j, "mean_ms", t->mean_ms);
    farm_json_num(&j, "std_ms", t->n > 1 ? sqrt(t->m2_ms2 / (double)(t->n - 1)) : 0.0);
    farm_json_u64(&j, "min_ns", t->min_ns);
    farm_json_u64(&j, "max_ns", t->max_ns);
    if (has_split) {
        farm_json_u64(&j, "h2d_ns_sum", t->h2d_ns);
        farm_json_u64(&j, "kernel_ns_sum", t->kernel_ns);
        farm_json_u64(&j, "d2h_ns_sum", t->d2h_ns);
    }
    farm_json_int(&j, "hist_bins_per_octave", FARM_HIST_BINS_PER_OCTAVE);
    /* Sparse: [[bin, count], ...] of the non-empty bins, ~45 bytes each at most. */
    size_t cap = 4 + (size_t)FARM_HIST_BINS * 48, len = 0;
    char *text = malloc(cap);
    if (!text)
        farm_die(FARM_EXIT_ERROR, "out of memory (iteration histogram)");
    text[len++] = '[';
    for (int k = 0; k < FARM_HIST_BINS; k++)
        if (t->hist[k])
            len += (size_t)snprintf(text + len, cap - len, "%s[%d,%llu]", len > 1 ? "," : "", k,
                                    (unsigned long long)t->hist[k]);
    text[len++] = ']';
    text[len] = 0;
    farm_json_raw(&j, "hist", text);
    free(text);
    farm_json_end(&j);
}

static int cmp_rec(const void *a, const void *b)
{
    long x = ((const iter_rec *)a)->i, y = ((const iter_rec *)b)->i;
    return (x > y) - (x < y);
}

int farm_bench_run_after(const farm_common *c, farm_iter_fn fn, farm_iter_fn after, void *user, int has_split,
                         farm_iter_fields_fn fields, farm_stats *out)
{
    const farm_bench_hooks h = {fn, after, fields, NULL};
    return farm_bench_run_hooks(c, &h, user, has_split, out);
}

int farm_bench_run_hooks(const farm_common *c, const farm_bench_hooks *h, void *user, int has_split,
                         farm_stats *out)
{
    const farm_iter_fn fn = h->fn, after = h->after;
    const farm_iter_fields_fn fields = h->fields;
    memset(out, 0, sizeof *out);
    const uint64_t max_ns = c->max_seconds > 0 ? (uint64_t)(c->max_seconds * 1e9) : UINT64_MAX;
    const uint64_t min_ns = (uint64_t)(c->min_seconds * 1e9);

    phase("warmup");
    uint64_t w0 = farm_now_ns();
    for (long i = 0; i < c->warmup && farm_now_ns() - w0 < max_ns; i++) {
        farm_split sp = {0, 0, 0};
        int rc = fn(user, &sp);
        if (rc == FARM_EXIT_OK && after)
            rc = after(user, &sp);
        if (rc != FARM_EXIT_OK)
            return rc;
    }

    phase("measure");
    if (h->measure)
        h->measure(user);
    /* Past the first `head` iterations (0: no limit) the events stop: a reservoir keeps a uniform
     * sample of `head` of the rest (algorithm R) for the host's latency-over-time metrics. */
    const long head = c->iteration_events;
    tally t = {0};
    t.hist = calloc(FARM_HIST_BINS, sizeof *t.hist);
    iter_rec *pool = NULL; /* allocated when the first iteration past `head` ends */
    if (!t.hist)
        farm_die(FARM_EXIT_ERROR, "out of memory (iteration summary)");
    long pooled = 0;
    uint64_t rng = 0x9e3779b97f4a7c15ull ^ (uint64_t)c->seed;
    samples s;
    samples_init(&s, c->exact_iterations > 0 ? c->exact_iterations : FARM_EXACT_ITERATIONS_DEFAULT);
    uint64_t m0 = farm_now_ns();
    /* --min-seconds bounds the measured window as the host sees it, from the first iteration's
     * t_start to the last one's t_end (power and energy are integrated over exactly that span),
     * so time spent before the first and after the last iteration does not count towards it. */
    uint64_t first_t0 = 0, last_t1 = 0;
    int rc = FARM_EXIT_OK;
    for (long i = 0;; i++) {
        uint64_t window = i > 0 ? last_t1 - first_t0 : 0;
        if (i > 0 && ((i >= c->iters && window >= min_ns) || farm_now_ns() - m0 >= max_ns))
            break;
        iter_rec r = {i, 0, 0, {0, 0, 0}};
        r.t0 = farm_now_ns();
        if (i == 0)
            first_t0 = r.t0;
        rc = fn(user, &r.sp);
        r.t1 = farm_now_ns();
        last_t1 = r.t1;
        if (rc == FARM_EXIT_OK && after)
            rc = after(user, &r.sp);
        if (rc != FARM_EXIT_OK)
            break;
        if (head == 0 || i < head) {
            iter_event("iter", &r, has_split, fields, user);
        } else if (pooled < head) {
            if (!pool && !(pool = malloc((size_t)head * sizeof *pool)))
                farm_die(FARM_EXIT_ERROR, "out of memory (a sample of %ld iterations)", head);
            pool[pooled++] = r;
        } else {
            uint64_t slot = farm_rng_next(&rng) % (uint64_t)(i - head + 1);
            if (slot < (uint64_t)head)
                pool[slot] = r;
        }
        tally_add(&t, &r);
        push(&s, r.t1 - r.t0, &r.sp, has_split);
    }
    if (rc == FARM_EXIT_OK) {
        if (pooled)
            qsort(pool, (size_t)pooled, sizeof *pool, cmp_rec);
        for (long k = 0; k < pooled; k++)
            iter_event("iter_sample", &pool[k], has_split, NULL, NULL);
        summary_event(&t, head == 0 || t.n < head ? t.n : head, pooled, has_split);
    }
    free(pool);
    if (rc != FARM_EXIT_OK) {
        free(t.hist);
        samples_free(&s);
        return rc;
    }
    out->measure_s = (double)(farm_now_ns() - m0) / 1e9;
    out->iterations = t.n;
    out->mean_ms = s.sum_ms / (double)t.n;
    out->min_ms = (double)t.min_ns / 1e6;
    out->max_ms = (double)t.max_ns / 1e6;
    out->p90_ms = farm_quant_nearest_rank(&s.total, 0.9) / 1e6;
    out->median_ms = farm_quant_median(&s.total) / 1e6;
    out->median_h2d_ms = has_split ? farm_quant_median(&s.h2d) / 1e6 : NAN;
    out->median_kernel_ms = has_split ? farm_quant_median(&s.kern) / 1e6 : NAN;
    out->median_d2h_ms = has_split ? farm_quant_median(&s.d2h) / 1e6 : NAN;
    out->quantiles = farm_quant_kind(&s.total);
    free(t.hist);
    samples_free(&s);
    return FARM_EXIT_OK;
}

void farm_json_stats(farm_json *j, const farm_stats *s)
{
    farm_json_int(j, "iterations", s->iterations);
    farm_json_num(j, "median_ms", s->median_ms);
    farm_json_num(j, "mean_ms", s->mean_ms);
    farm_json_num(j, "min_ms", s->min_ms);
    farm_json_num(j, "max_ms", s->max_ms);
    farm_json_num(j, "p90_ms", s->p90_ms);
    farm_json_num(j, "median_h2d_ms", s->median_h2d_ms);
    farm_json_num(j, "median_kernel_ms", s->median_kernel_ms);
    farm_json_num(j, "median_d2h_ms", s->median_d2h_ms);
    /* exact: medians and p90 from every measured iteration; histogram: past --exact-iterations,
     * from a log histogram of all of them, within 0.54% (mean, min, max stay exact) */
    farm_json_str(j, "quantiles", s->quantiles ? s->quantiles : "exact");
}
