/* farm common runtime: warm-up / measurement loop and its statistics (see farm.h). */
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "farm.h"

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* Median and p90 of v (sorted in place). */
static double quantile(double *v, size_t n, double q)
{
    if (n == 0)
        return NAN;
    qsort(v, n, sizeof *v, cmp_double);
    if (q == 0.5)
        return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
    size_t idx = (size_t)ceil(q * (double)n) - 1;
    return v[idx < n ? idx : n - 1];
}

static void phase(const char *name)
{
    farm_json j;
    farm_json_begin(&j, "phase");
    farm_json_str(&j, "phase", name);
    farm_json_u64(&j, "t_ns", farm_now_ns());
    farm_json_end(&j);
}

typedef struct {
    double *total, *h2d, *kern, *d2h;
    size_t n, cap;
} samples;

static void push(samples *s, double total, const farm_split *sp)
{
    if (s->n == s->cap) {
        size_t cap = s->cap ? s->cap * 2 : 64;
        double **arrs[] = {&s->total, &s->h2d, &s->kern, &s->d2h};
        for (int i = 0; i < 4; i++) {
            double *p = realloc(*arrs[i], cap * sizeof(double));
            if (!p)
                farm_die(FARM_EXIT_ERROR, "out of memory (iteration samples)");
            *arrs[i] = p;
        }
        s->cap = cap;
    }
    s->total[s->n] = total;
    s->h2d[s->n] = (double)sp->h2d_ns / 1e6;
    s->kern[s->n] = (double)sp->kernel_ns / 1e6;
    s->d2h[s->n] = (double)sp->d2h_ns / 1e6;
    s->n++;
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

int farm_bench_run_after(const farm_common *c, farm_iter_fn fn, farm_iter_fn after, void *user, int has_split,
                         farm_iter_fields_fn fields, farm_stats *out)
{
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
    samples s = {0};
    uint64_t m0 = farm_now_ns();
    /* --min-seconds bounds the measured window as the host sees it, from the first iteration's
     * t_start to the last one's t_end (power and energy are integrated over exactly that span),
     * so time spent before the first and after the last iteration does not count towards it. */
    uint64_t first_t0 = 0, last_t1 = 0;
    for (long i = 0;; i++) {
        uint64_t window = i > 0 ? last_t1 - first_t0 : 0;
        if (i > 0 && ((i >= c->iters && window >= min_ns) || farm_now_ns() - m0 >= max_ns))
            break;
        farm_split sp = {0, 0, 0};
        uint64_t t0 = farm_now_ns();
        if (i == 0)
            first_t0 = t0;
        int rc = fn(user, &sp);
        uint64_t t1 = farm_now_ns();
        last_t1 = t1;
        if (rc == FARM_EXIT_OK && after)
            rc = after(user, &sp);
        if (rc != FARM_EXIT_OK) {
            free(s.total), free(s.h2d), free(s.kern), free(s.d2h);
            return rc;
        }
        farm_json j;
        farm_json_begin(&j, "iter");
        farm_json_int(&j, "i", i);
        farm_json_u64(&j, "t_start_ns", t0);
        farm_json_u64(&j, "t_end_ns", t1);
        if (has_split) {
            farm_json_u64(&j, "h2d_ns", sp.h2d_ns);
            farm_json_u64(&j, "kernel_ns", sp.kernel_ns);
            farm_json_u64(&j, "d2h_ns", sp.d2h_ns);
        }
        if (fields)
            fields(user, &j);
        farm_json_end(&j);
        push(&s, (double)(t1 - t0) / 1e6, &sp);
    }
    out->measure_s = (double)(farm_now_ns() - m0) / 1e9;
    out->iterations = (long)s.n;
    double sum = 0, mn = INFINITY, mx = 0;
    for (size_t i = 0; i < s.n; i++) {
        sum += s.total[i];
        mn = fmin(mn, s.total[i]);
        mx = fmax(mx, s.total[i]);
    }
    out->mean_ms = sum / (double)s.n;
    out->min_ms = mn;
    out->max_ms = mx;
    out->p90_ms = quantile(s.total, s.n, 0.9);
    out->median_ms = quantile(s.total, s.n, 0.5);
    out->median_h2d_ms = has_split ? quantile(s.h2d, s.n, 0.5) : NAN;
    out->median_kernel_ms = has_split ? quantile(s.kern, s.n, 0.5) : NAN;
    out->median_d2h_ms = has_split ? quantile(s.d2h, s.n, 0.5) : NAN;
    free(s.total), free(s.h2d), free(s.kern), free(s.d2h);
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
}
