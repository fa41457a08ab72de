/* farm common runtime: OpenCL device selection, context, errors, buffers (see farm.h). */
#define _POSIX_C_SOURCE 200809L
#include <ctype.h>
#include <stdlib.h>
#include <string.h>

#include "farm.h"

#define MAX_PLATFORMS 16
#define MAX_DEVICES 64

const char *farm_cl_error_name(cl_int err)
{
    switch (err) {
#define E(x) case x: return #x
        E(CL_SUCCESS); E(CL_DEVICE_NOT_FOUND); E(CL_DEVICE_NOT_AVAILABLE); E(CL_COMPILER_NOT_AVAILABLE);
        E(CL_MEM_OBJECT_ALLOCATION_FAILURE); E(CL_OUT_OF_RESOURCES); E(CL_OUT_OF_HOST_MEMORY);
        E(CL_PROFILING_INFO_NOT_AVAILABLE); E(CL_BUILD_PROGRAM_FAILURE); E(CL_INVALID_VALUE);
        E(CL_INVALID_DEVICE); E(CL_INVALID_BINARY); E(CL_INVALID_BUILD_OPTIONS); E(CL_INVALID_PROGRAM);
        E(CL_INVALID_KERNEL_NAME); E(CL_INVALID_KERNEL_ARGS); E(CL_INVALID_ARG_INDEX); E(CL_INVALID_ARG_VALUE);
        E(CL_INVALID_ARG_SIZE); E(CL_INVALID_WORK_DIMENSION); E(CL_INVALID_WORK_GROUP_SIZE);
        E(CL_INVALID_WORK_ITEM_SIZE); E(CL_INVALID_GLOBAL_OFFSET); E(CL_INVALID_BUFFER_SIZE);
        E(CL_INVALID_MEM_OBJECT); E(CL_INVALID_COMMAND_QUEUE); E(CL_INVALID_CONTEXT); E(CL_INVALID_EVENT);
        E(CL_INVALID_OPERATION); E(CL_INVALID_PLATFORM); E(CL_MISALIGNED_SUB_BUFFER_OFFSET);
#undef E
    case -1001: return "CL_PLATFORM_NOT_FOUND_KHR";
    default: return "CL_UNKNOWN_ERROR";
    }
}

void farm_cl_check(cl_int err, const char *what)
{
    if (err != CL_SUCCESS)
        farm_die(FARM_EXIT_ERROR, "%s: %s (%d)", what, farm_cl_error_name(err), (int)err);
}

static const char *type_name(cl_device_type t)
{
    if (t & CL_DEVICE_TYPE_GPU) return "gpu";
    if (t & CL_DEVICE_TYPE_CPU) return "cpu";
    if (t & CL_DEVICE_TYPE_ACCELERATOR) return "accelerator";
    return "other";
}

typedef struct {
    cl_platform_id platform;
    cl_device_id device;
    unsigned pi, di;
} dev_ref;

static void no_library(void)
{
    char why[1024];
    if (farm_cl_load(why, sizeof why) != 0)
        farm_die(FARM_EXIT_NO_DEVICE,
                 "no OpenCL library: %s; set FARM_OPENCL_LIBRARY to the phone's library or use --backend=cpu", why);
}

static size_t enumerate(dev_ref *out, size_t cap, cl_int *status)
{
    no_library();
    cl_platform_id plats[MAX_PLATFORMS];
    cl_uint np = 0;
    *status = clGetPlatformIDs(MAX_PLATFORMS, plats, &np);
    if (*status != CL_SUCCESS)
        return 0;
    size_t n = 0;
    for (cl_uint p = 0; p < np && p < MAX_PLATFORMS; p++) {
        cl_device_id devs[MAX_DEVICES];
        cl_uint nd = 0;
        if (clGetDeviceIDs(plats[p], CL_DEVICE_TYPE_ALL, MAX_DEVICES, devs, &nd) != CL_SUCCESS)
            continue;
        for (cl_uint d = 0; d < nd && d < MAX_DEVICES && n < cap; d++)
            out[n++] = (dev_ref){plats[p], devs[d], p, d};
    }
    return n;
}

