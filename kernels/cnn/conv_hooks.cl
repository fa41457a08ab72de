// cnn's convolutions as im2col GEMMs on farm's own GEMM kernels (Caffe's and Augur's premise: a
// convolution costs what the GEMM of its im2col shape costs). For a layer with cout maps of
// hout x wout from cin maps with a k x k window:
//   C[m][n] = sum_kk W[m][kk] * col[kk][n],  m < cout, n < hout*wout, kk < cin*k*k
//   col[(ci*k + kh)*k + kw][oh*wout + ow] = in[ci][oh*stride - pad + kh][ow*stride - pad + kw]
// W is the OIHW weight tensor read as a cout x (cin*k*k) row-major matrix. The output element
// goes to channel c_off + m of the output tensor (fire modules concatenate in place), plus bias,
// ReLU.
//
// GPU devices (-DTSM ...): this file, then common/gemm_tiled.cl twice: `conv_im2col` reads col on
// the fly in the kernel's B-tile loads (implicit im2col: no buffer, one launch per layer; index
// tables, see im2col_tab) and
// `conv_1x1` reads a 1x1 stride-1 layer's input tensor as B directly.
// CPU devices (-DTM ...): this file, common/gemm_packed.cl and cnn/conv_im2col.cl: im2col writes
// the B panels of the packed GEMM, whose epilogue is conv_out.

#ifdef FARM_FP16
#ifdef FARM_HALF_ARITH
#pragma OPENCL EXTENSION cl_khr_fp16 : enable
#define C_LD(p, i) ((float)(p)[(i)])
#define C_ST(v, i, p) ((p)[(i)] = (half)(v))
#else
#define C_LD(p, i) vload_half((i), (p))
#define C_ST(v, i, p) vstore_half((v), (i), (p))
#endif
typedef half cstore_t;
#else
typedef float cstore_t;
#define C_LD(p, i) ((p)[(i)])
#define C_ST(v, i, p) ((p)[(i)] = (v))
#endif

static inline float im2col_at(__global const cstore_t *in, int kidx, int n, int hin, int win, int wout, int ksz,
                              int stride, int pad)
{
    const int kk2 = ksz * ksz;
    const int ci = kidx / kk2, r = kidx - ci * kk2;
    const int kh = r / ksz, kw = r - kh * ksz;
    const int oh = n / wout, ow = n - oh * wout;
    const int ih = oh * stride - pad + kh, iw = ow * stride - pad + kw;
    return (ih >= 0 && ih < hin && iw >= 0 && iw < win) ? C_LD(in, (ci * hin + ih) * win + iw) : 0.0f;
}

// GPU path, im2col gathers in the GEMM's B-tile loads (-DGATHER, chosen per layer by the host):
//   0 (tab)   two small index tables per layer, so a load costs two cached loads instead of four
//             integer divisions: ktab[kk] = (ci*hin*win + kh*win + kw, kh, kw, 0),
//             ptab[n] = (ih0*win + iw0, ih0, iw0, 0) with ih0 = oh*stride - pad, iw0 = ow*stride - pad;
//   1 (hoist) ptab read once per work-item before the K loop (a work-item's columns are fixed), only
//             the warp-uniform ktab entry per load;
//   2 (arith) as hoist, and kk split into (ci, kh, kw) by the compile-time window -DKSZ (multiplies
//             by constants), so a load is one gather with no table read in front of it;
//   3 (window) K in window-major order, kk' = (kh*KSZ + kw)*cin + ci (the host permutes the weight
//             columns to match: the sum is the same), used where TSK divides cin: every K tile then
//             lies in ONE window position, so (kh, kw), the bounds check's offsets and the channel
//             offset are computed once per tile (TILED_B_TILE) and a load is a bounds test of the
//             pixel plus one strided gather, as plain B's is.
static inline float im2col_tab(__global const cstore_t *in, __global const int4 *ktab, __global const int4 *ptab,
                               int kidx, int n, int hin, int win)
{
    const int4 kt = ktab[kidx], pt = ptab[n];
    const int ih = pt.y + kt.y, iw = pt.z + kt.z;
    return ((uint)ih < (uint)hin && (uint)iw < (uint)win) ? C_LD(in, kt.x + pt.x) : 0.0f;
}

