/* lstm OpenCL path (strategies in lstm.h): weights resident, inputs uploaded per iteration,
 * logits read back. */
#include <stdlib.h>
#include <string.h>

#include "lstm.h"
#include "lstm_cl.h"
#include "tune.h"

struct lstm_gpu {
    farm_cl *cl;
    const lstm_model *m;
    farm_cl_program prog;
    cl_kernel cell[LSTM_MAX_LAYERS], dense;
    cl_mem w[LSTM_MAX_LAYERS], b[LSTM_MAX_LAYERS], h[LSTM_MAX_LAYERS][2], c[LSTM_MAX_LAYERS];
    cl_mem wd, bd, x, logits;
    int fused, wave, persist, grid;
    int ks, ju; /* wave: reduction split (ks > 1: lstm_wave_split with JU x KS work-groups) */
    cl_kernel fused_k, wave_k;
    cl_mem h_all, c_all;
    cl_mem w_all, b_all, cstate;
    cl_mem bar;      /* grid: the barrier counter, only ever incremented */
    cl_uint bar_base; /* grid: what the counter holds before the next launch */
    int groups;      /* grid: work-groups per batch element */
    size_t fused_global, fused_local;
    size_t persist_global[2], persist_local[2];
    void *hx; /* inputs in storage format */
    size_t esize, xbytes;
    size_t cell_global[2], cell_local[2];
    int use_local;
    farm_evlist evs;
};

static void *storage(const float *x, size_t n, int fp16)
{
    void *p = farm_alloc(n * (fp16 ? 2 : 4));
    if (fp16)
        for (size_t i = 0; i < n; i++)
            ((uint16_t *)p)[i] = farm_f32_to_f16(x[i]);
    else
        memcpy(p, x, n * 4);
    return p;
}

static cl_mem resident(farm_cl *cl, const float *x, size_t n, int fp16)
{
    void *host = storage(x, n, fp16);
    cl_mem m = farm_cl_buffer(cl, CL_MEM_READ_ONLY | CL_MEM_COPY_HOST_PTR, n * (fp16 ? 2 : 4), host);
    free(host);
    return m;
}

static void arg(cl_kernel k, cl_uint i, size_t size, const void *v)
{
    farm_cl_check(clSetKernelArg(k, i, size, v), "clSetKernelArg(lstm)");
}

/* Weights and biases of all layers concatenated (layer l at sum_{i<l} (D_i + H) * 4H). */
static void concat_weights(lstm_gpu *g, farm_cl *cl, const lstm_model *m)
{
    const lstm_shape *s = &m->s;
    const size_t H = (size_t)s->hidden;
    size_t wn = 0;
    for (long l = 0; l < s->layers; l++)
        wn += ((size_t)lstm_in_dim(s, l) + H) * 4 * H;
    float *w_all = farm_alloc(wn * sizeof(float)), *b_all = farm_alloc((size_t)s->layers * 4 * H * sizeof(float));
    size_t off = 0;
    for (long l = 0; l < s->layers; l++) {
        const size_t n = ((size_t)lstm_in_dim(s, l) + H) * 4 * H;
        memcpy(w_all + off, m->w[l], n * sizeof(float));
        memcpy(b_all + (size_t)l * 4 * H, m->b[l], 4 * H * sizeof(float));
        off += n;
    }
    g->w_all = resident(cl, w_all, wn, s->fp16);
    g->b_all = resident(cl, b_all, (size_t)s->layers * 4 * H, s->fp16);
    free(w_all);
    free(b_all);
}

/* Arguments 0-9 of the one-launch kernels (lstm_fused, lstm_persist): shape, inputs, weights. */
static void whole_inference_args(lstm_gpu *g, cl_kernel k, const lstm_shape *s)
{
    const cl_int T = (cl_int)s->seq_len, D0 = (cl_int)s->input_dim, Hi = (cl_int)s->hidden, L = (cl_int)s->layers,
                 C = (cl_int)s->classes;
    arg(k, 0, sizeof T, &T);
    arg(k, 1, sizeof D0, &D0);
    arg(k, 2, sizeof Hi, &Hi);
    arg(k, 3, sizeof L, &L);
    arg(k, 4, sizeof C, &C);
    arg(k, 5, sizeof(cl_mem), &g->x);
    arg(k, 6, sizeof(cl_mem), &g->w_all);
    arg(k, 7, sizeof(cl_mem), &g->b_all);
    arg(k, 8, sizeof(cl_mem), &g->wd);
    arg(k, 9, sizeof(cl_mem), &g->bd);
}

