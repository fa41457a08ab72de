/* cnn --tune: per-layer search of the im2col-gemm configuration (see cnn_tune.h). */
#include "cnn_tune.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cnn_cpu.h"

#define MAX_CAND 48

typedef struct {
    cnn_gpu *g;
    int index, n;
    cnn_gemm_cfg cand[MAX_CAND];
    char text[MAX_CAND][256];
    float *want, *got; /* the layer's output channels: cpu reference, gpu result */
    size_t count, offset;
    double tol;
    farm_tune_progress progress;
} layer_eval;

static void workload_of(const cnn_gpu *g, const cnn_layer *l, char *out, size_t outlen)
{
    size_t m, n, k;
    cnn_gemm_shape(l, &m, &n, &k);
    snprintf(out, outlen, "conv m=%zu n=%zu k=%zu window=%dx%ds%d kernel=%s precision=%s", m, n, k, l->k, l->k,
             l->stride, g->tiled ? "local" : "packed", !g->fp16 ? "fp32" : g->half_arith ? "fp16-arith" : "fp16");
}

static uint64_t time_layer(void *user)
{
    layer_eval *e = user;
    return cnn_gpu_run_layer(e->g, e->index);
}

static int eval(void *user, int index, double *ms, int *verified)
{
    layer_eval *e = user;
    const cnn_layer *l = &e->g->net->layer[e->index];
    cnn_gpu_set_layer(e->g, e->index, &e->cand[index]);
    *ms = farm_tune_time(time_layer, e, 7, 0.5);
    float *out = farm_alloc(cnn_tensor_count(e->g->net, l->out) * sizeof(float));
    cnn_gpu_read_tensor(e->g, l->out, out);
    memcpy(e->got, out + e->offset, e->count * sizeof(float));
    free(out);
    double scale = 0.0;
    for (size_t i = 0; i < e->count; ++i)
        scale = fmax(scale, fabs((double)e->want[i]));
    *verified = farm_compare(e->got, e->want, e->count, e->tol, e->tol * scale).ok;
    return 0;
}

/* Candidates, the default first: on the tiled kernel every valid tile with the default gather,
 * then the default tile with each other gather (a layer that gathers); on the packed kernel the
 * register blocks gemm's tuner tries. Tiles before gathers: the budget is shared by every layer
 * shape and goes mostly to building programs (one per tile and gather); on the H200 the tile
 * mattered up to 1.4x, the default gather (window) was the fastest or within about 3%. With the
 * gathers first, SqueezeNet 1.0's tuned 729-pixel 3x3 layers stayed at 1.56-1.78x of gemm --tune
 * on their shapes; tiles first, every shape tried all 20 tiles within 40 s and they are 1.20-1.25x
 * (kernels/bench/results-h200.md, session 6). */
static int candidates(const cnn_gpu *g, const cnn_layer *l, const cnn_gemm_cfg *def, cnn_gemm_cfg *out)
{
    int n = 0;
    out[n++] = *def;
    if (g->tiled) {
        farm_tiled_cfg t[MAX_CAND];
        const int nt = farm_tiled_candidates(g->cl, g->half_arith ? 2 : 4, t, MAX_CAND);
        for (int i = 0; i < nt && n < MAX_CAND; ++i)
            if (memcmp(&t[i], &def->tiled, sizeof t[i]) != 0) {
                out[n] = *def;
                out[n].tiled = t[i];
                cnn_gemm_set_gather(&out[n], l, def->gather); /* window needs this tile's TSK to divide cin */
                n++;
            }
        for (int gth = 0; gth < CNN_GATHERS && !cnn_layer_is_1x1(l) && n < MAX_CAND; ++gth)
            if (gth != (int)def->gather) {
                out[n] = *def;
                cnn_gemm_set_gather(&out[n], l, (cnn_gather)gth);
                n += out[n].gather == (cnn_gather)gth; /* window falls back to arith where it cannot run */
            }
        return n;
    }
    static const int tm[] = {14, 6, 8, 4, 10, 12}, vw[] = {16, 8}, vn[] = {2, 1, 3};
    for (size_t a = 0; a < sizeof vw / sizeof vw[0]; ++a)
        for (size_t b = 0; b < sizeof vn / sizeof vn[0]; ++b)
            for (size_t i = 0; i < sizeof tm / sizeof tm[0] && n < MAX_CAND; ++i) {
                cnn_gemm_cfg c = *def;
                c.tm = tm[i], c.vw = vw[a], c.vn = vn[b];
                if (c.tm != def->tm || c.vw != def->vw || c.vn != def->vn)
                    out[n++] = c;
            }
    return n;
}

