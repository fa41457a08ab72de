/* MLP model, weights files and training data (see mlp.h). */
#define _POSIX_C_SOURCE 200809L
#include "mlp.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int mlp_parse_layers(mlp *m, const char *spec, char *err, size_t errlen)
{
    memset(m, 0, sizeof *m);
    const char *p = spec;
    int n = 0;
    while (*p) {
        char *end;
        long v = strtol(p, &end, 10);
        if (end == p || v < 1 || v > 65536 || (*end && *end != ',') || n > MLP_MAX_LAYERS) {
            snprintf(err, errlen, "--layers=%s: expected 2 to %d comma-separated sizes in 1..65536, "
                     "e.g. 784,256,128,16", spec, MLP_MAX_LAYERS + 1);
            return -1;
        }
        m->sizes[n++] = (int)v;
        p = *end ? end + 1 : end;
    }
    if (n < 2) {
        snprintf(err, errlen, "--layers=%s: need at least an input and an output size, e.g. 784,16", spec);
        return -1;
    }
    m->nlayers = n - 1;
    return 0;
}

size_t mlp_weight_count(const mlp *m, int l)
{
    return (size_t)m->sizes[l] * (size_t)m->sizes[l + 1];
}

void mlp_init_weights(mlp *m, uint64_t seed)
{
    for (int l = 0; l < m->nlayers; ++l) {
        m->w[l] = farm_alloc(mlp_weight_count(m, l) * sizeof(float));
        m->b[l] = farm_alloc((size_t)m->sizes[l + 1] * sizeof(float));
        const float bound = sqrtf(6.0f / (float)m->sizes[l]);
        farm_fill_uniform(m->w[l], mlp_weight_count(m, l), seed * 7919u + (uint64_t)l, -bound, bound);
    }
}

static float *load_one(const char *dir, int l, const char *what, size_t d0, size_t d1, int ndim, char *err,
                       size_t errlen)
{
    char path[1200];
    snprintf(path, sizeof path, "%s/fc%d.%s.npy", dir, l + 1, what);
    farm_array a;
    if (farm_npy_read(path, &a, err, errlen))
        return NULL;
    if (a.ndim != ndim || a.shape[0] != d0 || (ndim == 2 && a.shape[1] != d1)) {
        if (ndim == 2)
            snprintf(err, errlen, "%s: expected shape (%zu,%zu) [out][in] for --layers", path, d0, d1);
        else
            snprintf(err, errlen, "%s: expected shape (%zu,) for --layers", path, d0);
        farm_array_free(&a);
        return NULL;
    }
    return a.data;
}

int mlp_load_weights(mlp *m, const char *dir, char *err, size_t errlen)
{
    for (int l = 0; l < m->nlayers; ++l) {
        const size_t out = (size_t)m->sizes[l + 1], in = (size_t)m->sizes[l];
        if (!(m->w[l] = load_one(dir, l, "weight", out, in, 2, err, errlen)))
            return -1;
        if (!(m->b[l] = load_one(dir, l, "bias", out, 0, 1, err, errlen)))
            return -1;
    }
    return 0;
}

int mlp_save_weights(const mlp *m, const char *dir, char *err, size_t errlen)
{
    for (int l = 0; l < m->nlayers; ++l) {
        char path[1200];
        const size_t shape[2] = {(size_t)m->sizes[l + 1], (size_t)m->sizes[l]};
        snprintf(path, sizeof path, "%s/fc%d.weight.npy", dir, l + 1);
        if (farm_npy_write(path, m->w[l], shape, 2, err, errlen))
            return -1;
        snprintf(path, sizeof path, "%s/fc%d.bias.npy", dir, l + 1);
        if (farm_npy_write(path, m->b[l], shape, 1, err, errlen))
            return -1;
    }
    return 0;
}

void mlp_free(mlp *m)
{
    for (int l = 0; l < m->nlayers; ++l) {
        free(m->w[l]);
        free(m->b[l]);
        m->w[l] = m->b[l] = NULL;
    }
}

void mlp_round_f16(mlp *m)
{
    for (int l = 0; l < m->nlayers; ++l) {
        farm_round_f16(m->w[l], mlp_weight_count(m, l));
        farm_round_f16(m->b[l], (size_t)m->sizes[l + 1]);
    }
}

void mlp_data_synthetic(mlp_data *d, const mlp *m, size_t n, uint64_t seed)
{
    const int nin = m->sizes[0], ncls = m->sizes[m->nlayers];
    d->n = n;
    d->x = farm_alloc(n * (size_t)nin * sizeof(float));
    d->y = farm_alloc(n * sizeof(int32_t));
    float *teacher = farm_alloc((size_t)ncls * (size_t)nin * sizeof(float));
    farm_fill_uniform(d->x, n * (size_t)nin, seed ^ 0xda7aULL, -1.0f, 1.0f);
    farm_fill_uniform(teacher, (size_t)ncls * (size_t)nin, seed ^ 0x7eac4e5ULL, -1.0f, 1.0f);
    for (size_t s = 0; s < n; ++s) {
        int best = 0;
        double best_v = -INFINITY;
        for (int c = 0; c < ncls; ++c) {
            double v = 0.0;
            for (int i = 0; i < nin; ++i)
                v += (double)teacher[(size_t)c * nin + i] * d->x[s * nin + i];
            if (v > best_v) {
                best_v = v;
                best = c;
            }
        }
        d->y[s] = best;
    }
    free(teacher);
}

int mlp_data_load(mlp_data *d, const mlp *m, const char *dir, char *err, size_t errlen)
{
    char path[1200];
    farm_array x, y;
    snprintf(path, sizeof path, "%s/x.npy", dir);
    if (farm_npy_read(path, &x, err, errlen))
        return -1;
    if (x.ndim != 2 || x.shape[1] != (size_t)m->sizes[0] || x.shape[0] % (size_t)m->batch) {
        snprintf(err, errlen, "%s: expected shape (N,%d) with N a multiple of --batch=%d", path, m->sizes[0],
                 m->batch);
        farm_array_free(&x);
        return -1;
    }
    snprintf(path, sizeof path, "%s/y.npy", dir);
    if (farm_npy_read(path, &y, err, errlen)) {
        farm_array_free(&x);
        return -1;
    }
    const int ncls = m->sizes[m->nlayers];
    int ok = y.ndim == 1 && y.shape[0] == x.shape[0];
    d->n = x.shape[0];
    d->x = x.data;
    d->y = farm_alloc(d->n * sizeof(int32_t));
    for (size_t s = 0; ok && s < d->n; ++s) {
        d->y[s] = (int32_t)y.data[s];
        ok = (float)d->y[s] == y.data[s] && d->y[s] >= 0 && d->y[s] < ncls;
    }
    farm_array_free(&y);
    if (!ok) {
        snprintf(err, errlen, "%s: expected (N,) float32 class indices in 0..%d", path, ncls - 1);
        mlp_data_free(d);
        return -1;
    }
    return 0;
}

void mlp_data_free(mlp_data *d)
{
    free(d->x);
    free(d->y);
    memset(d, 0, sizeof *d);
}

double mlp_step_flops(const mlp *m)
{
    double f = 0.0;
    for (int l = 0; l < m->nlayers; ++l) {
        const double mac = (double)m->batch * m->sizes[l] * m->sizes[l + 1];
        f += 2.0 * mac;                                     /* forward */
        f += l > 0 ? 2.0 * mac : 0.0;                       /* gradient w.r.t. the layer input */
        f += 2.0 * mac + 2.0 * m->sizes[l] * m->sizes[l + 1]; /* weight gradient + update */
    }
    return f;
}
