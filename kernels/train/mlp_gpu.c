/* OpenCL path of the train benchmark (see mlp_gpu.h). */
#include "mlp_gpu.h"

#include <stdlib.h>
#include <string.h>

#include "fc_tiled_cl.h"
#include "gemm_tiled_cl.h"
#include "tiled_types_cl.h"
#include "train_cl.h" /* generated from train.cl: train_cl_source */

#define ARG(k, i, v) farm_cl_check(clSetKernelArg((k), (i), sizeof(v), &(v)), "clSetKernelArg")

static void *to_storage(const float *x, size_t n, int fp16)
{
    void *out = farm_alloc(n * (fp16 ? 2 : 4));
    if (fp16)
        for (size_t i = 0; i < n; ++i)
            ((uint16_t *)out)[i] = farm_f32_to_f16(x[i]);
    else
        memcpy(out, x, n * sizeof(float));
    return out;
}

static void from_storage(const void *src, float *dst, size_t n, int fp16)
{
    if (fp16)
        for (size_t i = 0; i < n; ++i)
            dst[i] = farm_f16_to_f32(((const uint16_t *)src)[i]);
    else
        memcpy(dst, src, n * sizeof(float));
}

void mlp_gpu_init(mlp_gpu *g, farm_cl *cl, mlp *m, int fp16, mlp_buffers mode, const char *cache_dir)
{
    memset(g, 0, sizeof *g);
    g->m = m;
    g->cl = cl;
    g->mode = mode;
    g->fp16 = fp16;
    g->half_arith = fp16 && cl->has_fp16;
    g->elem_bytes = fp16 ? 2 : 4;
    /* no -cl-std: the sources are OpenCL C 1.1, which older Mali/Adreno drivers still build */
    const char *options = !fp16 ? "" : g->half_arith ? "-DFARM_FP16 -DFARM_HALF_ARITH" : "-DFARM_FP16";
    farm_cl_build(cl, "train", train_cl_source, options, cache_dir, &g->prog);
    g->forward = farm_cl_kernel(&g->prog, "fc_forward");
    g->xent = farm_cl_kernel(&g->prog, "softmax_xent");
    g->backward_input = farm_cl_kernel(&g->prog, "fc_backward_input");
    g->update = farm_cl_kernel(&g->prog, "fc_update");
    g->bias_update = farm_cl_kernel(&g->prog, "bias_update");
    const size_t batch = (size_t)m->batch;
    /* Per-step data lives in host-visible memory when it is mapped. */
    const cl_mem_flags io = mode == MLP_MAPPED ? CL_MEM_READ_WRITE | CL_MEM_ALLOC_HOST_PTR : CL_MEM_READ_WRITE;
    for (int l = 0; l <= m->nlayers; ++l) {
        const size_t bytes = batch * (size_t)m->sizes[l] * g->elem_bytes;
        g->act[l] = farm_cl_buffer(cl, l == 0 ? io : CL_MEM_READ_WRITE, bytes, NULL);
        g->grad[l] = farm_cl_buffer(cl, CL_MEM_READ_WRITE, bytes, NULL);
    }
    g->labels = farm_cl_buffer(cl, io, batch * sizeof(int32_t), NULL);
    g->loss = farm_cl_buffer(cl, io, batch * sizeof(float), NULL);
    g->loss_host = farm_alloc(batch * sizeof(float));
    for (int l = 0; l < m->nlayers; ++l) {
        const size_t nw = mlp_weight_count(m, l), nb = (size_t)m->sizes[l + 1];
        g->w_host[l] = to_storage(m->w[l], nw, fp16);
        g->b_host[l] = to_storage(m->b[l], nb, fp16);
        g->w[l] = farm_cl_buffer(cl, CL_MEM_READ_WRITE | CL_MEM_COPY_HOST_PTR, nw * g->elem_bytes, g->w_host[l]);
        g->b[l] = farm_cl_buffer(cl, CL_MEM_READ_WRITE | CL_MEM_COPY_HOST_PTR, nb * g->elem_bytes, g->b_host[l]);
    }
}

static void enqueue(mlp_gpu *g, cl_kernel k, size_t g0, size_t g1, farm_evlist *evs)
{
    const size_t global[2] = {g0, g1};
    farm_cl_check(clEnqueueNDRangeKernel(g->cl->queue, k, g1 ? 2 : 1, NULL, global, NULL, 0, NULL,
                                         farm_ev_slot(evs, FARM_KERNEL)),
                  "clEnqueueNDRangeKernel");
}