static void create_fused(lstm_gpu *g, farm_cl *cl, const lstm_model *m, long wg)
{
    const lstm_shape *s = &m->s;
    const size_t H = (size_t)s->hidden;
    concat_weights(g, cl, m);
    g->cstate = farm_cl_buffer(cl, CL_MEM_READ_WRITE, (size_t)(s->batch * s->layers) * H * 4, NULL);
    size_t local = wg > 0 ? (size_t)wg : H;
    if (local > cl->max_wg_size)
        local = cl->max_wg_size;
    g->fused_local = local;
    g->fused_global = local * (size_t)s->batch;
    cl_kernel k = g->fused_k = farm_cl_kernel(&g->prog, "lstm_fused");
    whole_inference_args(g, k, s);
    arg(k, 10, sizeof(cl_mem), &g->cstate);
    arg(k, 11, sizeof(cl_mem), &g->logits);
    arg(k, 12, (size_t)(s->layers * 2) * H * sizeof(float), NULL);
}

/* persist: lstm_persist, one work-group of ju x ks work-items per batch element. */
static void create_persist(lstm_gpu *g, farm_cl *cl, const lstm_model *m)
{
    const lstm_shape *s = &m->s;
    const size_t H = (size_t)s->hidden;
    concat_weights(g, cl, m);
    g->persist_local[0] = (size_t)g->ju;
    g->persist_local[1] = (size_t)g->ks;
    g->persist_global[0] = (size_t)g->ju;
    g->persist_global[1] = (size_t)g->ks * (size_t)s->batch;
    cl_kernel k = g->fused_k = farm_cl_kernel(&g->prog, "lstm_persist");
    whole_inference_args(g, k, s);
    arg(k, 10, sizeof(cl_mem), &g->logits);
    arg(k, 11, (size_t)(s->layers * 2) * H * sizeof(float), NULL);
    arg(k, 12, (size_t)s->layers * H * sizeof(float), NULL);
}

/* grid: lstm_grid, G work-groups of ju x ks per batch element, at most one per compute unit in all
 * (the kernel's barrier across work-groups needs every one of them resident at once). */
static void create_grid(lstm_gpu *g, farm_cl *cl, const lstm_model *m)
{
    const lstm_shape *s = &m->s;
    const size_t H = (size_t)s->hidden, bh = (size_t)(s->batch * s->hidden);
    const size_t cu = cl->compute_units ? cl->compute_units : 1;
    size_t groups = (H + (size_t)g->ju - 1) / (size_t)g->ju;
    if (groups * (size_t)s->batch > cu)
        groups = cu / (size_t)s->batch; /* main.c refuses a batch over the compute units */
    g->groups = (int)(groups ? groups : 1);
    concat_weights(g, cl, m);
    g->h_all = farm_cl_buffer(cl, CL_MEM_READ_WRITE, (size_t)s->layers * 2 * bh * 4, NULL);
    g->c_all = farm_cl_buffer(cl, CL_MEM_READ_WRITE, (size_t)s->layers * bh * 4, NULL);
    const cl_uint zero = 0;
    g->bar = farm_cl_buffer(cl, CL_MEM_READ_WRITE | CL_MEM_COPY_HOST_PTR, sizeof zero, (void *)&zero);
    g->bar_base = 0;
    const float ok = 0.0f; /* the status word after the logits */
    farm_cl_check(clEnqueueWriteBuffer(cl->queue, g->logits, CL_TRUE, (size_t)(s->batch * s->classes) * 4, 4, &ok, 0,
                                       NULL, NULL),
                  "clEnqueueWriteBuffer(status)");
    g->persist_local[0] = (size_t)g->ju;
    g->persist_local[1] = (size_t)g->ks;
    g->persist_global[0] = (size_t)g->ju * (size_t)g->groups;
    g->persist_global[1] = (size_t)g->ks * (size_t)s->batch;
    cl_kernel k = g->fused_k = farm_cl_kernel(&g->prog, "lstm_grid");
    whole_inference_args(g, k, s);
    /* far beyond any diagonal's work: about 10 s of L2 reads on a GPU; on a CPU device a second or
     * more of cached reads, since a loaded host may park the other work-group's thread for tens of
     * milliseconds (2^24 reads timed out on the 2-core development host at load 4) */
    const cl_uint spin_max = (cl->device_type & CL_DEVICE_TYPE_GPU) ? 1u << 24 : 1u << 30;
    arg(k, 10, sizeof(cl_mem), &g->logits);
    arg(k, 11, sizeof(cl_mem), &g->h_all);
    arg(k, 12, sizeof(cl_mem), &g->c_all);
    arg(k, 13, sizeof(cl_mem), &g->bar);
    arg(k, 15, sizeof spin_max, &spin_max);
}

