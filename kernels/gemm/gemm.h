/* gemm benchmark: C[M][N] = A[M][K] * B[K][N], row-major, fp32 or fp16 storage. */
#ifndef GEMM_H
#define GEMM_H
#include "farm.h"

typedef struct {
    size_t m, n, k;
    int fp16;       /* fp16 storage: inputs and output rounded to half, accumulation in fp32 */
    const float *a; /* m*k, already rounded to half when fp16 */
    const float *b; /* k*n */
} gemm_problem;

/* CPU paths (cpu: pool NULL or 1 thread; cpu-mt: rows split over the pool). Output rounded to
 * half when fp16, like the GPU's half store. */
void gemm_cpu(const gemm_problem *p, float *c, farm_pool *pool);

/* GPU path configuration (tuning knobs, all selectable on the command line). */
typedef struct {
    const char *kernel; /* "regblock" (register blocking + vector loads), "packed" (the same on panels
                           repacked on the device), "local" (local-memory tiles) */
    long tile_m;        /* regblock: rows of C per work-item */
    long vec;           /* regblock: columns of C per work-item = vector width (2, 4, 8, 16) */
    long vecs;          /* packed: vectors per row of the work-item's block (columns = vec * vecs) */
    long wg_m, wg_n;    /* work-group size (0, 0 = driver's choice; local kernel: fixed 16 x 16) */
    int transfers_each; /* copy A, B in and C out on every iteration (else once) */
} gemm_gpu_opts;

typedef struct gemm_gpu gemm_gpu;

gemm_gpu *gemm_gpu_create(farm_cl *cl, const gemm_problem *p, const gemm_gpu_opts *o, const char *cache_dir);
const farm_cl_program *gemm_gpu_program(const gemm_gpu *g);
/* Adds the effective kernel configuration (kernel, tile_m, vec, wg, padded sizes) to an event. */
void gemm_gpu_describe(const gemm_gpu *g, farm_json *j);
/* One iteration; writes C (m*n floats) when transfers happen this iteration. */
int gemm_gpu_iter(gemm_gpu *g, float *c, farm_split *split);
/* Reads C back (for --transfers=once, verify and dump). */
void gemm_gpu_read(gemm_gpu *g, float *c);
void gemm_gpu_destroy(gemm_gpu *g);

#endif
