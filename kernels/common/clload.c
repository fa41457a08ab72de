/* OpenCL loaded at run time (see farm.h, farm_cl_load).
 *
 * Why: a program linked with -lOpenCL carries DT_NEEDED libOpenCL.so, and Android's linker kills
 * it before main on every phone without that exact file (one that ships only a wrapper such as
 * /vendor/lib64/libOpenCL-pixel.so), even for --backend=cpu. So no program links OpenCL:
 * the OpenCL functions the programs call are defined here, each forwarding to a pointer that
 * farm_cl_load fills from the first library of a candidate list that loads, the way mobile
 * OpenCL runtimes do (TFLite's opencl_wrapper.cc, MNN's OpenCLWrapper.cpp, Arm Compute Library's
 * CLSymbols). A Pixel-style library exports only enableOpenCL() and loadOpenCLPointer(name): the
 * first is called once, the second gives each entry point.
 *
 * Built with -DFARM_CL_LINKED (the host-only CLBlast reference, which links libOpenCL itself),
 * this file defines no OpenCL function and farm_cl_load only reports "linked". */
#define _POSIX_C_SOURCE 200809L
#include <dlfcn.h>
#include <stdlib.h>
#include <string.h>

#include "farm.h"

#ifdef FARM_CL_LINKED

int farm_cl_load(char *why, size_t cap)
{
    (void)why;
    (void)cap;
    return 0;
}

const char *farm_cl_library(void)
{
    return "linked";
}

#else

#if defined(__LP64__) || defined(_LP64)
#define LIBDIR "lib64"
#else
#define LIBDIR "lib"
#endif

/* Tried in order after $FARM_OPENCL_LIBRARY. Bare names go through the linker's search path (the
 * vendor and system library directories on Android); the full paths cover builds whose search
 * path leaves them out. libOpenCL.so.1 is ocl-icd's name on desktop Linux (and virtual phones). */
static const char *const CANDIDATES[] = {
    "libOpenCL.so",
    "/vendor/" LIBDIR "/libOpenCL.so",
    "/system/vendor/" LIBDIR "/libOpenCL.so",
    "/system/" LIBDIR "/libOpenCL.so",
    "libOpenCL-pixel.so", /* Pixel 6+ (Tensor): enableOpenCL + loadOpenCLPointer */
    "/vendor/" LIBDIR "/libOpenCL-pixel.so",
    "/system/vendor/" LIBDIR "/libOpenCL-pixel.so",
    "libOpenCL-car.so", /* Android Automotive builds of the same wrapper */
    "/vendor/" LIBDIR "/libOpenCL-car.so",
    "libGLES_mali.so", /* Mali drivers that carry OpenCL in the GLES library */
    "/vendor/" LIBDIR "/egl/libGLES_mali.so",
    "/system/vendor/" LIBDIR "/egl/libGLES_mali.so",
    "/system/" LIBDIR "/egl/libGLES_mali.so",
    "libmali.so",
    "/vendor/" LIBDIR "/libmali.so",
    "/system/vendor/" LIBDIR "/libmali.so",
#ifndef __ANDROID__
    "libOpenCL.so.1",
#endif
};

