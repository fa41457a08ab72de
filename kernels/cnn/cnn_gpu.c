/* OpenCL path of the cnn benchmark (see cnn_gpu.h). */
#include "cnn_gpu.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cnn_cl.h" /* generated from cnn.cl: cnn_cl_source */
#include "conv_hooks_cl.h"
#include "conv_im2col_cl.h"
#include "gemm_packed_cl.h"
#include "gemm_tiled_cl.h"
#include "tiled_types_cl.h"

/* Between the two inclusions of gemm_tiled.cl: the second kernel reads a 1x1 stride-1 layer's
 * input tensor as B directly. */
static const char second_tiled[] = "#define TILED_NAME conv_1x1\n#define TILED_EXTRA CONV_EXTRA\n"
                                   "#define TILED_STORE CONV_STORE\n";
/* Before the third: conv_fire, a fire module's two expand layers in one launch (conv_hooks.cl). It
 * keeps every bounds test: padded like the others it ran 14-29% slower in 7 of SqueezeNet's 16
 * pairs on the H200 (1.0 fire4 and fire9, 1.1 fire3 and fire6-9; the rest within 6%), where the
 * layers run apart took up to 29% less time (kernels/bench/results-h200.md, session 6). */
static const char third_tiled[] = "#define BOUNDS 1\n#define TILED_NAME conv_fire\n#define TILED_EXTRA FIRE_EXTRA\n"
                                  "#define TILED_STORE FIRE_STORE\n#define TILED_SELECT FIRE_SELECT\n"
                                  "#define TILED_B_STATE_T int4\n"
                                  "#define TILED_B_PREP(n) ((n) < N ? ptab[(n)] : (int4)(0, -(1 << 20), 0, 0))\n"
                                  "#if GATHER == 3\n#define TILED_B_TILE_T int4\n"
                                  "#define TILED_B_TILE(t0) im2col_window_tile((t0), K_, win, hin * win)\n"
                                  "#define TILED_LOAD_B_TT FIRE_LOAD_B_TT\n"
                                  "#else\n#define TILED_LOAD_B_ST FIRE_LOAD_B_ST\n#endif\n";

static void *to_storage(const float *x, size_t n, int fp16)
{
    if (!fp16) {
        float *out = farm_alloc(n * sizeof(float));
        memcpy(out, x, n * sizeof(float));
        return out;
    }
    uint16_t *out = farm_alloc(n * sizeof(uint16_t));
    for (size_t i = 0; i < n; ++i)
        out[i] = farm_f32_to_f16(x[i]);
    return out;
}

static cl_mem upload(cnn_gpu *g, const float *x, size_t n)
{
    void *host = to_storage(x, n, g->fp16);
    cl_mem m = farm_cl_buffer(g->cl, CL_MEM_READ_ONLY | CL_MEM_COPY_HOST_PTR, n * g->elem_bytes, host);
    free(host);
    return m;
}

/* A rows x cols weight matrix with CNN_TILE_SLACK zero rows after it (the padded tile's A loads). */
static cl_mem upload_rows(cnn_gpu *g, const float *x, size_t rows, size_t cols)
{
    const size_t n = rows * cols, total = (rows + CNN_TILE_SLACK) * cols;
    float *padded = farm_alloc(total * sizeof(float));
    memcpy(padded, x, n * sizeof(float));
    memset(padded + n, 0, (total - n) * sizeof(float));
    cl_mem m = upload(g, padded, total);
    free(padded);
    return m;
}

#define ARG(k, i, v) farm_cl_check(clSetKernelArg((k), (i), sizeof(v), &(v)), "clSetKernelArg")

static void *map_staging(cnn_gpu *g, size_t bytes, cl_mem *buf)
{
    cl_int err;
    *buf = farm_cl_buffer(g->cl, CL_MEM_READ_WRITE | CL_MEM_ALLOC_HOST_PTR, bytes, NULL);
    void *p = clEnqueueMapBuffer(g->cl->queue, *buf, CL_TRUE, CL_MAP_READ | CL_MAP_WRITE, 0, bytes, 0, NULL, NULL,
                                 &err);
    farm_cl_check(err, "clEnqueueMapBuffer (staging)");
    return p;
}

