/* A tiny OpenCL busy loop for the virtual-phone tests: runs a compute-heavy kernel repeatedly
 * for --seconds (default 3) on the first OpenCL device. Exit 3 when there is no OpenCL platform. */
#define _POSIX_C_SOURCE 199309L
#define CL_TARGET_OPENCL_VERSION 120
#include <CL/cl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static const char *SRC =
    "__kernel void spin(__global float *out, int n) {\n"
    "  int i = get_global_id(0); float x = (float)i;\n"
    "  for (int k = 0; k < n; k++) { x = x * 0.999f + 0.5f; }\n"
    "  out[i] = x;\n"
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
            fprintf(stderr, "usage: cl_busy [--seconds=S]\n");
            return 2;
        }
    }
    cl_platform_id platform;
    cl_uint nplat = 0;
    if (clGetPlatformIDs(1, &platform, &nplat) != CL_SUCCESS || nplat == 0) {
        fprintf(stderr, "no OpenCL platform\n");
        return 3;
    }
    cl_device_id dev;
    if (clGetDeviceIDs(platform, CL_DEVICE_TYPE_ALL, 1, &dev, NULL) != CL_SUCCESS) {
        fprintf(stderr, "no OpenCL device\n");
        return 3;
    }
    cl_int err;
    cl_context ctx = clCreateContext(NULL, 1, &dev, NULL, NULL, &err);
    cl_command_queue q = clCreateCommandQueue(ctx, dev, 0, &err);
    cl_program prog = clCreateProgramWithSource(ctx, 1, &SRC, NULL, &err);
    if (clBuildProgram(prog, 1, &dev, "", NULL, NULL) != CL_SUCCESS) {
        fprintf(stderr, "build failed\n");
        return 5;
    }
    cl_kernel k = clCreateKernel(prog, "spin", &err);
    size_t global = 4096;
    cl_mem out = clCreateBuffer(ctx, CL_MEM_WRITE_ONLY, global * sizeof(float), NULL, &err);
    int n = 20000;
    clSetKernelArg(k, 0, sizeof(cl_mem), &out);
    clSetKernelArg(k, 1, sizeof(int), &n);
    double end = now_s() + seconds;
    long launches = 0;
    printf("{\"event\":\"start\"}\n");
    fflush(stdout);
    while (now_s() < end) {
        clEnqueueNDRangeKernel(q, k, 1, NULL, &global, NULL, 0, NULL, NULL);
        clFinish(q);
        launches++;
    }
    printf("{\"event\":\"done\",\"launches\":%ld}\n", launches);
    clReleaseMemObject(out);
    clReleaseKernel(k);
    clReleaseProgram(prog);
    clReleaseCommandQueue(q);
    clReleaseContext(ctx);
    return 0;
}
