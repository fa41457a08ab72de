/* OpenCL path of the cnn benchmark: one buffer per tensor, weights uploaded once, one kernel per
 * layer with its own profiling event (per-layer times). */
#ifndef FARM_CNN_GPU_H
#define FARM_CNN_GPU_H

#include "../common/farm.h"
#include "../common/tiled.h"
#include "net.h"

/* GEMM configuration of one conv layer on the im2col-gemm path: the tiled kernel's on GPU
 * devices, the packed kernel's (tm rows x vw*vn columns per work-item) on CPU devices. */
typedef enum { CNN_GATHER_TAB = 0, CNN_GATHER_HOIST = 1, CNN_GATHER_ARITH = 2, CNN_GATHER_WINDOW = 3 } cnn_gather;
#define CNN_GATHERS 4
extern const char *const cnn_gather_names[]; /* "tab", "hoist", "arith", "window", NULL */

typedef struct {
    farm_tiled_cfg tiled;
    cnn_gather gather; /* tiled: how the B-tile loads gather im2col (conv_hooks.cl) */
    int ksz;           /* tiled, CNN_GATHER_ARITH / _WINDOW: the window compiled in (0 otherwise) */
    int ktail;         /* tiled: TSK does not divide the layer's K (or, 3x3, its input channels: a
                          fused pair's 1x1 part), so the loads test k (set by cnn_gpu_set_layer) */
    int tm, vw, vn;
} cnn_gemm_cfg;

#define CNN_MAX_PROGS 128 /* --tune builds one per configuration it tries */
/* GPU devices: M and N of every conv GEMM are padded to whole tiles, the padding's results dropped
 * (conv_hooks.cl): tensors have this many elements to spare after their end, weights this many
 * rows (zero), pixel tables this many sentinel entries. A tile larger than this (only from a
 * hand-written configuration) runs with every bounds test. */
#define CNN_TILE_SLACK 128

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
    cl_mem wwin[CNN_MAX_LAYERS]; /* window gather: weight columns in (kh, kw, ci) order, else NULL */
    cl_kernel conv[16]; /* indexed like cnn_g_values */
    cl_kernel maxpool, avgpool;
    void *input_host;   /* input image in storage precision (mapped pin_in) */
    void *result_host;  /* last result in storage precision (mapped pin_out) */
    float *result;      /* last result as float32 (cnn_result_count values) */
    uint64_t layer_ns[CNN_MAX_LAYERS]; /* kernel time of each layer in the last run */
    /* im2col-gemm path (cnn_gpu_use_gemm) */
    int conv_gemm;       /* 1: convolutions run as GEMMs */
    int tiled;           /* 1: tiled kernel (GPU devices), 0: packed kernel (CPU devices) */
    cnn_gemm_cfg cfg[CNN_MAX_LAYERS];
    int prog_of[CNN_MAX_LAYERS];
    int nprogs;
    cnn_gemm_cfg prog_cfg[CNN_MAX_PROGS];
    farm_cl_program gprog[CNN_MAX_PROGS];
    cl_kernel k_main[CNN_MAX_PROGS]; /* conv_im2col (tiled) or gemm_packed */
    cl_kernel k_aux[CNN_MAX_PROGS];  /* conv_1x1 (tiled) or im2col_pack */
    cl_kernel k_pack1[CNN_MAX_PROGS]; /* packed: im2col_pack_1x1 */
    cl_mem ap[CNN_MAX_LAYERS];       /* packed weights (CPU devices) for the layer's config */
    cnn_gemm_cfg ap_cfg[CNN_MAX_LAYERS];
    cl_mem bp;                       /* B panels (CPU devices), sized for the largest layer */
    cl_mem ktab[CNN_MAX_LAYERS], ptab[CNN_MAX_LAYERS]; /* im2col index tables (conv_hooks.cl) */
    size_t bp_bytes;
    int launches[CNN_MAX_LAYERS];    /* kernel launches of each layer (0: inside its fused partner's) */
    /* GPU devices: each layer's own kernel object, arguments set once (an inference only enqueues) */
    cl_kernel lk[CNN_MAX_LAYERS];
    size_t lglobal[CNN_MAX_LAYERS][2], llocal[CNN_MAX_LAYERS][2];
    int fused_with[CNN_MAX_LAYERS];  /* the other layer of a fused fire expand pair, or -1 */
    uint64_t fused_ns[CNN_MAX_LAYERS]; /* a fused pair's launch time, last run (both layers) */
    int flush_every;                 /* clFlush after every N launches of an inference (0: never) */
    uint64_t host_enqueue_ns;        /* last run: host time from the upload to the result's arrival */
    uint64_t host_collect_ns;        /* last run: host time reading the profiling events after it */
    cl_mem pin_in, pin_out;          /* mapped host-allocated staging of the image and the result */
    /* the events of the last submitted inference, until cnn_gpu_collect reads them */
    farm_evlist xfer;
    cl_event layer_ev[CNN_MAX_LAYERS][2];
    int nev[CNN_MAX_LAYERS];
    uint64_t im2col_ns[CNN_MAX_LAYERS]; /* CPU devices: the im2col part of layer_ns */
    char cache_dir[1024];
} cnn_gpu;