/* Pool layers get a kernel object each with its arguments set once: an inference only enqueues. */
static void bind_pools(cnn_gpu *g)
{
    for (int i = 0; i < g->net->nlayers; ++i) {
        const cnn_layer *l = &g->net->layer[i];
        if (l->kind == CNN_CONV)
            continue;
        if (l->kind == CNN_DWCONV) {
            cl_kernel k = g->lk[i] = farm_cl_kernel(&g->prog, "dwconv");
            ARG(k, 0, g->tensor[l->in]);
            ARG(k, 1, g->w[i]);
            ARG(k, 2, g->b[i]);
            ARG(k, 3, g->tensor[l->out]);
            const int ints[] = {l->hin, l->win, l->hout, l->wout, l->k, l->stride, l->pad, l->relu};
            for (cl_uint a = 0; a < 8; ++a)
                ARG(k, 4 + a, ints[a]);
            continue;
        }
        if (l->kind == CNN_ADD) {
            cl_kernel k = g->lk[i] = farm_cl_kernel(&g->prog, "add");
            ARG(k, 0, g->tensor[l->in]);
            ARG(k, 1, g->tensor[l->in2]);
            ARG(k, 2, g->tensor[l->out]);
            const int n = l->cout * l->hout * l->wout;
            ARG(k, 3, n);
            ARG(k, 4, l->relu);
            continue;
        }
        cl_kernel k = g->lk[i] = farm_cl_kernel(&g->prog, l->kind == CNN_MAXPOOL ? "maxpool" : "avgpool");
        ARG(k, 0, g->tensor[l->in]);
        ARG(k, 1, g->tensor[l->out]);
        if (l->kind == CNN_MAXPOOL) {
            const int ints[] = {l->hin, l->win, l->hout, l->wout, l->k, l->stride};
            for (cl_uint a = 0; a < 6; ++a)
                ARG(k, 2 + a, ints[a]);
        } else {
            const int plane = l->hin * l->win;
            ARG(k, 2, plane);
            ARG(k, 3, l->cout);
        }
    }
}

void cnn_gpu_init(cnn_gpu *g, farm_cl *cl, const cnn_net *net, int fp16, const float *input,
                  const char *cache_dir)
{
    memset(g, 0, sizeof *g);
    g->net = net;
    g->cl = cl;
    g->fp16 = fp16;
    g->half_arith = fp16 && cl->has_fp16;
    g->elem_bytes = fp16 ? 2 : 4;
    /* no -cl-std: the sources are OpenCL C 1.1, which older Mali/Adreno drivers still build */
    const char *options = !fp16 ? "" : g->half_arith ? "-DFARM_FP16 -DFARM_HALF_ARITH" : "-DFARM_FP16";
    farm_cl_build(cl, "cnn", cnn_cl_source, options, cache_dir, &g->prog);
    for (int i = 0; i < cnn_g_count; ++i) {
        char name[32];
        snprintf(name, sizeof name, "conv_g%d", cnn_g_values[i]);
        g->conv[i] = farm_cl_kernel(&g->prog, name);
    }
    g->maxpool = farm_cl_kernel(&g->prog, "maxpool");
    g->avgpool = farm_cl_kernel(&g->prog, "avgpool");
    for (int t = 0; t < net->ntensors; ++t)
        g->tensor[t] =
            farm_cl_buffer(cl, CL_MEM_READ_WRITE, (cnn_tensor_count(net, t) + CNN_TILE_SLACK) * g->elem_bytes, NULL);
    for (int i = 0; i < net->nlayers; ++i) {
        const cnn_layer *l = &net->layer[i];
        if (l->kind == CNN_DWCONV) {
            g->w[i] = upload(g, l->w, (size_t)l->cout * l->k * l->k);
            g->b[i] = upload(g, l->b, (size_t)l->cout);
        }
        if (l->kind != CNN_CONV)
            continue;
        g->w[i] = upload_rows(g, l->w, (size_t)l->cout, (size_t)l->cin * l->k * l->k);
        g->b[i] = upload(g, l->b, (size_t)l->cout);
    }
    /* the single-layer add's second operand: a copy of the input in its own buffer */
    if (net->input_copy) {
        void *copy = to_storage(input, cnn_tensor_count(net, 0), fp16);
        farm_cl_check(clEnqueueWriteBuffer(cl->queue, g->tensor[net->input_copy], CL_TRUE, 0,
                                           cnn_tensor_count(net, 0) * g->elem_bytes, copy, 0, NULL, NULL),
                      "clEnqueueWriteBuffer (add operand)");
        free(copy);
    }
    /* The image and the result move through mapped host-allocated buffers, which drivers keep in
     * pinned memory: the copy runs as DMA without a staging copy (NVIDIA's OpenCL guide). */
    const size_t in_bytes = cnn_tensor_count(net, 0) * g->elem_bytes;
    void *image = to_storage(input, cnn_tensor_count(net, 0), fp16);
    g->input_host = map_staging(g, in_bytes, &g->pin_in);
    memcpy(g->input_host, image, in_bytes);
    free(image);
    snprintf(g->cache_dir, sizeof g->cache_dir, "%s", cache_dir ? cache_dir : "");
    g->tiled = (cl->device_type & CL_DEVICE_TYPE_GPU) != 0;
    g->result_host = map_staging(g, cnn_result_count(net) * g->elem_bytes, &g->pin_out);
    g->result = farm_alloc(cnn_result_count(net) * sizeof(float));
    for (int i = 0; i < net->nlayers; ++i)
        g->fused_with[i] = -1;
    bind_pools(g);
}

static size_t kernel_wg_limit(const cnn_gpu *g, cl_kernel k)
{
    size_t n = 0;
    farm_cl_check(clGetKernelWorkGroupInfo(k, g->cl->device, CL_KERNEL_WORK_GROUP_SIZE, sizeof n, &n, NULL),
                  "clGetKernelWorkGroupInfo");
    return n;
}

