/* gemm OpenCL path: padded device buffers (rectangular copies do the padding, so sizes that are
 * not multiples of the tile need no bounds checks in the kernel), one kernel launch per iteration. */
#include <stdlib.h>
#include <string.h>

#include "gemm.h"
#include "gemm_cl.h"
#include "gemm_packed_cl.h"
#include "gemm_tiled_cl.h"
#include "tiled_types_cl.h"

struct gemm_gpu {
    farm_cl *cl;
    gemm_problem p;
    gemm_gpu_opts o;
    farm_cl_program prog;
    cl_kernel kernel, pack_a, pack_b;
    cl_mem ap, bp; /* packed panels (kernel "packed") */
    int packed;
    cl_mem da, db, dc;
    size_t mp, np, kp, esize;
    size_t global[2], local[2];
    int use_local;
    int gvec4; /* local: built with TILED_GVEC4 */
    void *ha, *hb, *hc; /* host-side inputs/outputs in storage format */
    int copied;
    farm_evlist evs;
};

static size_t round_up(size_t x, size_t m) { return (x + m - 1) / m * m; }

static void *to_storage(const float *x, size_t n, int fp16)
{
    if (!fp16) {
        void *p = farm_alloc(n * 4);
        memcpy(p, x, n * 4);
        return p;
    }
    uint16_t *h = farm_alloc(n * 2);
    for (size_t i = 0; i < n; i++)
        h[i] = farm_f32_to_f16(x[i]);
    return h;
}

/* float4 global loads: fp32, asked for, and tiles that split into whole float4s per work-item (the
 * operands are padded to whole tiles, so rows stay 16-byte aligned). */
static int gemm_gvec4_fits(const farm_tiled_cfg *t, int fp16, int global_vec)
{
    const int nt = (int)farm_tiled_threads(t);
    return global_vec == 4 && !fp16 && t->tsk % 4 == 0 && t->tsn % 4 == 0 && (t->tsm * t->tsk / 4) % nt == 0 &&
           (t->tsk * t->tsn / 4) % nt == 0;
}

