// farm lstm kernels (model and layout in lstm.h). -DFP16=1: weights and inputs stored as half.
// One lstm_cell launch computes all four gates and the state update of every hidden unit (dim 0)
// of every batch element (dim 1) for one layer and time step: adjacent work-items read adjacent
// weight columns, so loads coalesce on GPUs and vectorise across work-items on CPU devices.

#if FP16
typedef half store_t;
#define LD(p, i) vload_half((i), (p))
#else
typedef float store_t;
#define LD(p, i) ((p)[i])
#endif

static inline float sigmoid_(float x) { return 1.0f / (1.0f + exp(-x)); }

__kernel void lstm_cell(const int D, const int H, __global const store_t *in, const int in_stride,
                        const int in_off, __global const float *h_prev, __global float *h_out,
                        __global float *c, __global const store_t *W, __global const store_t *bias,
                        const int in_is_state)
{
    const int j = get_global_id(0), b = get_global_id(1);
    if (j >= H)
        return;
    const int H4 = 4 * H;
    float zi = LD(bias, j), zf = LD(bias, H + j), zg = LD(bias, 2 * H + j), zo = LD(bias, 3 * H + j);
    // Layer 0 reads the (half-stored) inputs; upper layers read the fp32 state of the layer below.
    __global const float *in_state = (__global const float *)in;
    for (int r = 0; r < D; r++) {
        const float v = in_is_state ? in_state[b * in_stride + in_off + r] : LD(in, b * in_stride + in_off + r);
        const int row = r * H4;
        zi = mad(v, LD(W, row + j), zi);
        zf = mad(v, LD(W, row + H + j), zf);
        zg = mad(v, LD(W, row + 2 * H + j), zg);
        zo = mad(v, LD(W, row + 3 * H + j), zo);
    }
    __global const float *hp = h_prev + b * H;
    for (int r = 0; r < H; r++) {
        const float v = hp[r];
        const int row = (D + r) * H4;
        zi = mad(v, LD(W, row + j), zi);
        zf = mad(v, LD(W, row + H + j), zf);
        zg = mad(v, LD(W, row + 2 * H + j), zg);
        zo = mad(v, LD(W, row + 3 * H + j), zo);
    }
    const int s = b * H + j;
    const float cn = sigmoid_(zf) * c[s] + sigmoid_(zi) * tanh(zg);
    c[s] = cn;
    h_out[s] = sigmoid_(zo) * tanh(cn);
}

// logits[b][k] = bd[k] + sum_j h[b][j] * Wd[j][k]; global (classes, batch).
__kernel void lstm_dense(const int H, const int C, __global const float *h, __global const store_t *Wd,
                         __global const store_t *bd, __global float *logits)
{
    const int k = get_global_id(0), b = get_global_id(1);
    float acc = LD(bd, k);
    for (int j = 0; j < H; j++)
        acc = mad(h[b * H + j], LD(Wd, j * C + k), acc);
    logits[b * C + k] = acc;
}