/* Every OpenCL function the programs call: X(return type, name, (parameters), (arguments)). */
#define FARM_CL_FUNCTIONS(X)                                                                           \
    X(cl_int, clGetPlatformIDs, (cl_uint a, cl_platform_id *b, cl_uint *c), (a, b, c))                  \
    X(cl_int, clGetPlatformInfo, (cl_platform_id a, cl_platform_info b, size_t c, void *d, size_t *e),  \
      (a, b, c, d, e))                                                                                  \
    X(cl_int, clGetDeviceIDs, (cl_platform_id a, cl_device_type b, cl_uint c, cl_device_id *d, cl_uint *e), \
      (a, b, c, d, e))                                                                                  \
    X(cl_int, clGetDeviceInfo, (cl_device_id a, cl_device_info b, size_t c, void *d, size_t *e),        \
      (a, b, c, d, e))                                                                                  \
    X(cl_context, clCreateContext,                                                                      \
      (const cl_context_properties *a, cl_uint b, const cl_device_id *c,                                \
       void(CL_CALLBACK *d)(const char *, const void *, size_t, void *), void *e, cl_int *f),           \
      (a, b, c, d, e, f))                                                                               \
    X(cl_int, clReleaseContext, (cl_context a), (a))                                                    \
    X(cl_command_queue, clCreateCommandQueue,                                                           \
      (cl_context a, cl_device_id b, cl_command_queue_properties c, cl_int *d), (a, b, c, d))           \
    X(cl_int, clReleaseCommandQueue, (cl_command_queue a), (a))                                         \
    X(cl_mem, clCreateBuffer, (cl_context a, cl_mem_flags b, size_t c, void *d, cl_int *e), (a, b, c, d, e)) \
    X(cl_int, clReleaseMemObject, (cl_mem a), (a))                                                      \
    X(cl_program, clCreateProgramWithSource,                                                            \
      (cl_context a, cl_uint b, const char **c, const size_t *d, cl_int *e), (a, b, c, d, e))           \
    X(cl_program, clCreateProgramWithBinary,                                                            \
      (cl_context a, cl_uint b, const cl_device_id *c, const size_t *d, const unsigned char **e,        \
       cl_int *f, cl_int *g),                                                                           \
      (a, b, c, d, e, f, g))                                                                            \
    X(cl_int, clBuildProgram,                                                                           \
      (cl_program a, cl_uint b, const cl_device_id *c, const char *d,                                   \
       void(CL_CALLBACK *e)(cl_program, void *), void *f),                                              \
      (a, b, c, d, e, f))                                                                               \
    X(cl_int, clGetProgramInfo, (cl_program a, cl_program_info b, size_t c, void *d, size_t *e),        \
      (a, b, c, d, e))                                                                                  \
    X(cl_int, clGetProgramBuildInfo,                                                                    \
      (cl_program a, cl_device_id b, cl_program_build_info c, size_t d, void *e, size_t *f),            \
      (a, b, c, d, e, f))                                                                               \
    X(cl_int, clReleaseProgram, (cl_program a), (a))                                                    \
    X(cl_kernel, clCreateKernel, (cl_program a, const char *b, cl_int *c), (a, b, c))                  \
    X(cl_int, clReleaseKernel, (cl_kernel a), (a))                                                      \
    X(cl_int, clSetKernelArg, (cl_kernel a, cl_uint b, size_t c, const void *d), (a, b, c, d))          \
    X(cl_int, clGetKernelWorkGroupInfo,                                                                 \
      (cl_kernel a, cl_device_id b, cl_kernel_work_group_info c, size_t d, void *e, size_t *f),         \
      (a, b, c, d, e, f))                                                                               \
    X(cl_int, clEnqueueNDRangeKernel,                                                                   \
      (cl_command_queue a, cl_kernel b, cl_uint c, const size_t *d, const size_t *e, const size_t *f,   \
       cl_uint g, const cl_event *h, cl_event *i),                                                      \
      (a, b, c, d, e, f, g, h, i))                                                                      \
    X(cl_int, clEnqueueReadBuffer,                                                                      \
      (cl_command_queue a, cl_mem b, cl_bool c, size_t d, size_t e, void *f, cl_uint g,                 \
       const cl_event *h, cl_event *i),                                                                 \
      (a, b, c, d, e, f, g, h, i))                                                                      \
    X(cl_int, clEnqueueWriteBuffer,                                                                     \
      (cl_command_queue a, cl_mem b, cl_bool c, size_t d, size_t e, const void *f, cl_uint g,           \
       const cl_event *h, cl_event *i),                                                                 \
      (a, b, c, d, e, f, g, h, i))                                                                      \
    X(cl_int, clEnqueueReadBufferRect,                                                                  \
      (cl_command_queue a, cl_mem b, cl_bool c, const size_t *d, const size_t *e, const size_t *f,      \
       size_t g, size_t h, size_t i, size_t j, void *k, cl_uint l, const cl_event *m, cl_event *n),     \
      (a, b, c, d, e, f, g, h, i, j, k, l, m, n))                                                       \
    X(cl_int, clEnqueueWriteBufferRect,                                                                 \
      (cl_command_queue a, cl_mem b, cl_bool c, const size_t *d, const size_t *e, const size_t *f,      \
       size_t g, size_t h, size_t i, size_t j, const void *k, cl_uint l, const cl_event *m, cl_event *n), \
      (a, b, c, d, e, f, g, h, i, j, k, l, m, n))                                                       \
    X(cl_int, clEnqueueCopyBuffer,                                                                      \
      (cl_command_queue a, cl_mem b, cl_mem c, size_t d, size_t e, size_t f, cl_uint g, const cl_event *h, \
       cl_event *i),                                                                                    \
      (a, b, c, d, e, f, g, h, i))                                                                      \
    X(cl_int, clEnqueueFillBuffer,                                                                      \
      (cl_command_queue a, cl_mem b, const void *c, size_t d, size_t e, size_t f, cl_uint g,            \
       const cl_event *h, cl_event *i),                                                                 \
      (a, b, c, d, e, f, g, h, i))                                                                      \
    X(void *, clEnqueueMapBuffer,                                                                       \
      (cl_command_queue a, cl_mem b, cl_bool c, cl_map_flags d, size_t e, size_t f, cl_uint g,          \
       const cl_event *h, cl_event *i, cl_int *j),                                                      \
      (a, b, c, d, e, f, g, h, i, j))                                                                   \
    X(cl_int, clEnqueueUnmapMemObject,                                                                  \
      (cl_command_queue a, cl_mem b, void *c, cl_uint d, const cl_event *e, cl_event *f),               \
      (a, b, c, d, e, f))                                                                               \
    X(cl_int, clFlush, (cl_command_queue a), (a))                                                       \
    X(cl_int, clFinish, (cl_command_queue a), (a))                                                      \
    X(cl_int, clWaitForEvents, (cl_uint a, const cl_event *b), (a, b))                                 \
    X(cl_int, clGetEventProfilingInfo, (cl_event a, cl_profiling_info b, size_t c, void *d, size_t *e), \
      (a, b, c, d, e))                                                                                  \
    X(cl_int, clReleaseEvent, (cl_event a), (a))

