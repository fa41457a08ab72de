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

// z (gates i, f, g, o of unit j) += v * row `row` of W (one row holds the 4H gate columns).
#define GATES_MAD(z, v, W, row, H)                                                                 \
    {                                                                                              \
        z##i = mad((v), LD((W), (row)), z##i);                                                     \
        z##f = mad((v), LD((W), (row) + (H)), z##f);                                               \
        z##g = mad((v), LD((W), (row) + 2 * (H)), z##g);                                           \
        z##o = mad((v), LD((W), (row) + 3 * (H)), z##o);                                           \
    }

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
                        GATES_MAD(z, v, Wl, r * H4 + u, H)
                    }
                } else {
                    for (int r = 0; r < H; r++) {
                        const float v = below[r];
                        GATES_MAD(z, v, Wl, r * H4 + u, H)
                    }
                }
                for (int r = 0; r < H; r++) {
                    const float v = hp[r];
                    GATES_MAD(z, v, Wl, (D + r) * H4 + u, H)
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
            GATES_MAD(z, v, Wl, r * H4 + j, H)
        }
    } else {
        __global const float *below = h_all + (((l - 1) * 2 + slot_out) * B + b) * H;
#pragma unroll 8
        for (int r = 0; r < H; r++) {
            const float v = below[r];
            GATES_MAD(z, v, Wl, r * H4 + j, H)
        }
    }
    __global const float *hp = h_all + ((l * 2 + slot_in) * B + b) * H;
#pragma unroll 8
    for (int r = 0; r < H; r++) {
        const float v = hp[r];
        GATES_MAD(z, v, Wl, (D + r) * H4 + j, H)
    }
    const int s = (l * B + b) * H + j;
    const float cn = sigmoid_(zf) * c_all[s] + sigmoid_(zi) * tanh(zg);
    c_all[s] = cn;
    h_all[((l * 2 + slot_out) * B + b) * H + j] = sigmoid_(zo) * tanh(cn);
}

// lstm_wave with the reduction split across work-items: a work-group of JU x KS work-items owns
// JU hidden units of one (layer, batch element); work-item (u, s) sums rows s, s + KS, ... of the
// four gate columns of unit u, the KS partial sums meet in local memory, work-items s < 4 add up
// one gate each (all four when KS < 4), then s = 0 updates the cell. The serial chain per work-item is (D + H) / KS
// multiply-adds instead of D + H, and KS times as many work-items are in flight (the step is
// latency-bound: a few hundred work-items each walking a long dependent chain).
// Adjacent work-items (u) read adjacent weight columns. Step 0 reads no state (h_0 = c_0 = 0), so no
// fill is needed before an inference. Build options -DJU -DKS; local size (JU, KS, 1), global
// (H rounded up to JU, KS * batch, L).
#ifdef KS
// The KS partial sums of work-item (u, s)'s gates z##i..z##o meet in part; sum[g][u] holds gate g's
// total after it (slices s < 4 add up one gate each, all four when KS < 4). Two barriers: every
// work-item of the group must reach it.
#define SPLIT_SUM(part, sum, z, s, u)                                                              \
    {                                                                                              \
        part[0][s][u] = z##i;                                                                      \
        part[1][s][u] = z##f;                                                                      \
        part[2][s][u] = z##g;                                                                      \
        part[3][s][u] = z##o;                                                                      \
        barrier(CLK_LOCAL_MEM_FENCE);                                                              \
        for (int g_ = s; g_ < 4; g_ += KS) {                                                       \
            float acc_ = 0.0f;                                                                     \
            for (int q_ = 0; q_ < KS; q_++)                                                        \
                acc_ += part[g_][q_][u];                                                           \
            sum[g_][u] = acc_;                                                                     \
        }                                                                                          \
        barrier(CLK_LOCAL_MEM_FENCE);                                                              \
    }