gemm_gpu *gemm_gpu_create(farm_cl *cl, const gemm_problem *p, const gemm_gpu_opts *o, const char *cache_dir)
{
    gemm_gpu *g = farm_alloc(sizeof *g);
    g->cl = cl;
    g->p = *p;
    g->o = *o;
    g->use_local = !strcmp(o->kernel, "local");
    g->packed = !strcmp(o->kernel, "packed");
    g->esize = p->fp16 ? 2 : 4;
    char opts[512];
    if (g->use_local) {
        const farm_tiled_cfg *t = &o->tiled;
        g->mp = round_up(p->m, (size_t)t->tsm);
        g->np = round_up(p->n, (size_t)t->tsn);
        g->kp = round_up(p->k, (size_t)t->tsk);
        farm_tiled_ranges(t, g->mp, g->np, g->global, g->local);
        char topts[256];
        farm_tiled_options(t, topts, sizeof topts);
        g->gvec4 = gemm_gvec4_fits(t, p->fp16, o->global_vec);
        snprintf(opts, sizeof opts, "%s%s%s %s", p->fp16 ? "-DFARM_FP16" : "", o->half_arith ? " -DFARM_HALF_ARITH" : "",
                 g->gvec4 ? " -DTILED_GVEC4" : "", topts);
    } else {
        size_t wm = o->wg_m > 0 ? (size_t)o->wg_m : 1, wn = o->wg_n > 0 ? (size_t)o->wg_n : 1;
        const size_t vn = g->packed ? (size_t)o->vecs : 1, cols = (size_t)o->vec * vn;
        g->mp = round_up(p->m, (size_t)o->tile_m * wm);
        g->np = round_up(p->n, cols * wn);
        g->kp = round_up(p->k, 4);
        g->global[0] = g->np / cols;
        g->global[1] = g->mp / (size_t)o->tile_m;
        g->local[0] = o->wg_n > 0 ? wn : 0;
        g->local[1] = o->wg_m > 0 ? wm : 0;
        snprintf(opts, sizeof opts, "-DFP16=%d -DTM=%ld -DVW=%ld -DVN=%zu", p->fp16, o->tile_m, o->vec, vn);
    }
    strncat(opts, " -cl-mad-enable", sizeof opts - strlen(opts) - 1);
    if (g->use_local) {
        const char *parts[] = {tiled_types_cl_source, gemm_tiled_cl_source};
        char *src = farm_cl_concat(parts, 2);
        farm_cl_build(cl, "gemm_tiled", src, opts, cache_dir, &g->prog);
        free(src);
    } else if (g->packed) {
        farm_cl_build(cl, "gemm_packed", gemm_packed_cl_source, opts, cache_dir, &g->prog);
    } else {
        farm_cl_build(cl, "gemm", gemm_cl_source, opts, cache_dir, &g->prog);
    }
    g->kernel = farm_cl_kernel(&g->prog, g->use_local ? "gemm_tiled" : g->packed ? "gemm_packed" : "gemm_regblock");

    g->da = farm_cl_buffer(cl, CL_MEM_READ_ONLY, g->mp * g->kp * g->esize, NULL);
    g->db = farm_cl_buffer(cl, CL_MEM_READ_ONLY, g->kp * g->np * g->esize, NULL);
    g->dc = farm_cl_buffer(cl, CL_MEM_WRITE_ONLY, g->mp * g->np * g->esize, NULL);
    /* Zero padding once; later rectangular writes touch only the real rows and columns. */
    const float zero = 0.0f;
    cl_mem bufs[2] = {g->da, g->db};
    size_t sizes[2] = {g->mp * g->kp * g->esize, g->kp * g->np * g->esize};
    for (int i = 0; i < 2; i++)
        farm_cl_check(clEnqueueFillBuffer(cl->queue, bufs[i], &zero, g->esize, 0, sizes[i], 0, NULL, NULL),
                      "clEnqueueFillBuffer");
    farm_cl_check(clFinish(cl->queue), "clFinish");

    g->ha = to_storage(p->a, p->m * p->k, p->fp16);
    g->hb = to_storage(p->b, p->k * p->n, p->fp16);
    g->hc = farm_alloc(p->m * p->n * g->esize);

    cl_int m = (cl_int)g->mp, n = (cl_int)g->np, k = (cl_int)g->kp, err = CL_SUCCESS;
    err |= clSetKernelArg(g->kernel, 0, sizeof m, &m);
    err |= clSetKernelArg(g->kernel, 1, sizeof n, &n);
    err |= clSetKernelArg(g->kernel, 2, sizeof k, &k);
    if (g->use_local) { /* M, N, K, A, lda, B, ldb, C, ldc: padded row-major buffers */
        err |= clSetKernelArg(g->kernel, 3, sizeof g->da, &g->da);
        err |= clSetKernelArg(g->kernel, 4, sizeof k, &k);
        err |= clSetKernelArg(g->kernel, 5, sizeof g->db, &g->db);
        err |= clSetKernelArg(g->kernel, 6, sizeof n, &n);
        err |= clSetKernelArg(g->kernel, 7, sizeof g->dc, &g->dc);
        err |= clSetKernelArg(g->kernel, 8, sizeof n, &n);
        farm_cl_check(err, "clSetKernelArg(gemm_tiled)");
        return g;
    }
    if (g->packed) {
        g->ap = farm_cl_buffer(cl, CL_MEM_READ_WRITE, g->mp * g->kp * 4, NULL);
        g->bp = farm_cl_buffer(cl, CL_MEM_READ_WRITE, g->kp * g->np * 4, NULL);
        g->pack_a = farm_cl_kernel(&g->prog, "pack_a");
        g->pack_b = farm_cl_kernel(&g->prog, "pack_b");
        err |= clSetKernelArg(g->pack_a, 0, sizeof k, &k);
        err |= clSetKernelArg(g->pack_a, 1, sizeof g->da, &g->da);
        err |= clSetKernelArg(g->pack_a, 2, sizeof g->ap, &g->ap);
        err |= clSetKernelArg(g->pack_b, 0, sizeof k, &k);
        err |= clSetKernelArg(g->pack_b, 1, sizeof n, &n);
        err |= clSetKernelArg(g->pack_b, 2, sizeof g->db, &g->db);
        err |= clSetKernelArg(g->pack_b, 3, sizeof g->bp, &g->bp);
        err |= clSetKernelArg(g->kernel, 3, sizeof g->ap, &g->ap);
        err |= clSetKernelArg(g->kernel, 4, sizeof g->bp, &g->bp);
    } else {
        err |= clSetKernelArg(g->kernel, 3, sizeof g->da, &g->da);
        err |= clSetKernelArg(g->kernel, 4, sizeof g->db, &g->db);
    }
    err |= clSetKernelArg(g->kernel, 5, sizeof g->dc, &g->dc);
    farm_cl_check(err, "clSetKernelArg(gemm)");
    return g;
}

