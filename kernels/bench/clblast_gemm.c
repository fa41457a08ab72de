/* Reference point for tests/bench: CLBlast's SGEMM on the same OpenCL device, same JSON Lines
 * conventions as the benchmark programs (host-only: CLBlast is not on phones). */
#include "farm.h" /* first: it sets CL_TARGET_OPENCL_VERSION */

#include <clblast_c.h>
#include <stdlib.h>

typedef struct {
    farm_cl *cl;
    cl_mem a, b, c;
    size_t m, n, k;
    long calls;
} job;

static int iter(void *user, farm_split *split)
{
    job *jb = user;
    cl_event ev = NULL;
    /* --calls back-to-back products, one wait: the wall time per call is CLBlast's device time
     * (its own event covers only its last kernel, which at n >= 2048 is a small helper) */
    for (long i = 1; i < jb->calls; i++)
        if (CLBlastSgemm(CLBlastLayoutRowMajor, CLBlastTransposeNo, CLBlastTransposeNo, jb->m, jb->n, jb->k, 1.0f, jb->a,
                         0, jb->k, jb->b, 0, jb->n, 0.0f, jb->c, 0, jb->n, &jb->cl->queue, NULL) != CLBlastSuccess)
            farm_die(FARM_EXIT_ERROR, "CLBlastSgemm failed");
    CLBlastStatusCode st = CLBlastSgemm(CLBlastLayoutRowMajor, CLBlastTransposeNo, CLBlastTransposeNo, jb->m, jb->n,
                                        jb->k, 1.0f, jb->a, 0, jb->k, jb->b, 0, jb->n, 0.0f, jb->c, 0, jb->n,
                                        &jb->cl->queue, &ev);
    if (st != CLBlastSuccess)
        farm_die(FARM_EXIT_ERROR, "CLBlastSgemm failed with status %d", (int)st);
    clWaitForEvents(1, &ev);
    cl_ulong s = 0, e = 0;
    clGetEventProfilingInfo(ev, CL_PROFILING_COMMAND_START, sizeof s, &s, NULL);
    clGetEventProfilingInfo(ev, CL_PROFILING_COMMAND_END, sizeof e, &e, NULL);
    split->kernel_ns = e > s ? e - s : 0;
    clReleaseEvent(ev);
    return FARM_EXIT_OK;
}

int main(int argc, char **argv)
{
    farm_common c;
    farm_common_defaults(&c);
    long n = 1024, calls = 1;
    const farm_opt opts[] = {
        FARM_OPTS_BENCH(&c),
        FARM_OPTS_CL(&c),
        {"n", FARM_OPT_INT, &n, "square size M = N = K", 1, 1 << 15, NULL},
        {"calls", FARM_OPT_INT, &calls, "products per iteration (gflops_calls: per call of the wall time)", 1, 1000,
         NULL},
        {0},
    };
    farm_parse_args(argc, argv, "clblast_gemm", "CLBlast SGEMM reference (row-major C = A * B).",
                    "clblast_gemm --n=1024 --iters=5", opts);
    farm_cl cl;
    farm_cl_open(&cl, c.cl_device);
    const size_t N = (size_t)n, bytes = N * N * sizeof(float);
    float *host = farm_alloc(bytes);
    farm_fill_uniform(host, N * N, (uint64_t)c.seed, -1.0f, 1.0f);
    job jb = {&cl, NULL, NULL, NULL, N, N, N, calls};
    jb.a = farm_cl_buffer(&cl, CL_MEM_READ_ONLY | CL_MEM_COPY_HOST_PTR, bytes, host);
    jb.b = farm_cl_buffer(&cl, CL_MEM_READ_ONLY | CL_MEM_COPY_HOST_PTR, bytes, host);
    jb.c = farm_cl_buffer(&cl, CL_MEM_READ_WRITE, bytes, NULL);
    farm_json j;
    farm_json_begin(&j, "info");
    farm_json_str(&j, "program", "clblast_gemm");
    farm_cl_info_fields(&j, &cl, NULL);
    farm_json_int(&j, "n", n);
    farm_json_end(&j);
    farm_stats st;
    int rc = farm_bench_run(&c, iter, &jb, 1, &st);
    if (rc != FARM_EXIT_OK)
        farm_die(rc, "iteration failed");
    const double flop = 2.0 * (double)N * (double)N * (double)N;
    farm_json_begin(&j, "result");
    farm_json_stats(&j, &st);
    /* Wall time per call: CLBlast may run helper kernels, its event covers only the last one. */
    farm_json_num(&j, "gflops", flop / (st.median_ms * 1e6));
    farm_json_num(&j, "gflops_calls", (double)calls * flop / (st.median_ms * 1e6));
    farm_json_end(&j);
    clReleaseMemObject(jb.a);
    clReleaseMemObject(jb.b);
    clReleaseMemObject(jb.c);
    farm_cl_close(&cl);
    free(host);
    return FARM_EXIT_OK;
}
