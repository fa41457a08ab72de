/*
 * train: one MLP training step per iteration (forward, backward, SGD) on cpu, cpu-mt or gpu, after
 * Das et al. (on-device training: data movement dominates GPU training). The gpu backend splits each
 * step into h2d / kernel / d2h time under a buffer strategy (--buffers=copy|resident|mapped).
 * Files and layouts: kernels/train/README.md.
 */
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "../common/farm.h"
#include "mlp.h"
#include "mlp_gpu.h"
#include "tune.h"

/* --verify tolerances, relative to the largest value compared: weight changes (final - initial)
 * and per-step losses. fp16 stores weights with 11 significant bits, so small updates round away
 * differently when the two paths' sums differ in the last bit; half arithmetic (cl_khr_fp16
 * devices only, not exercised on PoCL) also accumulates the dot products in half. */
#define TOL_FP32 1e-3
#define TOL_FP16_STORAGE 1e-1
#define TOL_FP16_ARITH 2e-1

typedef struct {
    mlp *m;
    const mlp_data *data;
    const void *x_storage; /* data->x in the gpu's storage precision */
    float lr;
    int gpu;
    mlp_cpu cpu;
    mlp_gpu gpu_state;
    double loss_first, loss_last;
    double *loss;          /* per call (warm-up included), kept only for --dump-output (the loss curve) */
    int keep_losses;
    farm_split moved;      /* summed over the measured steps (reset when the measure phase begins) */
    size_t calls, cap;
} app;

static int step(void *user, farm_split *split)
{
    app *a = user;
    if (a->keep_losses && a->calls == a->cap) {
        a->cap = a->cap ? 2 * a->cap : 256;
        a->loss = realloc(a->loss, a->cap * sizeof *a->loss);
        if (!a->loss)
            farm_die(FARM_EXIT_ERROR, "out of memory (the loss of %zu steps)", a->cap);
    }
    const size_t batches = a->data->n / (size_t)a->m->batch;
    const size_t row = (a->calls % batches) * (size_t)a->m->batch;
    const int32_t *y = a->data->y + row;
    const size_t xoff = row * (size_t)a->m->sizes[0];
    double loss;
    if (a->gpu) {
        const char *x = (const char *)a->x_storage + xoff * a->gpu_state.elem_bytes;
        loss = mlp_gpu_step(&a->gpu_state, x, y, a->lr, split);
    } else {
        loss = mlp_cpu_step(&a->cpu, a->data->x + xoff, y, a->lr);
    }
    if (!isfinite(loss))
        farm_die(FARM_EXIT_ERROR, "loss diverged (%s) at step %zu: lower --lr", isnan(loss) ? "NaN" : "infinite",
                 a->calls);
    if (a->keep_losses)
        a->loss[a->calls] = loss;
    if (a->calls == 0)
        a->loss_first = loss;
    a->loss_last = loss;
    a->moved.h2d_ns += split->h2d_ns;
    a->moved.kernel_ns += split->kernel_ns;
    a->moved.d2h_ns += split->d2h_ns;
    a->calls++;
    return FARM_EXIT_OK;
}

static void iter_fields(void *user, farm_json *j)
{
    const app *a = user;
    farm_json_int(j, "step", (long long)a->calls - 1);
    farm_json_num(j, "loss", a->loss_last);
}

static void measure_begins(void *user)
{
    app *a = user;
    memset(&a->moved, 0, sizeof a->moved);
}

static void clone(const mlp *src, mlp *dst)
{
    *dst = *src;
    for (int l = 0; l < src->nlayers; ++l) {
        dst->w[l] = farm_alloc(mlp_weight_count(src, l) * sizeof(float));
        dst->b[l] = farm_alloc((size_t)src->sizes[l + 1] * sizeof(float));
        memcpy(dst->w[l], src->w[l], mlp_weight_count(src, l) * sizeof(float));
        memcpy(dst->b[l], src->b[l], (size_t)src->sizes[l + 1] * sizeof(float));
    }
}