static inline float im2col_hoist(__global const cstore_t *in, __global const int4 *ktab, int4 pt, int kidx, int hin,
                                 int win)
{
    const int4 kt = ktab[kidx];
    const int ih = pt.y + kt.y, iw = pt.z + kt.z;
    return ((uint)ih < (uint)hin && (uint)iw < (uint)win) ? C_LD(in, kt.x + pt.x) : 0.0f;
}

#ifdef KSZ
static inline float im2col_arith(__global const cstore_t *in, int4 pt, int kidx, int hin, int win)
{
    const int ci = kidx / (KSZ * KSZ), r = kidx - ci * (KSZ * KSZ);
    const int kh = r / KSZ, kw = r - kh * KSZ;
    const int ih = pt.y + kh, iw = pt.z + kw;
    return ((uint)ih < (uint)hin && (uint)iw < (uint)win) ? C_LD(in, (ci * hin + kh) * win + kw + pt.x) : 0.0f;
}
#endif

#ifdef KSZ
// Per K tile (window gather): x = the address offset of the tile's window position and first
// channel, less t0 planes (so element k reads pt.x + ts.x + k * plane), y = kh, z = kw.
static inline int4 im2col_window_tile(int t0, int K, int win, int plane)
{
    const int cin = K / (KSZ * KSZ), pos = t0 / cin, ci0 = t0 - pos * cin;
    const int kh = pos / KSZ, kw = pos - kh * KSZ;
    return (int4)(kh * win + kw + (ci0 - t0) * plane, kh, kw, 0);
}

static inline float im2col_window(__global const cstore_t *in, int4 pt, int4 ts, int kidx, int hin, int win)
{
    const int ih = pt.y + ts.y, iw = pt.z + ts.z;
    return ((uint)ih < (uint)hin && (uint)iw < (uint)win) ? C_LD(in, pt.x + ts.x + kidx * (hin * win)) : 0.0f;
}
#endif

static inline void conv_out(__global cstore_t *out, __global const cstore_t *bias, int m, int n, float v, int c_off,
                            int plane, int relu)
{
    float y = v + C_LD(bias, m);
    if (relu && y < 0.0f)
        y = 0.0f;
    if (relu == 2 && y > 6.0f) /* ReLU6 (MobileNets) */
        y = 6.0f;
    C_ST(y, (c_off + m) * plane + n, out);
}

#ifdef TSM
// The host pads M and N to whole tiles (cnn_gpu.c: buffers with CNN_TILE_SLACK elements and weight
// rows to spare, pixel tables with sentinel entries that fail the gather's bounds test), so only
// the stores are clipped and, where TSK does not divide K (-DCONV_K_TAIL: conv1), K is tested:
// a plain GEMM's loads, as the gemm program's padded launch has. On the H200 the loads' M, N, K
// tests had cost the 729-pixel 3x3 layers 25-41% (run apart: 1.41-1.65x of gemm with them,
// 1.13-1.17x without; kernels/bench/results-h200.md). -DCONV_CHECKED (a tile larger than the
// slack): every test. conv_fire keeps every test (cnn_gpu.c, third_tiled).
#ifdef CONV_CHECKED
#define BOUNDS 1
#else
#define BOUNDS_STORE 1
#ifdef CONV_K_TAIL
#define BOUNDS_K 1
#endif
#endif
#define CONV_EXTRA                                                                                 \
    , __global const cstore_t *bias, __global const int4 *ktab, __global const int4 *ptab, const int hin, \
        const int win, const int c_off, const int relu