/* Builds the program (fp16: -DFARM_FP16, plus -DFARM_HALF_ARITH where cl_khr_fp16 exists),
 * creates buffers and uploads weights and the input image (not part of any iteration). */
void cnn_gpu_init(cnn_gpu *g, farm_cl *cl, const cnn_net *net, int fp16, const float *input,
                  const char *cache_dir);
/* Work-group size along output pixels (global sizes are padded to a multiple): `requested`
 * (0: the driver's choice) capped by what every kernel of the program allows, rounded down to a
 * power of two. A fixed size also keeps PoCL from compiling each kernel once per layer shape. */
size_t cnn_gpu_set_wg(cnn_gpu *g, size_t requested);
/* The GEMM shape of conv layer l as im2col: m = cout, n = hout*wout, k = cin*k*k. */
void cnn_gemm_shape(const cnn_layer *l, size_t *m, size_t *n, size_t *k);
/* 1 when conv layer l reads its input tensor as B directly (1x1, stride 1, no padding). */
int cnn_layer_is_1x1(const cnn_layer *l);
/* What the gemm program would pick for that shape on this device (its default), gathering with
 * `gather` (ignored by 1x1 layers, which gather nothing). */
cnn_gemm_cfg cnn_gemm_default(const farm_cl *cl, const cnn_layer *l, int half_arith, cnn_gather gather);
/* Sets the gather of c for layer l (ksz for arith and window; 1x1 layers keep tab: they gather
 * nothing; window needs c's TSK to divide the layer's input channels, else arith). */
void cnn_gemm_set_gather(cnn_gemm_cfg *c, const cnn_layer *l, cnn_gather gather);
/* "tsm=..,vw=4,gather=arith" (tiled) or "tm=14,vw=16,vn=2" (packed) and back (0 or -1); parse
 * takes the layer for the window of an arith gather. */
void cnn_gemm_format(const cnn_gemm_cfg *c, int tiled, char *out, size_t outlen);
int cnn_gemm_parse(const char *text, int tiled, const cnn_layer *l, cnn_gemm_cfg *c);
/* Switches the convolutions to the im2col-gemm path with one configuration per layer (entries of
 * non-conv layers are ignored); builds (or reuses) one program per distinct configuration. */
void cnn_gpu_use_gemm(cnn_gpu *g, const cnn_gemm_cfg *per_layer);
/* Sets the configuration of conv layer `index` (after cnn_gpu_use_gemm; builds what it needs). */
void cnn_gpu_set_layer(cnn_gpu *g, int index, const cnn_gemm_cfg *c);
/* GPU devices (tiled kernel): runs each fire module's expand1x1 and expand3x3 (same input, halves
 * of one concat) as ONE conv_fire launch with the expand3x3 layer's configuration; returns the
 * pairs fused. Call after the configurations are chosen (tuning runs the layers apart). */
int cnn_gpu_fuse_expand(cnn_gpu *g);
/* Hash of the OpenCL sources the im2col-gemm path builds from (tuning cache key). */
uint64_t cnn_gpu_source_key(void);
/* Runs only conv layer `index` (its input tensor as it is on the device) and returns its kernel ns. */
uint64_t cnn_gpu_run_layer(cnn_gpu *g, int index);
/* Writes / reads a tensor in float32 (converted from/to the storage precision). */
void cnn_gpu_write_tensor(cnn_gpu *g, int t, const float *x);
void cnn_gpu_read_tensor(cnn_gpu *g, int t, float *x);
/* One inference: input upload, every layer, result download (one wait, for the result), result
 * converted to float32; its profiling events stay pending. */
void cnn_gpu_submit(cnn_gpu *g);
/* Reads and releases the pending events: fills the split and layer_ns (a fused pair's launch
 * shared out by FLOPs). Measurement, not inference: the benchmark runs it outside the timed window. */
void cnn_gpu_collect(cnn_gpu *g, farm_split *split);
/* cnn_gpu_submit, then cnn_gpu_collect. */
void cnn_gpu_run(cnn_gpu *g, farm_split *split);
void cnn_gpu_free(cnn_gpu *g);

#endif