static void create_wave(lstm_gpu *g, farm_cl *cl, const lstm_model *m, long wg)
{
    const lstm_shape *s = &m->s;
    const size_t H = (size_t)s->hidden, bh = (size_t)(s->batch * s->hidden);
    concat_weights(g, cl, m);
    g->h_all = farm_cl_buffer(cl, CL_MEM_READ_WRITE, (size_t)s->layers * 2 * bh * 4, NULL);
    g->c_all = farm_cl_buffer(cl, CL_MEM_READ_WRITE, (size_t)s->layers * bh * 4, NULL);
    cl_kernel k = g->wave_k = farm_cl_kernel(&g->prog, g->ks > 1 ? "lstm_wave_split" : "lstm_wave");
    const cl_int T = (cl_int)s->seq_len, D0 = (cl_int)s->input_dim, Hi = (cl_int)H, B = (cl_int)s->batch;
    arg(k, 1, sizeof T, &T);
    arg(k, 2, sizeof D0, &D0);
    arg(k, 3, sizeof Hi, &Hi);
    arg(k, 4, sizeof B, &B);
    arg(k, 5, sizeof(cl_mem), &g->x);
    arg(k, 6, sizeof(cl_mem), &g->w_all);
    arg(k, 7, sizeof(cl_mem), &g->b_all);
    arg(k, 8, sizeof(cl_mem), &g->h_all);
    arg(k, 9, sizeof(cl_mem), &g->c_all);
    if (g->ks > 1) {
        const size_t ju = (size_t)g->ju;
        g->use_local = 1;
        g->cell_global[0] = (H + ju - 1) / ju * ju;
        g->cell_global[1] = (size_t)g->ks * (size_t)s->batch;
        g->cell_local[0] = ju;
        g->cell_local[1] = (size_t)g->ks;
        return;
    }
    g->use_local = wg > 0;
    const size_t lw = wg > 0 ? (size_t)wg : 1;
    g->cell_global[0] = (H + lw - 1) / lw * lw;
    g->cell_global[1] = (size_t)s->batch;
    g->cell_local[0] = lw;
    g->cell_local[1] = 1;
}

