/* A minimal OpenCL busy loop for the telemetry tests: enqueues a compute-heavy kernel back to
 * back for --seconds (default 3) on the first OpenCL device. Exit 3 without an OpenCL device. */
#define _POSIX_C_SOURCE 199309L
#define CL_TARGET_OPENCL_VERSION 120
#include <CL/cl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static const char *SRC =
    "__kernel void spin(__global float *out, int n) {\n"
    "  float x = (float)get_global_id(0);\n"
    "  for (int k = 0; k < n; k++) x = x * 0.9999f + 0.25f;\n"
    "  out[get_global_id(0)] = x;\n"
    "}\n";

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

int main(int argc, char **argv) {
    double seconds = 3.0;
    for (int i = 1; i < argc; i++) {
        if (strncmp(argv[i], "--seconds=", 10) == 0) {
            seconds = atof(argv[i] + 10);
        } else {
            fprintf(stderr, "cl_spin: unknown argument %s\n", argv[i]);
            return 2;
        }
    }
    cl_platform_id platform;
    cl_device_id device;
    cl_uint n = 0;
    if (clGetPlatformIDs(1, &platform, &n) != CL_SUCCESS || n == 0) return 3;
    if (clGetDeviceIDs(platform, CL_DEVICE_TYPE_ALL, 1, &device, &n) != CL_SUCCESS || n == 0) return 3;
    cl_int err;
    cl_context ctx = clCreateContext(NULL, 1, &device, NULL, NULL, &err);
    cl_command_queue q = clCreateCommandQueue(ctx, device, 0, &err);
    cl_program prog = clCreateProgramWithSource(ctx, 1, &SRC, NULL, &err);
    if (clBuildProgram(prog, 1, &device, NULL, NULL, NULL) != CL_SUCCESS) return 5;
    cl_kernel k = clCreateKernel(prog, "spin", &err);
    size_t global = 1024;
    cl_mem out = clCreateBuffer(ctx, CL_MEM_WRITE_ONLY, global * sizeof(float), NULL, &err);
    int iters = 20000;
    clSetKernelArg(k, 0, sizeof(out), &out);
    clSetKernelArg(k, 1, sizeof(iters), &iters);
    double end = now_s() + seconds;
    while (now_s() < end) {
        clEnqueueNDRangeKernel(q, k, 1, NULL, &global, NULL, 0, NULL, NULL);
        clFinish(q);
    }
    clReleaseMemObject(out);
    clReleaseKernel(k);
    clReleaseProgram(prog);
    clReleaseCommandQueue(q);
    clReleaseContext(ctx);
    return 0;
}