/* Layer i's search: its candidates and the cpu path's output of the layer from the gpu's input
 * tensor (which holds real data). */
static layer_eval *prepare_layer(cnn_gpu *g, int i, const cnn_gemm_cfg *def, double tol)
{
    const cnn_net *net = g->net;
    const cnn_layer *l = &net->layer[i];
    layer_eval *e = farm_alloc(sizeof *e);
    e->g = g, e->index = i, e->tol = tol;
    e->n = candidates(g, l, def, e->cand);
    for (int c = 0; c < e->n; ++c)
        cnn_gemm_format(&e->cand[c], g->tiled, e->text[c], sizeof e->text[c]);
    cnn_cpu ref;
    cnn_cpu_init(&ref, net, g->fp16, NULL);
    cnn_gpu_read_tensor(g, l->in, ref.tensor[l->in]);
    cnn_cpu_layer(&ref, i);
    e->offset = (size_t)l->out_c_offset * (size_t)l->hout * (size_t)l->wout;
    e->count = (size_t)l->cout * (size_t)l->hout * (size_t)l->wout;
    e->want = farm_alloc(e->count * sizeof(float));
    e->got = farm_alloc(e->count * sizeof(float));
    memcpy(e->want, ref.tensor[l->out] + e->offset, e->count * sizeof(float));
    cnn_cpu_free(&ref);
    farm_tune_progress_init(&e->progress);
    return e;
}

/* Candidate r of every layer before candidate r + 1 of any: a configuration's program is built
 * once for every layer that tries it, and the budget is shared out evenly. */
static void search(cnn_tune *t, cnn_gpu *g, const cnn_gemm_cfg *def, const int *distinct, int nd, double budget_s,
                   double tol)
{
    layer_eval *e[CNN_MAX_LAYERS];
    int most = 0;
    for (int d = 0; d < nd; ++d) {
        e[d] = prepare_layer(g, distinct[d], &def[distinct[d]], tol);
        most = e[d]->n > most ? e[d]->n : most;
    }
    const uint64_t t0 = farm_now_ns();
    for (int r = 0; r < most; ++r)
        for (int d = 0; d < nd; ++d) {
            if (r >= e[d]->n || (r > 0 && (double)(farm_now_ns() - t0) / 1e9 >= budget_s))
                continue;
            farm_tune_try(&e[d]->progress, t->layer[distinct[d]].workload, "kernel", r, e[d]->text[r], eval, e[d]);
        }
    const double seconds = (double)(farm_now_ns() - t0) / 1e9;
    for (int d = 0; d < nd; ++d) {
        const int best = farm_tune_pick(&e[d]->progress);
        farm_tune_record(&t->layer[distinct[d]], e[d]->text[best], e[d]->progress.best_ms, e[d]->progress.default_ms,
                         e[d]->progress.evaluated, seconds);
        cnn_gpu_set_layer(g, distinct[d], &e[d]->cand[best]);
        free(e[d]->want);
        free(e[d]->got);
        free(e[d]);
    }
}