#define FARM_CL_POINTER(ret, name, params, args) static ret(CL_API_CALL *p_##name) params;
FARM_CL_FUNCTIONS(FARM_CL_POINTER)

#define FARM_CL_FORWARD(ret, name, params, args)                                                       \
    CL_API_ENTRY ret CL_API_CALL name params { return p_##name args; }
FARM_CL_FUNCTIONS(FARM_CL_FORWARD)

typedef void (*enable_fn)(void);
typedef void *(*pointer_fn)(const char *);

static const char *g_library;

/* Fills every pointer from `handle` (dlsym, else the wrapper's loader); the first missing name. */
static const char *resolve(void *handle, pointer_fn loader)
{
#define FARM_CL_RESOLVE(ret, name, params, args)                                                       \
    *(void **)&p_##name = dlsym(handle, #name);                                                        \
    if (!p_##name && loader)                                                                           \
        *(void **)&p_##name = loader(#name);                                                           \
    if (!p_##name)                                                                                     \
        return #name;
    FARM_CL_FUNCTIONS(FARM_CL_RESOLVE)
    return NULL;
}

/* One candidate: 1 loaded, 0 not here or unusable (the reason appended to `why`). */
static int try_library(const char *name, char *why, size_t cap)
{
    void *handle = dlopen(name, RTLD_NOW | RTLD_LOCAL);
    size_t used = strlen(why);
    if (!handle)
        return 0; /* absent is the common case: not worth a line */
    pointer_fn loader = NULL;
    enable_fn enable = NULL;
    *(void **)&enable = dlsym(handle, "enableOpenCL");
    if (enable) {
        enable();
        *(void **)&loader = dlsym(handle, "loadOpenCLPointer");
    }
    const char *missing = resolve(handle, loader);
    if (!missing) {
        g_library = name;
        return 1;
    }
    snprintf(why + used, cap - used, "%s%s lacks %s", used ? "; " : "", name, missing);
    dlclose(handle);
    return 0;
}

int farm_cl_load(char *why, size_t cap)
{
    if (g_library)
        return 0;
    why[0] = 0;
    const char *forced = getenv("FARM_OPENCL_LIBRARY");
    if (forced && *forced) {
        if (try_library(forced, why, cap))
            return 0;
        if (!why[0])
            snprintf(why, cap, "FARM_OPENCL_LIBRARY=%s does not load: %s", forced, dlerror());
        return -1;
    }
    for (size_t i = 0; i < sizeof CANDIDATES / sizeof *CANDIDATES; i++)
        if (try_library(CANDIDATES[i], why, cap))
            return 0;
    if (!why[0])
        snprintf(why, cap, "none of libOpenCL.so, libOpenCL-pixel.so, libOpenCL-car.so, libGLES_mali.so, "
                           "libmali.so (bare and under /vendor, /system/vendor, /system " LIBDIR ") loads");
    return -1;
}

const char *farm_cl_library(void)
{
    return g_library;
}

#endif
