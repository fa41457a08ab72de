/*
 * Configuration of the shared GPU GEMM kernel (common/gemm_tiled.cl): tile shape, work-group,
 * vector width; validity for a device, build options, launch sizes, the default for a problem
 * shape and the tuner's search space. Used by gemm, cnn (convolutions) and train.
 */
#ifndef FARM_TILED_H
#define FARM_TILED_H

#include "farm.h"

typedef struct {
    int tsm, tsn, tsk; /* work-group tile of C (TSM x TSN), K depth staged per step */
    int wptm, wptn;    /* outputs per work-item (rows, columns) */
    int vw;            /* local-memory vector width: 1, 2 or 4 */
} farm_tiled_cfg;

/* Work-group size (TSN / WPTN) x (TSM / WPTM). */
size_t farm_tiled_threads(const farm_tiled_cfg *c);
/* 0 when the configuration can run on `cl` (work-group, local memory, divisibility), else -1 and
 * a one-line reason in err. elem_bytes: 4 (fp32 arithmetic) or 2 (half arithmetic). */
int farm_tiled_check(const farm_tiled_cfg *c, const farm_cl *cl, int elem_bytes, char *err, size_t errlen);
/* "-DTSM=.. -DTSN=.. -DTSK=.. -DWPTM=.. -DWPTN=.. -DVW=.." */
void farm_tiled_options(const farm_tiled_cfg *c, char *out, size_t outlen);
/* "tsm=128,tsn=128,tsk=8,wptm=8,wptn=8,vw=4" (the form kept in tuning caches) and back.
 * Parse returns 0, or -1 when the text is not a complete configuration. */
void farm_tiled_format(const farm_tiled_cfg *c, char *out, size_t outlen);
int farm_tiled_parse(const char *text, farm_tiled_cfg *c);
/* Global and local NDRange sizes for an M x N output (rounded up to whole tiles). */
void farm_tiled_ranges(const farm_tiled_cfg *c, size_t m, size_t n, size_t global[2], size_t local[2]);
/* The untuned choice for an M x N x K problem on this device: the largest tile of the built-in list
 * that still gives every compute unit a work-group, else the smallest that is valid. */
farm_tiled_cfg farm_tiled_default(const farm_cl *cl, size_t m, size_t n, size_t k, int elem_bytes);
/* The tuner's search space, best-first by expectation; returns how many were written (<= cap),
 * only configurations valid on `cl`. */
int farm_tiled_candidates(const farm_cl *cl, int elem_bytes, farm_tiled_cfg *out, int cap);

#endif
