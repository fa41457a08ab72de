/* --tune and the tuning cache of cnn's im2col-gemm convolutions (common/tune.h): one workload per
 * conv layer shape ("conv m=64 n=3025 k=144 window=3x3s1 kernel=local precision=fp32"), searched
 * on the layer alone with its real input (one inference runs first), each candidate verified
 * against the cpu path's output of that layer. Layers of the same shape share one search. */
#ifndef FARM_CNN_TUNE_H
#define FARM_CNN_TUNE_H

#include "../common/tune.h"
#include "cnn_gpu.h"

typedef struct {
    farm_tune_state layer[CNN_MAX_LAYERS]; /* conv layers only */
    farm_tune_state run;                   /* what the info event reports for the whole network */
    char *params;                          /* "conv1:<params>;fire2/squeeze1x1:<params>;..." */
} cnn_tune;

/* Chooses every conv layer's configuration (g already on cnn_gpu_use_gemm with the defaults `def`):
 * explicit (--gather given: the defaults), --tune (search, then store), the cache, or the defaults;
 * leaves the choice set on g. tol: the --verify tolerance of this precision. */
void cnn_tune_choose(cnn_tune *t, cnn_gpu *g, const farm_common *c, const cnn_gemm_cfg *def, int explicit_knobs,
                     const char *model, double tol);
/* tune_* fields of the info event: tune_params lists every conv layer ("name:params;..."),
 * tune_source is the weakest source among them (cache-partial: some layers had no entry). */
void cnn_tune_info_fields(farm_json *j, const cnn_tune *t);
const farm_tune_state *cnn_tune_layer(const cnn_tune *t, int index);
void cnn_tune_free(cnn_tune *t);

#endif