size_t cnn_gpu_set_wg(cnn_gpu *g, size_t requested)
{
    size_t limit = kernel_wg_limit(g, g->maxpool);
    const size_t avg = kernel_wg_limit(g, g->avgpool);
    limit = avg < limit ? avg : limit;
    for (int i = 0; i < cnn_g_count; ++i) {
        const size_t c = kernel_wg_limit(g, g->conv[i]);
        limit = c < limit ? c : limit;
    }
    size_t wg = requested < limit ? requested : limit;
    size_t pow2 = 1;
    while (pow2 * 2 <= wg)
        pow2 *= 2;
    g->wg = requested ? pow2 : 0;
    return g->wg;
}

static size_t round_up(size_t n, size_t m)
{
    return m ? (n + m - 1) / m * m : n;
}

static cl_kernel conv_kernel(const cnn_gpu *g, int gran)
{
    for (int i = 0; i < cnn_g_count; ++i)
        if (cnn_g_values[i] == gran)
            return g->conv[i];
    farm_die(FARM_EXIT_ERROR, "internal: no conv kernel for g=%d", gran);
}

static void enqueue_gemm_conv(cnn_gpu *g, int index, cl_event *ev);

/* ev has room for 2 events; returns how many it filled. */
static int enqueue_layer(cnn_gpu *g, int index, cl_event *ev)
{
    const cnn_layer *l = &g->net->layer[index];
    cl_mem in = g->tensor[l->in], out = g->tensor[l->out];
    cl_kernel k;
    size_t global[2];
    cl_uint dims = 2;
    if (l->kind == CNN_CONV && g->conv_gemm) {
        if (g->launches[index] > 0)
            enqueue_gemm_conv(g, index, ev);
        return g->launches[index];
    }
    if (l->kind == CNN_CONV) {
        k = conv_kernel(g, l->g);
        ARG(k, 0, in);
        ARG(k, 1, g->w[index]);
        ARG(k, 2, g->b[index]);
        ARG(k, 3, out);
        const int ints[] = {l->cin, l->hin, l->win, l->hout, l->wout, l->k, l->stride, l->pad,
                            l->out_c_offset, l->relu};
        for (cl_uint a = 0; a < 10; ++a)
            ARG(k, 4 + a, ints[a]);
        global[0] = round_up((size_t)l->hout * l->wout, g->wg);
        global[1] = (size_t)(l->cout / l->g);
    } else if (l->kind == CNN_MAXPOOL || l->kind == CNN_DWCONV) {
        k = g->lk[index];
        global[0] = round_up((size_t)l->hout * l->wout, g->wg);
        global[1] = (size_t)l->cout;
    } else if (l->kind == CNN_ADD) {
        k = g->lk[index];
        global[0] = round_up((size_t)l->cout * l->hout * l->wout, g->wg);
        global[1] = 1;
        dims = 1;
    } else {
        k = g->lk[index];
        global[0] = round_up((size_t)l->cout, g->wg);
        global[1] = 1;
        dims = 1;
    }
    const size_t local[2] = {g->wg, 1};
    farm_cl_check(clEnqueueNDRangeKernel(g->cl->queue, k, dims, NULL, global, g->wg ? local : NULL, 0, NULL, ev),
                  l->name);
    return 1;
}

static uint64_t event_ns(cl_event ev)
{
    cl_ulong s = 0, e = 0;
    if (clGetEventProfilingInfo(ev, CL_PROFILING_COMMAND_START, sizeof s, &s, NULL) != CL_SUCCESS ||
        clGetEventProfilingInfo(ev, CL_PROFILING_COMMAND_END, sizeof e, &e, NULL) != CL_SUCCESS || e < s)
        return 0;
    return (uint64_t)(e - s);
}

void cnn_gpu_submit(cnn_gpu *g)
{
    const cnn_net *net = g->net;
    cl_command_queue q = g->cl->queue;
    farm_evlist *xfer = &g->xfer;
    cl_event(*layer_ev)[2] = g->layer_ev;
    int *nev = g->nev;
    const uint64_t t0 = farm_now_ns();
    farm_cl_check(clEnqueueWriteBuffer(q, g->tensor[0], CL_FALSE, 0, cnn_tensor_count(net, 0) * g->elem_bytes,
                                       g->input_host, 0, NULL, farm_ev_slot(xfer, FARM_H2D)),
                  "upload input");
    /* Drivers may hold commands until a flush: flushing every few launches starts the device on
     * the first layers while the host still enqueues the rest (never a wait). */
    if (g->flush_every)
        clFlush(q);
    int launched = 0;
    for (int i = 0; i < net->nlayers; ++i) {
        nev[i] = enqueue_layer(g, i, layer_ev[i]);
        launched += nev[i];
        if (g->flush_every && nev[i] && launched % g->flush_every == 0)
            clFlush(q);
    }
    const size_t n = cnn_result_count(net);
    const cnn_layer *last = &net->layer[net->nlayers - 1];
    farm_cl_check(clEnqueueReadBuffer(q, g->tensor[last->out], CL_TRUE, 0, n * g->elem_bytes, g->result_host,
                                      0, NULL, farm_ev_slot(xfer, FARM_D2H)),
                  "download result");
    if (g->fp16) {
        const uint16_t *h = g->result_host;
        for (size_t i = 0; i < n; ++i)
            g->result[i] = farm_f16_to_f32(h[i]);
    } else {
        memcpy(g->result, g->result_host, n * sizeof(float));
    }
    g->host_enqueue_ns = farm_now_ns() - t0;
}