static void no_platform(cl_int status)
{
    const char *vendors = getenv("OCL_ICD_VENDORS");
    farm_die(FARM_EXIT_NO_DEVICE,
             "no OpenCL platform found (clGetPlatformIDs: %s; ICD vendors looked up in %s): install an "
             "OpenCL driver (e.g. pocl-opencl-icd) or use --backend=cpu",
             farm_cl_error_name(status), vendors ? vendors : "/etc/OpenCL/vendors");
}

/* Whether the device's extension string names `ext`. */
static int device_has(cl_device_id d, const char *ext)
{
    size_t len = 0;
    if (clGetDeviceInfo(d, CL_DEVICE_EXTENSIONS, 0, NULL, &len) != CL_SUCCESS || len == 0)
        return 0;
    char *text = farm_alloc(len + 1);
    text[len] = 0;
    clGetDeviceInfo(d, CL_DEVICE_EXTENSIONS, len, text, NULL);
    const int found = strstr(text, ext) != NULL;
    free(text);
    return found;
}

int farm_cl_list_devices(void)
{
    dev_ref devs[MAX_DEVICES];
    cl_int st;
    size_t n = enumerate(devs, MAX_DEVICES, &st);
    if (st != CL_SUCCESS || n == 0)
        no_platform(st);
    for (size_t i = 0; i < n; i++) {
        char pname[256] = "", dname[256] = "", idx[32];
        cl_device_type t = 0;
        clGetPlatformInfo(devs[i].platform, CL_PLATFORM_NAME, sizeof pname, pname, NULL);
        clGetDeviceInfo(devs[i].device, CL_DEVICE_NAME, sizeof dname, dname, NULL);
        clGetDeviceInfo(devs[i].device, CL_DEVICE_TYPE, sizeof t, &t, NULL);
        snprintf(idx, sizeof idx, "%u:%u", devs[i].pi, devs[i].di);
        farm_json j;
        farm_json_begin(&j, "device");
        farm_json_str(&j, "index", idx);
        farm_json_str(&j, "platform", pname);
        farm_json_str(&j, "name", dname);
        farm_json_str(&j, "type", type_name(t));
        farm_json_bool(&j, "fp16", device_has(devs[i].device, "cl_khr_fp16"));
        farm_json_str(&j, "library", farm_cl_library());
        farm_json_end(&j);
    }
    return FARM_EXIT_OK;
}

static int contains_ci(const char *hay, const char *needle)
{
    size_t n = strlen(needle);
    for (; *hay; hay++) {
        size_t k = 0;
        while (k < n && hay[k] && tolower((unsigned char)hay[k]) == tolower((unsigned char)needle[k]))
            k++;
        if (k == n)
            return 1;
    }
    return n == 0;
}

static int matches(const dev_ref *d, const char *sel)
{
    unsigned p, i;
    char tail;
    if (sscanf(sel, "%u:%u%c", &p, &i, &tail) == 2)
        return d->pi == p && d->di == i;
    cl_device_type t = 0;
    char name[256] = "", pname[256] = "";
    clGetDeviceInfo(d->device, CL_DEVICE_TYPE, sizeof t, &t, NULL);
    if (!strcmp(sel, "gpu") || !strcmp(sel, "cpu") || !strcmp(sel, "accelerator"))
        return !strcmp(type_name(t), sel);
    clGetDeviceInfo(d->device, CL_DEVICE_NAME, sizeof name, name, NULL);
    clGetPlatformInfo(d->platform, CL_PLATFORM_NAME, sizeof pname, pname, NULL);
    return contains_ci(name, sel) || contains_ci(pname, sel);
}

