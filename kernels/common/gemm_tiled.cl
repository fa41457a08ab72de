// farm's GPU GEMM kernel, shared by gemm, cnn (convolutions as im2col GEMMs) and train (the three
// GEMMs of a fully connected layer): C[M][N] = op(A)[M][K] * op(B)[K][N].
//
// A work-group computes a TSM x TSN tile of C; A and B tiles TSK deep are staged through local
// memory, double-buffered (the next tile is fetched into registers while the current one is
// multiplied, one barrier per tile); each work-item accumulates WPTM x WPTN outputs in registers
// and reads its operands from local memory as vectors of VW (1, 2 or 4). Work-item (tn, tm) owns
// rows (i / VW) * RTSM * VW + tm * VW + i % VW and the same pattern of columns, so local reads are
// broadcasts or conflict-free and stores of C are VW-wide and coalesced.
//
// Build options (chosen per device by the host, see kernels/README.md "Tuning"):
//   -DTSM -DTSN -DTSK -DWPTM -DWPTN -DVW   tile shape (WPTM, WPTN multiples of VW)
//   -DTRANS_A / -DTRANS_B   A stored K x M (A^T row-major) / B stored N x K
//   -DBOUNDS                M, N, K arbitrary (loads zero-filled, stores clipped); without it the
//                           host pads every dimension to the tile and no check runs
//   -DBOUNDS_STORE, -DBOUNDS_K   parts of BOUNDS, for a host whose buffers hold whole tiles of M and
//                           N (A and B readable up to the next tile, what the padding computes is
//                           dropped): stores clipped to M x N; loads zero-filled past K (a K that is
//                           not a multiple of TSK)
//   -DTILED_GVEC4           global loads as float4 (16 bytes: a quarter of the load instructions),
//                           for a host whose operands are fp32, padded to whole tiles, lda and ldb
//                           multiples of 4 and 16-byte aligned, with neither operand transposed
//                           and no load hook (the gemm program); TSK and TSN multiples of 4 and
//                           the tiles' float4 counts multiples of the work-group size
//   -DFARM_FP16             half storage (vload_half/vstore_half, fp32 arithmetic)
//   -DFARM_FP16 -DFARM_HALF_ARITH   half storage and half arithmetic (needs cl_khr_fp16)
// Hooks (a program that includes this file after its own definitions may replace them):
//   TILED_NAME      kernel name (gemm_tiled)
//   TILED_EXTRA     extra kernel parameters after C (empty)
//   TILED_LOAD_B(k, n)   element k, n of op(B) (k < K, n < N guaranteed with BOUNDS; without it n
//                   may run to the end of its tile)
//   TILED_STORE(m, n, v) writes output m, n (m < M, n < N guaranteed)
//   TILED_B_STATE_T, TILED_B_PREP(n), TILED_LOAD_B_ST(s, k, n)   optional: a value per B column
//                   this work-item loads from (one where the work-group size is a multiple of TSN),
//                   made once before the K loop from its column n (columns do not move along K: an
//                   im2col loader keeps its pixel's window origin there) and passed to the load
//                   instead of re-deriving it in every tile
//   TILED_B_TILE_T, TILED_B_TILE(t0), TILED_LOAD_B_TT(s, ts, k, n)   optional, with the above: a
//                   value made once per K tile (t0: its first k) by every work-item and passed to
//                   each of the tile's loads (an im2col loader whose K order keeps one window
//                   position per tile computes that position once, not per element)
//   TILED_SELECT    optional: code at the kernel's start that defines M, K, A, lda and gy (this
//                   work-group's row of tiles) from the parameters M_, K_, A_, lda_ and the group
//                   id; one launch can so run several GEMMs of the same N side by side (cnn's
//                   fused fire expand layers). Without it: the parameters and get_group_id(1).

#define RTSM (TSM / WPTM)
#define RTSN (TSN / WPTN)
#define NT (RTSM * RTSN)
#define LPT_A (TSM * TSK / NT) // elements of the A tile each work-item loads
#define LPT_B (TSK * TSN / NT)
#define PADV 1 // one vector of padding per local row: transposed stores hit distinct banks
#define LDA_L (TSM / VW + PADV)
#define LDB_L (TSN / VW + PADV)

