/* CPU training step (cpu: one thread; cpu-mt: each phase split over a farm_pool). Sums run in
 * the same order as the OpenCL kernels so the paths agree closely. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "mlp.h"

void mlp_cpu_init(mlp_cpu *c, mlp *m, int fp16, farm_pool *pool)
{
    memset(c, 0, sizeof *c);
    c->m = m;
    c->fp16 = fp16;
    c->pool = pool;
    int widest = 0;
    for (int l = 0; l <= m->nlayers; ++l) {
        c->act[l] = farm_alloc((size_t)m->batch * (size_t)m->sizes[l] * sizeof(float));
        c->grad[l] = farm_alloc((size_t)m->batch * (size_t)m->sizes[l] * sizeof(float));
        widest = m->sizes[l] > widest ? m->sizes[l] : widest;
    }
    c->loss = farm_alloc((size_t)m->batch * sizeof(float));
    const int threads = pool ? farm_pool_size(pool) : 1;
    c->scratch = farm_alloc((size_t)threads * (size_t)(widest + 1) * sizeof(float));
}

void mlp_cpu_free(mlp_cpu *c)
{
    for (int l = 0; l <= c->m->nlayers; ++l) {
        free(c->act[l]);
        free(c->grad[l]);
    }
    free(c->loss);
    free(c->scratch);
    memset(c, 0, sizeof *c);
}

typedef enum { PH_FORWARD, PH_BACKWARD_INPUT, PH_UPDATE } phase;

typedef struct {
    mlp_cpu *c;
    int layer;
    phase ph;
    float lr;
} task;

static float store(const mlp_cpu *c, float v)
{
    return c->fp16 ? farm_f16_to_f32(farm_f32_to_f16(v)) : v;
}

/* y[b][o] for o in [o0, o1) */
static void forward(mlp_cpu *c, int l, size_t o0, size_t o1)
{
    const mlp *m = c->m;
    const int nin = m->sizes[l], nout = m->sizes[l + 1];
    const int relu = l + 1 < m->nlayers;
    for (int b = 0; b < m->batch; ++b) {
        const float *x = c->act[l] + (size_t)b * nin;
        for (size_t o = o0; o < o1; ++o) {
            const float *w = m->w[l] + o * (size_t)nin;
            float acc = 0.0f;
            for (int i = 0; i < nin; ++i)
                acc += x[i] * w[i];
            acc += m->b[l][o];
            if (relu && acc < 0.0f)
                acc = 0.0f;
            c->act[l + 1][(size_t)b * nout + o] = store(c, acc);
        }
    }
}

/* grad[l][b][i] for i in [i0, i1): the gradient reaching layer l's input, ReLU-masked */
static void backward_input(mlp_cpu *c, int l, size_t i0, size_t i1)
{
    const mlp *m = c->m;
    const int nin = m->sizes[l], nout = m->sizes[l + 1];
    for (int b = 0; b < m->batch; ++b) {
        float *dx = c->grad[l] + (size_t)b * nin;
        const float *dy = c->grad[l + 1] + (size_t)b * nout;
        for (size_t i = i0; i < i1; ++i)
            dx[i] = 0.0f;
        for (int o = 0; o < nout; ++o) {
            const float g = dy[o];
            const float *w = m->w[l] + (size_t)o * nin;
            for (size_t i = i0; i < i1; ++i)
                dx[i] += g * w[i];
        }
        const float *x = c->act[l] + (size_t)b * nin;
        for (size_t i = i0; i < i1; ++i)
            dx[i] = x[i] > 0.0f ? store(c, dx[i]) : 0.0f;
    }
}

/* SGD on rows [o0, o1) of layer l's weights and biases; `acc` holds nin + 1 floats */
static void update(mlp_cpu *c, int l, size_t o0, size_t o1, float lr, float *acc)
{
    const mlp *m = c->m;
    const int nin = m->sizes[l], nout = m->sizes[l + 1];
    for (size_t o = o0; o < o1; ++o) {
        memset(acc, 0, sizeof(float) * (size_t)(nin + 1));
        for (int b = 0; b < m->batch; ++b) {
            const float g = c->grad[l + 1][(size_t)b * nout + o];
            const float *x = c->act[l] + (size_t)b * nin;
            for (int i = 0; i < nin; ++i)
                acc[i] += g * x[i];
            acc[nin] += g;
        }
        float *w = m->w[l] + o * (size_t)nin;
        for (int i = 0; i < nin; ++i)
            w[i] = store(c, w[i] - lr * acc[i]);
        m->b[l][o] = store(c, m->b[l][o] - lr * acc[nin]);
    }
}