void cnn_gpu_collect(cnn_gpu *g, farm_split *split)
{
    const cnn_net *net = g->net;
    cl_event(*layer_ev)[2] = g->layer_ev;
    const int *nev = g->nev;
    const uint64_t t1 = farm_now_ns();
    for (int i = 0; i < net->nlayers; ++i) {
        g->layer_ns[i] = 0;
        g->im2col_ns[i] = nev[i] == 2 ? event_ns(layer_ev[i][0]) : 0;
        for (int e = 0; e < nev[i]; ++e) {
            g->layer_ns[i] += event_ns(layer_ev[i][e]);
            clReleaseEvent(layer_ev[i][e]);
        }
        split->kernel_ns += g->layer_ns[i];
    }
    /* A fused pair's one launch is shared out by the layers' FLOPs (one event per layer stays). */
    for (int i = 0; i < net->nlayers; ++i) {
        const int j = g->fused_with[i];
        if (j <= i)
            continue;
        const double fi = cnn_layer_flops(&net->layer[i]), fj = cnn_layer_flops(&net->layer[j]);
        const uint64_t pair = g->layer_ns[i] + g->layer_ns[j];
        g->fused_ns[i] = g->fused_ns[j] = pair;
        g->layer_ns[i] = (uint64_t)((double)pair * fi / (fi + fj) + 0.5);
        g->layer_ns[j] = pair - g->layer_ns[i];
    }
    farm_ev_collect(&g->xfer, split);
    g->host_collect_ns = farm_now_ns() - t1;
}

void cnn_gpu_run(cnn_gpu *g, farm_split *split)
{
    cnn_gpu_submit(g);
    cnn_gpu_collect(g, split);
}

void cnn_gpu_free(cnn_gpu *g)
{
    farm_ev_free(&g->xfer);
    for (int i = 0; i < g->nprogs; ++i) {
        clReleaseKernel(g->k_main[i]);
        clReleaseKernel(g->k_aux[i]);
        if (g->k_pack1[i])
            clReleaseKernel(g->k_pack1[i]);
        farm_cl_program_release(&g->gprog[i]);
    }
    for (int i = 0; i < CNN_MAX_LAYERS; ++i) {
        if (g->lk[i])
            clReleaseKernel(g->lk[i]);
        if (g->ap[i])
            clReleaseMemObject(g->ap[i]);
        if (g->ktab[i])
            clReleaseMemObject(g->ktab[i]);
        if (g->ptab[i])
            clReleaseMemObject(g->ptab[i]);
    }
    if (g->bp)
        clReleaseMemObject(g->bp);
    for (int t = 0; t < CNN_MAX_TENSORS; ++t)
        if (g->tensor[t])
            clReleaseMemObject(g->tensor[t]);
    for (int i = 0; i < CNN_MAX_LAYERS; ++i) {
        if (g->w[i])
            clReleaseMemObject(g->w[i]);
        if (g->wwin[i])
            clReleaseMemObject(g->wwin[i]);
        if (g->b[i])
            clReleaseMemObject(g->b[i]);
    }
    for (int i = 0; i < cnn_g_count; ++i)
        if (g->conv[i])
            clReleaseKernel(g->conv[i]);
    if (g->maxpool)
        clReleaseKernel(g->maxpool);
    if (g->avgpool)
        clReleaseKernel(g->avgpool);
    farm_cl_program_release(&g->prog);
    if (g->pin_in) {
        clEnqueueUnmapMemObject(g->cl->queue, g->pin_in, g->input_host, 0, NULL, NULL);
        clEnqueueUnmapMemObject(g->cl->queue, g->pin_out, g->result_host, 0, NULL, NULL);
        clFinish(g->cl->queue);
        clReleaseMemObject(g->pin_in);
        clReleaseMemObject(g->pin_out);
    }
    free(g->result);
    memset(g, 0, sizeof *g);
}

/* ------------------------------------------------------------------ im2col-gemm path */

void cnn_gemm_shape(const cnn_layer *l, size_t *m, size_t *n, size_t *k)
{
    *m = (size_t)l->cout;
    *n = (size_t)l->hout * (size_t)l->wout;
    *k = (size_t)l->cin * (size_t)l->k * (size_t)l->k;
}

const char *const cnn_gather_names[] = {"tab", "hoist", "arith", "window", NULL};

int cnn_layer_is_1x1(const cnn_layer *l) { return l->k == 1 && l->stride == 1 && l->pad == 0; }

void cnn_gemm_set_gather(cnn_gemm_cfg *c, const cnn_layer *l, cnn_gather gather)
{
    c->gather = cnn_layer_is_1x1(l) ? CNN_GATHER_TAB : gather;
    /* window: a K tile must lie in one window position (conv_hooks.cl) */
    if (c->gather == CNN_GATHER_WINDOW && (c->tiled.tsk <= 0 || l->cin % c->tiled.tsk != 0))
        c->gather = CNN_GATHER_ARITH;
    c->ksz = c->gather == CNN_GATHER_ARITH || c->gather == CNN_GATHER_WINDOW ? l->k : 0;
}

