/* gpuload bursts: one short OpenCL kernel at a time, its size retuned to about --kernel-ms. */
#ifndef GPULOAD_BURST_H
#define GPULOAD_BURST_H
#include "farm.h"

typedef struct gpuload_burst gpuload_burst;

/* memory: stream a buffer (bandwidth) instead of a chain of multiply-adds (arithmetic). */
gpuload_burst *gpuload_burst_create(farm_cl *cl, int memory, double kernel_ms, const char *cache_dir);
const farm_cl_program *gpuload_burst_program(const gpuload_burst *b);
/* Runs one kernel to completion and retunes the next one's size; returns its wall time in ns. */
uint64_t gpuload_burst_run(gpuload_burst *b);
double gpuload_burst_work(const gpuload_burst *b);
void gpuload_burst_destroy(gpuload_burst *b);

#endif