static void worker(void *user, int tid, int nthreads)
{
    task *t = user;
    const mlp *m = t->c->m;
    size_t lo, hi;
    switch (t->ph) {
    case PH_FORWARD:
        farm_range((size_t)m->sizes[t->layer + 1], tid, nthreads, &lo, &hi);
        forward(t->c, t->layer, lo, hi);
        break;
    case PH_BACKWARD_INPUT:
        farm_range((size_t)m->sizes[t->layer], tid, nthreads, &lo, &hi);
        backward_input(t->c, t->layer, lo, hi);
        break;
    case PH_UPDATE: {
        float *acc = t->c->scratch + (size_t)tid * (size_t)(m->sizes[t->layer] + 1);
        farm_range((size_t)m->sizes[t->layer + 1], tid, nthreads, &lo, &hi);
        update(t->c, t->layer, lo, hi, t->lr, acc);
        break;
    }
    }
}

static void run(mlp_cpu *c, phase ph, int layer, float lr)
{
    task t = {c, layer, ph, lr};
    if (c->pool)
        farm_pool_run(c->pool, worker, &t);
    else
        worker(&t, 0, 1);
}

/* Softmax cross-entropy in fp32 (as the kernel): loss per sample and dz = (p - onehot) / batch. */
static double softmax_xent(mlp_cpu *c, const int32_t *y)
{
    const mlp *m = c->m;
    const int n = m->sizes[m->nlayers];
    double total = 0.0;
    for (int b = 0; b < m->batch; ++b) {
        const float *z = c->act[m->nlayers] + (size_t)b * n;
        float *dz = c->grad[m->nlayers] + (size_t)b * n;
        float mx = z[0];
        for (int j = 1; j < n; ++j)
            mx = fmaxf(mx, z[j]);
        float s = 0.0f;
        for (int j = 0; j < n; ++j)
            s += expf(z[j] - mx);
        c->loss[b] = logf(s) - (z[y[b]] - mx);
        total += c->loss[b];
        for (int j = 0; j < n; ++j) {
            const float p = expf(z[j] - mx) / s;
            dz[j] = store(c, (p - (j == y[b] ? 1.0f : 0.0f)) / (float)m->batch);
        }
    }
    return total / m->batch;
}

double mlp_cpu_step(mlp_cpu *c, const float *x, const int32_t *y, float lr)
{
    const mlp *m = c->m;
    const size_t n0 = (size_t)m->batch * (size_t)m->sizes[0];
    memcpy(c->act[0], x, n0 * sizeof(float));
    if (c->fp16)
        farm_round_f16(c->act[0], n0);
    for (int l = 0; l < m->nlayers; ++l)
        run(c, PH_FORWARD, l, lr);
    const double loss = softmax_xent(c, y);
    for (int l = m->nlayers - 1; l >= 0; --l) {
        if (l > 0)
            run(c, PH_BACKWARD_INPUT, l, lr); /* reads the weights before their update */
        run(c, PH_UPDATE, l, lr);
    }
    return loss;
}

/* Forward of hidden layer l guided by the gpu's activations (see mlp_cpu_step_guided). din bounds
 * |gpu - cpu| of the layer's input per element (NULL: identical inputs); dout receives the same for
 * its output. */
