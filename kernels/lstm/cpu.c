/* lstm CPU paths. cpu-mt: with at least as many batch elements as threads, each thread runs whole
 * sequences for its share of the batch (one dispatch per inference, no synchronisation); otherwise
 * one (layer, step) at a time with the hidden units split over the pool (every thread needs all of
 * h_{t-1}, so h is double-buffered and every step is a pool dispatch). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "lstm.h"

struct lstm_cpu {
    const lstm_model *m;
    farm_pool *pool;
    int nthreads;
    float *h[LSTM_MAX_LAYERS][2]; /* batch x H, double-buffered */
    float *c[LSTM_MAX_LAYERS];    /* batch x H */
    float **z;                    /* per-thread scratch: 4H */
    long t, l;                    /* step being computed (read by the pool task) */
};

static float sigmoidf(float x) { return 1.0f / (1.0f + expf(-x)); }

/* Units [j0, j1) of layer l at step t, for batch elements [b0, b1). */
static void cell(lstm_cpu *c, long l, long t, size_t j0, size_t j1, size_t b0, size_t b1, float *z)
{
    const lstm_shape *s = &c->m->s;
    const size_t H = (size_t)s->hidden, D = (size_t)lstm_in_dim(s, l), H4 = 4 * H;
    const float *W = c->m->w[l], *bias = c->m->b[l];
    const float *hp_all = c->h[l][t % 2];
    float *hn_all = c->h[l][(t + 1) % 2];
    for (size_t b = b0; b < b1; b++) {
        const float *in = l == 0 ? c->m->x + (b * (size_t)s->seq_len + (size_t)t) * D
                                 : c->h[l - 1][(t + 1) % 2] + b * H; /* layer below, this step */
        const float *hp = hp_all + b * H;
        for (size_t g = 0; g < 4; g++)
            memcpy(z + g * H + j0, bias + g * H + j0, (j1 - j0) * sizeof *z);
        for (size_t r = 0; r < D + H; r++) {
            const float v = r < D ? in[r] : hp[r - D];
            const float *row = W + r * H4;
            for (size_t g = 0; g < 4; g++)
                for (size_t j = j0; j < j1; j++)
                    z[g * H + j] += v * row[g * H + j];
        }
        float *cs = c->c[l] + b * H, *hn = hn_all + b * H;
        for (size_t j = j0; j < j1; j++) {
            const float i = sigmoidf(z[j]), f = sigmoidf(z[H + j]), g = tanhf(z[2 * H + j]),
                        o = sigmoidf(z[3 * H + j]);
            cs[j] = f * cs[j] + i * g;
            hn[j] = o * tanhf(cs[j]);
        }
    }
}

static void units_task(void *user, int tid, int nthreads)
{
    lstm_cpu *c = user;
    size_t j0, j1;
    farm_range((size_t)c->m->s.hidden, tid, nthreads, &j0, &j1);
    if (j1 > j0)
        cell(c, c->l, c->t, j0, j1, 0, (size_t)c->m->s.batch, c->z[tid]);
}

static void batch_task(void *user, int tid, int nthreads)
{
    lstm_cpu *c = user;
    const lstm_shape *s = &c->m->s;
    size_t b0, b1;
    farm_range((size_t)s->batch, tid, nthreads, &b0, &b1);
    for (long t = 0; t < s->seq_len; t++)
        for (long l = 0; l < s->layers; l++)
            cell(c, l, t, 0, (size_t)s->hidden, b0, b1, c->z[tid]);
}

lstm_cpu *lstm_cpu_create(const lstm_model *m, farm_pool *pool)
{
    lstm_cpu *c = farm_alloc(sizeof *c);
    c->m = m;
    c->pool = pool;
    c->nthreads = pool ? farm_pool_size(pool) : 1;
    const size_t bh = (size_t)(m->s.batch * m->s.hidden);
    for (long l = 0; l < m->s.layers; l++) {
        c->h[l][0] = farm_alloc(bh * sizeof(float));
        c->h[l][1] = farm_alloc(bh * sizeof(float));
        c->c[l] = farm_alloc(bh * sizeof(float));
    }
    c->z = farm_alloc((size_t)c->nthreads * sizeof *c->z);
    for (int i = 0; i < c->nthreads; i++)
        c->z[i] = farm_alloc(4 * (size_t)m->s.hidden * sizeof(float));
    return c;
}

void lstm_cpu_run(lstm_cpu *c, float *logits)
{
    const lstm_shape *s = &c->m->s;
    const size_t bh = (size_t)(s->batch * s->hidden), H = (size_t)s->hidden, C = (size_t)s->classes;
    for (long l = 0; l < s->layers; l++) {
        memset(c->h[l][0], 0, bh * sizeof(float));
        memset(c->c[l], 0, bh * sizeof(float));
    }
    if (!c->pool)
        batch_task(c, 0, 1);
    else if (s->batch >= c->nthreads)
        farm_pool_run(c->pool, batch_task, c);
    else
        for (c->t = 0; c->t < s->seq_len; c->t++)
            for (c->l = 0; c->l < s->layers; c->l++)
                farm_pool_run(c->pool, units_task, c);
    const float *h = c->h[s->layers - 1][s->seq_len % 2];
    for (size_t b = 0; b < (size_t)s->batch; b++)
        for (size_t k = 0; k < C; k++) {
            float acc = c->m->bd[k];
            for (size_t j = 0; j < H; j++)
                acc += h[b * H + j] * c->m->wd[j * C + k];
            logits[b * C + k] = acc;
        }
}

void lstm_cpu_destroy(lstm_cpu *c)
{
    if (!c)
        return;
    for (long l = 0; l < c->m->s.layers; l++) {
        free(c->h[l][0]);
        free(c->h[l][1]);
        free(c->c[l]);
    }
    for (int i = 0; i < c->nthreads; i++)
        free(c->z[i]);
    free(c->z);
    free(c);
}