const farm_cl_program *gemm_gpu_program(const gemm_gpu *g) { return &g->prog; }

void gemm_gpu_describe(const gemm_gpu *g, farm_json *j)
{
    farm_json_str(j, "kernel", g->use_local ? "local" : g->packed ? "packed" : "regblock");
    if (g->use_local) {
        const farm_tiled_cfg *t = &g->o.tiled;
        farm_json_int(j, "tsm", t->tsm);
        farm_json_int(j, "tsn", t->tsn);
        farm_json_int(j, "tsk", t->tsk);
        farm_json_int(j, "wptm", t->wptm);
        farm_json_int(j, "wptn", t->wptn);
        farm_json_int(j, "lvw", t->vw);
        farm_json_int(j, "global_vec", g->gvec4 ? 4 : 1);
    } else {
        farm_json_int(j, "tile_m", g->o.tile_m);
        farm_json_int(j, "vec", g->o.vec);
        farm_json_int(j, "vecs", g->packed ? g->o.vecs : 1);
    }
    farm_json_int(j, "wg_n", (long long)g->local[0]);
    farm_json_int(j, "wg_m", (long long)g->local[1]);
    farm_json_int(j, "padded_m", (long long)g->mp);
    farm_json_int(j, "padded_n", (long long)g->np);
    farm_json_int(j, "padded_k", (long long)g->kp);
    farm_json_bool(j, "transfers_each_iter", g->o.transfers_each);
}

static void write_inputs(gemm_gpu *g)
{
    const size_t origin[3] = {0, 0, 0};
    const size_t ra[3] = {g->p.k * g->esize, g->p.m, 1}, rb[3] = {g->p.n * g->esize, g->p.k, 1};
    farm_cl_check(clEnqueueWriteBufferRect(g->cl->queue, g->da, CL_FALSE, origin, origin, ra, g->kp * g->esize, 0,
                                           g->p.k * g->esize, 0, g->ha, 0, NULL, farm_ev_slot(&g->evs, FARM_H2D)),
                  "clEnqueueWriteBufferRect(A)");
    farm_cl_check(clEnqueueWriteBufferRect(g->cl->queue, g->db, CL_FALSE, origin, origin, rb, g->np * g->esize, 0,
                                           g->p.n * g->esize, 0, g->hb, 0, NULL, farm_ev_slot(&g->evs, FARM_H2D)),
                  "clEnqueueWriteBufferRect(B)");
}

static void read_output(gemm_gpu *g, float *c)
{
    const size_t origin[3] = {0, 0, 0};
    const size_t rc[3] = {g->p.n * g->esize, g->p.m, 1};
    farm_cl_check(clEnqueueReadBufferRect(g->cl->queue, g->dc, CL_TRUE, origin, origin, rc, g->np * g->esize, 0,
                                          g->p.n * g->esize, 0, g->hc, 0, NULL, farm_ev_slot(&g->evs, FARM_D2H)),
                  "clEnqueueReadBufferRect(C)");
    size_t cnt = g->p.m * g->p.n;
    if (g->p.fp16)
        for (size_t i = 0; i < cnt; i++)
            c[i] = farm_f16_to_f32(((uint16_t *)g->hc)[i]);
    else
        memcpy(c, g->hc, cnt * 4);
}

