/* OpenCL path of the cnn benchmark (see cnn_gpu.h). */
#include "cnn_gpu.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cnn_cl.h" /* generated from cnn.cl: cnn_cl_source */

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
        g->tensor[t] = farm_cl_buffer(cl, CL_MEM_READ_WRITE, cnn_tensor_count(net, t) * g->elem_bytes, NULL);
    for (int i = 0; i < net->nlayers; ++i) {
        const cnn_layer *l = &net->layer[i];
        if (l->kind != CNN_CONV)
            continue;
        g->w[i] = upload(g, l->w, (size_t)l->cout * l->cin * l->k * l->k);
        g->b[i] = upload(g, l->b, (size_t)l->cout);
    }
    g->input_host = to_storage(input, cnn_tensor_count(net, 0), fp16);
    g->result_host = farm_alloc(cnn_result_count(net) * g->elem_bytes);
    g->result = farm_alloc(cnn_result_count(net) * sizeof(float));
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

#define ARG(k, i, v) farm_cl_check(clSetKernelArg((k), (i), sizeof(v), &(v)), "clSetKernelArg")

static void enqueue_layer(cnn_gpu *g, int index, cl_event *ev)
{
    const cnn_layer *l = &g->net->layer[index];
    cl_mem in = g->tensor[l->in], out = g->tensor[l->out];
    cl_kernel k;
    size_t global[2];
    cl_uint dims = 2;
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
    } else if (l->kind == CNN_MAXPOOL) {
        k = g->maxpool;
        ARG(k, 0, in);
        ARG(k, 1, out);
        const int ints[] = {l->hin, l->win, l->hout, l->wout, l->k, l->stride};
        for (cl_uint a = 0; a < 6; ++a)
            ARG(k, 2 + a, ints[a]);
        global[0] = round_up((size_t)l->hout * l->wout, g->wg);
        global[1] = (size_t)l->cout;
    } else {
        k = g->avgpool;
        const int plane = l->hin * l->win;
        ARG(k, 0, in);
        ARG(k, 1, out);
        ARG(k, 2, plane);
        ARG(k, 3, l->cout);
        global[0] = round_up((size_t)l->cout, g->wg);
        global[1] = 1;
        dims = 1;
    }
    const size_t local[2] = {g->wg, 1};
    farm_cl_check(clEnqueueNDRangeKernel(g->cl->queue, k, dims, NULL, global, g->wg ? local : NULL, 0, NULL, ev),
                  l->name);
}

static uint64_t event_ns(cl_event ev)
{
    cl_ulong s = 0, e = 0;
    if (clGetEventProfilingInfo(ev, CL_PROFILING_COMMAND_START, sizeof s, &s, NULL) != CL_SUCCESS ||
        clGetEventProfilingInfo(ev, CL_PROFILING_COMMAND_END, sizeof e, &e, NULL) != CL_SUCCESS || e < s)
        return 0;
    return (uint64_t)(e - s);
}

void cnn_gpu_run(cnn_gpu *g, farm_split *split)
{
    const cnn_net *net = g->net;
    cl_command_queue q = g->cl->queue;
    farm_evlist xfer = {0};
    cl_event layer_ev[CNN_MAX_LAYERS];
    farm_cl_check(clEnqueueWriteBuffer(q, g->tensor[0], CL_FALSE, 0, cnn_tensor_count(net, 0) * g->elem_bytes,
                                       g->input_host, 0, NULL, farm_ev_slot(&xfer, FARM_H2D)),
                  "upload input");
    for (int i = 0; i < net->nlayers; ++i)
        enqueue_layer(g, i, &layer_ev[i]);
    const size_t n = cnn_result_count(net);
    const cnn_layer *last = &net->layer[net->nlayers - 1];
    farm_cl_check(clEnqueueReadBuffer(q, g->tensor[last->out], CL_TRUE, 0, n * g->elem_bytes, g->result_host,
                                      0, NULL, farm_ev_slot(&xfer, FARM_D2H)),
                  "download result");
    farm_cl_check(clFinish(q), "clFinish");
    for (int i = 0; i < net->nlayers; ++i) {
        g->layer_ns[i] = event_ns(layer_ev[i]);
        split->kernel_ns += g->layer_ns[i];
        clReleaseEvent(layer_ev[i]);
    }
    farm_ev_collect(&xfer, split);
    farm_ev_free(&xfer);
    if (g->fp16) {
        const uint16_t *h = g->result_host;
        for (size_t i = 0; i < n; ++i)
            g->result[i] = farm_f16_to_f32(h[i]);
    } else {
        memcpy(g->result, g->result_host, n * sizeof(float));
    }
}

void cnn_gpu_free(cnn_gpu *g)
{
    for (int t = 0; t < CNN_MAX_TENSORS; ++t)
        if (g->tensor[t])
            clReleaseMemObject(g->tensor[t]);
    for (int i = 0; i < CNN_MAX_LAYERS; ++i) {
        if (g->w[i])
            clReleaseMemObject(g->w[i]);
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
    free(g->input_host);
    free(g->result_host);
    free(g->result);
    memset(g, 0, sizeof *g);
}