void cnn_tune_choose(cnn_tune *t, cnn_gpu *g, const farm_common *c, const cnn_gemm_cfg *def, int explicit_knobs,
                     const char *model, double tol)
{
    const cnn_net *net = g->net;
    memset(t, 0, sizeof *t);
    const char *cache_dir = g->cache_dir[0] ? g->cache_dir : NULL;
    const uint64_t key = cnn_gpu_source_key();
    char run_workload[256];
    snprintf(run_workload, sizeof run_workload, "cnn model=%s input=%d layers=%d kernel=%s precision=%s", model,
             net->layer[0].hin, net->nlayers, g->tiled ? "local" : "packed",
             !g->fp16 ? "fp32" : g->half_arith ? "fp16-arith" : "fp16");
    farm_tune_begin(&t->run, g->cl, "cnn", key, cache_dir, run_workload);
    int nconv = 0;
    for (int i = 0; i < net->nlayers; ++i) {
        if (net->layer[i].kind != CNN_CONV)
            continue;
        char w[256];
        workload_of(g, &net->layer[i], w, sizeof w);
        farm_tune_begin(&t->layer[i], g->cl, "cnn", key, cache_dir, w);
        nconv++;
    }
    uint64_t t0 = farm_now_ns();
    if (c->tune && !explicit_knobs) {
        farm_split sp = {0, 0, 0};
        /* every tensor holds what the layer before it makes; the budget starts after this first
         * inference, which also pays the driver's first-launch costs (PoCL compiles each kernel's
         * work-group function then) */
        cnn_gpu_run(g, &sp);
        t0 = farm_now_ns();
        int first_of[CNN_MAX_LAYERS], nd = 0;
        for (int i = 0; i < net->nlayers; ++i) {
            if (net->layer[i].kind != CNN_CONV)
                continue;
            int same = -1;
            for (int d = 0; d < nd && same < 0; ++d)
                if (!strcmp(t->layer[first_of[d]].workload, t->layer[i].workload))
                    same = first_of[d];
            if (same < 0)
                first_of[nd++] = i;
        }
        search(t, g, def, first_of, nd, c->tune_budget_s, tol);
        for (int i = 0; i < net->nlayers; ++i) /* a layer of an earlier layer's shape: the same choice */
            for (int d = 0; d < nd && net->layer[i].kind == CNN_CONV; ++d)
                if (first_of[d] < i && !strcmp(t->layer[first_of[d]].workload, t->layer[i].workload)) {
                    t->layer[i] = t->layer[first_of[d]];
                    cnn_gpu_set_layer(g, i, &g->cfg[first_of[d]]);
                    break;
                }
    } else {
        for (int i = 0; i < net->nlayers; ++i) {
            if (net->layer[i].kind != CNN_CONV)
                continue;
            farm_tune_state *st = &t->layer[i];
            if (!farm_tune_resolve(st, c, explicit_knobs)) {
                cnn_gemm_format(&def[i], g->tiled, st->params, sizeof st->params);
                continue;
            }
            cnn_gemm_cfg cfg = def[i];
            char why[160] = "is not a valid configuration";
            if (cnn_gemm_parse(st->params, g->tiled, &net->layer[i], &cfg) == 0 &&
                (!g->tiled || farm_tiled_check(&cfg.tiled, g->cl, g->half_arith ? 2 : 4, why, sizeof why) == 0)) {
                cnn_gpu_set_layer(g, i, &cfg);
            } else {
                farm_tune_reject(st, why);
                cnn_gemm_format(&def[i], g->tiled, st->params, sizeof st->params);
            }
        }
    }

    /* The network's summary: every layer's parameters, the weakest source among them, the sums of
     * the known kernel times. */
    t->params = farm_alloc((size_t)nconv * 320 + 1);
    size_t used = 0;
    const farm_tune_state *parts[CNN_MAX_LAYERS];
    double kms = 0.0, dms = 0.0;
    int known = 1, candidates = 0, np = 0;
    for (int i = 0; i < net->nlayers; ++i) {
        if (net->layer[i].kind != CNN_CONV)
            continue;
        const farm_tune_state *st = &t->layer[i];
        used += (size_t)snprintf(t->params + used, (size_t)nconv * 320 + 1 - used, "%s%s:%s", used ? ";" : "",
                                 net->layer[i].name, st->params);
        parts[np++] = st;
        known = known && st->kernel_ms > 0 && st->default_ms > 0;
        kms += st->kernel_ms;
        dms += st->default_ms;
        int first = 1;
        for (int j = 0; j < i && first; ++j)
            first = net->layer[j].kind != CNN_CONV || strcmp(t->layer[j].workload, st->workload) != 0;
        if (first)
            candidates += st->candidates;
        if (st->warning[0] && !t->run.warning[0])
            snprintf(t->run.warning, sizeof t->run.warning, "%s", st->warning);
    }
    t->run.source = farm_tune_weakest(parts, np);
    t->run.kernel_ms = known ? kms : NAN;
    t->run.default_ms = known ? dms : NAN;
    t->run.candidates = candidates;
    t->run.tune_s = (double)(farm_now_ns() - t0) / 1e9;
}

void cnn_tune_info_fields(farm_json *j, const cnn_tune *t) { farm_tune_info_fields_as(j, &t->run, t->params); }

const farm_tune_state *cnn_tune_layer(const cnn_tune *t, int index) { return &t->layer[index]; }

void cnn_tune_free(cnn_tune *t)
{
    free(t->params);
    t->params = NULL;
}