__kernel __attribute__((reqd_work_group_size(JU, KS, 1))) void lstm_wave_split(
    const int d, const int T, const int D0, const int H, const int B, __global const store_t *x,
    __global const store_t *W, __global const store_t *bias, __global float *h_all, __global float *c_all)
{
    const int u = get_local_id(0), s = get_local_id(1);
    const int j = get_group_id(0) * JU + u, b = get_group_id(1), l = get_group_id(2);
    const int t = d - l;
    if (t < 0 || t >= T) // the same for the whole work-group: no barrier is skipped by part of it
        return;
    __local float part[4][KS][JU];
    __local float sum[4][JU];
    const int H4 = 4 * H, D = l == 0 ? D0 : H;
    const int woff = l == 0 ? 0 : (D0 + H) * H4 + (l - 1) * (2 * H) * H4;
    __global const store_t *Wl = W + woff;
    const int slot_in = t % 2, slot_out = (t + 1) % 2;
    float zi = 0.0f, zf = 0.0f, zg = 0.0f, zo = 0.0f;
    if (j < H) {
        if (l == 0) {
            __global const store_t *xt = x + (b * T + t) * D0;
            for (int r = s; r < D0; r += KS) {
                const float v = LD(xt, r);
                GATES_MAD(z, v, Wl, r * H4 + j, H)
            }
        } else {
            __global const float *below = h_all + (((l - 1) * 2 + slot_out) * B + b) * H;
#pragma unroll 4
            for (int r = s; r < H; r += KS) {
                const float v = below[r];
                GATES_MAD(z, v, Wl, r * H4 + j, H)
            }
        }
        if (t > 0) {
            __global const float *hp = h_all + ((l * 2 + slot_in) * B + b) * H;
#pragma unroll 4
            for (int r = s; r < H; r += KS) {
                const float v = hp[r];
                GATES_MAD(z, v, Wl, (D + r) * H4 + j, H)
            }
        }
    }
    SPLIT_SUM(part, sum, z, s, u)
    if (s == 0 && j < H) {
        __global const store_t *bl = bias + l * H4;
        const float gi = sum[0][u] + LD(bl, j), gf = sum[1][u] + LD(bl, H + j);
        const float gg = sum[2][u] + LD(bl, 2 * H + j), go = sum[3][u] + LD(bl, 3 * H + j);
        const int st = (l * B + b) * H + j;
        const float cn = sigmoid_(gf) * (t > 0 ? c_all[st] : 0.0f) + sigmoid_(gi) * tanh(gg);
        c_all[st] = cn;
        h_all[((l * 2 + slot_out) * B + b) * H + j] = sigmoid_(go) * tanh(cn);
    }
}
#endif

