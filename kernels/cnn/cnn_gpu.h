/* OpenCL path of the cnn benchmark: one buffer per tensor, weights uploaded once, one kernel per
 * layer with its own profiling event (per-layer times). */
#ifndef FARM_CNN_GPU_H
#define FARM_CNN_GPU_H

#include "../common/farm.h"
#include "net.h"

typedef struct {
    const cnn_net *net;
    farm_cl *cl;
    farm_cl_program prog;
    int fp16;          /* half storage */
    int half_arith;    /* half arithmetic too (device has cl_khr_fp16) */
    size_t elem_bytes; /* 2 or 4 */
    size_t wg;         /* work-group size along output pixels (0: the driver's choice) */
    cl_mem tensor[CNN_MAX_TENSORS];
    cl_mem w[CNN_MAX_LAYERS], b[CNN_MAX_LAYERS];
    cl_kernel conv[16]; /* indexed like cnn_g_values */
    cl_kernel maxpool, avgpool;
    void *input_host;   /* input image in storage precision */
    void *result_host;  /* last result in storage precision */
    float *result;      /* last result as float32 (cnn_result_count values) */
    uint64_t layer_ns[CNN_MAX_LAYERS]; /* kernel time of each layer in the last run */
} cnn_gpu;

/* Builds the program (fp16: -DFARM_FP16, plus -DFARM_HALF_ARITH where cl_khr_fp16 exists),
 * creates buffers and uploads weights and the input image (not part of any iteration). */
void cnn_gpu_init(cnn_gpu *g, farm_cl *cl, const cnn_net *net, int fp16, const float *input,
                  const char *cache_dir);
/* Work-group size along output pixels (global sizes are padded to a multiple): `requested`
 * (0: the driver's choice) capped by what every kernel of the program allows, rounded down to a
 * power of two. A fixed size also keeps PoCL from compiling each kernel once per layer shape. */
size_t cnn_gpu_set_wg(cnn_gpu *g, size_t requested);
/* One inference: input upload, every layer, result download; fills the split and layer_ns. */
void cnn_gpu_run(cnn_gpu *g, farm_split *split);
void cnn_gpu_free(cnn_gpu *g);

#endif
