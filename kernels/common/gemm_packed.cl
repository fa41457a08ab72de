// farm's packed GEMM for CPU OpenCL devices (BLAS-style panels), shared by gemm and by cnn's
// convolutions on CPU devices: C[M][N] = A[M][K] * B[K][N] on panels repacked on the device
// (pack_a, pack_b; cnn writes the B panels straight from its im2col), so the microkernel streams
// memory sequentially: one vector load of B and TM broadcasts of A per k.
//
// Build options: -DTM (rows of C per work-item), -DVW (vector width 2..16), -DVN (vectors per
// row, default 1), -DFP16=0|1 (half storage of A, B, C; fp32 arithmetic).
// Hooks (defined before this file): PACKED_EXTRA (extra kernel parameters after C) and
// PACKED_STORE_VEC(m, n0, v) (writes outputs m, n0 .. n0 + VW - 1 from the vector v; default: a
// vector store into C).

#define PCAT_(a, b) a##b
#define PCAT(a, b) PCAT_(a, b)
#if FP16
typedef half pstore_t;
#define P_LOAD1(p) vload_half(0, (p))
#define P_LOADV(p) PCAT(vload_half, VW)(0, (p))
#define P_STOREV(v, p) PCAT(vstore_half, VW)((v), 0, (p))
#else
typedef float pstore_t;
#define P_LOAD1(p) (*(p))
#define P_LOADV(p) PCAT(vload, VW)(0, (p))
#define P_STOREV(v, p) PCAT(vstore, VW)((v), 0, (p))
#endif
typedef PCAT(float, VW) pvec_t;
#ifndef PACKED_EXTRA
#define PACKED_EXTRA
#endif

// Packed variant (BLAS-style panels, so the inner loop streams memory sequentially):
//   Ap[M/TM][K][TM]  (TM rows of A interleaved per k)
//   Bp[N/(VW*VN)][K][VW*VN]  (VN vectors of VW columns of B per k)
// Each work-item computes TM x (VN*VW) of C: TM*VN independent vector accumulators hide the
// multiply-add latency (-DVN, default 1).
#ifndef VN
#define VN 1
#endif
#define PW (VW * VN)

__kernel void pack_a(const int K, __global const pstore_t *A, __global float *Ap)
{
    const int k = get_global_id(0), mb = get_global_id(1);
    for (int r = 0; r < TM; r++)
        Ap[(mb * K + k) * TM + r] = P_LOAD1(A + (mb * TM + r) * K + k);
}

__kernel void pack_b(const int K, const int N, __global const pstore_t *B, __global float *Bp)
{
    const int k = get_global_id(0), nb = get_global_id(1);
    for (int v = 0; v < VN; v++)
        PCAT(vstore, VW)(P_LOADV(B + k * N + nb * PW + v * VW), 0, Bp + (nb * K + k) * PW + v * VW);
}

// Global size: (N / (VW*VN), M / TM).
__kernel void gemm_packed(const int M, const int N, const int K, __global const float *Ap,
                          __global const float *Bp, __global pstore_t *C PACKED_EXTRA)
{
    const int nb = get_global_id(0), mb = get_global_id(1);
    (void)M;
    pvec_t acc[TM][VN];
    for (int r = 0; r < TM; r++)
        for (int v = 0; v < VN; v++)
            acc[r][v] = (pvec_t)(0.0f);
    __global const float *a = Ap + mb * K * TM;
    __global const float *b = Bp + nb * K * PW;
    for (int k = 0; k < K; k++) {
        pvec_t bv[VN];
        for (int v = 0; v < VN; v++)
            bv[v] = PCAT(vload, VW)(0, b + k * PW + v * VW);
        for (int r = 0; r < TM; r++) {
            const pvec_t ar = (pvec_t)(a[k * TM + r]);
            for (int v = 0; v < VN; v++)
                acc[r][v] = mad(ar, bv[v], acc[r][v]);
        }
    }
    for (int r = 0; r < TM; r++)
        for (int v = 0; v < VN; v++) {
#ifdef PACKED_STORE_VEC
            PACKED_STORE_VEC(mb * TM + r, nb * PW + v * VW, acc[r][v]);
#else
            P_STOREV(acc[r][v], C + (mb * TM + r) * N + nb * PW + v * VW);
#endif
        }
}
