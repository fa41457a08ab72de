/* lstm benchmark: stacked LSTM inference as in MobiRNN (UCI HAR: 128 steps x 9 channels, 6 classes).
 *
 * Per layer l (input width D_l = input_dim for l = 0, else hidden H) and time step t:
 *   z = [x_t, h_{t-1}] @ W_l + b_l            W_l: (D_l + H) x 4H, b_l: 4H
 *   i = sigmoid(z[0:H])  f = sigmoid(z[H:2H])  g = tanh(z[2H:3H])  o = sigmoid(z[3H:4H])
 *   c_t = f * c_{t-1} + i * g,  h_t = o * tanh(c_t)              (h_0 = c_0 = 0)
 * Gate order along the 4H columns: i, f, g, o. logits = h_T(last layer) @ W_d + b_d (H x classes).
 * fp16 precision stores weights and inputs as half; state and arithmetic stay fp32. */
#ifndef LSTM_H
#define LSTM_H
#include "farm.h"

typedef struct {
    long seq_len, input_dim, hidden, layers, classes, batch;
    int fp16;
} lstm_shape;

typedef struct {
    lstm_shape s;
    float *w[8], *b[8];  /* per layer: (D_l + H) x 4H and 4H */
    float *wd, *bd;      /* dense: H x classes, classes */
    float *x;            /* batch x seq_len x input_dim */
} lstm_model;

#define LSTM_MAX_LAYERS 8

static inline long lstm_in_dim(const lstm_shape *s, long layer) { return layer == 0 ? s->input_dim : s->hidden; }

/* Generates weights (uniform +-1/sqrt(H)) and inputs (uniform +-1) from seed, or loads them:
 * weights_dir/lstm{l}_kernel.npy, lstm{l}_bias.npy, dense_kernel.npy, dense_bias.npy; input_path
 * (batch, seq_len, input_dim). Shape mismatches die with exit 2 naming the file. */
void lstm_model_init(lstm_model *m, const lstm_shape *s, uint64_t seed, const char *weights_dir,
                     const char *input_path);
void lstm_model_free(lstm_model *m);

/* CPU paths; logits: batch x classes. pool NULL: one thread. */
typedef struct lstm_cpu lstm_cpu;
lstm_cpu *lstm_cpu_create(const lstm_model *m, farm_pool *pool);
void lstm_cpu_run(lstm_cpu *c, float *logits);
void lstm_cpu_destroy(lstm_cpu *c);

/* GPU path: weights resident on the device; each iteration uploads the inputs, runs the network
 * and reads the logits back. Two kernel strategies:
 *   fused: ONE launch per inference; a work-group per batch element walks all steps and layers
 *          (h in local memory, a barrier per step and layer);
 *   step:  one cell launch per (step, layer) computing all four gates and the state update of every
 *          unit and batch element, plus one dense launch;
 *   wave:  the step kernel over all layers at once along diagonals (layer l at step d - l): seq_len +
 *          layers - 1 cell launches plus one dense launch;
 *   persist: ONE launch per inference as fused, each unit's gate reduction split over ks work-items
 *          (lstm_persist: a work-group of wg x ks per batch element, h and c in local memory).
 *   grid:  ONE launch per inference, each layer's units spread over several work-groups per batch
 *          element (lstm_grid: wg x ks each, at most one per compute unit), the layers pipelined
 *          along diagonals as in wave and a barrier across work-groups between diagonals; needs a
 *          device that runs all of them at once (GPUs), else it fails with exit 5, never hangs.
 * Neither launches a kernel per gate or per element. */
typedef struct lstm_gpu lstm_gpu;
enum { LSTM_STEP = 0, LSTM_FUSED = 1, LSTM_WAVE = 2, LSTM_PERSIST = 3, LSTM_GRID = 4 };
/* persist: wg unit lanes (0: 32) x ks reduction slices (0: 1; main.c passes 32 on GPUs, 4 on CPU
 * devices). wave with ks > 1: the reduction of each unit split over ks work-items (lstm_wave_split), wg units
 * per work-group (0: 32); ks <= 1: one work-item per unit (lstm_wave). */
lstm_gpu *lstm_gpu_create(farm_cl *cl, const lstm_model *m, int strategy, long wg, long ks, const char *cache_dir);
/* Hash of the OpenCL source (tuning cache key). */
uint64_t lstm_gpu_source_key(void);
/* wave: the reduction split and units per work-group that ran (1 and 0 without a split). */
int lstm_gpu_ks(const lstm_gpu *g);
int lstm_gpu_ju(const lstm_gpu *g);
/* grid: work-groups per batch element (1 for the other strategies). */
int lstm_gpu_groups(const lstm_gpu *g);
/* Kernel launches per inference. */
long lstm_gpu_launches(const lstm_gpu *g);
const farm_cl_program *lstm_gpu_program(const lstm_gpu *g);
int lstm_gpu_run(lstm_gpu *g, float *logits, farm_split *split);
void lstm_gpu_destroy(lstm_gpu *g);

#endif