lstm_gpu *lstm_gpu_create(farm_cl *cl, const lstm_model *m, int strategy, long wg, long ks, const char *cache_dir)
{
    const lstm_shape *s = &m->s;
    lstm_gpu *g = farm_alloc(sizeof *g);
    g->cl = cl;
    g->m = m;
    g->esize = s->fp16 ? 2 : 4;
    const int persist = strategy == LSTM_PERSIST, grid = strategy == LSTM_GRID;
    const int split = (strategy == LSTM_WAVE && ks > 1) || persist || grid;
    g->ks = split ? (int)(ks > 0 ? ks : 1) : 1;
    g->ju = split ? (int)(wg > 0 ? wg : 32) : 0;
    char opts[96];
    if (split)
        snprintf(opts, sizeof opts, "-DFP16=%d -cl-mad-enable -DKS=%d -DJU=%d", s->fp16, g->ks, g->ju);
    else
        snprintf(opts, sizeof opts, "-DFP16=%d -cl-mad-enable", s->fp16);
    farm_cl_build(cl, "lstm", lstm_cl_source, opts, cache_dir, &g->prog);

    const size_t H = (size_t)s->hidden, C = (size_t)s->classes, bh = (size_t)(s->batch * s->hidden);
    const cl_int Hi = (cl_int)H, Ci = (cl_int)C;
    const int fused = strategy == LSTM_FUSED;
    g->fused = fused;
    g->wave = strategy == LSTM_WAVE;
    g->wd = resident(cl, m->wd, H * C, s->fp16);
    g->bd = resident(cl, m->bd, C, s->fp16);
    g->xbytes = (size_t)(s->batch * s->seq_len * s->input_dim) * g->esize;
    g->hx = storage(m->x, (size_t)(s->batch * s->seq_len * s->input_dim), s->fp16);
    g->x = farm_cl_buffer(cl, CL_MEM_READ_ONLY, g->xbytes, NULL);
    /* grid: one more float, the status word (lstm_grid sets it when its work-groups were not all
     * resident) */
    g->logits = farm_cl_buffer(cl, CL_MEM_READ_WRITE, ((size_t)s->batch * C + (size_t)grid) * 4, NULL);
    const cl_int zero_off = 0;
    g->dense = farm_cl_kernel(&g->prog, "lstm_dense");
    arg(g->dense, 0, sizeof Hi, &Hi);
    arg(g->dense, 1, sizeof Ci, &Ci);
    arg(g->dense, 3, sizeof(cl_mem), &g->wd);
    arg(g->dense, 4, sizeof(cl_mem), &g->bd);
    arg(g->dense, 5, sizeof(cl_mem), &g->logits);
    arg(g->dense, 6, sizeof zero_off, &zero_off);
    if (fused) {
        create_fused(g, cl, m, wg);
        return g;
    }
    g->persist = persist;
    g->grid = grid;
    if (grid) {
        create_grid(g, cl, m);
        return g;
    }
    if (persist) {
        create_persist(g, cl, m);
        return g;
    }
    if (g->wave) {
        create_wave(g, cl, m, wg);
        /* logits from the last layer's h at step T - 1: slot T % 2 */
        const cl_int off = (cl_int)((((size_t)s->layers - 1) * 2 + (size_t)(s->seq_len % 2)) * bh);
        arg(g->dense, 2, sizeof(cl_mem), &g->h_all);
        arg(g->dense, 6, sizeof off, &off);
        return g;
    }
    for (long l = 0; l < s->layers; l++) {
        const size_t D = (size_t)lstm_in_dim(s, l);
        g->w[l] = resident(cl, m->w[l], (D + H) * 4 * H, s->fp16);
        g->b[l] = resident(cl, m->b[l], 4 * H, s->fp16);
        g->h[l][0] = farm_cl_buffer(cl, CL_MEM_READ_WRITE, bh * 4, NULL);
        g->h[l][1] = farm_cl_buffer(cl, CL_MEM_READ_WRITE, bh * 4, NULL);
        g->c[l] = farm_cl_buffer(cl, CL_MEM_READ_WRITE, bh * 4, NULL);
        cl_kernel k = g->cell[l] = farm_cl_kernel(&g->prog, "lstm_cell");
        const cl_int Di = (cl_int)D;
        arg(k, 0, sizeof Di, &Di);
        arg(k, 1, sizeof Hi, &Hi);
        arg(k, 7, sizeof(cl_mem), &g->c[l]);
        arg(k, 8, sizeof(cl_mem), &g->w[l]);
        arg(k, 9, sizeof(cl_mem), &g->b[l]);
    }
    arg(g->dense, 2, sizeof(cl_mem), &g->h[s->layers - 1][s->seq_len % 2]);

    g->use_local = wg > 0;
    const size_t lw = wg > 0 ? (size_t)wg : 1;
    g->cell_global[0] = (H + lw - 1) / lw * lw;
    g->cell_global[1] = (size_t)s->batch;
    g->cell_local[0] = lw;
    g->cell_local[1] = 1;
    return g;
}