// Persistent split path: ONE launch per inference like lstm_fused, but each unit's gate reduction is
// split over KS work-items as in lstm_wave_split. Work-group b (local JU x KS) runs batch element b
// through every time step and layer; the JU unit lanes walk the H units in chunks of JU, work-item
// (u, s) sums rows s, s + KS, ... of unit u's four gate columns, the partial sums meet in local
// memory and lane s = 0 updates the cell. h (double-buffered by step parity) and c of every layer
// stay in local memory. Synchronisation is work-group barriers only: OpenCL 1.2/2.0 has no
// grid-wide barrier and no forward-progress guarantee between work-groups, so spinning on flags set
// by another work-group may hang (PoCL's CPU device runs work-groups one after another per thread);
// a batch element's whole recurrence therefore lives in one work-group. Every loop bound below is
// the same for the whole work-group, so no barrier is skipped by part of it.
// Local size (JU, KS, 1), global (JU, KS * batch, 1); local memory: hbuf L*2*H + cbuf L*H floats.
#ifdef KS
__kernel __attribute__((reqd_work_group_size(JU, KS, 1))) void lstm_persist(
    const int T, const int D0, const int H, const int L, const int C, __global const store_t *x,
    __global const store_t *W, __global const store_t *bias, __global const store_t *Wd,
    __global const store_t *bd, __global float *logits, __local float *hbuf, __local float *cbuf)
{
    const int u = get_local_id(0), s = get_local_id(1), b = get_group_id(1);
    const int H4 = 4 * H, lid = s * JU + u;
    __local float part[4][KS][JU];
    __local float sum[4][JU];
    for (int i = lid; i < L * 2 * H; i += JU * KS)
        hbuf[i] = 0.0f;
    for (int i = lid; i < L * H; i += JU * KS)
        cbuf[i] = 0.0f;
    barrier(CLK_LOCAL_MEM_FENCE);
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
            for (int j0 = 0; j0 < H; j0 += JU) {
                const int j = j0 + u;
                float zi = 0.0f, zf = 0.0f, zg = 0.0f, zo = 0.0f;
                if (j < H) {
                    if (l == 0) {
                        __global const store_t *xt = x + (b * T + t) * D0;
                        for (int r = s; r < D0; r += KS) {
                            const float v = LD(xt, r);
                            GATES_MAD(z, v, Wl, r * H4 + j, H)
                        }
                    } else {
#pragma unroll 4
                        for (int r = s; r < H; r += KS) {
                            const float v = below[r];
                            GATES_MAD(z, v, Wl, r * H4 + j, H)
                        }
                    }
#pragma unroll 4
                    for (int r = s; r < H; r += KS) {
                        const float v = hp[r];
                        GATES_MAD(z, v, Wl, (D + r) * H4 + j, H)
                    }
                }
                SPLIT_SUM(part, sum, z, s, u)
                if (s == 0 && j < H) {
                    const float gi = sum[0][u] + LD(bl, j), gf = sum[1][u] + LD(bl, H + j);
                    const float gg = sum[2][u] + LD(bl, 2 * H + j), go = sum[3][u] + LD(bl, 3 * H + j);
                    const float cn = sigmoid_(gf) * cbuf[l * H + j] + sigmoid_(gi) * tanh(gg);
                    cbuf[l * H + j] = cn;
                    hn[j] = sigmoid_(go) * tanh(cn);
                }
            }
            barrier(CLK_LOCAL_MEM_FENCE); // hn complete before the layer above (or step t + 1) reads it
            woff += (D + H) * H4;
        }
        cur = 1 - cur;
    }
    __local const float *h = hbuf + ((L - 1) * 2 + cur) * H;
    for (int k = lid; k < C; k += JU * KS) {
        float acc = LD(bd, k);
        for (int j = 0; j < H; j++)
            acc = mad(h[j], LD(Wd, j * C + k), acc);
        logits[b * C + k] = acc;
    }
}
#endif

#ifdef KS
// Grid path: ONE launch per inference with the units of every layer spread over G work-groups per
// batch element (global (JU * G, KS * batch)), the layers pipelined along diagonals as in the wave
// (layer l runs step d - l at diagonal d) and the diagonals separated by a barrier across the
// whole grid instead of a launch. Work-group g owns units [g * P, (g + 1) * P), P = ceil(H / G),
// in chunks of JU lanes, with each unit's reduction split over KS slices as in lstm_wave_split;
// h lives in h_all (double-buffered by step parity, as the wave's) and c in c_all, each unit's c
// touched only by its owner.
// OpenCL 1.2 has no grid-wide barrier and promises no forward progress between work-groups: the
// barrier below (a counter every work-group increments once per diagonal, work-item 0 spinning
// until all have) needs every work-group resident at once. The host launches at most one
// work-group per compute unit, which NVIDIA GPUs run at once; where they do not (a CPU device
// running work-groups one after another), the spin gives up after spin_max reads, the work-group
// sets the status word logits[batch * C] and returns: a wrong result reported, never a hang.
// Other work-groups' h is read through volatile pointers: a GPU's L1 is not coherent across
// compute units, so a plain load could see the value of an earlier diagonal. The counter only
// grows: this launch's barriers wait for base + (d + 1) * (G * batch) (mod 2^32, compared as a
// signed difference), base being what the counter held before the launch (host-tracked).
static int grid_sync(volatile __global uint *bar, const uint target, const uint spin_max, __local int *ok)
{
    barrier(CLK_GLOBAL_MEM_FENCE | CLK_LOCAL_MEM_FENCE);
    if (get_local_id(0) == 0 && get_local_id(1) == 0) {
        mem_fence(CLK_GLOBAL_MEM_FENCE); // this group's h stores before its arrival
        atomic_inc(bar);
        uint n = 0;
        while ((int)(*bar - target) < 0 && ++n < spin_max)
            ;
        *ok = (int)(*bar - target) >= 0;
        mem_fence(CLK_GLOBAL_MEM_FENCE); // the others' stores before this group's reads
    }
    barrier(CLK_GLOBAL_MEM_FENCE | CLK_LOCAL_MEM_FENCE);
    return *ok;
}