void farm_cl_open(farm_cl *cl, const char *selector)
{
    memset(cl, 0, sizeof *cl);
    dev_ref devs[MAX_DEVICES];
    cl_int st;
    size_t n = enumerate(devs, MAX_DEVICES, &st);
    if (st != CL_SUCCESS || n == 0)
        no_platform(st);
    const dev_ref *pick = NULL;
    if (selector) {
        for (size_t i = 0; i < n && !pick; i++)
            if (matches(&devs[i], selector))
                pick = &devs[i];
        if (!pick)
            farm_die(FARM_EXIT_NO_DEVICE,
                     "no OpenCL device matches --cl-device=%s (%zu device(s) present; see --list-devices)",
                     selector, n);
    } else {
        for (size_t i = 0; i < n && !pick; i++)
            if (matches(&devs[i], "gpu"))
                pick = &devs[i];
        if (!pick)
            pick = &devs[0];
    }
    cl->platform = pick->platform;
    cl->device = pick->device;
    clGetPlatformInfo(cl->platform, CL_PLATFORM_NAME, sizeof cl->platform_name, cl->platform_name, NULL);
    clGetDeviceInfo(cl->device, CL_DEVICE_NAME, sizeof cl->device_name, cl->device_name, NULL);
    clGetDeviceInfo(cl->device, CL_DEVICE_VERSION, sizeof cl->device_version, cl->device_version, NULL);
    clGetDeviceInfo(cl->device, CL_DRIVER_VERSION, sizeof cl->driver_version, cl->driver_version, NULL);
    clGetDeviceInfo(cl->device, CL_DEVICE_TYPE, sizeof cl->device_type, &cl->device_type, NULL);
    clGetDeviceInfo(cl->device, CL_DEVICE_MAX_WORK_GROUP_SIZE, sizeof cl->max_wg_size, &cl->max_wg_size, NULL);
    clGetDeviceInfo(cl->device, CL_DEVICE_MAX_COMPUTE_UNITS, sizeof cl->compute_units, &cl->compute_units, NULL);
    clGetDeviceInfo(cl->device, CL_DEVICE_LOCAL_MEM_SIZE, sizeof cl->local_mem_bytes, &cl->local_mem_bytes, NULL);
    cl->has_fp16 = device_has(cl->device, "cl_khr_fp16");
    cl_int err;
    cl_context_properties props[] = {CL_CONTEXT_PLATFORM, (cl_context_properties)cl->platform, 0};
    cl->context = clCreateContext(props, 1, &cl->device, NULL, NULL, &err);
    farm_cl_check(err, "clCreateContext");
    cl->queue = clCreateCommandQueue(cl->context, cl->device, CL_QUEUE_PROFILING_ENABLE, &err);
    farm_cl_check(err, "clCreateCommandQueue");
}

void farm_cl_close(farm_cl *cl)
{
    if (cl->queue) {
        clFinish(cl->queue);
        clReleaseCommandQueue(cl->queue);
    }
    if (cl->context)
        clReleaseContext(cl->context);
    cl->queue = NULL;
    cl->context = NULL;
}

cl_kernel farm_cl_kernel(const farm_cl_program *p, const char *name)
{
    cl_int err;
    cl_kernel k = clCreateKernel(p->program, name, &err);
    if (err != CL_SUCCESS)
        farm_die(FARM_EXIT_ERROR, "clCreateKernel(%s): %s (%d)", name, farm_cl_error_name(err), (int)err);
    return k;
}

cl_mem farm_cl_buffer(const farm_cl *cl, cl_mem_flags flags, size_t bytes, void *host)
{
    cl_int err;
    cl_mem m = clCreateBuffer(cl->context, flags, bytes ? bytes : 4, host, &err);
    if (err != CL_SUCCESS)
        farm_die(FARM_EXIT_ERROR, "clCreateBuffer(%zu bytes): %s (%d)", bytes, farm_cl_error_name(err), (int)err);
    return m;
}

void farm_cl_info_fields(farm_json *j, const farm_cl *cl, const farm_cl_program *p)
{
    farm_json_str(j, "platform", cl->platform_name);
    farm_json_str(j, "device", cl->device_name);
    farm_json_str(j, "device_type", type_name(cl->device_type));
    farm_json_str(j, "device_version", cl->device_version);
    farm_json_str(j, "driver_version", cl->driver_version);
    farm_json_str(j, "opencl_library", farm_cl_library());
    /* whether half arithmetic can run at all (--precision=fp16 falls back to half storage without) */
    farm_json_bool(j, "cl_khr_fp16", cl->has_fp16);
    if (p) {
        farm_json_num(j, "build_ms", p->build_ms);
        farm_json_bool(j, "cache_hit", p->cache_hit);
        farm_json_str(j, "cache_path", p->cache_path[0] ? p->cache_path : NULL);
    }
}
