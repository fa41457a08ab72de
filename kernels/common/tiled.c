/* Configuration of the shared GPU GEMM kernel (see tiled.h and common/gemm_tiled.cl). */
#define _POSIX_C_SOURCE 200809L
#include "tiled.h"

#include <stdio.h>
#include <string.h>

/* Built-in configurations, best first where the problem fills the device. The first is the
 * large-problem default on GPUs: 128 x 64 per work-group of 256, 8 x 4 per work-item, 16 deep
 * (the tuner's choice at n = 1024, 2048 and 4096 on an H200: 27-38 TFLOPS where 128 x 128 x 8
 * gave 25-26); smaller tiles keep every compute unit busy on small problems. */
static const farm_tiled_cfg BUILTIN[] = {
    {128, 64, 16, 8, 4, 4},  {128, 128, 16, 8, 8, 4}, {64, 128, 16, 4, 8, 4}, {128, 128, 8, 8, 8, 4},
    {128, 64, 8, 8, 4, 4},   {64, 128, 8, 4, 8, 4},   {128, 128, 8, 8, 4, 4}, {64, 64, 16, 4, 4, 4},
    {64, 64, 8, 4, 4, 4},    {64, 64, 8, 8, 8, 4},    {64, 64, 16, 8, 8, 4},  {32, 64, 8, 4, 4, 4},
    {64, 32, 8, 4, 4, 4},    {32, 32, 8, 4, 4, 4},    {32, 32, 16, 4, 4, 4},  {16, 64, 8, 2, 4, 2},
    {64, 16, 8, 4, 2, 2},    {16, 32, 8, 2, 2, 2},    {16, 16, 8, 2, 2, 2},   {128, 128, 8, 8, 8, 2},
};
#define NBUILTIN (int)(sizeof BUILTIN / sizeof BUILTIN[0])

size_t farm_tiled_threads(const farm_tiled_cfg *c)
{
    return (size_t)(c->tsm / c->wptm) * (size_t)(c->tsn / c->wptn);
}

int farm_tiled_check(const farm_tiled_cfg *c, const farm_cl *cl, int elem_bytes, char *err, size_t errlen)
{
    const int pos = c->tsm > 0 && c->tsn > 0 && c->tsk > 0 && c->wptm > 0 && c->wptn > 0;
    if (!pos || (c->vw != 1 && c->vw != 2 && c->vw != 4)) {
        snprintf(err, errlen, "tile sizes must be positive and vw 1, 2 or 4");
        return -1;
    }
    if (c->tsm % c->wptm || c->tsn % c->wptn || c->wptm % c->vw || c->wptn % c->vw) {
        snprintf(err, errlen, "wptm must divide tsm, wptn tsn, and vw both wptm and wptn");
        return -1;
    }
    const size_t nt = farm_tiled_threads(c);
    if ((size_t)(c->tsm * c->tsk) % nt || (size_t)(c->tsn * c->tsk) % nt) {
        snprintf(err, errlen, "the %zu work-items must split the %dx%d and %dx%d operand tiles evenly", nt, c->tsm,
                 c->tsk, c->tsk, c->tsn);
        return -1;
    }
    if (c->wptm * c->wptn > 256) {
        snprintf(err, errlen, "wptm x wptn = %d accumulators per work-item exceeds 256", c->wptm * c->wptn);
        return -1;
    }
    if (cl && nt > cl->max_wg_size) {
        snprintf(err, errlen, "work-group of %zu exceeds the device's %zu", nt, cl->max_wg_size);
        return -1;
    }
    const size_t local = 2u * (size_t)c->tsk * ((size_t)c->tsm + (size_t)c->vw + (size_t)c->tsn + (size_t)c->vw) *
                         (size_t)elem_bytes;
    if (cl && cl->local_mem_bytes && local > cl->local_mem_bytes) {
        snprintf(err, errlen, "needs %zu bytes of local memory, the device has %llu", local,
                 (unsigned long long)cl->local_mem_bytes);
        return -1;
    }
    return 0;
}