__kernel __attribute__((reqd_work_group_size(JU, KS, 1))) void lstm_grid(
    const int T, const int D0, const int H, const int L, const int C, __global const store_t *x,
    __global const store_t *W, __global const store_t *bias, __global const store_t *Wd,
    __global const store_t *bd, __global float *logits, __global float *h_all, __global float *c_all,
    volatile __global uint *bar, const uint base, const uint spin_max)
{
    const int u = get_local_id(0), s = get_local_id(1);
    const int g = get_group_id(0), G = get_num_groups(0), b = get_group_id(1), B = get_num_groups(1);
    const int H4 = 4 * H, P = (H + G - 1) / G;
    const int j_lo = g * P, j_hi = min(H, j_lo + P);
    const uint nwg = (uint)(G * B);
    __local float part[4][KS][JU];
    __local float sum[4][JU];
    __local int ok;
    uint target = base;
    for (int d = 0; d < T + L - 1; d++) {
        int woff = 0;
        for (int l = 0; l < L; l++) {
            const int t = d - l, D = l == 0 ? D0 : H;
            __global const store_t *Wl = W + woff;
            woff += (D + H) * H4;
            if (t < 0 || t >= T) // the same for the whole work-group
                continue;
            const int slot_in = t % 2, slot_out = (t + 1) % 2;
            volatile __global const float *hp = h_all + ((l * 2 + slot_in) * B + b) * H;
            __global const store_t *bl = bias + l * H4;
            for (int j0 = j_lo; j0 < j_hi; j0 += JU) {
                const int j = j0 + u;
                float zi = 0.0f, zf = 0.0f, zg = 0.0f, zo = 0.0f;
                if (j < j_hi) {
                    if (l == 0) {
                        __global const store_t *xt = x + (b * T + t) * D0;
                        for (int r = s; r < D0; r += KS) {
                            const float v = LD(xt, r);
                            GATES_MAD(z, v, Wl, r * H4 + j, H)
                        }
                    } else {
                        volatile __global const float *below = h_all + (((l - 1) * 2 + slot_out) * B + b) * H;
#pragma unroll 4
                        for (int r = s; r < H; r += KS) {
                            const float v = below[r];
                            GATES_MAD(z, v, Wl, r * H4 + j, H)
                        }
                    }
                    if (t > 0) {
#pragma unroll 4
                        for (int r = s; r < H; r += KS) {
                            const float v = hp[r];
                            GATES_MAD(z, v, Wl, (D + r) * H4 + j, H)
                        }
                    }
                }
                SPLIT_SUM(part, sum, z, s, u)
                if (s == 0 && j < j_hi) {
                    const float gi = sum[0][u] + LD(bl, j), gf = sum[1][u] + LD(bl, H + j);
                    const float gg = sum[2][u] + LD(bl, 2 * H + j), go = sum[3][u] + LD(bl, 3 * H + j);
                    const int st = (l * B + b) * H + j;
                    const float cn = sigmoid_(gf) * (t > 0 ? c_all[st] : 0.0f) + sigmoid_(gi) * tanh(gg);
                    c_all[st] = cn;
                    h_all[((l * 2 + slot_out) * B + b) * H + j] = sigmoid_(go) * tanh(cn);
                }
            }
        }
        target += nwg;
        if (!grid_sync(bar, target, spin_max, &ok)) {
            if (u == 0 && s == 0)
                logits[B * C] = 1.0f;
            return; // the whole work-group: ok is the same for all of it
        }
    }
    if (g != 0)
        return;
    volatile __global const float *h = h_all + (((L - 1) * 2 + T % 2) * B + b) * H;
    for (int k = s * JU + u; k < C; k += JU * KS) {
        float acc = LD(bd, k);
        for (int j = 0; j < H; j++)
            acc = mad(h[j], LD(Wd, j * C + k), acc);
        logits[b * C + k] = acc;
    }
}
#endif