static void forward_guided(mlp_cpu *c, int l, const mlp_guide *gd, const double *din, double *dout,
                           mlp_guide_stats *st, int o0, int o1)
{
    const mlp *m = c->m;
    const int nin = m->sizes[l], nout = m->sizes[l + 1];
    const double n = (double)nin + 1.0;
    /* both paths' dot products are within gamma_n * sum|x||w| of the exact one, in any summation
     * order, fused or not (Higham, Accuracy and Stability, 3.1): their difference within twice that */
    const double gamma = n * gd->u_acc / (1.0 - n * gd->u_acc) + n * 0x1p-24 / (1.0 - n * 0x1p-24);
    const float *gpu = gd->act[l + 1];
    for (int b = 0; b < m->batch; ++b) {
        const float *x = c->act[l] + (size_t)b * nin;
        const double *dx = din ? din + (size_t)b * nin : NULL;
        for (int o = o0; o < o1; ++o) {
            const float *w = m->w[l] + (size_t)o * nin;
            float acc = 0.0f;
            double mag = fabs((double)m->b[l][o]), spread = 0.0;
            for (int i = 0; i < nin; ++i) {
                acc += x[i] * w[i];
                mag += fabs((double)x[i] * (double)w[i]);
                if (dx)
                    spread += fabs((double)w[i]) * dx[i];
            }
            acc += m->b[l][o];
            const double bound = gamma * mag + spread;
            const size_t at = (size_t)b * nout + (size_t)o;
            const float theirs = gpu[at];
            if (fabs((double)acc) <= bound) { /* the sign is rounding's: take the gpu's value */
                st->ambiguous++;
                c->act[l + 1][at] = theirs;
                dout[at] = 0.0;
                continue;
            }
            if ((theirs > 0.0f) != (acc > 0.0f) && st->mismatched++ == 0)
                st->first_layer = l + 1, st->first_index = at;
            c->act[l + 1][at] = acc > 0.0f ? store(c, acc) : 0.0f;
            dout[at] = acc > 0.0f ? bound + 2.0 * gd->u_store * (fabs((double)acc) + bound) : 0.0;
        }
    }
}

#define GUIDE_MAX_THREADS 256

typedef struct {
    mlp_cpu *c;
    int layer;
    const mlp_guide *gd;
    const double *din;
    double *dout;
    mlp_guide_stats st[GUIDE_MAX_THREADS];
} guided_task;

static void guided_worker(void *user, int tid, int nthreads)
{
    guided_task *t = user;
    size_t lo, hi;
    farm_range((size_t)t->c->m->sizes[t->layer + 1], tid, nthreads, &lo, &hi);
    if (tid < GUIDE_MAX_THREADS)
        forward_guided(t->c, t->layer, t->gd, t->din, t->dout, &t->st[tid], (int)lo, (int)hi);
}

/* Threads split output units (never a sum); their counts are merged in thread order, so the first
 * mismatch reported is the one a single thread would find in that layer's unit order. */
static void run_guided(mlp_cpu *c, int l, const mlp_guide *gd, const double *din, double *dout, mlp_guide_stats *st)
{
    static guided_task t;
    memset(&t, 0, sizeof t);
    t.c = c, t.layer = l, t.gd = gd, t.din = din, t.dout = dout;
    if (c->pool && farm_pool_size(c->pool) <= GUIDE_MAX_THREADS)
        farm_pool_run(c->pool, guided_worker, &t);
    else
        guided_worker(&t, 0, 1);
    for (int i = 0; i < GUIDE_MAX_THREADS; ++i) {
        if (t.st[i].mismatched && !st->mismatched)
            st->first_layer = t.st[i].first_layer, st->first_index = t.st[i].first_index;
        st->ambiguous += t.st[i].ambiguous;
        st->mismatched += t.st[i].mismatched;
    }
}

double mlp_cpu_step_guided(mlp_cpu *c, const float *x, const int32_t *y, float lr, const mlp_guide *gd,
                           mlp_guide_stats *st)
{
    const mlp *m = c->m;
    const size_t n0 = (size_t)m->batch * (size_t)m->sizes[0];
    memcpy(c->act[0], x, n0 * sizeof(float));
    if (c->fp16)
        farm_round_f16(c->act[0], n0);
    double *din = NULL;
    for (int l = 0; l < m->nlayers; ++l) {
        if (l + 1 == m->nlayers) {
            run(c, PH_FORWARD, l, lr); /* the logits: no ReLU, no decision */
            break;
        }
        double *dout = farm_alloc((size_t)m->batch * (size_t)m->sizes[l + 1] * sizeof(double));
        run_guided(c, l, gd, din, dout, st);
        free(din);
        din = dout;
    }
    free(din);
    const double loss = softmax_xent(c, y);
    for (int l = m->nlayers - 1; l >= 0; --l) {
        if (l > 0)
            run(c, PH_BACKWARD_INPUT, l, lr);
        run(c, PH_UPDATE, l, lr);
    }
    return loss;
}