static void enqueue_tiled(mlp_gpu *g, int kind, size_t gm, size_t gn, farm_evlist *evs)
{
    size_t global[2], local[2];
    farm_tiled_ranges(&g->cfg[kind], gm, gn, global, local);
    farm_cl_check(clEnqueueNDRangeKernel(g->cl->queue, g->tk[g->prog_of[kind]][kind], 2, NULL, global, local, 0, NULL,
                                         farm_ev_slot(evs, FARM_KERNEL)),
                  "clEnqueueNDRangeKernel(tiled)");
}

/* gemm_tiled arguments: M, N, K, A, lda, B, ldb, C, ldc, then the part's extras. */
static cl_kernel tiled_args(mlp_gpu *g, int kind, cl_int M, cl_int N, cl_int K, cl_mem a, cl_int lda, cl_mem b,
                            cl_int ldb, cl_mem c, cl_int ldc)
{
    cl_kernel k = g->tk[g->prog_of[kind]][kind];
    ARG(k, 0, M);
    ARG(k, 1, N);
    ARG(k, 2, K);
    ARG(k, 3, a);
    ARG(k, 4, lda);
    ARG(k, 5, b);
    ARG(k, 6, ldb);
    ARG(k, 7, c);
    ARG(k, 8, ldc);
    return k;
}

/* --corrupt test hook: one value written where no kernel would write it (not timed). */
static void corrupt(mlp_gpu *g, cl_mem buf)
{
    static const float f32 = 10.0f;
    static const uint16_t f16 = 0x4900; /* 10.0 as half */
    farm_cl_check(clEnqueueWriteBuffer(g->cl->queue, buf, CL_FALSE, 0, g->elem_bytes, g->fp16 ? (const void *)&f16
                                                                                                : (const void *)&f32,
                                       0, NULL, NULL),
                  "corrupt");
}

static void kernels_tiled(mlp_gpu *g, float lr, farm_evlist *evs)
{
    const mlp *m = g->m;
    const cl_int batch = m->batch;
    for (int l = 0; l < m->nlayers; ++l) {
        const cl_int nin = m->sizes[l], nout = m->sizes[l + 1], relu = l + 1 < m->nlayers;
        cl_kernel k = tiled_args(g, FC_FWD, batch, nout, nin, g->act[l], nin, g->w[l], nin, g->act[l + 1], nout);
        ARG(k, 9, g->b[l]);
        ARG(k, 10, relu);
        enqueue_tiled(g, FC_FWD, (size_t)batch, (size_t)nout, evs);
        if (l == 0 && relu && g->corrupt == MLP_CORRUPT_ACTIVATION)
            corrupt(g, g->act[1]);
    }
    const int ncls = m->sizes[m->nlayers];
    ARG(g->xent, 0, g->act[m->nlayers]);
    ARG(g->xent, 1, g->labels);
    ARG(g->xent, 2, g->grad[m->nlayers]);
    ARG(g->xent, 3, g->loss);
    ARG(g->xent, 4, ncls);
    ARG(g->xent, 5, batch);
    enqueue(g, g->xent, (size_t)batch, 0, evs);
    for (int l = m->nlayers - 1; l >= 0; --l) {
        const cl_int nin = m->sizes[l], nout = m->sizes[l + 1];
        if (l > 0) { /* before the update: reads this layer's old weights (in-order queue) */
            cl_kernel k = tiled_args(g, FC_BWD, batch, nin, nout, g->grad[l + 1], nout, g->w[l], nin, g->grad[l], nin);
            ARG(k, 9, g->act[l]);
            enqueue_tiled(g, FC_BWD, (size_t)batch, (size_t)nin, evs);
        }
        cl_kernel k = tiled_args(g, FC_UPD, nout, nin, batch, g->grad[l + 1], nout, g->act[l], nin, g->w[l], nin);
        ARG(k, 9, lr);
        enqueue_tiled(g, FC_UPD, (size_t)nout, (size_t)nin, evs);
        ARG(g->bias_update, 0, g->grad[l + 1]);
        ARG(g->bias_update, 1, g->b[l]);
        ARG(g->bias_update, 2, nout);
        ARG(g->bias_update, 3, batch);
        ARG(g->bias_update, 4, lr);
        enqueue(g, g->bias_update, (size_t)nout, 0, evs);
    }
}