#define CONV_STORE(m, n, v) conv_out(C, bias, (m), (n), (v), c_off, N, relu)
#define TILED_EXTRA CONV_EXTRA
#define TILED_STORE CONV_STORE
#define TILED_NAME conv_im2col
#ifndef GATHER
#define GATHER 0
#endif
#if GATHER == 0
#define TILED_LOAD_B(k, n) im2col_tab(B, ktab, ptab, (k), (n), hin, win)
#else
#define TILED_B_STATE_T int4
#define TILED_B_PREP(n) ((n) < N ? ptab[(n)] : (int4)(0, -(1 << 20), 0, 0))
#if GATHER == 1
#define TILED_LOAD_B_ST(s, k, n) im2col_hoist(B, ktab, (s), (k), hin, win)
#elif GATHER == 2
#define TILED_LOAD_B_ST(s, k, n) im2col_arith(B, (s), (k), hin, win)
#else
#define TILED_B_TILE_T int4
#define TILED_B_TILE(t0) im2col_window_tile((t0), K, win, hin * win)
#define TILED_LOAD_B_TT(s, ts, k, n) im2col_window(B, (s), (ts), (k), hin, win)
#endif
#endif

// A fire module's two expand layers in ONE launch (conv_fire): both read the squeeze output
// (N pixels, hin x win), expand1x1 (M1 maps, K1 = its input channels) writes channels
// [c_off1, c_off1 + M1) and expand3x3 (M_ maps, K_ = 9 x K1) channels [c_off, c_off + M_) of the
// concat. Work-group rows [0, ceil(M1 / TSM)) compute the 1x1 GEMM (its input tensor read as B),
// the rest the 3x3 GEMM (the im2col gather of GATHER); the branch is uniform per work-group.
#define FIRE_EXTRA CONV_EXTRA, __global const cstore_t *A1, __global const cstore_t *bias1, const int M1, \
                   const int K1, const int c_off1
#define FIRE_SELECT                                                                                \
    const int g1_ = (M1 + TSM - 1) / TSM;                                                          \
    const int wide_ = (int)get_group_id(1) >= g1_; /* 1: this group computes the 3x3 layer */      \
    const int gy = wide_ ? (int)get_group_id(1) - g1_ : (int)get_group_id(1);                      \
    const int M = wide_ ? M_ : M1, K = wide_ ? K_ : K1, lda = K;                                   \
    __global const tstore_t *A = wide_ ? A_ : A1;
#if GATHER == 0
#define FIRE_GATHER(s, k, n) im2col_tab(B, ktab, ptab, (k), (n), hin, win)
#elif GATHER == 1
#define FIRE_GATHER(s, k, n) im2col_hoist(B, ktab, (s), (k), hin, win)
#elif GATHER == 2
#define FIRE_GATHER(s, k, n) im2col_arith(B, (s), (k), hin, win)
#endif
#if GATHER == 3
#define FIRE_LOAD_B_TT(s, ts, k, n) (wide_ ? im2col_window(B, (s), (ts), (k), hin, win) : C_LD(B, (k) * N + (n)))
#else
#define FIRE_LOAD_B_ST(s, k, n) (wide_ ? FIRE_GATHER(s, k, n) : C_LD(B, (k) * N + (n)))
#endif
#define FIRE_STORE(m, n, v) conv_out(C, wide_ ? bias : bias1, (m), (n), (v), wide_ ? c_off : c_off1, N, relu)
#endif

#ifdef TM
/* vector epilogue: bias and ReLU on the whole vector, one vector store unless it crosses n_real */
#define PACKED_STORE_VEC(m, n0, v)                                                                 \
    if ((m) < m_real) {                                                                            \
        pvec_t y_ = (v) + (pvec_t)(C_LD(bias, (m)));                                               \
        if (relu)                                                                                  \
            y_ = fmax(y_, (pvec_t)(0.0f));                                                         \
        if (relu == 2)                                                                             \
            y_ = fmin(y_, (pvec_t)(6.0f));                                                         \
        if ((n0) + VW <= n_real) {                                                                 \
            P_STOREV(y_, C + (c_off + (m)) * n_real + (n0));                                       \
        } else {                                                                                   \
            float o_[VW];                                                                          \
            PCAT(vstore, VW)(y_, 0, o_);                                                           \
            for (int e_ = 0; e_ < VW && (n0) + e_ < n_real; e_++)                                  \
                C_ST(o_[e_], (c_off + (m)) * n_real + (n0) + e_, C);                               \
        }                                                                                          \
    }
#define PACKED_EXTRA , __global const cstore_t *bias, const int m_real, const int n_real, const int c_off, const int relu
#endif
