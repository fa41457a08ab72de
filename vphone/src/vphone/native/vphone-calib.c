/* vphone-calib: how fast one host core multiplies matrices on the two paths a virtual phone's
 * work takes, so that the simulator can give its CPU cores and its GPU budgets in the ratios of
 * the real SoC (vphone/src/vphone/socspeed.py).
 *
 *   c     a single-threaded i-k-j loop (the inner loop streams rows of B and C, which the
 *         compiler vectorises): what a plain C program on the phone's CPU does
 *   pocl  a register-blocked GEMM over packed panels through OpenCL on the host's CPU device
 *         (PoCL), one worker thread: what an OpenCL program on the phone's "GPU" does
 *
 * Prints one JSON line {"c_gflops": X, "pocl_gflops": Y} (pocl_gflops 0 with "pocl_error" when
 * there is no OpenCL CPU device). Run it with POCL_MAX_PTHREAD_COUNT=1 and on one host CPU
 * (taskset): the numbers are per host core. Times are CPU time (the thread's for the C loop, the
 * process's, i.e. PoCL's worker, for the kernel), as a CFS quota counts it: a busy host that
 * takes the CPU away between slices does not make a core look slower. Each path runs for
 * MIN_SECONDS of CPU time and reports its best repetition.
 */
#define _POSIX_C_SOURCE 200809L
#define CL_TARGET_OPENCL_VERSION 120
#include <CL/cl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define N 256         /* square matrices: 33.5 MFLOP per product */
#define MIN_SECONDS 0.3
#define TM 14         /* rows of C per work-item */
#define VW 16         /* columns of C per vector */
#define VN 2          /* vectors per row */

