/* gpuload bursts (see burst.h). Work-groups: several per compute unit, so every core or shader
 * cluster is kept busy while a kernel runs. */
#include <stdlib.h>

#include "burst.h"
#include "gpuload_cl.h"

#define MEMORY_BUFFER_FLOAT4 (256 * 1024) /* 4 MiB per buffer: one pass ~ 1 ms on a phone GPU */

struct gpuload_burst {
    farm_cl *cl;
    farm_cl_program prog;
    cl_kernel k;
    cl_mem out, src, dst;
    int memory;
    size_t global, local;
    double units;     /* compute: loop trips; memory: float4 elements streamed */
    double kernel_ns; /* wanted duration of one launch */
};

static void arg(cl_kernel k, cl_uint i, size_t size, const void *v)
{
    farm_cl_check(clSetKernelArg(k, i, size, v), "clSetKernelArg(gpuload)");
}

static uint64_t launch(gpuload_burst *b)
{
    cl_int work;
    if (b->memory) {
        double units = b->units < 1024 ? 1024 : b->units;
        cl_int n = units < MEMORY_BUFFER_FLOAT4 ? (cl_int)units : MEMORY_BUFFER_FLOAT4;
        work = (cl_int)(units / n + 0.5);
        arg(b->k, 2, sizeof n, &n);
        arg(b->k, 3, sizeof work, &work);
    } else {
        work = b->units < 1 ? 1 : (cl_int)b->units;
        arg(b->k, 1, sizeof work, &work);
    }
    uint64_t t0 = farm_now_ns();
    farm_cl_check(clEnqueueNDRangeKernel(b->cl->queue, b->k, 1, NULL, &b->global, &b->local, 0, NULL, NULL),
                  "clEnqueueNDRangeKernel(gpuload)");
    farm_cl_check(clFinish(b->cl->queue), "clFinish(gpuload)");
    return farm_now_ns() - t0;
}

uint64_t gpuload_burst_run(gpuload_burst *b)
{
    uint64_t took = launch(b);
    /* Keep one launch near the wanted duration (the device may slow down or be shared); at most
     * x2 per launch so one outlier cannot make the next launch long. */
    double ratio = b->kernel_ns / (double)(took ? took : 1);
    ratio = ratio < 0.5 ? 0.5 : ratio > 2.0 ? 2.0 : ratio;
    b->units *= ratio;
    b->units = b->units < 1 ? 1 : b->units > 1e9 ? 1e9 : b->units;
    return took;
}

gpuload_burst *gpuload_burst_create(farm_cl *cl, int memory, double kernel_ms, const char *cache_dir)
{
    gpuload_burst *b = farm_alloc(sizeof *b);
    b->cl = cl;
    b->memory = memory;
    b->kernel_ns = kernel_ms * 1e6;
    farm_cl_build(cl, "gpuload", gpuload_cl_source, "-cl-mad-enable", cache_dir, &b->prog);
    b->local = cl->max_wg_size >= 64 ? 64 : (cl->max_wg_size ? cl->max_wg_size : 1);
    b->global = (size_t)(cl->compute_units ? cl->compute_units : 1) * 8 * b->local;
    b->out = farm_cl_buffer(cl, CL_MEM_WRITE_ONLY, b->global * sizeof(float), NULL);
    if (memory) {
        const size_t bytes = (size_t)MEMORY_BUFFER_FLOAT4 * 16;
        const float zero = 0.0f;
        b->k = farm_cl_kernel(&b->prog, "load_memory");
        b->src = farm_cl_buffer(cl, CL_MEM_READ_ONLY, bytes, NULL);
        b->dst = farm_cl_buffer(cl, CL_MEM_WRITE_ONLY, bytes, NULL);
        farm_cl_check(clEnqueueFillBuffer(cl->queue, b->src, &zero, sizeof zero, 0, bytes, 0, NULL, NULL),
                      "clEnqueueFillBuffer(gpuload)");
        arg(b->k, 0, sizeof b->src, &b->src);
        arg(b->k, 1, sizeof b->dst, &b->dst);
        b->units = 4096;
    } else {
        b->k = farm_cl_kernel(&b->prog, "load_compute");
        arg(b->k, 0, sizeof b->out, &b->out);
        b->units = 16;
    }
    launch(b); /* the first launch pays one-time costs */
    for (int i = 0; i < 6; i++)
        gpuload_burst_run(b);
    return b;
}

const farm_cl_program *gpuload_burst_program(const gpuload_burst *b) { return &b->prog; }
double gpuload_burst_work(const gpuload_burst *b) { return b->units; }

void gpuload_burst_destroy(gpuload_burst *b)
{
    if (!b)
        return;
    clReleaseKernel(b->k);
    clReleaseMemObject(b->out);
    if (b->src)
        clReleaseMemObject(b->src);
    if (b->dst)
        clReleaseMemObject(b->dst);
    farm_cl_program_release(&b->prog);
    free(b);
}
