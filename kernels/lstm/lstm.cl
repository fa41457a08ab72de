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
#pragma unroll 8
    for (int r = 0; r < D; r++) {
        const float v = in_is_state ? in_state[b * in_stride + in_off + r] : LD(in, b * in_stride + in_off + r);
        const int row = r * H4;
        zi = mad(v, LD(W, row + j), zi);
        zf = mad(v, LD(W, row + H + j), zf);
        zg = mad(v, LD(W, row + 2 * H + j), zg);
        zo = mad(v, LD(W, row + 3 * H + j), zo);
    }
    __global const float *hp = h_prev + b * H;
#pragma unroll 8
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
                         __global const store_t *bd, __global float *logits, const int h_off)
{
    const int k = get_global_id(0), b = get_global_id(1);
    float acc = LD(bd, k);
    h += h_off;
    for (int j = 0; j < H; j++)
        acc = mad(h[b * H + j], LD(Wd, j * C + k), acc);
    logits[b * C + k] = acc;
}

// One launch per inference: work-group b runs batch element b through every time step and layer,
// keeping h of every layer in local memory (double-buffered) and c in global memory owned by the
// work-item that updates it; one barrier per (step, layer). Weights of all layers are
// concatenated (layer l at offset sum_{i<l} (D_i + H) * 4H), biases too (l * 4H).
__kernel void lstm_fused(const int T, const int D0, const int H, const int L, const int C,
                         __global const store_t *x, __global const store_t *W, __global const store_t *bias,
                         __global const store_t *Wd, __global const store_t *bd, __global float *cstate,
                         __global float *logits, __local float *hbuf)
{
    const int b = get_group_id(0), lid = get_local_id(0), wg = get_local_size(0);
    const int H4 = 4 * H;
    __global float *cs = cstate + b * L * H;
    for (int l = 0; l < L; l++)
        for (int u = lid; u < H; u += wg) {
            hbuf[(l * 2) * H + u] = 0.0f;
            cs[l * H + u] = 0.0f;
        }
    barrier(CLK_LOCAL_MEM_FENCE | CLK_GLOBAL_MEM_FENCE);
    int cur = 0;
    for (int t = 0; t < T; t++) {
        int woff = 0;
        for (int l = 0; l < L; l++) {
            const int D = l == 0 ? D0 : H;
            __local const float *hp = hbuf + (l * 2 + cur) * H;
            __local float *hn = hbuf + (l * 2 + 1 - cur) * H;
            __local const float *below = hbuf + ((l - 1) * 2 + 1 - cur) * H; // layer l-1 at step t
            __global const store_t *Wl = W + woff;
            __global const store_t *bl = bias + l * H4;
            for (int u = lid; u < H; u += wg) {
                float zi = LD(bl, u), zf = LD(bl, H + u), zg = LD(bl, 2 * H + u), zo = LD(bl, 3 * H + u);
                if (l == 0) {
                    __global const store_t *xt = x + (b * T + t) * D0;
                    for (int r = 0; r < D0; r++) {
                        const float v = LD(xt, r);
                        const int row = r * H4 + u;
                        zi = mad(v, LD(Wl, row), zi);
                        zf = mad(v, LD(Wl, row + H), zf);
                        zg = mad(v, LD(Wl, row + 2 * H), zg);
                        zo = mad(v, LD(Wl, row + 3 * H), zo);
                    }
                } else {
                    for (int r = 0; r < H; r++) {
                        const float v = below[r];
                        const int row = r * H4 + u;
                        zi = mad(v, LD(Wl, row), zi);
                        zf = mad(v, LD(Wl, row + H), zf);
                        zg = mad(v, LD(Wl, row + 2 * H), zg);
                        zo = mad(v, LD(Wl, row + 3 * H), zo);
                    }
                }
                for (int r = 0; r < H; r++) {
                    const float v = hp[r];
                    const int row = (D + r) * H4 + u;
                    zi = mad(v, LD(Wl, row), zi);
                    zf = mad(v, LD(Wl, row + H), zf);
                    zg = mad(v, LD(Wl, row + 2 * H), zg);
                    zo = mad(v, LD(Wl, row + 3 * H), zo);
                }
                const float cn = sigmoid_(zf) * cs[l * H + u] + sigmoid_(zi) * tanh(zg);
                cs[l * H + u] = cn;
                hn[u] = sigmoid_(zo) * tanh(cn);
            }
            barrier(CLK_LOCAL_MEM_FENCE | CLK_GLOBAL_MEM_FENCE);
            woff += (D + H) * H4;
        }
        cur = 1 - cur;
    }
    __local const float *h = hbuf + ((L - 1) * 2 + cur) * H;
    for (int k = lid; k < C; k += wg) {
        float acc = LD(bd, k);
        for (int j = 0; j < H; j++)
            acc = mad(h[j], LD(Wd, j * C + k), acc);
        logits[b * C + k] = acc;
    }
}