static double cpu_s(clockid_t clock)
{
    struct timespec ts;
    clock_gettime(clock, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* The size as the phone's programs have it: known only at run time. A compile-time size would
 * let -O2's cheap vectoriser specialise the loop, 3-4x faster than the same loop in a program
 * that reads its sizes (kernels/gemm's cpu path measured 5.7 GFLOP/s where this loop with a
 * constant N measured 21). */
static volatile size_t runtime_n = N;

static void c_gemm(const float *a, const float *b, float *c)
{
    const size_t n = runtime_n;
    for (size_t i = 0; i < n; i++) {
        float *ci = c + i * n;
        memset(ci, 0, n * sizeof *ci);
        for (size_t k = 0; k < n; k++) {
            const float av = a[i * n + k];
            const float *bk = b + k * n;
            for (size_t j = 0; j < n; j++)
                ci[j] += av * bk[j];
        }
    }
}

static double c_gflops(const float *a, const float *b, float *c)
{
    double best = 1e30, start = cpu_s(CLOCK_THREAD_CPUTIME_ID);
    do {
        double t0 = cpu_s(CLOCK_THREAD_CPUTIME_ID);
        c_gemm(a, b, c);
        double dt = cpu_s(CLOCK_THREAD_CPUTIME_ID) - t0;
        if (dt < best)
            best = dt;
    } while (cpu_s(CLOCK_THREAD_CPUTIME_ID) - start < MIN_SECONDS);
    return 2.0 * N * N * N / best / 1e9;
}

/* The packed panels are laid out by the host here (the phone's programs pack on the device; the
 * product itself is what is timed). */
static const char *kernel_source =
    "#define PW (VW * VN)\n"
    "typedef float16 vec_t;\n"
    "__kernel void gemm(const int K, __global const float *Ap, __global const float *Bp,\n"
    "                   __global float *C, const int Nc)\n"
    "{\n"
    "    const int nb = get_global_id(0), mb = get_global_id(1);\n"
    "    vec_t acc[TM][VN];\n"
    "    for (int r = 0; r < TM; r++)\n"
    "        for (int v = 0; v < VN; v++)\n"
    "            acc[r][v] = (vec_t)(0.0f);\n"
    "    __global const float *a = Ap + mb * K * TM;\n"
    "    __global const float *b = Bp + nb * K * PW;\n"
    "    for (int k = 0; k < K; k++) {\n"
    "        vec_t bv[VN];\n"
    "        for (int v = 0; v < VN; v++)\n"
    "            bv[v] = vload16(0, b + k * PW + v * VW);\n"
    "        for (int r = 0; r < TM; r++) {\n"
    "            const vec_t ar = (vec_t)(a[k * TM + r]);\n"
    "            for (int v = 0; v < VN; v++)\n"
    "                acc[r][v] = mad(ar, bv[v], acc[r][v]);\n"
    "        }\n"
    "    }\n"
    "    for (int r = 0; r < TM; r++)\n"
    "        for (int v = 0; v < VN; v++)\n"
    "            vstore16(acc[r][v], 0, C + (mb * TM + r) * Nc + nb * PW + v * VW);\n"
    "}\n";

static int fail(const char *what, cl_int err)
{
    printf("{\"c_gflops\": %.6g, \"pocl_gflops\": 0, \"pocl_error\": \"%s (%d)\"}\n", 0.0, what, (int)err);
    return 0;
}

static double pocl_gflops(const char **error, cl_int *code)
{
    /* M padded to a multiple of TM; N (columns) is a multiple of VW * VN already. */
    const size_t mp = (N + TM - 1) / TM * TM;
    cl_platform_id platforms[8];
    cl_uint np = 0;
    cl_device_id dev = NULL;
    if ((*code = clGetPlatformIDs(8, platforms, &np)) != CL_SUCCESS || np == 0) {
        *error = "no OpenCL platform";
        return 0;
    }
    for (cl_uint i = 0; i < np && dev == NULL; i++)
        if (clGetDeviceIDs(platforms[i], CL_DEVICE_TYPE_CPU, 1, &dev, NULL) != CL_SUCCESS)
            dev = NULL;
    if (dev == NULL) {
        *error = "no OpenCL CPU device";
        return 0;
    }
    cl_context ctx = clCreateContext(NULL, 1, &dev, NULL, NULL, code);
    if (*code != CL_SUCCESS) {
        *error = "clCreateContext";
        return 0;
    }
    cl_command_queue q = clCreateCommandQueue(ctx, dev, 0, code);
    cl_program prog = clCreateProgramWithSource(ctx, 1, &kernel_source, NULL, code);
    char opts[64];
    snprintf(opts, sizeof opts, "-DTM=%d -DVW=%d -DVN=%d", TM, VW, VN);
    if ((*code = clBuildProgram(prog, 1, &dev, opts, NULL, NULL)) != CL_SUCCESS) {
        *error = "clBuildProgram";
        return 0;
    }
    cl_kernel kern = clCreateKernel(prog, "gemm", code);
    float *ap = calloc(mp * N, sizeof(float)), *bp = calloc((size_t)N * N, sizeof(float));
    if (ap == NULL || bp == NULL) {
        *error = "out of memory";
        return 0;
    }
    for (size_t i = 0; i < mp * N; i++)
        ap[i] = (float)(i % 7) * 0.25f;
    for (size_t i = 0; i < (size_t)N * N; i++)
        bp[i] = (float)(i % 5) * 0.5f;
    cl_mem da = clCreateBuffer(ctx, CL_MEM_READ_ONLY | CL_MEM_COPY_HOST_PTR, mp * N * sizeof(float), ap, code);
    cl_mem db = clCreateBuffer(ctx, CL_MEM_READ_ONLY | CL_MEM_COPY_HOST_PTR, (size_t)N * N * sizeof(float), bp, code);
    cl_mem dc = clCreateBuffer(ctx, CL_MEM_WRITE_ONLY, mp * N * sizeof(float), NULL, code);
    const cl_int k = N, nc = N;
    clSetKernelArg(kern, 0, sizeof k, &k);
    clSetKernelArg(kern, 1, sizeof da, &da);
    clSetKernelArg(kern, 2, sizeof db, &db);
    clSetKernelArg(kern, 3, sizeof dc, &dc);
    clSetKernelArg(kern, 4, sizeof nc, &nc);
    const size_t global[2] = {N / (VW * VN), mp / TM};
    double best = 1e30, start = cpu_s(CLOCK_PROCESS_CPUTIME_ID);
    int runs = 0;
    do {
        double t0 = cpu_s(CLOCK_PROCESS_CPUTIME_ID);
        *code = clEnqueueNDRangeKernel(q, kern, 2, NULL, global, NULL, 0, NULL, NULL);
        if (*code == CL_SUCCESS)
            *code = clFinish(q);
        if (*code != CL_SUCCESS) {
            *error = "kernel run";
            return 0;
        }
        double dt = cpu_s(CLOCK_PROCESS_CPUTIME_ID) - t0;
        if (runs++ > 0 && dt < best) /* the first run includes PoCL's lazy set-up */
            best = dt;
    } while (cpu_s(CLOCK_PROCESS_CPUTIME_ID) - start < MIN_SECONDS || runs < 3);
    clReleaseMemObject(da);
    clReleaseMemObject(db);
    clReleaseMemObject(dc);
    clReleaseKernel(kern);
    clReleaseProgram(prog);
    clReleaseCommandQueue(q);
    clReleaseContext(ctx);
    free(ap);
    free(bp);
    return 2.0 * N * N * N / best / 1e9;
}

int main(void)
{
    float *a = malloc((size_t)N * N * sizeof(float)), *b = malloc((size_t)N * N * sizeof(float));
    float *c = malloc((size_t)N * N * sizeof(float));
    if (a == NULL || b == NULL || c == NULL)
        return fail("out of memory", 0) + 1;
    for (size_t i = 0; i < (size_t)N * N; i++) {
        a[i] = (float)(i % 7) * 0.25f;
        b[i] = (float)(i % 5) * 0.5f;
    }
    const double cpu = c_gflops(a, b, c);
    const char *error = NULL;
    cl_int code = CL_SUCCESS;
    const double gpu = pocl_gflops(&error, &code);
    if (error != NULL)
        printf("{\"c_gflops\": %.6g, \"pocl_gflops\": 0, \"pocl_error\": \"%s (%d)\"}\n", cpu, error, (int)code);
    else
        printf("{\"c_gflops\": %.6g, \"pocl_gflops\": %.6g}\n", cpu, gpu);
    free(a);
    free(b);
    free(c);
    return 0;
}
