/* CPU paths (cpu: one thread; cpu-mt: output maps split over a farm_pool) of the cnn benchmark. */
#ifndef FARM_CNN_CPU_H
#define FARM_CNN_CPU_H

#include "../common/farm.h"
#include "net.h"

typedef struct {
    const cnn_net *net;
    int fp16;                       /* round every stored activation to half (fp16 storage) */
    farm_pool *pool;                /* NULL or 1 thread: single-threaded */
    float *tensor[CNN_MAX_TENSORS]; /* activations; tensor[0] is the input image */
} cnn_cpu;

void cnn_cpu_init(cnn_cpu *c, const cnn_net *net, int fp16, farm_pool *pool);
void cnn_cpu_free(cnn_cpu *c);
/* Runs layer `index` (tensors must hold its input). */
void cnn_cpu_layer(cnn_cpu *c, int index);
/* Output tensor of the last layer that runs. */
const float *cnn_cpu_result(const cnn_cpu *c);

#endif
