/* farm common runtime: quantiles of a stream of nanosecond times in bounded memory (see farm.h).
 *
 * The `result` event's medians used to sort every iteration's times: 32 bytes per iteration kept
 * to the end (61 MB for the 1.9 M iterations of a 10 s run of a tiny LSTM, too much for a phone).
 * Now the first `cap` values are kept and sorted exactly; from value cap + 1 on, all of them go into
 * a log histogram (the same bins as iter_summary's) and quantiles are read from it, each order
 * statistic as its bin's geometric midpoint: within 2^(1/(2B)) - 1 = 0.54% of the exact value. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "farm.h"

void farm_quant_init(farm_quant *q, size_t cap)
{
    memset(q, 0, sizeof *q);
    q->cap = cap;
}

void farm_quant_free(farm_quant *q)
{
    free(q->v);
    free(q->hist);
    memset(q, 0, sizeof *q);
}

/* Histogram slot of a value: 0 holds exact zeros (a split with no copies), k + 1 the bin k. */
static size_t slot_of(uint64_t ns)
{
    return ns == 0 ? 0 : (size_t)farm_hist_bin(ns) + 1;
}

static void to_histogram(farm_quant *q)
{
    q->hist = calloc(FARM_HIST_BINS + 1, sizeof *q->hist);
    if (!q->hist)
        farm_die(FARM_EXIT_ERROR, "out of memory (quantile histogram)");
    for (size_t i = 0; i < q->n; i++)
        q->hist[slot_of(q->v[i])]++;
    free(q->v);
    q->v = NULL;
    q->alloc = 0;
}

void farm_quant_add(farm_quant *q, uint64_t ns)
{
    if (!q->hist && q->n == q->cap)
        to_histogram(q);
    if (q->hist) {
        q->hist[slot_of(ns)]++;
    } else {
        if (q->n == q->alloc) {
            size_t alloc = q->alloc ? 2 * q->alloc : 64;
            alloc = alloc < q->cap ? alloc : q->cap;
            uint64_t *v = realloc(q->v, alloc * sizeof *v);
            if (!v)
                farm_die(FARM_EXIT_ERROR, "out of memory (%zu iteration times)", alloc);
            q->v = v;
            q->alloc = alloc;
        }
        q->v[q->n] = ns;
        q->sorted = 0;
    }
    q->n++;
}

int farm_quant_exact(const farm_quant *q)
{
    return q->hist == NULL;
}

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return (x > y) - (x < y);
}

/* The rank-th smallest value (0-based), exact or as its bin's midpoint. */
static double order_statistic(farm_quant *q, size_t rank)
{
    if (!q->hist) {
        if (!q->sorted) {
            qsort(q->v, q->n, sizeof *q->v, cmp_u64);
            q->sorted = 1;
        }
        return (double)q->v[rank];
    }
    size_t seen = 0;
    for (size_t s = 0; s <= FARM_HIST_BINS; s++) {
        seen += q->hist[s];
        if (seen > rank)
            return s == 0 ? 0.0 : pow(2.0, ((double)(s - 1) + 0.5) / FARM_HIST_BINS_PER_OCTAVE);
    }
    return NAN; /* not reached: rank < n */
}

double farm_quant_median(farm_quant *q)
{
    if (q->n == 0)
        return NAN;
    if (q->n % 2)
        return order_statistic(q, q->n / 2);
    return 0.5 * (order_statistic(q, q->n / 2 - 1) + order_statistic(q, q->n / 2));
}

double farm_quant_nearest_rank(farm_quant *q, double p)
{
    if (q->n == 0)
        return NAN;
    size_t idx = (size_t)ceil(p * (double)q->n);
    idx = idx > 0 ? idx - 1 : 0;
    return order_statistic(q, idx < q->n ? idx : q->n - 1);
}

const char *farm_quant_kind(const farm_quant *q)
{
    return q->hist ? "histogram" : "exact";
}
