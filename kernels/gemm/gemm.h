/* gemm benchmark: C[M][N] = A[M][K] * B[K][N], row-major, fp32 or fp16 storage. */
#ifndef GEMM_H
#define GEMM_H
#include "farm.h"
#include "tiled.h"

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
    long wg_m, wg_n;    /* regblock/packed work-group size (0, 0 = driver's choice) */
    int transfers_each; /* copy A, B in and C out on every iteration (else once) */
    farm_tiled_cfg tiled; /* local: tile configuration (common/gemm_tiled.cl) */
    int half_arith;     /* local, fp16: half arithmetic (the device has cl_khr_fp16) */
    int global_vec;     /* local, fp32: 4 loads the operand tiles as float4 where the tile allows it
                           (gemm_tiled.cl's TILED_GVEC4), 1 as scalars */
} gemm_gpu_opts;

/* Hash of every OpenCL source the gemm program builds from (the tuning cache's source key). */
uint64_t gemm_source_key(void);
/* Tunable parameters of the regblock/packed kernels as text ("tile_m=14,vec=16,vecs=2,wg_m=0,wg_n=0")
 * and back (0, or -1 when the text is not such a list). */
void gemm_cpu_params_format(const gemm_gpu_opts *o, char *out, size_t outlen);
int gemm_cpu_params_parse(const char *text, gemm_gpu_opts *o);

typedef struct gemm_gpu gemm_gpu;

gemm_gpu *gemm_gpu_create(farm_cl *cl, const gemm_problem *p, const gemm_gpu_opts *o, const char *cache_dir);
const farm_cl_program *gemm_gpu_program(const gemm_gpu *g);
/* Adds the effective kernel configuration (kernel, tile_m, vec, wg, padded sizes) to an event. */
void gemm_gpu_describe(const gemm_gpu *g, farm_json *j);
/* Kernel time of one resident-input iteration in ns (0 on failure): the tuner's timer. */
uint64_t gemm_gpu_time_once(void *g);
/* One iteration; writes C (m*n floats) when transfers happen this iteration. */
int gemm_gpu_iter(gemm_gpu *g, float *c, farm_split *split);
/* Reads C back (for --transfers=once, verify and dump). */
void gemm_gpu_read(gemm_gpu *g, float *c);
void gemm_gpu_destroy(gemm_gpu *g);

#endif