cnn_gemm_cfg cnn_gemm_default(const farm_cl *cl, const cnn_layer *l, int half_arith, cnn_gather gather)
{
    cnn_gemm_cfg c;
    memset(&c, 0, sizeof c);
    size_t m, n, k;
    cnn_gemm_shape(l, &m, &n, &k);
    c.tiled = farm_tiled_default(cl, m, n, k, half_arith ? 2 : 4);
    cnn_gemm_set_gather(&c, l, gather);
    c.tm = 14, c.vw = 16, c.vn = 2; /* gemm's packed default (kernels/README.md) */
    return c;
}

void cnn_gemm_format(const cnn_gemm_cfg *c, int tiled, char *out, size_t outlen)
{
    if (tiled) {
        char t[160];
        farm_tiled_format(&c->tiled, t, sizeof t);
        snprintf(out, outlen, "%s,gather=%s", t, cnn_gather_names[c->gather]);
    } else {
        snprintf(out, outlen, "tm=%d,vw=%d,vn=%d", c->tm, c->vw, c->vn);
    }
}

int cnn_gemm_parse(const char *text, int tiled, const cnn_layer *l, cnn_gemm_cfg *c)
{
    if (tiled) {
        const char *g = strstr(text, ",gather=");
        char t[160];
        if (!g || (size_t)(g - text) >= sizeof t)
            return -1;
        memcpy(t, text, (size_t)(g - text));
        t[g - text] = 0;
        int which = -1;
        for (int i = 0; cnn_gather_names[i]; ++i)
            if (!strcmp(g + 8, cnn_gather_names[i]))
                which = i;
        if (which < 0 || farm_tiled_parse(t, &c->tiled) != 0)
            return -1;
        cnn_gemm_set_gather(c, l, (cnn_gather)which);
        return 0;
    }
    int tm, vw, vn;
    char tail;
    if (sscanf(text, "tm=%d,vw=%d,vn=%d%c", &tm, &vw, &vn, &tail) != 3 || tm < 1 || tm > 16 || vn < 1 || vn > 4 ||
        (vw != 2 && vw != 4 && vw != 8 && vw != 16))
        return -1;
    c->tm = tm, c->vw = vw, c->vn = vn;
    return 0;
}

/* gather = 0: a 1x1 layer runs conv_1x1, which any program of the same tile has. */
static int same_cfg(const cnn_gemm_cfg *a, const cnn_gemm_cfg *b, int tiled, int gather)
{
    if (!tiled)
        return a->tm == b->tm && a->vw == b->vw && a->vn == b->vn;
    return !memcmp(&a->tiled, &b->tiled, sizeof a->tiled) && a->ktail == b->ktail &&
           (!gather || (a->gather == b->gather && a->ksz == b->ksz));
}

uint64_t cnn_gpu_source_key(void)
{
    const char *parts[] = {conv_hooks_cl_source,  conv_im2col_cl_source, gemm_packed_cl_source,
                           tiled_types_cl_source, gemm_tiled_cl_source,  second_tiled,
                           third_tiled};
    uint64_t h = FARM_HASH_INIT;
    for (size_t i = 0; i < sizeof parts / sizeof parts[0]; ++i)
        h = farm_hash64(h, parts[i], strlen(parts[i]) + 1);
    return h;
}

static int program_for(cnn_gpu *g, const cnn_gemm_cfg *c, int gather)
{
    for (int i = 0; i < g->nprogs; ++i)
        if (same_cfg(&g->prog_cfg[i], c, g->tiled, gather))
            return i;
    if (g->nprogs == CNN_MAX_PROGS)
        farm_die(FARM_EXIT_ERROR, "internal: more than %d GEMM configurations", CNN_MAX_PROGS);
    const int i = g->nprogs++;
    g->prog_cfg[i] = *c;
    char opts[512];
    const char *prec = !g->fp16 ? "" : g->half_arith ? "-DFARM_FP16 -DFARM_HALF_ARITH" : "-DFARM_FP16";
    if (g->tiled) {
        char t[256], ksz[32] = "";
        farm_tiled_options(&c->tiled, t, sizeof t);
        if (c->ksz)
            snprintf(ksz, sizeof ksz, " -DKSZ=%d", c->ksz);
        const int checked = c->tiled.tsm > CNN_TILE_SLACK || c->tiled.tsn > CNN_TILE_SLACK;
        snprintf(opts, sizeof opts, "%s %s -DGATHER=%d%s%s%s", prec, t, (int)c->gather, ksz,
                 c->ktail ? " -DCONV_K_TAIL" : "", checked ? " -DCONV_CHECKED" : "");
        const char *parts[] = {tiled_types_cl_source, conv_hooks_cl_source, gemm_tiled_cl_source, second_tiled,
                               gemm_tiled_cl_source,  third_tiled,          gemm_tiled_cl_source};
        char *src = farm_cl_concat(parts, 7);
        farm_cl_build(g->cl, "cnn_conv_tiled", src, opts, g->cache_dir[0] ? g->cache_dir : NULL, &g->gprog[i]);
        free(src);
        g->k_main[i] = farm_cl_kernel(&g->gprog[i], "conv_im2col");
        g->k_aux[i] = farm_cl_kernel(&g->gprog[i], "conv_1x1");
    } else {
        snprintf(opts, sizeof opts, "%s -DFP16=%d -DTM=%d -DVW=%d -DVN=%d -cl-mad-enable", prec, g->fp16, c->tm, c->vw,
                 c->vn);
        const char *parts[] = {conv_hooks_cl_source, gemm_packed_cl_source, conv_im2col_cl_source};
        char *src = farm_cl_concat(parts, 3);
        farm_cl_build(g->cl, "cnn_conv_packed", src, opts, g->cache_dir[0] ? g->cache_dir : NULL, &g->gprog[i]);
        free(src);
        g->k_main[i] = farm_cl_kernel(&g->gprog[i], "gemm_packed");
        g->k_aux[i] = farm_cl_kernel(&g->gprog[i], "im2col_pack");
        g->k_pack1[i] = farm_cl_kernel(&g->gprog[i], "im2col_pack_1x1");
    }
    return i;
}