static void kernels_simple(mlp_gpu *g, float lr, farm_evlist *evs);

static void kernels(mlp_gpu *g, float lr, farm_evlist *evs)
{
    if (g->tiled)
        kernels_tiled(g, lr, evs);
    else
        kernels_simple(g, lr, evs);
    if (g->corrupt == MLP_CORRUPT_WEIGHT)
        corrupt(g, g->w[0]);
}

static void kernels_simple(mlp_gpu *g, float lr, farm_evlist *evs)
{
    const mlp *m = g->m;
    const int batch = m->batch;
    for (int l = 0; l < m->nlayers; ++l) {
        const int nin = m->sizes[l], nout = m->sizes[l + 1], relu = l + 1 < m->nlayers;
        ARG(g->forward, 0, g->act[l]);
        ARG(g->forward, 1, g->w[l]);
        ARG(g->forward, 2, g->b[l]);
        ARG(g->forward, 3, g->act[l + 1]);
        ARG(g->forward, 4, nin);
        ARG(g->forward, 5, nout);
        ARG(g->forward, 6, relu);
        enqueue(g, g->forward, (size_t)nout, (size_t)batch, evs);
        if (l == 0 && relu && g->corrupt == MLP_CORRUPT_ACTIVATION)
            corrupt(g, g->act[1]);
    }
    const int ncls = m->sizes[m->nlayers];
    ARG(g->xent, 0, g->act[m->nlayers]);
    ARG(g->xent, 1, g->labels);
    ARG(g->xent, 2, g->grad[m->nlayers]);
    ARG(g->xent, 3, g->loss);
    ARG(g->xent, 4, ncls);
    ARG(g->xent, 5, batch);
    enqueue(g, g->xent, (size_t)batch, 0, evs);
    for (int l = m->nlayers - 1; l >= 0; --l) {
        const int nin = m->sizes[l], nout = m->sizes[l + 1];
        if (l > 0) { /* before the update: reads this layer's old weights (in-order queue) */
            ARG(g->backward_input, 0, g->grad[l + 1]);
            ARG(g->backward_input, 1, g->w[l]);
            ARG(g->backward_input, 2, g->act[l]);
            ARG(g->backward_input, 3, g->grad[l]);
            ARG(g->backward_input, 4, nin);
            ARG(g->backward_input, 5, nout);
            enqueue(g, g->backward_input, (size_t)nin, (size_t)batch, evs);
        }
        ARG(g->update, 0, g->grad[l + 1]);
        ARG(g->update, 1, g->act[l]);
        ARG(g->update, 2, g->w[l]);
        ARG(g->update, 3, g->b[l]);
        ARG(g->update, 4, nin);
        ARG(g->update, 5, nout);
        ARG(g->update, 6, batch);
        ARG(g->update, 7, lr);
        enqueue(g, g->update, (size_t)nin + 1, (size_t)nout, evs);
    }
}

static void write_buf(mlp_gpu *g, cl_mem buf, const void *src, size_t bytes, farm_evlist *evs)
{
    farm_cl_check(clEnqueueWriteBuffer(g->cl->queue, buf, CL_FALSE, 0, bytes, src, 0, NULL,
                                       farm_ev_slot(evs, FARM_H2D)),
                  "clEnqueueWriteBuffer");
}

static void read_buf(mlp_gpu *g, cl_mem buf, void *dst, size_t bytes, farm_evlist *evs)
{
    farm_cl_check(clEnqueueReadBuffer(g->cl->queue, buf, CL_FALSE, 0, bytes, dst, 0, NULL,
                                      farm_ev_slot(evs, FARM_D2H)),
                  "clEnqueueReadBuffer");
}