const farm_cl_program *lstm_gpu_program(const lstm_gpu *g) { return &g->prog; }

uint64_t lstm_gpu_source_key(void)
{
    const char *parts[] = {lstm_cl_source};
    return farm_tune_source_key(parts, 1);
}

int lstm_gpu_ks(const lstm_gpu *g) { return g->ks; }
int lstm_gpu_ju(const lstm_gpu *g) { return g->ju; }
int lstm_gpu_groups(const lstm_gpu *g) { return g->grid ? g->groups : 1; }

long lstm_gpu_launches(const lstm_gpu *g)
{
    if (g->fused || g->persist || g->grid)
        return 1;
    return (g->wave ? g->m->s.seq_len + g->m->s.layers - 1 : g->m->s.seq_len * g->m->s.layers) + 1;
}

static int run_fused(lstm_gpu *g, float *logits, farm_split *split)
{
    const lstm_shape *s = &g->m->s;
    cl_command_queue q = g->cl->queue;
    farm_cl_check(clEnqueueWriteBuffer(q, g->x, CL_FALSE, 0, g->xbytes, g->hx, 0, NULL, farm_ev_slot(&g->evs, FARM_H2D)),
                  "clEnqueueWriteBuffer(x)");
    if (g->persist)
        farm_cl_check(clEnqueueNDRangeKernel(q, g->fused_k, 2, NULL, g->persist_global, g->persist_local, 0, NULL,
                                             farm_ev_slot(&g->evs, FARM_KERNEL)),
                      "clEnqueueNDRangeKernel(lstm_persist)");
    else
        farm_cl_check(clEnqueueNDRangeKernel(q, g->fused_k, 1, NULL, &g->fused_global, &g->fused_local, 0, NULL,
                                             farm_ev_slot(&g->evs, FARM_KERNEL)),
                      "clEnqueueNDRangeKernel(lstm_fused)");
    farm_cl_check(clEnqueueReadBuffer(q, g->logits, CL_TRUE, 0, (size_t)(s->batch * s->classes) * 4, logits, 0, NULL,
                                      farm_ev_slot(&g->evs, FARM_D2H)),
                  "clEnqueueReadBuffer(logits)");
    farm_ev_collect(&g->evs, split);
    return FARM_EXIT_OK;
}

static int run_grid(lstm_gpu *g, float *logits, farm_split *split)
{
    const lstm_shape *s = &g->m->s;
    cl_command_queue q = g->cl->queue;
    const size_t n = (size_t)(s->batch * s->classes);
    float *out = farm_alloc((n + 1) * sizeof(float));
    farm_cl_check(clEnqueueWriteBuffer(q, g->x, CL_FALSE, 0, g->xbytes, g->hx, 0, NULL, farm_ev_slot(&g->evs, FARM_H2D)),
                  "clEnqueueWriteBuffer(x)");
    arg(g->fused_k, 14, sizeof g->bar_base, &g->bar_base);
    farm_cl_check(clEnqueueNDRangeKernel(q, g->fused_k, 2, NULL, g->persist_global, g->persist_local, 0, NULL,
                                         farm_ev_slot(&g->evs, FARM_KERNEL)),
                  "clEnqueueNDRangeKernel(lstm_grid)");
    farm_cl_check(clEnqueueReadBuffer(q, g->logits, CL_TRUE, 0, (n + 1) * 4, out, 0, NULL, farm_ev_slot(&g->evs, FARM_D2H)),
                  "clEnqueueReadBuffer(logits)");
    farm_ev_collect(&g->evs, split);
    /* every work-group arrives once per diagonal */
    g->bar_base += (cl_uint)((s->seq_len + s->layers - 1) * (long)g->groups * s->batch);
    memcpy(logits, out, n * sizeof(float));
    const int resident = out[n] == 0.0f;
    free(out);
    if (!resident)
        farm_die(FARM_EXIT_ERROR,
                 "--gpu-kernel=grid: the device did not run its %d work-groups at once (a barrier across them timed "
                 "out), so the result is void; use --gpu-kernel=persist or wave on this device",
                 g->groups * (int)s->batch);
    return FARM_EXIT_OK;
}