static size_t round_up_to(size_t n, size_t m) { return (n + m - 1) / m * m; }

/* CPU devices: weights as A panels [Mp/TM][K][TM] (fp32, zero rows past cout), once per config. */
static void pack_weights(cnn_gpu *g, int index)
{
    const cnn_layer *l = &g->net->layer[index];
    const cnn_gemm_cfg *c = &g->cfg[index];
    if (g->ap[index] && same_cfg(&g->ap_cfg[index], c, 0, 0))
        return;
    if (g->ap[index])
        clReleaseMemObject(g->ap[index]);
    size_t m, n, k;
    cnn_gemm_shape(l, &m, &n, &k);
    const size_t tm = (size_t)c->tm, mp = round_up_to(m, tm);
    float *ap = farm_alloc(mp * k * sizeof(float));
    for (size_t r = 0; r < m; ++r)
        for (size_t kk = 0; kk < k; ++kk)
            ap[((r / tm) * k + kk) * tm + r % tm] = l->w[r * k + kk];
    g->ap[index] = farm_cl_buffer(g->cl, CL_MEM_READ_ONLY | CL_MEM_COPY_HOST_PTR, mp * k * sizeof(float), ap);
    g->ap_cfg[index] = *c;
    free(ap);
    const size_t pw = (size_t)c->vw * (size_t)c->vn, bytes = round_up_to(n, pw) * k * sizeof(float);
    if (bytes > g->bp_bytes) {
        if (g->bp)
            clReleaseMemObject(g->bp);
        g->bp = farm_cl_buffer(g->cl, CL_MEM_READ_WRITE, bytes, NULL);
        g->bp_bytes = bytes;
    }
}

/* GPU devices: the im2col index tables of conv_hooks.cl (im2col_tab), once per layer. */
static void make_tables(cnn_gpu *g, int index)
{
    if (g->ktab[index])
        return;
    const cnn_layer *l = &g->net->layer[index];
    size_t m, n, k;
    cnn_gemm_shape(l, &m, &n, &k);
    /* pixels past n (the last tile's padding): an origin no window reaches, so every load is 0 */
    const size_t np = n + CNN_TILE_SLACK;
    cl_int *kt = farm_alloc(k * 4 * sizeof(cl_int)), *pt = farm_alloc(np * 4 * sizeof(cl_int));
    for (size_t kk = 0; kk < k; ++kk) {
        const int ci = (int)kk / (l->k * l->k), r = (int)kk % (l->k * l->k), kh = r / l->k, kw = r % l->k;
        kt[4 * kk] = ci * l->hin * l->win + kh * l->win + kw;
        kt[4 * kk + 1] = kh;
        kt[4 * kk + 2] = kw;
    }
    for (size_t p = 0; p < n; ++p) {
        const int oh = (int)p / l->wout, ow = (int)p % l->wout;
        const int ih0 = oh * l->stride - l->pad, iw0 = ow * l->stride - l->pad;
        pt[4 * p] = ih0 * l->win + iw0;
        pt[4 * p + 1] = ih0;
        pt[4 * p + 2] = iw0;
    }
    for (size_t p = n; p < np; ++p)
        pt[4 * p] = 0, pt[4 * p + 1] = -(1 << 20), pt[4 * p + 2] = 0;
    g->ktab[index] = farm_cl_buffer(g->cl, CL_MEM_READ_ONLY | CL_MEM_COPY_HOST_PTR, k * 4 * sizeof(cl_int), kt);
    g->ptab[index] = farm_cl_buffer(g->cl, CL_MEM_READ_ONLY | CL_MEM_COPY_HOST_PTR, np * 4 * sizeof(cl_int), pt);
    free(kt);
    free(pt);
}

/* GPU devices: layer `index`'s own kernel object (conv_im2col, conv_1x1, or conv_fire for an
 * expand3x3 fused with its expand1x1) from its configuration's program, arguments set once. */
