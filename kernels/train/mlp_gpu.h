/* OpenCL path of the train benchmark, with three ways to move data each step:
 *   copy      weights, biases and the batch go to the device and weights come back every step
 *             (a framework that keeps the model on the host)
 *   resident  weights stay on the device; only the batch goes up and the per-sample losses come back
 *   mapped    like resident, but batch and losses move through mapped host-visible buffers
 *             (CL_MEM_ALLOC_HOST_PTR, map/unmap: zero-copy where memory is shared, as on phones)
 *   device    like resident, with the whole dataset uploaded once before the measured steps: a
 *             step copies its batch on the device (kernel time) and only the losses come back, so
 *             nothing goes from host to device inside a step (what a framework's training loop
 *             with its data already on the GPU does)
 * h2d_ns / d2h_ns are the profiled transfer (or map/unmap) commands plus, for mapped, the host
 * copies into and out of the mapped pointers. */
#ifndef FARM_TRAIN_MLP_GPU_H
#define FARM_TRAIN_MLP_GPU_H

#include "../common/tiled.h"
#include "mlp.h"

typedef enum { MLP_COPY = 0, MLP_RESIDENT = 1, MLP_MAPPED = 2, MLP_DEVICE = 3 } mlp_buffers;

#define MLP_MAX_PROGS 64 /* tiled programs, one per configuration (--tune tries many) */

/* Test hook (--corrupt): a wrong value on the device each step, for --verify to catch. */
typedef enum { MLP_CORRUPT_NONE = 0, MLP_CORRUPT_WEIGHT = 1, MLP_CORRUPT_ACTIVATION = 2 } mlp_corrupt;

typedef struct {
    mlp *m;
    farm_cl *cl;
    mlp_corrupt corrupt; /* weight: w[0][0] = 10 after the update; activation: act[1][0] = 10 after
                            the first layer's forward */
    farm_cl_program prog;
    mlp_buffers mode;
    int fp16, half_arith;
    size_t elem_bytes;
    cl_mem act[MLP_MAX_LAYERS + 1], grad[MLP_MAX_LAYERS + 1];
    cl_mem w[MLP_MAX_LAYERS], b[MLP_MAX_LAYERS];
    cl_mem labels, loss;
    cl_kernel forward, xent, backward_input, update;
    void *w_host[MLP_MAX_LAYERS], *b_host[MLP_MAX_LAYERS]; /* copy mode: the model lives here */
    float *loss_host;
    /* tiled path: the three GEMMs of each layer on common/gemm_tiled.cl (FC_FWD, FC_BWD, FC_UPD) */
    int tiled;
    farm_tiled_cfg cfg[3];
    int nprogs, prog_of[3];
    farm_tiled_cfg prog_cfg[MLP_MAX_PROGS];
    farm_cl_program tprog[MLP_MAX_PROGS];
    cl_kernel tk[MLP_MAX_PROGS][3]; /* [program][gemm kind] */
    cl_kernel bias_update;
    /* device mode: the dataset on the device, and the host arrays whose rows the steps name */
    cl_mem data_x, data_y;
    const void *data_x_host;
    const int32_t *data_y_host;
    size_t data_rows;
} mlp_gpu;

enum { FC_FWD = 0, FC_BWD = 1, FC_UPD = 2 };

/* The GEMM (m, n, k) of kind `kind` for layer l (FC_FWD: batch x nout x nin, ...). */
void mlp_gemm_shape(const mlp *m, int layer, int kind, size_t *gm, size_t *gn, size_t *gk);
/* The largest (by m*n*k) GEMM of kind `kind` over the layers: what its configuration is chosen for. */
void mlp_gemm_largest(const mlp *m, int kind, size_t *gm, size_t *gn, size_t *gk);
/* Defaults per GEMM kind: what the gemm program picks for that kind's largest shape. */
void mlp_gemm_defaults(const farm_cl *cl, const mlp *m, int half_arith, farm_tiled_cfg cfg[3]);
/* Switches the step to the tiled GEMM kernels with these configurations (call after init; again to
 * change them: programs already built are reused). */
void mlp_gpu_use_tiled(mlp_gpu *g, const farm_tiled_cfg cfg[3], const char *cache_dir);
/* Hash of the sources of the tiled path (tuning cache key). */
uint64_t mlp_gpu_source_key(void);

/* Builds the program, creates buffers and uploads the initial weights (not timed). */
void mlp_gpu_init(mlp_gpu *g, farm_cl *cl, mlp *m, int fp16, mlp_buffers mode, const char *cache_dir);
/* device mode: uploads the dataset (x: rows x sizes[0] in storage precision, y: rows labels) once;
 * later steps must pass rows of these same arrays. A no-op in the other modes or once done. */
void mlp_gpu_set_dataset(mlp_gpu *g, const void *x, const int32_t *y, size_t rows);
/* One step on a batch already in storage precision (x: batch rows, half or float). Returns the
 * mean loss and fills the split. */
double mlp_gpu_step(mlp_gpu *g, const void *x, const int32_t *y, float lr, farm_split *split);
/* Copies the device weights into m->w / m->b as float32 (for dumps and verification). */
void mlp_gpu_read_weights(mlp_gpu *g);
/* The device's activations act[l] ([batch][sizes[l]], float32) as the last step left them. */
void mlp_gpu_read_act(mlp_gpu *g, int l, float *out);
/* Sets the model's weights and biases, on the device and in g->m, to those of src (same sizes). */
void mlp_gpu_write_weights(mlp_gpu *g, const mlp *src);
void mlp_gpu_free(mlp_gpu *g);

#endif