static int run_wave(lstm_gpu *g, float *logits, farm_split *split)
{
    const lstm_shape *s = &g->m->s;
    cl_command_queue q = g->cl->queue;
    const size_t bh4 = (size_t)(s->batch * s->hidden) * 4;
    const float zero = 0.0f;
    farm_cl_check(clEnqueueWriteBuffer(q, g->x, CL_FALSE, 0, g->xbytes, g->hx, 0, NULL, farm_ev_slot(&g->evs, FARM_H2D)),
                  "clEnqueueWriteBuffer(x)");
    if (g->ks == 1) { /* the split kernel reads no state at step 0 */
        farm_cl_check(clEnqueueFillBuffer(q, g->h_all, &zero, 4, 0, bh4 * 2 * (size_t)s->layers, 0, NULL,
                                          farm_ev_slot(&g->evs, FARM_KERNEL)),
                      "clEnqueueFillBuffer(h)");
        farm_cl_check(clEnqueueFillBuffer(q, g->c_all, &zero, 4, 0, bh4 * (size_t)s->layers, 0, NULL,
                                          farm_ev_slot(&g->evs, FARM_KERNEL)),
                      "clEnqueueFillBuffer(c)");
    }
    const size_t global[3] = {g->cell_global[0], g->cell_global[1], (size_t)s->layers};
    const size_t local[3] = {g->cell_local[0], g->cell_local[1], 1};
    for (cl_int d = 0; d < (cl_int)(s->seq_len + s->layers - 1); d++) {
        arg(g->wave_k, 0, sizeof d, &d);
        farm_cl_check(clEnqueueNDRangeKernel(q, g->wave_k, 3, NULL, global, g->use_local ? local : NULL, 0, NULL,
                                             farm_ev_slot(&g->evs, FARM_KERNEL)),
                      "clEnqueueNDRangeKernel(lstm_wave)");
    }
    const size_t dg[2] = {(size_t)s->classes, (size_t)s->batch};
    farm_cl_check(clEnqueueNDRangeKernel(q, g->dense, 2, NULL, dg, NULL, 0, NULL, farm_ev_slot(&g->evs, FARM_KERNEL)),
                  "clEnqueueNDRangeKernel(lstm_dense)");
    farm_cl_check(clEnqueueReadBuffer(q, g->logits, CL_TRUE, 0, (size_t)(s->batch * s->classes) * 4, logits, 0, NULL,
                                      farm_ev_slot(&g->evs, FARM_D2H)),
                  "clEnqueueReadBuffer(logits)");
    farm_ev_collect(&g->evs, split);
    return FARM_EXIT_OK;
}