/* Zero-copy transfer: map, host copy (timed on the host clock), unmap. Returns the copy's ns. */
static uint64_t mapped_copy(mlp_gpu *g, cl_mem buf, void *host, size_t bytes, int to_device, farm_evlist *evs)
{
    cl_int err;
    const farm_xfer kind = to_device ? FARM_H2D : FARM_D2H;
    void *p = clEnqueueMapBuffer(g->cl->queue, buf, CL_TRUE, to_device ? CL_MAP_WRITE_INVALIDATE_REGION : CL_MAP_READ,
                                 0, bytes, 0, NULL, farm_ev_slot(evs, kind), &err);
    farm_cl_check(err, "clEnqueueMapBuffer");
    const uint64_t t0 = farm_now_ns();
    if (to_device)
        memcpy(p, host, bytes);
    else
        memcpy(host, p, bytes);
    const uint64_t dt = farm_now_ns() - t0;
    farm_cl_check(clEnqueueUnmapMemObject(g->cl->queue, buf, p, 0, NULL, farm_ev_slot(evs, kind)),
                  "clEnqueueUnmapMemObject");
    return dt;
}

void mlp_gpu_set_dataset(mlp_gpu *g, const void *x, const int32_t *y, size_t rows)
{
    if (g->mode != MLP_DEVICE || g->data_x_host)
        return;
    const size_t xbytes = rows * (size_t)g->m->sizes[0] * g->elem_bytes;
    g->data_x = farm_cl_buffer(g->cl, CL_MEM_READ_ONLY | CL_MEM_COPY_HOST_PTR, xbytes, (void *)x);
    g->data_y = farm_cl_buffer(g->cl, CL_MEM_READ_ONLY | CL_MEM_COPY_HOST_PTR, rows * sizeof(int32_t), (void *)y);
    g->data_x_host = x;
    g->data_y_host = y;
    g->data_rows = rows;
}

/* device mode: the batch starting at row y - data_y_host, copied on the device. */
static void copy_batch_on_device(mlp_gpu *g, const void *x, const int32_t *y, farm_evlist *evs)
{
    const size_t batch = (size_t)g->m->batch, row_bytes = (size_t)g->m->sizes[0] * g->elem_bytes;
    if (!g->data_y_host)
        farm_die(FARM_EXIT_ERROR, "train: --buffers=device: no dataset on the device (mlp_gpu_set_dataset)");
    const size_t row = (size_t)(y - g->data_y_host);
    if (y < g->data_y_host || row + batch > g->data_rows || (const char *)x != (const char *)g->data_x_host + row * row_bytes)
        farm_die(FARM_EXIT_ERROR, "train: --buffers=device: a step's batch is not a row range of the uploaded dataset");
    farm_cl_check(clEnqueueCopyBuffer(g->cl->queue, g->data_x, g->act[0], row * row_bytes, 0, batch * row_bytes, 0,
                                      NULL, farm_ev_slot(evs, FARM_KERNEL)),
                  "clEnqueueCopyBuffer(batch)");
    farm_cl_check(clEnqueueCopyBuffer(g->cl->queue, g->data_y, g->labels, row * sizeof(int32_t), 0,
                                      batch * sizeof(int32_t), 0, NULL, farm_ev_slot(evs, FARM_KERNEL)),
                  "clEnqueueCopyBuffer(labels)");
}

double mlp_gpu_step(mlp_gpu *g, const void *x, const int32_t *y, float lr, farm_split *split)
{
    const mlp *m = g->m;
    const size_t batch = (size_t)m->batch;
    const size_t xbytes = batch * (size_t)m->sizes[0] * g->elem_bytes;
    farm_evlist evs = {0};
    uint64_t host_h2d = 0, host_d2h = 0;
    if (g->mode == MLP_COPY)
        for (int l = 0; l < m->nlayers; ++l) {
            write_buf(g, g->w[l], g->w_host[l], mlp_weight_count(m, l) * g->elem_bytes, &evs);
            write_buf(g, g->b[l], g->b_host[l], (size_t)m->sizes[l + 1] * g->elem_bytes, &evs);
        }
    if (g->mode == MLP_DEVICE) {
        copy_batch_on_device(g, x, y, &evs);
    } else if (g->mode == MLP_MAPPED) {
        host_h2d += mapped_copy(g, g->act[0], (void *)x, xbytes, 1, &evs);
        host_h2d += mapped_copy(g, g->labels, (void *)y, batch * sizeof(int32_t), 1, &evs);
    } else {
        write_buf(g, g->act[0], x, xbytes, &evs);
        write_buf(g, g->labels, y, batch * sizeof(int32_t), &evs);
    }
    kernels(g, lr, &evs);
    if (g->mode == MLP_MAPPED) {
        host_d2h += mapped_copy(g, g->loss, g->loss_host, batch * sizeof(float), 0, &evs);
    } else {
        read_buf(g, g->loss, g->loss_host, batch * sizeof(float), &evs);
        if (g->mode == MLP_COPY)
            for (int l = 0; l < m->nlayers; ++l) {
                read_buf(g, g->w[l], g->w_host[l], mlp_weight_count(m, l) * g->elem_bytes, &evs);
                read_buf(g, g->b[l], g->b_host[l], (size_t)m->sizes[l + 1] * g->elem_bytes, &evs);
            }
    }
    farm_cl_check(clFinish(g->cl->queue), "clFinish");
    farm_ev_collect(&evs, split);
    farm_ev_free(&evs);
    split->h2d_ns += host_h2d;
    split->d2h_ns += host_d2h;
    double total = 0.0;
    for (size_t b = 0; b < batch; ++b)
        total += g->loss_host[b];
    return total / (double)batch;
}