/* All weights and biases minus the initial ones, flattened (what training changed). */
static float *deltas(const mlp *now, const mlp *init, size_t *count)
{
    size_t n = 0;
    for (int l = 0; l < now->nlayers; ++l)
        n += mlp_weight_count(now, l) + (size_t)now->sizes[l + 1];
    float *d = farm_alloc(n * sizeof(float));
    size_t k = 0;
    for (int l = 0; l < now->nlayers; ++l) {
        for (size_t i = 0; i < mlp_weight_count(now, l); ++i)
            d[k++] = now->w[l][i] - init->w[l][i];
        for (int i = 0; i < now->sizes[l + 1]; ++i)
            d[k++] = now->b[l][i] - init->b[l][i];
    }
    *count = n;
    return d;
}

static farm_cmp compare_scaled(const float *got, const float *want, size_t n, double tol)
{
    double scale = 0.0;
    for (size_t i = 0; i < n; ++i)
        scale = fmax(scale, fabs((double)want[i]));
    return farm_compare(got, want, n, tol, tol * scale);
}

/* What --verify found (see verify). */
typedef struct {
    farm_cmp cmp;           /* the worst step's weight changes, or its loss */
    int bad_step;           /* first step that failed (-1: none) */
    int mask_step;          /* first step with a ReLU decision mismatch (-1: none) */
    mlp_guide_stats guide;  /* ReLU decisions over every step */
    double replay_max_diff; /* replayed final weights against the measured run's (0: deterministic) */
} verdict;

/* Every step (warm-up included) again on the gpu from the initial weights, each one checked
 * against a single-thread cpu step from the SAME weights (the gpu's before the step), its hidden
 * ReLU decisions guided by the gpu's where rounding decides them (mlp_cpu_step_guided): weight and
 * bias changes within tol of the largest, the loss within tol, no decision outside the rounding
 * bound that differs. Checking step by step keeps a flipped near-zero decision from compounding
 * over later steps (which a replay of the whole run on the cpu cannot tell from an error); the
 * replay's final weights must equal the measured run's, so the check covers the weights reported. */