#ifndef TILED_NAME
#define TILED_NAME gemm_tiled
#endif
#ifndef TILED_EXTRA
#define TILED_EXTRA
#endif

#ifdef TRANS_A
#define A_AT(m, k) T_LD(A, (k) * lda + (m))
#else
#define A_AT(m, k) T_LD(A, (m) * lda + (k))
#endif
#ifndef TILED_LOAD_B
#ifdef TRANS_B
#define TILED_LOAD_B(k, n) T_LD(B, (n) * ldb + (k))
#else
#define TILED_LOAD_B(k, n) T_LD(B, (k) * ldb + (n))
#define TILED_B4_AT(k, n) (B + (k) * ldb + (n))
#endif
#endif
#ifndef TILED_STORE
#define TILED_STORE(m, n, v) T_ST((v), (m) * ldc + (n), C)
#endif
// A work-item's B loads of a tile lie in columns (lid + e NT) mod TSN: where NT is a multiple of
// TSN (every built-in and tuned tile on GPUs) that is ONE column, so one state serves all of them
// (one pixel-table read and one int4 in registers instead of LPT_B; on the H200 the per-load state
// cost the 729-pixel 3x3 layers 15-25%, kernels/bench/results-h200.md).
#if !defined(TRANS_B) && (NT % TSN) == 0
#define B_NST 1
#define B_ST(e) bst[0]
#else
#define B_NST LPT_B
#define B_ST(e) bst[e]
#endif
#if defined(TILED_B_STATE_T) && defined(TILED_B_TILE_T)
#define B_LOAD(e, k, n) TILED_LOAD_B_TT(B_ST(e), tst_, k, n)
#elif defined(TILED_B_STATE_T)
#define B_LOAD(e, k, n) TILED_LOAD_B_ST(B_ST(e), k, n)
#else
#define B_LOAD(e, k, n) TILED_LOAD_B(k, n)
#endif

// Coordinates inside the tile of the e-th element this work-item loads, chosen so that adjacent
// work-items read adjacent addresses of the operand as it is stored (coalesced global loads).
#ifdef TRANS_A
#define A_COORD(l, r, c) { r = (l) % TSM; c = (l) / TSM; }
#else
#define A_COORD(l, r, c) { r = (l) / TSK; c = (l) % TSK; }
#endif
#ifdef TRANS_B
#define B_COORD(l, r, c) { c = (l) / TSK; r = (l) % TSK; }
#else
#define B_COORD(l, r, c) { r = (l) / TSN; c = (l) % TSN; }
#endif

