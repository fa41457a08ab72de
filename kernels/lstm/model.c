/* lstm model data: seeded generation or .npy loading with shape checks (layout in lstm.h). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "lstm.h"

static float *load(const char *path, const size_t *shape, int ndim)
{
    farm_array a;
    char err[600];
    if (farm_npy_read(path, &a, err, sizeof err) != 0)
        farm_die(FARM_EXIT_USAGE, "%s", err);
    int ok = a.ndim == ndim;
    for (int i = 0; ok && i < ndim; i++)
        ok = a.shape[i] == shape[i];
    if (!ok) {
        char want[128] = "", got[128] = "";
        for (int i = 0; i < ndim; i++)
            snprintf(want + strlen(want), sizeof want - strlen(want), "%s%zu", i ? ", " : "", shape[i]);
        for (int i = 0; i < a.ndim; i++)
            snprintf(got + strlen(got), sizeof got - strlen(got), "%s%zu", i ? ", " : "", a.shape[i]);
        farm_die(FARM_EXIT_USAGE, "%s: expected shape (%s), got (%s) (see kernels/README.md, lstm layout)", path,
                 want, got);
    }
    return a.data;
}

static float *generate(size_t n, uint64_t seed, float scale)
{
    float *x = farm_alloc(n * sizeof *x);
    farm_fill_uniform(x, n, seed, -scale, scale);
    return x;
}

void lstm_model_init(lstm_model *m, const lstm_shape *s, uint64_t seed, const char *weights_dir,
                     const char *input_path)
{
    memset(m, 0, sizeof *m);
    m->s = *s;
    const size_t H = (size_t)s->hidden, C = (size_t)s->classes;
    const float scale = 1.0f / sqrtf((float)H);
    char path[1200];
    for (long l = 0; l < s->layers; l++) {
        size_t rows = (size_t)lstm_in_dim(s, l) + H;
        size_t wshape[2] = {rows, 4 * H}, bshape[1] = {4 * H};
        if (weights_dir) {
            snprintf(path, sizeof path, "%s/lstm%ld_kernel.npy", weights_dir, l);
            m->w[l] = load(path, wshape, 2);
            snprintf(path, sizeof path, "%s/lstm%ld_bias.npy", weights_dir, l);
            m->b[l] = load(path, bshape, 1);
        } else {
            m->w[l] = generate(rows * 4 * H, seed + 100 + (uint64_t)l, scale);
            m->b[l] = generate(4 * H, seed + 200 + (uint64_t)l, scale);
        }
    }
    size_t dshape[2] = {H, C}, dbshape[1] = {C};
    if (weights_dir) {
        snprintf(path, sizeof path, "%s/dense_kernel.npy", weights_dir);
        m->wd = load(path, dshape, 2);
        snprintf(path, sizeof path, "%s/dense_bias.npy", weights_dir);
        m->bd = load(path, dbshape, 1);
    } else {
        m->wd = generate(H * C, seed + 300, scale);
        m->bd = generate(C, seed + 301, scale);
    }
    size_t xshape[3] = {(size_t)s->batch, (size_t)s->seq_len, (size_t)s->input_dim};
    size_t xn = xshape[0] * xshape[1] * xshape[2];
    m->x = input_path ? load(input_path, xshape, 3) : generate(xn, seed, 1.0f);
    if (s->fp16) { /* half storage of weights and inputs, identical for every backend */
        for (long l = 0; l < s->layers; l++) {
            farm_round_f16(m->w[l], ((size_t)lstm_in_dim(s, l) + H) * 4 * H);
            farm_round_f16(m->b[l], 4 * H);
        }
        farm_round_f16(m->wd, H * C);
        farm_round_f16(m->bd, C);
        farm_round_f16(m->x, xn);
    }
}

void lstm_model_free(lstm_model *m)
{
    for (long l = 0; l < m->s.layers; l++) {
        free(m->w[l]);
        free(m->b[l]);
    }
    free(m->wd);
    free(m->bd);
    free(m->x);
}