static verdict verify(app *a, const mlp *init, int fp16, double tol, farm_pool *pool)
{
    verdict v;
    memset(&v, 0, sizeof v);
    v.cmp.ok = 1;
    v.bad_step = v.mask_step = -1;
    mlp_gpu *g = &a->gpu_state;
    mlp measured, before, ref;
    clone(a->m, &measured);
    clone(init, &before);
    clone(init, &ref);
    mlp_gpu_write_weights(g, init);
    mlp_cpu cpu;
    mlp_cpu_init(&cpu, &ref, fp16, pool);
    float *act[MLP_MAX_LAYERS + 1] = {0};
    for (int l = 1; l < ref.nlayers; ++l)
        act[l] = farm_alloc((size_t)ref.batch * (size_t)ref.sizes[l] * sizeof(float));
    const mlp_guide guide = {(const float *const *)act, g->half_arith ? 0x1p-11 : 0x1p-24, fp16 ? 0x1p-11 : 0.0};
    const size_t batches = a->data->n / (size_t)ref.batch;
    for (size_t s = 0; s < a->calls; ++s) {
        const size_t row = (s % batches) * (size_t)ref.batch;
        farm_split sp = {0, 0, 0};
        const char *x = (const char *)a->x_storage + row * (size_t)ref.sizes[0] * g->elem_bytes;
        const float got_loss = (float)mlp_gpu_step(g, x, a->data->y + row, a->lr, &sp);
        for (int l = 1; l < ref.nlayers; ++l)
            mlp_gpu_read_act(g, l, act[l]);
        mlp_gpu_read_weights(g);
        for (int l = 0; l < ref.nlayers; ++l) {
            memcpy(ref.w[l], before.w[l], mlp_weight_count(&ref, l) * sizeof(float));
            memcpy(ref.b[l], before.b[l], (size_t)ref.sizes[l + 1] * sizeof(float));
        }
        const size_t mism = v.guide.mismatched;
        const float want_loss = (float)mlp_cpu_step_guided(&cpu, a->data->x + row * (size_t)ref.sizes[0],
                                                           a->data->y + row, a->lr, &guide, &v.guide);
        size_t n;
        float *want = deltas(&ref, &before, &n), *got = deltas(a->m, &before, &n);
        farm_cmp w = compare_scaled(got, want, n, tol);
        const farm_cmp l = compare_scaled(&got_loss, &want_loss, 1, tol);
        if (w.ok && !l.ok)
            w = l;
        if (v.guide.mismatched > mism && v.mask_step < 0)
            v.mask_step = (int)s;
        if (w.ok && v.guide.mismatched > mism)
            w.ok = 0, w.mismatches = v.guide.mismatched - mism;
        if (!w.ok && v.cmp.ok)
            v.cmp = w, v.bad_step = (int)s;
        if (w.max_abs_err > v.cmp.max_abs_err && v.cmp.ok)
            v.cmp.max_abs_err = w.max_abs_err;
        free(want), free(got);
        for (int k = 0; k < ref.nlayers; ++k) {
            memcpy(before.w[k], a->m->w[k], mlp_weight_count(&ref, k) * sizeof(float));
            memcpy(before.b[k], a->m->b[k], (size_t)ref.sizes[k + 1] * sizeof(float));
        }
    }
    for (int l = 0; l < ref.nlayers; ++l) {
        for (size_t i = 0; i < mlp_weight_count(&ref, l); ++i)
            v.replay_max_diff = fmax(v.replay_max_diff, fabs((double)a->m->w[l][i] - measured.w[l][i]));
        for (int i = 0; i < ref.sizes[l + 1]; ++i)
            v.replay_max_diff = fmax(v.replay_max_diff, fabs((double)a->m->b[l][i] - measured.b[l][i]));
        memcpy(a->m->w[l], measured.w[l], mlp_weight_count(&ref, l) * sizeof(float));
        memcpy(a->m->b[l], measured.b[l], (size_t)ref.sizes[l + 1] * sizeof(float));
    }
    if (v.replay_max_diff > 0.0 && v.cmp.ok) /* the kernels are deterministic: a race, or worse */
        v.cmp.ok = 0, v.bad_step = (int)a->calls;
    for (int l = 1; l < ref.nlayers; ++l)
        free(act[l]);
    mlp_cpu_free(&cpu);
    mlp_free(&ref);
    mlp_free(&before);
    mlp_free(&measured);
    return v;
}

/* --tune (tiled fc kernels): the configuration of each GEMM kind in turn (forward, backward,
 * update), the others held at their best so far, judged by a whole step's kernel time; every
 * candidate is verified by one step from the initial weights against the cpu path's step. One
 * cache workload per kind: its largest shape, as the defaults are chosen. */
#define FC_MAX_CAND 48
static const char *const fc_kind_names[3] = {"forward", "backward", "update"};

typedef struct {
    app *a;
    const mlp *init;
    const char *cache_dir;
    farm_tiled_cfg base[3];
    int kind, n;
    farm_tiled_cfg cand[FC_MAX_CAND];
    float *want; /* the cpu step's weight changes */
    double want_loss, tol;
} fc_tuner;

static void fc_workload(const mlp *m, int kind, const char *precision, char *out, size_t outlen)
{
    size_t gm, gn, gk;
    mlp_gemm_largest(m, kind, &gm, &gn, &gk);
    snprintf(out, outlen, "fc kind=%s m=%zu n=%zu k=%zu precision=%s", fc_kind_names[kind], gm, gn, gk, precision);
}

static uint64_t fc_time(void *user)
{
    fc_tuner *t = user;
    farm_split sp = {0, 0, 0};
    mlp_gpu_step(&t->a->gpu_state, t->a->x_storage, t->a->data->y, t->a->lr, &sp);
    return sp.kernel_ns;
}