__kernel __attribute__((reqd_work_group_size(RTSN, RTSM, 1))) void TILED_NAME(
    const int M_, const int N, const int K_, __global const tstore_t *A_, const int lda_,
    __global const tstore_t *B, const int ldb, __global tstore_t *C, const int ldc TILED_EXTRA)
{
#ifdef TILED_SELECT
    TILED_SELECT
#else
    const int M = M_, K = K_, lda = lda_, gy = (int)get_group_id(1);
    __global const tstore_t *A = A_;
#endif
    __local tvec_t As[2][TSK][LDA_L];
    __local tvec_t Bs[2][TSK][LDB_L];
    const int tn = get_local_id(0), tm = get_local_id(1);
    const int lid = tm * RTSN + tn;
    const int gm0 = gy * TSM, gn0 = get_group_id(0) * TSN;
    (void)M;
    (void)N;
    (void)ldb;
    (void)ldc;

    tacc_t acc[WPTM][WPTN];
#pragma unroll
    for (int i = 0; i < WPTM; i++)
#pragma unroll
        for (int j = 0; j < WPTN; j++)
            acc[i][j] = (tacc_t)0;

    tacc_t ra[LPT_A], rb[LPT_B];
    const int ntiles = (K + TSK - 1) / TSK;
#ifdef TILED_B_STATE_T
    TILED_B_STATE_T bst[B_NST];
#pragma unroll
    for (int e = 0; e < B_NST; e++) {
        int r, c;
        B_COORD(lid + e * NT, r, c);
        (void)r;
        bst[e] = TILED_B_PREP(gn0 + c);
    }
#endif

#ifdef BOUNDS
#define A_OK(m, k) ((m) < M && (k) < K)
#define B_OK(k, n) ((k) < K && (n) < N)
#elif defined(BOUNDS_K)
#define A_OK(m, k) ((k) < K)
#define B_OK(k, n) ((k) < K)
#else
#define A_OK(m, k) 1
#define B_OK(k, n) 1
#endif
#ifdef TILED_B_TILE_T
#define B_TILE_STATE(t0) const TILED_B_TILE_T tst_ = TILED_B_TILE(t0);
#else
#define B_TILE_STATE(t0)
#endif
#define FETCH(t0)                                                                                  \
    {                                                                                              \
        _Pragma("unroll") for (int e = 0; e < LPT_A; e++) {                                        \
            int r, c;                                                                              \
            A_COORD(lid + e * NT, r, c);                                                           \
            const int gm = gm0 + r, gk = (t0) + c;                                                 \
            ra[e] = A_OK(gm, gk) ? A_AT(gm, gk) : (tacc_t)0;                                       \
        }                                                                                          \
        B_TILE_STATE(t0)                                                                           \
        _Pragma("unroll") for (int e = 0; e < LPT_B; e++) {                                        \
            int r, c;                                                                              \
            B_COORD(lid + e * NT, r, c);                                                           \
            const int gk = (t0) + r, gn = gn0 + c;                                                 \
            rb[e] = B_OK(gk, gn) ? B_LOAD(e, gk, gn) : (tacc_t)0;                                   \
        }                                                                                          \
    }
#ifdef TILED_GVEC4
#if defined(BOUNDS) || defined(BOUNDS_K) || defined(TRANS_A) || defined(TRANS_B) || defined(FARM_FP16) ||      \
    defined(TILED_B_STATE_T) || !defined(TILED_B4_AT) || (TSK % 4) || (TSN % 4) || ((TSM * TSK / 4) % NT) || ((TSK * TSN / 4) % NT)
#error "TILED_GVEC4 needs fp32 operands padded to whole tiles, untransposed, TSK and TSN multiples of 4"
#endif
#define LPT_A4 (TSM * TSK / 4 / NT)
#define LPT_B4 (TSK * TSN / 4 / NT)
#undef FETCH
    // Work-item lid's e-th float4 of the A tile: row (lid + e NT) / (TSK / 4), k 4 ((lid + e NT) %
    // (TSK / 4)); of the B tile: k row (lid + e NT) / (TSN / 4), columns 4 ((lid + e NT) % (TSN / 4)).
    float4 ra4[LPT_A4], rb4[LPT_B4];
#define FETCH(t0)                                                                                  \
    {                                                                                              \
        _Pragma("unroll") for (int e = 0; e < LPT_A4; e++) {                                       \
            const int l_ = lid + e * NT, r = l_ / (TSK / 4), c = 4 * (l_ % (TSK / 4));              \
            ra4[e] = *(__global const float4 *)(A + (gm0 + r) * lda + (t0) + c);                   \
        }                                                                                          \
        _Pragma("unroll") for (int e = 0; e < LPT_B4; e++) {                                       \
            const int l_ = lid + e * NT, r = l_ / (TSN / 4), c = 4 * (l_ % (TSN / 4));              \
            rb4[e] = *(__global const float4 *)(TILED_B4_AT((t0) + r, gn0 + c));                    \
        }                                                                                          \
    }
#define STASH(buf)                                                                                 \
    {                                                                                              \
        __local float *as = (__local float *)As[buf];                                              \
        __local float *bs = (__local float *)Bs[buf];                                              \
        _Pragma("unroll") for (int e = 0; e < LPT_A4; e++) {                                       \
            const int l_ = lid + e * NT, r = l_ / (TSK / 4), c = 4 * (l_ % (TSK / 4));              \
            as[(c + 0) * (LDA_L * VW) + r] = ra4[e].s0;                                            \
            as[(c + 1) * (LDA_L * VW) + r] = ra4[e].s1;                                            \
            as[(c + 2) * (LDA_L * VW) + r] = ra4[e].s2;                                            \
            as[(c + 3) * (LDA_L * VW) + r] = ra4[e].s3;                                            \
        }                                                                                          \
        _Pragma("unroll") for (int e = 0; e < LPT_B4; e++) {                                       \
            const int l_ = lid + e * NT, r = l_ / (TSN / 4), c = 4 * (l_ % (TSN / 4));              \
            vstore4(rb4[e], 0, bs + r * (LDB_L * VW) + c);                                         \
        }                                                                                          \
    }
#else
#define STASH(buf)                                                                                 \
    {                                                                                              \
        __local tacc_t *as = (__local tacc_t *)As[buf];                                            \
        __local tacc_t *bs = (__local tacc_t *)Bs[buf];                                            \
        _Pragma("unroll") for (int e = 0; e < LPT_A; e++) {                                        \
            int r, c;                                                                              \
            A_COORD(lid + e * NT, r, c);                                                           \
            as[c * (LDA_L * VW) + r] = ra[e];                                                      \
        }                                                                                          \
        _Pragma("unroll") for (int e = 0; e < LPT_B; e++) {                                        \
            int r, c;                                                                              \
            B_COORD(lid + e * NT, r, c);                                                           \
            bs[r * (LDB_L * VW) + c] = rb[e];                                                      \
        }                                                                                          \
    }
#endif

    FETCH(0);
    STASH(0);
    barrier(CLK_LOCAL_MEM_FENCE);
    for (int t = 0; t < ntiles; t++) {
        const int cur = t & 1;
        if (t + 1 < ntiles)
            FETCH((t + 1) * TSK);
#pragma unroll
        for (int kk = 0; kk < TSK; kk++) {
            tacc_t a[WPTM], b[WPTN];
#pragma unroll
            for (int i = 0; i < WPTM / VW; i++) {
                const tvec_t v = As[cur][kk][i * RTSM + tm];
                UNPACK(a, i * VW, v)
            }
#pragma unroll
            for (int j = 0; j < WPTN / VW; j++) {
                const tvec_t v = Bs[cur][kk][j * RTSN + tn];
                UNPACK(b, j * VW, v)
            }
#pragma unroll
            for (int i = 0; i < WPTM; i++)
#pragma unroll
                for (int j = 0; j < WPTN; j++)
                    acc[i][j] = mad(a[i], b[j], acc[i][j]);
        }
        if (t + 1 < ntiles)
            STASH(1 - cur);
        barrier(CLK_LOCAL_MEM_FENCE);
    }

#pragma unroll
    for (int i = 0; i < WPTM; i++) {
        const int m = gm0 + (i / VW) * (RTSM * VW) + tm * VW + i % VW;
#pragma unroll
        for (int j = 0; j < WPTN; j++) {
            const int n = gn0 + (j / VW) * (RTSN * VW) + tn * VW + j % VW;
#if defined(BOUNDS) || defined(BOUNDS_STORE)
            if (m < M && n < N)
#endif
                TILED_STORE(m, n, acc[i][j]);
        }
    }
}

// Leave nothing behind, so that a program can include this file again for another variant.
#undef TILED_NAME
#undef TILED_EXTRA
#undef TILED_LOAD_B
#undef TILED_STORE
#undef TILED_B_STATE_T
#undef TILED_B_PREP
#undef TILED_LOAD_B_ST
#undef TILED_B_TILE_T
#undef TILED_B_TILE
#undef TILED_LOAD_B_TT
#undef B_TILE_STATE
#undef TILED_SELECT
#undef B_LOAD
#undef B_NST
#undef B_ST
#undef A_AT
#undef A_COORD
#undef B_COORD
#undef A_OK
#undef B_OK
#undef FETCH
#undef STASH
#undef LPT_A4
#undef TILED_B4_AT
#undef LPT_B4
