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

/* One step checked against another implementation's (the gpu's) step from the same weights and
 * batch. A hidden unit's ReLU decision is only meaningful where its pre-activation z is farther
 * from zero than the two paths can disagree by rounding: |z| > gamma * sum|x*w| (+ the bound on
 * how far their inputs already differ, propagated from the layer below). Within that bound the
 * step takes the other path's activation (`act`, a ReLU output of each hidden layer); outside it,
 * a different decision (mask) is counted as a mismatch, which is a real error. */
typedef struct {
    const float *const *act; /* act[l] for 1 <= l < nlayers: [batch][sizes[l]] as the other path made it */
    double u_acc;            /* the other path's unit roundoff: 2^-24 (fp32 sums), 2^-11 (half) */
    double u_store;          /* storage rounding of activations: 2^-11 (fp16), else 0 */
} mlp_guide;

typedef struct {
    size_t ambiguous;  /* decisions taken from the other path (within the rounding bound) */
    size_t mismatched; /* decisions outside the bound that differ: an error */
    int first_layer;
    size_t first_index;
} mlp_guide_stats;

/* mlp_cpu_step with the hidden layers' ReLU decisions guided as above (c's pool splits output units,
 * so the result does not depend on the threads); adds to st. */
double mlp_cpu_step_guided(mlp_cpu *c, const float *x, const int32_t *y, float lr, const mlp_guide *gd,
                           mlp_guide_stats *st);

#endif