int lstm_gpu_run(lstm_gpu *g, float *logits, farm_split *split)
{
    if (g->grid)
        return run_grid(g, logits, split);
    if (g->fused || g->persist)
        return run_fused(g, logits, split);
    if (g->wave)
        return run_wave(g, logits, split);
    const lstm_shape *s = &g->m->s;
    cl_command_queue q = g->cl->queue;
    const size_t bh4 = (size_t)(s->batch * s->hidden) * 4;
    const float zero = 0.0f;
    farm_cl_check(clEnqueueWriteBuffer(q, g->x, CL_FALSE, 0, g->xbytes, g->hx, 0, NULL, farm_ev_slot(&g->evs, FARM_H2D)),
                  "clEnqueueWriteBuffer(x)");
    for (long l = 0; l < s->layers; l++) {
        farm_cl_check(clEnqueueFillBuffer(q, g->h[l][0], &zero, 4, 0, bh4, 0, NULL, farm_ev_slot(&g->evs, FARM_KERNEL)),
                      "clEnqueueFillBuffer(h)");
        farm_cl_check(clEnqueueFillBuffer(q, g->c[l], &zero, 4, 0, bh4, 0, NULL, farm_ev_slot(&g->evs, FARM_KERNEL)),
                      "clEnqueueFillBuffer(c)");
    }
    const cl_int x_stride = (cl_int)(s->seq_len * s->input_dim), h_stride = (cl_int)s->hidden, zero_i = 0;
    const cl_int is_x = 0, is_state = 1;
    for (long t = 0; t < s->seq_len; t++) {
        for (long l = 0; l < s->layers; l++) {
            cl_kernel k = g->cell[l];
            if (l == 0) {
                const cl_int off = (cl_int)(t * s->input_dim);
                arg(k, 2, sizeof(cl_mem), &g->x);
                arg(k, 3, sizeof x_stride, &x_stride);
                arg(k, 4, sizeof off, &off);
                arg(k, 10, sizeof is_x, &is_x);
            } else {
                arg(k, 2, sizeof(cl_mem), &g->h[l - 1][(t + 1) % 2]);
                arg(k, 3, sizeof h_stride, &h_stride);
                arg(k, 4, sizeof zero_i, &zero_i);
                arg(k, 10, sizeof is_state, &is_state);
            }
            arg(k, 5, sizeof(cl_mem), &g->h[l][t % 2]);
            arg(k, 6, sizeof(cl_mem), &g->h[l][(t + 1) % 2]);
            farm_cl_check(clEnqueueNDRangeKernel(q, k, 2, NULL, g->cell_global, g->use_local ? g->cell_local : NULL,
                                                 0, NULL, farm_ev_slot(&g->evs, FARM_KERNEL)),
                          "clEnqueueNDRangeKernel(lstm_cell)");
        }
    }
    const size_t dg[2] = {(size_t)s->classes, (size_t)s->batch};
    farm_cl_check(clEnqueueNDRangeKernel(q, g->dense, 2, NULL, dg, NULL, 0, NULL, farm_ev_slot(&g->evs, FARM_KERNEL)),
                  "clEnqueueNDRangeKernel(lstm_dense)");
    farm_cl_check(clEnqueueReadBuffer(q, g->logits, CL_TRUE, 0, (size_t)(s->batch * s->classes) * 4, logits, 0, NULL,
                                      farm_ev_slot(&g->evs, FARM_D2H)),
                  "clEnqueueReadBuffer(logits)");
    farm_ev_collect(&g->evs, split);
    return FARM_EXIT_OK;
}

void lstm_gpu_destroy(lstm_gpu *g)
{
    if (!g)
        return;
    farm_ev_free(&g->evs);
    if (g->fused) {
        clReleaseKernel(g->fused_k);
        clReleaseMemObject(g->cstate);
    }
    if (g->persist)
        clReleaseKernel(g->fused_k);
    if (g->grid) {
        clReleaseKernel(g->fused_k);
        clReleaseMemObject(g->bar);
    }
    if (g->wave || g->grid) {
        clReleaseKernel(g->wave_k);
        clReleaseMemObject(g->h_all);
        clReleaseMemObject(g->c_all);
    }
    if (g->fused || g->wave || g->persist || g->grid) {
        clReleaseMemObject(g->w_all);
        clReleaseMemObject(g->b_all);
    }
    for (long l = 0; l < g->m->s.layers && !g->fused && !g->wave && !g->persist && !g->grid; l++) {
        clReleaseKernel(g->cell[l]);
        clReleaseMemObject(g->w[l]);
        clReleaseMemObject(g->b[l]);
        clReleaseMemObject(g->h[l][0]);
        clReleaseMemObject(g->h[l][1]);
        clReleaseMemObject(g->c[l]);
    }
    clReleaseKernel(g->dense);
    clReleaseMemObject(g->wd);
    clReleaseMemObject(g->bd);
    clReleaseMemObject(g->x);
    clReleaseMemObject(g->logits);
    farm_cl_program_release(&g->prog);
    free(g->hx);
    free(g);
}