void mlp_gpu_read_weights(mlp_gpu *g)
{
    mlp *m = g->m;
    for (int l = 0; l < m->nlayers; ++l) {
        const size_t nw = mlp_weight_count(m, l), nb = (size_t)m->sizes[l + 1];
        farm_cl_check(clEnqueueReadBuffer(g->cl->queue, g->w[l], CL_TRUE, 0, nw * g->elem_bytes, g->w_host[l], 0,
                                          NULL, NULL),
                      "read weights");
        farm_cl_check(clEnqueueReadBuffer(g->cl->queue, g->b[l], CL_TRUE, 0, nb * g->elem_bytes, g->b_host[l], 0,
                                          NULL, NULL),
                      "read biases");
        from_storage(g->w_host[l], m->w[l], nw, g->fp16);
        from_storage(g->b_host[l], m->b[l], nb, g->fp16);
    }
}

void mlp_gpu_read_act(mlp_gpu *g, int l, float *out)
{
    const size_t n = (size_t)g->m->batch * (size_t)g->m->sizes[l];
    void *host = farm_alloc(n * g->elem_bytes);
    farm_cl_check(clEnqueueReadBuffer(g->cl->queue, g->act[l], CL_TRUE, 0, n * g->elem_bytes, host, 0, NULL, NULL),
                  "read activations");
    from_storage(host, out, n, g->fp16);
    free(host);
}

void mlp_gpu_write_weights(mlp_gpu *g, const mlp *src)
{
    mlp *m = g->m;
    for (int l = 0; l < m->nlayers; ++l) {
        const size_t nw = mlp_weight_count(m, l), nb = (size_t)m->sizes[l + 1];
        memcpy(m->w[l], src->w[l], nw * sizeof(float));
        memcpy(m->b[l], src->b[l], nb * sizeof(float));
        free(g->w_host[l]);
        free(g->b_host[l]);
        g->w_host[l] = to_storage(m->w[l], nw, g->fp16);
        g->b_host[l] = to_storage(m->b[l], nb, g->fp16);
        farm_cl_check(clEnqueueWriteBuffer(g->cl->queue, g->w[l], CL_TRUE, 0, nw * g->elem_bytes, g->w_host[l], 0,
                                           NULL, NULL),
                      "write weights");
        farm_cl_check(clEnqueueWriteBuffer(g->cl->queue, g->b[l], CL_TRUE, 0, nb * g->elem_bytes, g->b_host[l], 0,
                                           NULL, NULL),
                      "write biases");
    }
}

void mlp_gpu_free(mlp_gpu *g)
{
    for (int l = 0; l <= g->m->nlayers; ++l) {
        clReleaseMemObject(g->act[l]);
        clReleaseMemObject(g->grad[l]);
    }
    for (int l = 0; l < g->m->nlayers; ++l) {
        clReleaseMemObject(g->w[l]);
        clReleaseMemObject(g->b[l]);
        free(g->w_host[l]);
        free(g->b_host[l]);
    }
    clReleaseMemObject(g->labels);
    clReleaseMemObject(g->loss);
    if (g->data_x_host) {
        clReleaseMemObject(g->data_x);
        clReleaseMemObject(g->data_y);
    }
    clReleaseKernel(g->forward);
    clReleaseKernel(g->xent);
    clReleaseKernel(g->backward_input);
    clReleaseKernel(g->update);
    clReleaseKernel(g->bias_update);
    for (int p = 0; p < g->nprogs; ++p) {
        for (int k = 0; k < 3; ++k)
            clReleaseKernel(g->tk[p][k]);
        farm_cl_program_release(&g->tprog[p]);
    }
    farm_cl_program_release(&g->prog);
    free(g->loss_host);
    memset(g, 0, sizeof *g);
}

