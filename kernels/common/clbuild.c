/* farm common runtime: OpenCL program build with an on-disk program-binary cache (see farm.h).
 * Key: FNV-1a 64 of platform, device, device version, driver version, build options and source. */
#define _POSIX_C_SOURCE 200809L
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "farm.h"

const char *farm_cl_cache_dir(const char *opt)
{
    if (opt && *opt)
        return opt;
    const char *env = getenv("FARM_CL_CACHE");
    if (env && *env)
        return env;
    return "./.clcache";
}

static void mkdirs(const char *dir)
{
    char path[1024];
    snprintf(path, sizeof path, "%s", dir);
    for (char *p = path + 1; *p; p++)
        if (*p == '/') {
            *p = 0;
            mkdir(path, 0755);
            *p = '/';
        }
    mkdir(path, 0755);
}

static unsigned char *read_file(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    unsigned char *buf = NULL;
    if (fseek(f, 0, SEEK_END) == 0) {
        long n = ftell(f);
        if (n > 0 && fseek(f, 0, SEEK_SET) == 0) {
            buf = malloc((size_t)n);
            if (buf && fread(buf, 1, (size_t)n, f) != (size_t)n) {
                free(buf);
                buf = NULL;
            }
            *len = (size_t)n;
        }
    }
    fclose(f);
    return buf;
}

static void store_binary(const farm_cl *cl, cl_program prog, const char *path)
{
    size_t size = 0;
    if (clGetProgramInfo(prog, CL_PROGRAM_BINARY_SIZES, sizeof size, &size, NULL) != CL_SUCCESS || !size)
        return;
    unsigned char *bin = malloc(size);
    if (!bin)
        return;
    unsigned char *bins[1] = {bin};
    if (clGetProgramInfo(prog, CL_PROGRAM_BINARIES, sizeof bins, bins, NULL) == CL_SUCCESS) {
        char tmp[1100];
        snprintf(tmp, sizeof tmp, "%s.%ld.tmp", path, (long)getpid());
        FILE *f = fopen(tmp, "wb");
        if (f) {
            int ok = fwrite(bin, 1, size, f) == size;
            ok = (fclose(f) == 0) && ok;
            /* rename is atomic: concurrent runs never read half a binary */
            if (!ok || rename(tmp, path) != 0)
                unlink(tmp);
        }
    }
    (void)cl;
    free(bin);
}

static void die_build_log(const farm_cl *cl, cl_program prog, const char *name, cl_int err)
{
    char log[2048] = "";
    clGetProgramBuildInfo(prog, cl->device, CL_PROGRAM_BUILD_LOG, sizeof log - 1, log, NULL);
    farm_die(FARM_EXIT_ERROR, "OpenCL build of %s failed: %s (%d): %.600s", name, farm_cl_error_name(err),
             (int)err, log);
}

void farm_cl_build(farm_cl *cl, const char *name, const char *source, const char *options, const char *cache_dir,
                   farm_cl_program *out)
{
    memset(out, 0, sizeof *out);
    if (!options)
        options = "";
    uint64_t t0 = farm_now_ns();
    uint64_t h = FARM_HASH_INIT;
    const char *parts[] = {cl->platform_name, cl->device_name, cl->device_version, cl->driver_version, options,
                           source};
    for (size_t i = 0; i < sizeof parts / sizeof parts[0]; i++)
        h = farm_hash64(h, parts[i], strlen(parts[i]) + 1);
    if (cache_dir) {
        mkdirs(cache_dir);
        snprintf(out->cache_path, sizeof out->cache_path, "%s/%s-%016llx.bin", cache_dir, name,
                 (unsigned long long)h);
    }
    cl_int err;
    if (out->cache_path[0]) {
        size_t len = 0;
        unsigned char *bin = read_file(out->cache_path, &len);
        if (bin) {
            const unsigned char *bins[1] = {bin};
            cl_int bstatus;
            cl_program p = clCreateProgramWithBinary(cl->context, 1, &cl->device, &len, bins, &bstatus, &err);
            if (err == CL_SUCCESS && bstatus == CL_SUCCESS &&
                clBuildProgram(p, 1, &cl->device, options, NULL, NULL) == CL_SUCCESS) {
                out->program = p;
                out->cache_hit = 1;
            } else if (p) {
                clReleaseProgram(p); /* stale or foreign binary: rebuild from source below */
            }
            free(bin);
        }
    }
    if (!out->program) {
        cl_program p = clCreateProgramWithSource(cl->context, 1, &source, NULL, &err);
        farm_cl_check(err, "clCreateProgramWithSource");
        err = clBuildProgram(p, 1, &cl->device, options, NULL, NULL);
        if (err != CL_SUCCESS)
            die_build_log(cl, p, name, err);
        out->program = p;
        if (out->cache_path[0])
            store_binary(cl, p, out->cache_path);
    }
    out->build_ms = (double)(farm_now_ns() - t0) / 1e6;
}

char *farm_cl_concat(const char *const *parts, int n)
{
    size_t len = 1;
    for (int i = 0; i < n; i++)
        len += strlen(parts[i]) + 1;
    char *out = farm_alloc(len), *p = out;
    for (int i = 0; i < n; i++) {
        const size_t l = strlen(parts[i]);
        memcpy(p, parts[i], l);
        p += l;
        *p++ = '\n';
    }
    *p = 0;
    return out;
}

void farm_cl_program_release(farm_cl_program *p)
{
    if (p->program)
        clReleaseProgram(p->program);
    p->program = NULL;
}