void farm_tiled_options(const farm_tiled_cfg *c, char *out, size_t outlen)
{
    snprintf(out, outlen, "-DTSM=%d -DTSN=%d -DTSK=%d -DWPTM=%d -DWPTN=%d -DVW=%d", c->tsm, c->tsn, c->tsk, c->wptm,
             c->wptn, c->vw);
}

void farm_tiled_format(const farm_tiled_cfg *c, char *out, size_t outlen)
{
    snprintf(out, outlen, "tsm=%d,tsn=%d,tsk=%d,wptm=%d,wptn=%d,vw=%d", c->tsm, c->tsn, c->tsk, c->wptm, c->wptn,
             c->vw);
}

int farm_tiled_parse(const char *text, farm_tiled_cfg *c)
{
    char tail;
    farm_tiled_cfg t;
    if (sscanf(text, "tsm=%d,tsn=%d,tsk=%d,wptm=%d,wptn=%d,vw=%d%c", &t.tsm, &t.tsn, &t.tsk, &t.wptm, &t.wptn, &t.vw,
               &tail) != 6)
        return -1;
    char err[160];
    if (farm_tiled_check(&t, NULL, 4, err, sizeof err) != 0)
        return -1;
    *c = t;
    return 0;
}

void farm_tiled_ranges(const farm_tiled_cfg *c, size_t m, size_t n, size_t global[2], size_t local[2])
{
    local[0] = (size_t)(c->tsn / c->wptn);
    local[1] = (size_t)(c->tsm / c->wptm);
    global[0] = (n + (size_t)c->tsn - 1) / (size_t)c->tsn * local[0];
    global[1] = (m + (size_t)c->tsm - 1) / (size_t)c->tsm * local[1];
}

farm_tiled_cfg farm_tiled_default(const farm_cl *cl, size_t m, size_t n, size_t k, int elem_bytes)
{
    (void)k;
    char err[160];
    const size_t units = cl->compute_units ? cl->compute_units : 1;
    /* CPU devices (PoCL) run a work-group as loops over work-items: small groups, small tiles. */
    const int cpu = !(cl->device_type & CL_DEVICE_TYPE_GPU);
    int best = -1;
    size_t best_area = 0;
    for (int i = 0; i < NBUILTIN; i++) {
        const farm_tiled_cfg *c = &BUILTIN[i];
        if (farm_tiled_check(c, cl, elem_bytes, err, sizeof err) != 0)
            continue;
        if (cpu && farm_tiled_threads(c) > 64)
            continue;
        const size_t tiles = ((m + (size_t)c->tsm - 1) / (size_t)c->tsm) * ((n + (size_t)c->tsn - 1) / (size_t)c->tsn);
        const size_t area = (size_t)c->tsm * (size_t)c->tsn;
        /* half the compute units with one work-group each is still a full device for 256-wide groups */
        const int fills = 2 * tiles >= units;
        if (best < 0) {
            best = i, best_area = area;
            continue;
        }
        const size_t bt = ((m + (size_t)BUILTIN[best].tsm - 1) / (size_t)BUILTIN[best].tsm) *
                          ((n + (size_t)BUILTIN[best].tsn - 1) / (size_t)BUILTIN[best].tsn);
        const int best_fills = 2 * bt >= units;
        /* prefer filling the device, then list order; where nothing fills, the smaller tile */
        if ((fills && !best_fills) || (!fills && !best_fills && area < best_area))
            best = i, best_area = area;
    }
    if (best < 0) {
        const farm_tiled_cfg tiny = {8, 8, 8, 1, 1, 1};
        return tiny;
    }
    return BUILTIN[best];
}

int farm_tiled_candidates(const farm_cl *cl, int elem_bytes, farm_tiled_cfg *out, int cap)
{
    char err[160];
    int n = 0;
    for (int i = 0; i < NBUILTIN && n < cap; i++)
        if (farm_tiled_check(&BUILTIN[i], cl, elem_bytes, err, sizeof err) == 0)
            out[n++] = BUILTIN[i];
    return n;
}
