/*
 * MLP training step for the `train` benchmark: fully connected layers (weights [out][in], bias
 * [out]), ReLU on hidden layers, softmax cross-entropy averaged over the batch, plain SGD.
 * Shared by the cpu paths (here) and the gpu path (mlp_gpu.c).
 */
#ifndef FARM_TRAIN_MLP_H
#define FARM_TRAIN_MLP_H

#include <stddef.h>
#include <stdint.h>

#include "../common/farm.h"

#define MLP_MAX_LAYERS 16 /* weight layers */

typedef struct {
    int nlayers;                    /* weight layers (sizes has nlayers + 1 entries) */
    int sizes[MLP_MAX_LAYERS + 1];  /* e.g. 784, 256, 128, 16 */
    int batch;
    float *w[MLP_MAX_LAYERS];       /* [sizes[l+1]][sizes[l]] */
    float *b[MLP_MAX_LAYERS];       /* [sizes[l+1]] */
} mlp;

/* Training data: n samples (a multiple of the batch); step s uses batch (s mod n/batch). */
typedef struct {
    size_t n;
    float *x;      /* [n][sizes[0]] */
    int32_t *y;    /* [n] class index < sizes[nlayers] */
} mlp_data;

/* Parses "784,256,128,16" (2..MLP_MAX_LAYERS+1 sizes, each 1..65536). -1 with reason in err. */
int mlp_parse_layers(mlp *m, const char *spec, char *err, size_t errlen);
/* He-uniform weights (ReLU), zero biases, from seed. */
void mlp_init_weights(mlp *m, uint64_t seed);
/* fcN.weight.npy / fcN.bias.npy (N = 1..nlayers) in dir: load or save. -1 with reason in err. */
int mlp_load_weights(mlp *m, const char *dir, char *err, size_t errlen);
int mlp_save_weights(const mlp *m, const char *dir, char *err, size_t errlen);
void mlp_free(mlp *m);
void mlp_round_f16(mlp *m);
size_t mlp_weight_count(const mlp *m, int layer);

/* Synthetic learnable task: x uniform in [-1, 1], label = argmax of a fixed random linear
 * teacher (seeded), so a network can fit it and the loss falls. */
void mlp_data_synthetic(mlp_data *d, const mlp *m, size_t n, uint64_t seed);
/* x.npy [n][sizes[0]] float and y.npy [n] float32 holding class indices. */
int mlp_data_load(mlp_data *d, const mlp *m, const char *dir, char *err, size_t errlen);
void mlp_data_free(mlp_data *d);

/* Floating-point operations of one step (forward, backward, update; multiply-add = 2). */
double mlp_step_flops(const mlp *m);

/* CPU training state: activations and gradients; fp16 rounds every stored value to half. */
typedef struct {
    mlp *m;
    int fp16;
    farm_pool *pool;               /* NULL or 1 thread: single-threaded */
    float *act[MLP_MAX_LAYERS + 1]; /* act[0] = batch input, act[l+1] = output of layer l */
    float *grad[MLP_MAX_LAYERS + 1]; /* gradient w.r.t. act[l] (l >= 1) */
    float *loss;                   /* [batch] */
    float *scratch;                /* per-thread rows for the weight gradient */
} mlp_cpu;

void mlp_cpu_init(mlp_cpu *c, mlp *m, int fp16, farm_pool *pool);
/* One SGD step on batch rows x [batch][sizes[0]], labels y; returns the mean loss. */
double mlp_cpu_step(mlp_cpu *c, const float *x, const int32_t *y, float lr);
void mlp_cpu_free(mlp_cpu *c);

#endif
