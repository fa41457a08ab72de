/* libOpenCL-pixel.so of a virtual Pixel: the phone's only OpenCL library, as Pixel 6 and later
 * (Tensor) ship it. It exports no OpenCL function: a program opens it with dlopen, calls
 * enableOpenCL() once and gets every entry point from loadOpenCLPointer(name), as TFLite's GPU
 * delegate (opencl_wrapper.cc, use_wrapper), MNN, TNN and Arm Compute Library do on Pixels
 * ("dlsym doesn't work on Pixel"). Before enableOpenCL() it gives no pointer, so a program that
 * skips the call fails here as it may on the device.
 *
 * Behind it: the host's OpenCL ICD loader (ocl-icd, then PoCL), copied to VPHONE_OPENCL_IMPL in
 * the phone's /vendor (vphone/src/vphone/layout.py), where no program's candidate list looks. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stddef.h>

#ifndef VPHONE_OPENCL_IMPL
#define VPHONE_OPENCL_IMPL "/vendor/lib64/vphone/libOpenCL-icd.so"
#endif

#define EXPORT __attribute__((visibility("default")))

static void *g_impl;
static int g_enabled;

EXPORT void enableOpenCL(void)
{
    if (!g_impl)
        g_impl = dlopen(VPHONE_OPENCL_IMPL, RTLD_NOW | RTLD_LOCAL);
    g_enabled = g_impl != NULL;
}

EXPORT void *loadOpenCLPointer(const char *name)
{
    if (!g_enabled || !name)
        return NULL;
    return dlsym(g_impl, name);
}