static void bind_tiled(cnn_gpu *g, int index)
{
    const cnn_layer *l = &g->net->layer[index];
    const int p = g->prog_of[index], pair = g->fused_with[index];
    const cnn_layer *l1 = pair >= 0 ? &g->net->layer[pair] : NULL;
    const char *name = l1 ? "conv_fire" : cnn_layer_is_1x1(l) ? "conv_1x1" : "conv_im2col";
    if (g->lk[index])
        clReleaseKernel(g->lk[index]);
    cl_kernel kr = g->lk[index] = farm_cl_kernel(&g->gprog[p], name);
    size_t m, n, k;
    cnn_gemm_shape(l, &m, &n, &k);
    const cl_int M = (cl_int)m, N = (cl_int)n, K = (cl_int)k, ld = N;
    ARG(kr, 0, M);
    ARG(kr, 1, N);
    ARG(kr, 2, K);
    cl_mem weights = g->cfg[index].gather == CNN_GATHER_WINDOW ? g->wwin[index] : g->w[index];
    ARG(kr, 3, weights);
    ARG(kr, 4, K);
    ARG(kr, 5, g->tensor[l->in]);
    ARG(kr, 6, ld);
    ARG(kr, 7, g->tensor[l->out]);
    ARG(kr, 8, ld);
    ARG(kr, 9, g->b[index]);
    ARG(kr, 10, g->ktab[index]);
    ARG(kr, 11, g->ptab[index]);
    const int ints[] = {l->hin, l->win, l->out_c_offset, l->relu};
    for (cl_uint a = 0; a < 4; ++a)
        ARG(kr, 12 + a, ints[a]);
    size_t rows = m;
    const farm_tiled_cfg *t = &g->cfg[index].tiled;
    if (l1) {
        size_t m1, n1, k1;
        cnn_gemm_shape(l1, &m1, &n1, &k1);
        const cl_int M1 = (cl_int)m1, K1 = (cl_int)k1, coff1 = l1->out_c_offset;
        ARG(kr, 16, g->w[pair]);
        ARG(kr, 17, g->b[pair]);
        ARG(kr, 18, M1);
        ARG(kr, 19, K1);
        ARG(kr, 20, coff1);
        rows += round_up(m1, (size_t)t->tsm); /* the 1x1 layer's rows of tiles first */
    }
    farm_tiled_ranges(t, rows, n, g->lglobal[index], g->llocal[index]);
}

/* The window gather's weights: OIHW columns reordered to (kh, kw, ci), once per layer. */
static void make_window_weights(cnn_gpu *g, int index)
{
    const cnn_layer *l = &g->net->layer[index];
    if (g->wwin[index])
        return;
    const size_t kk = (size_t)l->k * (size_t)l->k, cin = (size_t)l->cin, k = cin * kk;
    float *w = farm_alloc((size_t)l->cout * k * sizeof(float));
    for (size_t m = 0; m < (size_t)l->cout; ++m)
        for (size_t ci = 0; ci < cin; ++ci)
            for (size_t pos = 0; pos < kk; ++pos)
                w[m * k + pos * cin + ci] = l->w[m * k + ci * kk + pos];
    g->wwin[index] = upload_rows(g, w, (size_t)l->cout, k);
    free(w);
}

void cnn_gpu_set_layer(cnn_gpu *g, int index, const cnn_gemm_cfg *c)
{
    const cnn_layer *l = &g->net->layer[index];
    g->cfg[index] = *c;
    const int tsk = c->tiled.tsk > 0 ? c->tiled.tsk : 1;
    g->cfg[index].ktail = g->tiled && ((l->cin * l->k * l->k) % tsk != 0 || l->cin % tsk != 0);
    c = &g->cfg[index];
    if (g->tiled && c->gather == CNN_GATHER_WINDOW)
        make_window_weights(g, index);
    g->prog_of[index] = program_for(g, c, !cnn_layer_is_1x1(&g->net->layer[index]));
    if (!g->tiled)
        pack_weights(g, index);
    make_tables(g, index);
    g->launches[index] = g->tiled ? 1 : 2;
    if (g->tiled && g->fused_with[index] > index) /* runs in its expand3x3's launch, with that tile */
        g->launches[index] = 0;
    else if (g->tiled)
        bind_tiled(g, index);
}

int cnn_gpu_fuse_expand(cnn_gpu *g)
{
    if (!g->conv_gemm || !g->tiled)
        return 0;
    const cnn_net *net = g->net;
    int pairs = 0;
    for (int i = 0; i + 1 < net->nlayers; ++i) {
        const cnn_layer *a = &net->layer[i], *b = &net->layer[i + 1];
        if (a->kind != CNN_CONV || b->kind != CNN_CONV || !cnn_layer_is_1x1(a) || cnn_layer_is_1x1(b) || a->in != b->in ||
            a->out != b->out || b->stride != 1 || b->hout != a->hout || b->wout != a->wout || a->relu != b->relu)
            continue;
        g->fused_with[i] = i + 1;
        g->fused_with[i + 1] = i;
        if (g->lk[i])
            clReleaseKernel(g->lk[i]);
        g->lk[i] = NULL;
        g->launches[i] = 0;
        bind_tiled(g, i + 1);
        pairs++;
        i++;
    }
    return pairs;
}