// Wavefront step path: ONE launch per diagonal d computes, for every layer l at once, time step
// t = d - l (layer l's input at step t is layer l-1's output at step t, made by the previous
// launch), so an inference takes seq_len + layers - 1 launches instead of seq_len x layers.
// Global (H padded, batch, L). State of every layer in one buffer each: h_all[L][2][batch][H]
// (double-buffered by step parity: step t reads slot t % 2, writes slot (t + 1) % 2), c_all[L][batch][H].
// Weights and biases concatenated as for lstm_fused.
__kernel void lstm_wave(const int d, const int T, const int D0, const int H, const int B, __global const store_t *x,
                        __global const store_t *W, __global const store_t *bias, __global float *h_all,
                        __global float *c_all)
{
    const int j = get_global_id(0), b = get_global_id(1), l = get_global_id(2);
    const int t = d - l;
    if (j >= H || t < 0 || t >= T)
        return;
    const int H4 = 4 * H, D = l == 0 ? D0 : H;
    const int woff = l == 0 ? 0 : (D0 + H) * H4 + (l - 1) * (2 * H) * H4;
    __global const store_t *Wl = W + woff;
    __global const store_t *bl = bias + l * H4;
    float zi = LD(bl, j), zf = LD(bl, H + j), zg = LD(bl, 2 * H + j), zo = LD(bl, 3 * H + j);
    const int slot_in = t % 2, slot_out = (t + 1) % 2;
    if (l == 0) {
        __global const store_t *xt = x + (b * T + t) * D0;
    #pragma unroll 8
        for (int r = 0; r < D0; r++) {
            const float v = LD(xt, r);
            const int row = r * H4 + j;
            zi = mad(v, LD(Wl, row), zi);
            zf = mad(v, LD(Wl, row + H), zf);
            zg = mad(v, LD(Wl, row + 2 * H), zg);
            zo = mad(v, LD(Wl, row + 3 * H), zo);
        }
    } else {
        __global const float *below = h_all + (((l - 1) * 2 + slot_out) * B + b) * H;
#pragma unroll 8
        for (int r = 0; r < H; r++) {
            const float v = below[r];
            const int row = r * H4 + j;
            zi = mad(v, LD(Wl, row), zi);
            zf = mad(v, LD(Wl, row + H), zf);
            zg = mad(v, LD(Wl, row + 2 * H), zg);
            zo = mad(v, LD(Wl, row + 3 * H), zo);
        }
    }
    __global const float *hp = h_all + ((l * 2 + slot_in) * B + b) * H;
#pragma unroll 8
    for (int r = 0; r < H; r++) {
        const float v = hp[r];
        const int row = (D + r) * H4 + j;
        zi = mad(v, LD(Wl, row), zi);
        zf = mad(v, LD(Wl, row + H), zf);
        zg = mad(v, LD(Wl, row + 2 * H), zg);
        zo = mad(v, LD(Wl, row + 3 * H), zo);
    }
    const int s = (l * B + b) * H + j;
    const float cn = sigmoid_(zf) * c_all[s] + sigmoid_(zi) * tanh(zg);
    c_all[s] = cn;
    h_all[((l * 2 + slot_out) * B + b) * H + j] = sigmoid_(zo) * tanh(cn);
}