int gemm_gpu_iter(gemm_gpu *g, float *c, farm_split *split)
{
    if (g->o.transfers_each || !g->copied) {
        write_inputs(g);
        g->copied = 1;
    }
    if (g->packed) {
        const size_t ga[2] = {g->kp, g->mp / (size_t)g->o.tile_m},
                     gb[2] = {g->kp, g->np / ((size_t)g->o.vec * (size_t)g->o.vecs)};
        farm_cl_check(clEnqueueNDRangeKernel(g->cl->queue, g->pack_a, 2, NULL, ga, NULL, 0, NULL,
                                             farm_ev_slot(&g->evs, FARM_KERNEL)),
                      "clEnqueueNDRangeKernel(pack_a)");
        farm_cl_check(clEnqueueNDRangeKernel(g->cl->queue, g->pack_b, 2, NULL, gb, NULL, 0, NULL,
                                             farm_ev_slot(&g->evs, FARM_KERNEL)),
                      "clEnqueueNDRangeKernel(pack_b)");
    }
    farm_cl_check(clEnqueueNDRangeKernel(g->cl->queue, g->kernel, 2, NULL, g->global,
                                         g->local[0] ? g->local : NULL, 0, NULL, farm_ev_slot(&g->evs, FARM_KERNEL)),
                  "clEnqueueNDRangeKernel(gemm)");
    if (g->o.transfers_each)
        read_output(g, c);
    farm_cl_check(clFinish(g->cl->queue), "clFinish(gemm)");
    farm_ev_collect(&g->evs, split);
    return FARM_EXIT_OK;
}

uint64_t gemm_gpu_time_once(void *user)
{
    gemm_gpu *g = user;
    const int each = g->o.transfers_each;
    g->o.transfers_each = 0;
    farm_split sp = {0, 0, 0};
    gemm_gpu_iter(g, NULL, &sp);
    g->o.transfers_each = each;
    return sp.kernel_ns;
}

uint64_t gemm_source_key(void)
{
    const char *parts[] = {gemm_cl_source, gemm_packed_cl_source, tiled_types_cl_source, gemm_tiled_cl_source};
    uint64_t h = FARM_HASH_INIT;
    for (int i = 0; i < 4; i++)
        h = farm_hash64(h, parts[i], strlen(parts[i]) + 1);
    return h;
}

void gemm_cpu_params_format(const gemm_gpu_opts *o, char *out, size_t outlen)
{
    snprintf(out, outlen, "tile_m=%ld,vec=%ld,vecs=%ld,wg_m=%ld,wg_n=%ld", o->tile_m, o->vec, o->vecs, o->wg_m,
             o->wg_n);
}

int gemm_cpu_params_parse(const char *text, gemm_gpu_opts *o)
{
    long tm, v, vs, wm, wn;
    char tail;
    if (sscanf(text, "tile_m=%ld,vec=%ld,vecs=%ld,wg_m=%ld,wg_n=%ld%c", &tm, &v, &vs, &wm, &wn, &tail) != 5)
        return -1;
    if (tm < 1 || tm > 16 || (v != 2 && v != 4 && v != 8 && v != 16) || vs < 1 || vs > 4 || wm < 0 || wn < 0 ||
        wm > 1024 || wn > 1024 || ((wm > 0) != (wn > 0)))
        return -1;
    o->tile_m = tm, o->vec = v, o->vecs = vs, o->wg_m = wm, o->wg_n = wn;
    return 0;
}

void gemm_gpu_read(gemm_gpu *g, float *c)
{
    farm_split ignore = {0, 0, 0};
    read_output(g, c);
    farm_ev_collect(&g->evs, &ignore);
}

void gemm_gpu_destroy(gemm_gpu *g)
{
    if (!g)
        return;
    farm_ev_free(&g->evs);
    clReleaseMemObject(g->da);
    clReleaseMemObject(g->db);
    clReleaseMemObject(g->dc);
    clReleaseKernel(g->kernel);
    if (g->packed) {
        clReleaseKernel(g->pack_a);
        clReleaseKernel(g->pack_b);
        clReleaseMemObject(g->ap);
        clReleaseMemObject(g->bp);
    }
    farm_cl_program_release(&g->prog);
    free(g->ha);
    free(g->hb);
    free(g->hc);
    free(g);
}