void cnn_gpu_use_gemm(cnn_gpu *g, const cnn_gemm_cfg *per_layer)
{
    g->conv_gemm = 1;
    for (int i = 0; i < g->net->nlayers; ++i)
        if (g->net->layer[i].kind == CNN_CONV)
            cnn_gpu_set_layer(g, i, &per_layer[i]);
}

static void enqueue_gemm_conv(cnn_gpu *g, int index, cl_event *ev)
{
    const cnn_layer *l = &g->net->layer[index];
    const cnn_gemm_cfg *c = &g->cfg[index];
    const int p = g->prog_of[index];
    cl_mem in = g->tensor[l->in], out = g->tensor[l->out];
    size_t m, n, k;
    cnn_gemm_shape(l, &m, &n, &k);
    const cl_int M = (cl_int)m, N = (cl_int)n, K = (cl_int)k;
    if (g->tiled) {
        farm_cl_check(clEnqueueNDRangeKernel(g->cl->queue, g->lk[index], 2, NULL, g->lglobal[index],
                                             g->llocal[index], 0, NULL, ev),
                      l->name);
        return;
    }
    const size_t pw = (size_t)c->vw * (size_t)c->vn, np = round_up_to(n, pw), mp = round_up_to(m, (size_t)c->tm);
    const cl_int nreal = N;
    if (cnn_layer_is_1x1(l)) {
        cl_kernel pk = g->k_pack1[p];
        ARG(pk, 0, in);
        ARG(pk, 1, g->bp);
        ARG(pk, 2, K);
        ARG(pk, 3, nreal);
        const size_t pg[2] = {k, np / pw};
        farm_cl_check(clEnqueueNDRangeKernel(g->cl->queue, pk, 2, NULL, pg, NULL, 0, NULL, &ev[0]), l->name);
    } else {
        cl_kernel pk = g->k_aux[p];
        ARG(pk, 0, in);
        ARG(pk, 1, g->bp);
        ARG(pk, 2, g->ptab[index]);
        ARG(pk, 3, K);
        ARG(pk, 4, nreal);
        const int pints[] = {l->hin, l->win, l->k};
        for (cl_uint a = 0; a < 3; ++a)
            ARG(pk, 5 + a, pints[a]);
        const size_t pg[3] = {pw, k, np / pw};
        farm_cl_check(clEnqueueNDRangeKernel(g->cl->queue, pk, 3, NULL, pg, NULL, 0, NULL, &ev[0]), l->name);
    }
    cl_kernel gk = g->k_main[p];
    const cl_int Mp = (cl_int)mp, Np = (cl_int)np;
    ARG(gk, 0, Mp);
    ARG(gk, 1, Np);
    ARG(gk, 2, K);
    ARG(gk, 3, g->ap[index]);
    ARG(gk, 4, g->bp);
    ARG(gk, 5, out);
    ARG(gk, 6, g->b[index]);
    ARG(gk, 7, M);
    ARG(gk, 8, N);
    const cl_int coff = l->out_c_offset, relu = l->relu;
    ARG(gk, 9, coff);
    ARG(gk, 10, relu);
    const size_t gg[2] = {np / pw, mp / (size_t)c->tm};
    farm_cl_check(clEnqueueNDRangeKernel(g->cl->queue, gk, 2, NULL, gg, NULL, 0, NULL, &ev[1]), l->name);
}

uint64_t cnn_gpu_run_layer(cnn_gpu *g, int index)
{
    cl_event ev[2];
    const int n = enqueue_layer(g, index, ev);
    farm_cl_check(clFinish(g->cl->queue), "clFinish");
    uint64_t ns = 0;
    for (int e = 0; e < n; ++e) {
        ns += event_ns(ev[e]);
        clReleaseEvent(ev[e]);
    }
    return ns;
}

void cnn_gpu_write_tensor(cnn_gpu *g, int t, const float *x)
{
    const size_t n = cnn_tensor_count(g->net, t);
    void *host = to_storage(x, n, g->fp16);
    farm_cl_check(clEnqueueWriteBuffer(g->cl->queue, g->tensor[t], CL_TRUE, 0, n * g->elem_bytes, host, 0, NULL, NULL),
                  "write tensor");
    free(host);
}

void cnn_gpu_read_tensor(cnn_gpu *g, int t, float *x)
{
    const size_t n = cnn_tensor_count(g->net, t);
    void *host = farm_alloc(n * g->elem_bytes);
    farm_cl_check(clEnqueueReadBuffer(g->cl->queue, g->tensor[t], CL_TRUE, 0, n * g->elem_bytes, host, 0, NULL, NULL),
                  "read tensor");
    if (g->fp16)
        for (size_t i = 0; i < n; ++i)
            x[i] = farm_f16_to_f32(((const uint16_t *)host)[i]);
    else
        memcpy(x, host, n * sizeof(float));
    free(host);
}