static int fc_eval(void *user, int index, double *ms, int *verified)
{
    fc_tuner *t = user;
    mlp_gpu *g = &t->a->gpu_state;
    farm_tiled_cfg cfg[3] = {t->base[0], t->base[1], t->base[2]};
    cfg[t->kind] = t->cand[index];
    mlp_gpu_use_tiled(g, cfg, t->cache_dir);
    mlp_gpu_write_weights(g, t->init);
    farm_split sp = {0, 0, 0};
    const double loss = mlp_gpu_step(g, t->a->x_storage, t->a->data->y, t->a->lr, &sp);
    mlp_gpu_read_weights(g);
    size_t n;
    float *got = deltas(g->m, t->init, &n);
    const float gl = (float)loss, wl = (float)t->want_loss;
    *verified = compare_scaled(got, t->want, n, t->tol).ok && compare_scaled(&gl, &wl, 1, t->tol).ok;
    free(got);
    *ms = farm_tune_time(fc_time, t, 7, 1.0);
    return 0;
}

/* Chooses cfg[3] (defaults on entry) by --tune or from the cache; st[3] say where each came from. */
static void fc_choose(app *a, const mlp *init, const farm_common *c, const char *cache_dir, double tol,
                      farm_tiled_cfg cfg[3], farm_tune_state st[3])
{
    mlp_gpu *g = &a->gpu_state;
    const char *prec = !g->fp16 ? "fp32" : g->half_arith ? "fp16-arith" : "fp16";
    for (int kind = 0; kind < 3; ++kind) {
        char w[256];
        fc_workload(a->m, kind, prec, w, sizeof w);
        farm_tune_begin(&st[kind], g->cl, "train", mlp_gpu_source_key(), cache_dir, w);
    }
    if (!c->tune) {
        for (int kind = 0; kind < 3; ++kind) {
            farm_tiled_cfg t;
            char why[160] = "is not a valid configuration";
            if (!farm_tune_resolve(&st[kind], c, 0))
                ;
            else if (farm_tiled_parse(st[kind].params, &t) == 0 &&
                     farm_tiled_check(&t, g->cl, g->half_arith ? 2 : 4, why, sizeof why) == 0)
                cfg[kind] = t;
            else
                farm_tune_reject(&st[kind], why);
            farm_tiled_format(&cfg[kind], st[kind].params, sizeof st[kind].params);
        }
        mlp_gpu_use_tiled(g, cfg, cache_dir);
        return;
    }
    static fc_tuner t;
    memset(&t, 0, sizeof t);
    t.a = a, t.init = init, t.cache_dir = cache_dir, t.tol = tol;
    memcpy(t.base, cfg, sizeof t.base);
    mlp ref;
    clone(init, &ref);
    mlp_cpu cpu;
    mlp_cpu_init(&cpu, &ref, g->fp16, NULL);
    t.want_loss = mlp_cpu_step(&cpu, a->data->x, a->data->y, a->lr);
    size_t n;
    t.want = deltas(&ref, init, &n);
    mlp_cpu_free(&cpu);
    mlp_free(&ref);
    const uint64_t t0 = farm_now_ns();
    for (int kind = 0; kind < 3; ++kind) {
        t.kind = kind;
        t.n = 0;
        t.cand[t.n++] = t.base[kind];
        farm_tiled_cfg all[FC_MAX_CAND];
        const int na = farm_tiled_candidates(g->cl, g->half_arith ? 2 : 4, all, FC_MAX_CAND);
        for (int i = 0; i < na && t.n < FC_MAX_CAND; ++i)
            if (memcmp(&all[i], &t.base[kind], sizeof all[i]) != 0)
                t.cand[t.n++] = all[i];
        char text[FC_MAX_CAND][160];
        const char *params[FC_MAX_CAND];
        for (int i = 0; i < t.n; ++i) {
            farm_tiled_format(&t.cand[i], text[i], sizeof text[i]);
            params[i] = text[i];
        }
        const double left = c->tune_budget_s - (double)(farm_now_ns() - t0) / 1e9;
        double best_ms, default_ms;
        int evaluated;
        const uint64_t k0 = farm_now_ns();
        const int best = farm_tune_search_for(st[kind].workload, "kernel", params, t.n, fc_eval, &t,
                                              left > 0 ? left / (3 - kind) : 0, &best_ms, &default_ms, &evaluated);
        t.base[kind] = t.cand[best];
        farm_tune_record(&st[kind], params[best], best_ms, default_ms, evaluated,
                         (double)(farm_now_ns() - k0) / 1e9);
    }
    memcpy(cfg, t.base, sizeof t.base);
    mlp_gpu_use_tiled(g, cfg, cache_dir);
    mlp_gpu_write_weights(g, init); /* the measured steps start where an untuned run starts */
    free(t.want);
}

