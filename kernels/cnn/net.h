/*
 * SqueezeNet v1.0 / v1.1, MobileNetV1 / V2 and ResNet-18 as flat lists of layers over CHW tensors
 * (batch 1), shared by the cpu and gpu paths of the `cnn` benchmark. A fire module is three conv
 * layers: squeeze1x1 writes its own tensor, expand1x1 and expand3x3 write channel ranges of one
 * tensor (the concatenation).
 */
#ifndef FARM_CNN_NET_H
#define FARM_CNN_NET_H

#include <stddef.h>
#include <stdio.h>
#include <stdint.h>

/* CNN_DWCONV: depthwise (one k x k filter per channel, cout == cin); CNN_ADD: element-wise sum of
 * tensors `in` and `in2` (a residual add: MobileNetV2, ResNet-18, and the single-layer mode). */
typedef enum { CNN_CONV, CNN_MAXPOOL, CNN_AVGPOOL, CNN_DWCONV, CNN_ADD } cnn_kind;

typedef struct {
    int c, h, w;
} cnn_dims;

typedef struct {
    char name[40];         /* Caffe names: conv1, pool1, fire2/squeeze1x1, ..., conv10, pool10 */
    cnn_kind kind;
    int in, out;           /* tensor indices */
    int in2;               /* CNN_ADD: the second operand's tensor */
    int cin, hin, win;
    int cout, hout, wout;  /* cout: maps this layer writes */
    int k, stride, pad;
    int relu;              /* 0: linear, 1: ReLU, CNN_RELU6: min(max(x, 0), 6) (MobileNets) */
    int out_c_offset;      /* first channel written in the output tensor */
    int g;                 /* granularity: output maps per work item (conv, gpu) */
    int g_requested;       /* what --g asked for this layer (g may be smaller, see cnn_apply_g) */
    float *w, *b;          /* conv: weights [cout][cin][k][k] and bias [cout] */
} cnn_layer;

#define CNN_RELU6 2

/* MobileNetV2 has the most: 64 layers */
#define CNN_MAX_LAYERS 80
#define CNN_MAX_TENSORS 80

typedef struct {
    int total_layers;      /* layers of the whole network */
    int nlayers;           /* layers that run (--layers-limit) */
    cnn_layer layer[CNN_MAX_LAYERS];
    int ntensors;
    cnn_dims tensor[CNN_MAX_TENSORS]; /* tensor 0 is the input image */
    int input_copy;        /* the single-layer add's second operand, a copy of the input (0: none) */
} cnn_net;

/* The granularities of Motamedi et al.; the gpu program has one kernel per value. */
extern const int cnn_g_values[];
extern const int cnn_g_count;

/* Lays out `model` ("squeezenet1.0" | "squeezenet1.1" | "mobilenetv1" | "mobilenetv2" | "resnet18")
 * for a square input of `input_size`. Batch norm is folded into each conv's weights and bias.
 * Returns 0, or -1 with a one-line reason (input too small) in err. */
int cnn_build(cnn_net *net, const char *model, int input_size, char *err, size_t errlen);

/* One layer alone (the single-layer mode, for sampling kernels on a phone): `kind` is conv, dwconv,
 * maxpool, avgpool (global), fc or add over a cin x size x size input; conv writes cout maps
 * (k x k, stride, pad), fc is a conv whose window covers the whole input (cout outputs, 1x1).
 * The layer is named "layer". Returns 0, or -1 with a one-line reason in err. */
int cnn_build_layer(cnn_net *net, const char *kind, int cin, int size, int cout, int k, int stride, int pad,
                    char *err, size_t errlen);

/* Applies a --g spec: "4" (every conv layer), "conv1:2,fire2/squeeze1x1:4" (per layer) or both
 * ("4,conv10:8"). A global value that does not divide a layer's maps falls back to the largest
 * granularity that does (g_requested keeps the asked value); a per-layer value must divide.
 * Returns 0, or -1 with a one-line reason in err. */
int cnn_apply_g(cnn_net *net, const char *spec, char *err, size_t errlen);

/* Conv weights: seeded He-uniform (biases small uniform), or .npy files from dir named
 * <layer with '/' -> '.'>.weight.npy [cout][cin][k][k] and .bias.npy [cout] (float32).
 * Only layers that run are loaded. Returns 0, or -1 with the file and problem in err. */
int cnn_init_weights(cnn_net *net, uint64_t seed);
int cnn_load_weights(cnn_net *net, const char *dir, char *err, size_t errlen);
void cnn_round_weights_f16(cnn_net *net);
void cnn_free_weights(cnn_net *net);

/* Floating-point operations (multiply-add = 2) and bytes touched (inputs, weights, outputs at
 * `elem_bytes` per value) of one layer. */
double cnn_layer_flops(const cnn_layer *l);
double cnn_layer_bytes(const cnn_layer *l, int elem_bytes);

/* The result tensor of the layers that run: the last layer's output tensor, channels
 * [0, out_c_offset + cout) (so stopping after a fire module's expand3x3 gives the concat). */
size_t cnn_result_count(const cnn_net *net);

/* Prints every layer of `net` as farm's network descriptor (YAML, farm/analysis/networks/README.md):
 * name, kind, the layer each input comes from, shapes [c, h, w], kernel, stride, pad, groups and
 * activation; the descriptor farm prices a network by, so it cannot drift from what runs. */
void cnn_print_descriptor(const cnn_net *net, const char *model, FILE *out);
size_t cnn_tensor_count(const cnn_net *net, int t);

#endif