/* ------------------------------------------------------------------ tiled path */

void mlp_gemm_shape(const mlp *m, int layer, int kind, size_t *gm, size_t *gn, size_t *gk)
{
    const size_t b = (size_t)m->batch, nin = (size_t)m->sizes[layer], nout = (size_t)m->sizes[layer + 1];
    if (kind == FC_FWD)
        *gm = b, *gn = nout, *gk = nin;
    else if (kind == FC_BWD)
        *gm = b, *gn = nin, *gk = nout;
    else
        *gm = nout, *gn = nin, *gk = b;
}

void mlp_gemm_largest(const mlp *m, int kind, size_t *gm, size_t *gn, size_t *gk)
{
    size_t best = 0;
    *gm = *gn = *gk = 1;
    for (int l = 0; l < m->nlayers; ++l) {
        size_t a, b, c;
        mlp_gemm_shape(m, l, kind, &a, &b, &c);
        if (a * b * c > best)
            best = a * b * c, *gm = a, *gn = b, *gk = c;
    }
}

void mlp_gemm_defaults(const farm_cl *cl, const mlp *m, int half_arith, farm_tiled_cfg cfg[3])
{
    for (int kind = 0; kind < 3; ++kind) {
        size_t bm, bn, bk;
        mlp_gemm_largest(m, kind, &bm, &bn, &bk);
        cfg[kind] = farm_tiled_default(cl, bm, bn, bk, half_arith ? 2 : 4);
    }
}

static const char *const part_define[3] = {"#undef FC_PART\n#define FC_PART 1\n", "#undef FC_PART\n#define FC_PART 2\n",
                                           "#undef FC_PART\n#define FC_PART 3\n"};

uint64_t mlp_gpu_source_key(void)
{
    const char *parts[] = {tiled_types_cl_source, fc_tiled_cl_source, gemm_tiled_cl_source, train_cl_source};
    uint64_t h = FARM_HASH_INIT;
    for (size_t i = 0; i < sizeof parts / sizeof parts[0]; ++i)
        h = farm_hash64(h, parts[i], strlen(parts[i]) + 1);
    return h;
}

void mlp_gpu_use_tiled(mlp_gpu *g, const farm_tiled_cfg cfg[3], const char *cache_dir)
{
    static const char *const names[3] = {"fc_forward_tiled", "fc_backward_tiled", "fc_update_tiled"};
    g->tiled = 1;
    for (int kind = 0; kind < 3; ++kind) {
        g->cfg[kind] = cfg[kind];
        int p = -1;
        for (int j = 0; j < g->nprogs && p < 0; ++j)
            if (!memcmp(&g->prog_cfg[j], &cfg[kind], sizeof cfg[kind]))
                p = j;
        if (p < 0) {
            if (g->nprogs == MLP_MAX_PROGS)
                farm_die(FARM_EXIT_ERROR, "internal: more than %d tiled configurations", MLP_MAX_PROGS);
            p = g->nprogs++;
            g->prog_cfg[p] = cfg[kind];
            char t[256], opts[512];
            farm_tiled_options(&cfg[kind], t, sizeof t);
            snprintf(opts, sizeof opts, "%s %s", !g->fp16 ? "" : g->half_arith ? "-DFARM_FP16 -DFARM_HALF_ARITH" : "-DFARM_FP16",
                     t);
            const char *parts[] = {tiled_types_cl_source, part_define[0], fc_tiled_cl_source, gemm_tiled_cl_source,
                                   part_define[1], fc_tiled_cl_source, gemm_tiled_cl_source,
                                   part_define[2], fc_tiled_cl_source, gemm_tiled_cl_source};
            char *src = farm_cl_concat(parts, 10);
            farm_cl_build(g->cl, "train_tiled", src, opts, cache_dir, &g->tprog[p]);
            free(src);
            for (int k = 0; k < 3; ++k)
                g->tk[p][k] = farm_cl_kernel(&g->tprog[p], names[k]);
        }
        g->prog_of[kind] = p;
    }
}