/* The dataset's inputs in the gpu's storage precision (made once, kept in *keep). */
static const void *x_storage_of(const mlp_gpu *g, const mlp_data *data, const mlp *m, void **keep)
{
    if (*keep)
        return *keep;
    const size_t nx = data->n * (size_t)m->sizes[0];
    *keep = farm_alloc(nx * g->elem_bytes);
    if (g->fp16)
        for (size_t i = 0; i < nx; ++i)
            ((uint16_t *)*keep)[i] = farm_f32_to_f16(data->x[i]);
    else
        memcpy(*keep, data->x, nx * sizeof(float));
    return *keep;
}

static void ensure_dir(const char *dir)
{
    if (mkdir(dir, 0755) != 0 && errno != EEXIST)
        farm_die(FARM_EXIT_USAGE, "--dump-weights=%s: cannot create directory: %s", dir, strerror(errno));
}

int main(int argc, char **argv)
{
    farm_common common;
    farm_common_defaults(&common);
    static const char *const buffer_modes[] = {"copy", "resident", "mapped", "device", NULL};
    static const char *const fc_kernels[] = {"auto", "tiled", "simple", NULL};
    const char *fc_kernel = "auto";
    static const char *const corrupt_choices[] = {"none", "weight", "activation", NULL};
    const char *corrupt_what = "none";
    const char *layers = "784,256,128,16", *buffers = "copy", *data_dir = NULL, *init_dir = NULL, *dump_dir = NULL;
    long batch = 32, steps = 0, samples = 0;
    double lr = 0.1;
    farm_opt opts[] = {
        FARM_OPTS_BENCH(&common),
        FARM_OPTS_CL(&common),
        FARM_OPTS_TUNE(&common),
        {"layers", FARM_OPT_STRING, &layers, "layer sizes, input first, classes last", 0, 0, NULL},
        {"batch", FARM_OPT_INT, &batch, "samples per step", 1, 65536, NULL},
        {"lr", FARM_OPT_DOUBLE, &lr, "SGD learning rate", 0, 1e3, NULL},
        {"steps", FARM_OPT_INT, &steps, "measured training steps (0: --iters)", 0, 1e9, NULL},
        {"buffers", FARM_OPT_CHOICE, &buffers, "gpu data movement per step", 0, 0, buffer_modes},
        {"fc-kernel", FARM_OPT_CHOICE, &fc_kernel,
         "gpu: layer GEMMs on farm's tiled GEMM kernel (fused epilogues) or one work-item per output (auto: tiled "
         "on GPUs, simple on CPU devices, where the tiled programs take long to compile)", 0, 0,
         fc_kernels},
        {"samples", FARM_OPT_INT, &samples, "synthetic dataset size, a multiple of --batch (0: 32 batches)", 0,
         1e8, NULL},
        {"data-dir", FARM_OPT_STRING, &data_dir, "dir with x.npy (N,in) and y.npy (N,) float32 labels", 0, 0, NULL},
        {"init-weights", FARM_OPT_STRING, &init_dir, "dir with fcN.weight.npy (out,in), fcN.bias.npy (out,)", 0, 0,
         NULL},
        {"dump-weights", FARM_OPT_STRING, &dump_dir, "write the trained fcN.*.npy here", 0, 0, NULL},
        {"corrupt", FARM_OPT_CHOICE, &corrupt_what,
         "test hook (gpu): every step writes one wrong weight or hidden activation on the device, for --verify "
         "to catch (exit 4)",
         0, 0, corrupt_choices},
        {0},
    };
    farm_parse_args(argc, argv, "train",
                    "MLP training steps (forward, backward, SGD); iter events carry the loss and, on gpu,\n"
                    "the h2d/kernel/d2h split; --dump-output writes every step's loss as .npy.",
                    "train --backend=gpu --layers=784,256,128,16 --batch=32 --buffers=resident --steps=50", opts);
    farm_common_check(&common);
    if (common.list_devices)
        return farm_cl_list_devices();
    if (steps)
        common.iters = steps;

    char err[512];
    static mlp m;
    if (mlp_parse_layers(&m, layers, err, sizeof err))
        farm_die(FARM_EXIT_USAGE, "%s", err);
    m.batch = (int)batch;
    if (samples && samples % batch)
        farm_die(FARM_EXIT_USAGE, "--samples=%ld is not a multiple of --batch=%ld", samples, batch);
    if (init_dir) {
        if (mlp_load_weights(&m, init_dir, err, sizeof err))
            farm_die(FARM_EXIT_USAGE, "--init-weights: %s", err);
    } else {
        mlp_init_weights(&m, (uint64_t)common.seed);
    }
    mlp_data data;
    if (data_dir) {
        if (mlp_data_load(&data, &m, data_dir, err, sizeof err))
            farm_die(FARM_EXIT_USAGE, "--data-dir: %s", err);
    } else {
        mlp_data_synthetic(&data, &m, samples ? (size_t)samples : 32u * (size_t)batch, (uint64_t)common.seed);
    }
    const int fp16 = strcmp(common.precision, "fp16") == 0;
    if (fp16) {
        mlp_round_f16(&m);
        farm_round_f16(data.x, data.n * (size_t)m.sizes[0]);
    }
    mlp init;
    clone(&m, &init);

    app a;
    memset(&a, 0, sizeof a);
    a.m = &m;
    a.data = &data;
    a.lr = (float)lr;
    a.gpu = strcmp(common.backend, "gpu") == 0;
    const mlp_buffers mode = !strcmp(buffers, "copy")       ? MLP_COPY
                             : !strcmp(buffers, "resident") ? MLP_RESIDENT
                             : !strcmp(buffers, "device")   ? MLP_DEVICE
                                                            : MLP_MAPPED;
    farm_cl cl;
    farm_pool *pool = NULL;
    void *x_storage = NULL;
    farm_tune_state tune_st[3];
    if (a.gpu) {
        farm_cl_open(&cl, common.cl_device);
        mlp_gpu_init(&a.gpu_state, &cl, &m, fp16, mode, farm_cl_cache_dir(common.cl_cache));
        a.gpu_state.corrupt = !strcmp(corrupt_what, "weight")       ? MLP_CORRUPT_WEIGHT
                              : !strcmp(corrupt_what, "activation") ? MLP_CORRUPT_ACTIVATION
                                                                    : MLP_CORRUPT_NONE;
        if (!strcmp(fc_kernel, "auto"))
            fc_kernel = (cl.device_type & CL_DEVICE_TYPE_GPU) ? "tiled" : "simple";
        const double vtol = !fp16 ? TOL_FP32 : a.gpu_state.half_arith ? TOL_FP16_ARITH : TOL_FP16_STORAGE;
        if (!strcmp(fc_kernel, "tiled")) {
            farm_tiled_cfg cfg[3];
            mlp_gemm_defaults(&cl, &m, a.gpu_state.half_arith, cfg);
            mlp_gpu_use_tiled(&a.gpu_state, cfg, farm_cl_cache_dir(common.cl_cache));
            a.x_storage = x_storage_of(&a.gpu_state, &data, &m, &x_storage);
            mlp_gpu_set_dataset(&a.gpu_state, a.x_storage, data.y, data.n);
            fc_choose(&a, &init, &common, farm_cl_cache_dir(common.cl_cache), vtol, cfg, tune_st);
        } else if (common.tune) {
            fprintf(stderr, "train: warning: --tune: --fc-kernel=simple has no tuned parameters (use "
                            "--fc-kernel=tiled)\n");
        }
        a.x_storage = x_storage_of(&a.gpu_state, &data, &m, &x_storage);
        mlp_gpu_set_dataset(&a.gpu_state, a.x_storage, data.y, data.n);
    } else {
        pool = strcmp(common.backend, "cpu-mt") == 0 ? farm_pool_create((int)common.threads) : NULL;
        mlp_cpu_init(&a.cpu, &m, fp16, pool);
    }

    const double flops = mlp_step_flops(&m);
    farm_json j;
    farm_json_begin(&j, "info");
    farm_json_str(&j, "program", "train");
    farm_json_str(&j, "backend", common.backend);
    if (pool)
        farm_json_int(&j, "threads", farm_pool_size(pool));
    farm_json_str(&j, "layers", layers);
    farm_json_int(&j, "batch", batch);
    farm_json_num(&j, "lr", lr);
    farm_json_str(&j, "precision", common.precision);
    farm_json_str(&j, "precision_mode", !fp16 ? "fp32" : (a.gpu && a.gpu_state.half_arith) ? "fp16" : "fp16-storage");
    if (fp16 && a.gpu && !a.gpu_state.half_arith)
        farm_json_str(&j, "fp16_fallback", "device lacks cl_khr_fp16: half storage, fp32 arithmetic");
    if (a.gpu) {
        farm_json_str(&j, "buffers", buffers);
        farm_json_str(&j, "fc_kernel", fc_kernel);
        if (a.gpu_state.tiled) {
            static const char *const kind_names[3] = {"gemm_forward", "gemm_backward", "gemm_update"};
            for (int kind = 0; kind < 3; ++kind) {
                char t[160];
                farm_tiled_format(&a.gpu_state.cfg[kind], t, sizeof t);
                farm_json_str(&j, kind_names[kind], t);
            }
            char params[600];
            snprintf(params, sizeof params, "forward:%.180s;backward:%.180s;update:%.180s", tune_st[0].params,
                     tune_st[1].params, tune_st[2].params);
            const farm_tune_state *parts[3] = {&tune_st[0], &tune_st[1], &tune_st[2]};
            farm_tune_state run = tune_st[2]; /* kernel_ms: a step with all three kinds' choices */
            run.source = farm_tune_weakest(parts, 3);
            run.default_ms = tune_st[0].default_ms;
            run.candidates = tune_st[0].candidates + tune_st[1].candidates + tune_st[2].candidates;
            run.tune_s = tune_st[0].tune_s + tune_st[1].tune_s + tune_st[2].tune_s;
            snprintf(run.workload, sizeof run.workload, "fc layers=%s batch=%ld precision=%s", layers, batch,
                     common.precision);
            for (int kind = 0; kind < 3 && !run.warning[0]; ++kind)
                snprintf(run.warning, sizeof run.warning, "%s", tune_st[kind].warning);
            run.entry[0] = 0; /* three entries: tune_params names what each kind ran */
            farm_tune_info_fields_as(&j, &run, params);
        }
    }
    farm_json_str(&j, "data", data_dir ? data_dir : "synthetic-teacher");
    farm_json_u64(&j, "samples", data.n);
    farm_json_num(&j, "flops_per_step", flops);
    if (a.gpu)
        farm_cl_info_fields(&j, &cl, &a.gpu_state.prog);
    farm_json_end(&j);

    farm_stats stats;
    a.keep_losses = common.dump_output != NULL;
    const farm_bench_hooks hooks = {step, NULL, iter_fields, measure_begins};
    int rc = farm_bench_run_hooks(&common, &hooks, &a, a.gpu, &stats);
    if (rc != FARM_EXIT_OK)
        farm_die(rc, "training step failed");
    if (a.gpu)
        mlp_gpu_read_weights(&a.gpu_state);

    /* data movement share over the measured steps */
    const double moved = (double)(a.moved.h2d_ns + a.moved.d2h_ns);
    const double total = moved + (double)a.moved.kernel_ns;
    if (dump_dir) {
        ensure_dir(dump_dir);
        if (mlp_save_weights(&m, dump_dir, err, sizeof err))
            farm_die(FARM_EXIT_ERROR, "--dump-weights: %s", err);
    }
    if (common.dump_output) {
        float *l = farm_alloc(a.calls * sizeof(float));
        for (size_t s = 0; s < a.calls; ++s)
            l[s] = (float)a.loss[s];
        const size_t shape[1] = {a.calls};
        if (farm_npy_write(common.dump_output, l, shape, 1, err, sizeof err))
            farm_die(FARM_EXIT_ERROR, "--dump-output: %s", err);
        free(l);
    }
    const double tol = !fp16 ? TOL_FP32 : (a.gpu && a.gpu_state.half_arith) ? TOL_FP16_ARITH : TOL_FP16_STORAGE;
    verdict vd;
    memset(&vd, 0, sizeof vd);
    vd.cmp.ok = 1;
    if (common.verify) { /* the cpu reference on --threads (outputs split, never a sum: same result) */
        farm_pool *vpool = farm_pool_create((int)common.threads);
        vd = verify(&a, &init, fp16, tol, vpool);
        farm_pool_destroy(vpool);
    }
    const farm_cmp cmp = vd.cmp;

    farm_json_begin(&j, "result");
    farm_json_str(&j, "program", "train");
    farm_json_str(&j, "backend", common.backend);
    farm_json_str(&j, "precision", common.precision);
    if (a.gpu)
        farm_json_str(&j, "buffers", buffers);
    farm_json_stats(&j, &stats);
    farm_json_u64(&j, "steps_total", a.calls);
    farm_json_num(&j, "loss_first", a.loss_first);
    farm_json_num(&j, "loss_last", a.loss_last);
    farm_json_num(&j, "flops_per_step", flops);
    farm_json_num(&j, "gflops", flops / (stats.median_ms * 1e6));
    if (a.gpu) {
        farm_json_num(&j, "gflops_kernel", flops / (stats.median_kernel_ms * 1e6));
        farm_json_num(&j, "data_movement_share", total > 0 ? moved / total : NAN);
    }
    double checksum = 0.0;
    for (int l = 0; l < m.nlayers; ++l)
        checksum += farm_checksum(m.w[l], mlp_weight_count(&m, l)) + farm_checksum(m.b[l], (size_t)m.sizes[l + 1]);
    farm_json_num(&j, "checksum", checksum);
    if (common.verify) {
        farm_json_bool(&j, "verified", cmp.ok);
        farm_json_num(&j, "tolerance", tol);
        farm_json_num(&j, "max_abs_err", cmp.max_abs_err);
        farm_json_u64(&j, "mismatches", cmp.mismatches);
        farm_json_str(&j, "verify_method", "stepwise-guided");
        farm_json_u64(&j, "verify_relu_ambiguous", vd.guide.ambiguous);
        farm_json_u64(&j, "verify_relu_mismatched", vd.guide.mismatched);
        farm_json_num(&j, "verify_replay_max_diff", vd.replay_max_diff);
        if (vd.bad_step >= 0)
            farm_json_int(&j, "verify_bad_step", vd.bad_step);
    }
    farm_json_end(&j);
    if (!cmp.ok && vd.bad_step == (int)a.calls)
        farm_die(FARM_EXIT_VERIFY, "verify: replaying the %zu steps on the gpu gave other weights (max diff %g): "
                 "the kernels are not deterministic", a.calls, vd.replay_max_diff);
    if (!cmp.ok && vd.guide.mismatched)
        farm_die(FARM_EXIT_VERIFY, "verify: %zu ReLU decisions differ from the cpu path's beyond the rounding "
                 "bound, the first at step %d (layer %d, element %zu)", vd.guide.mismatched, vd.mask_step,
                 vd.guide.first_layer, vd.guide.first_index);
    if (!cmp.ok)
        farm_die(FARM_EXIT_VERIFY, "verify: step %d: %zu values differ from the cpu path beyond %g (first at %zu)",
                 vd.bad_step, cmp.mismatches, tol, cmp.first_bad);

    if (a.gpu) {
        mlp_gpu_free(&a.gpu_state);
        farm_cl_close(&cl);
    } else {
        mlp_cpu_free(&a.cpu);
    }
    if (pool)
        farm_pool_destroy(pool);
    free(x_storage);
    free(a.loss);
    mlp_data_free(&data);
    mlp_free(&init);
    mlp_free(&m);
    return FARM_EXIT_OK;
}
