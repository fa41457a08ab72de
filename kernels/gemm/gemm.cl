// farm gemm kernels: C[M][N] = A[M][K] * B[K][N], row-major, on buffers padded by the host to
// multiples of the tile (padding is zero, so no bounds checks in the inner loops).
//
// Build options (set by gpu.c):
//   -DFP16=0|1        storage type: float, or half via vload_half/vstore_half (fp32 arithmetic;
//                     works without cl_khr_fp16)
//   -DTM=n -DVW=n     gemm_regblock: each work-item computes TM rows x VW columns of C, VW as one
//                     vector (2, 4, 8, 16); K is consumed 4 at a time with float4 loads of A.
//   -DTSM -DTSN -DTSK -DWPTM -DWPTN   gemm_local: work-group tile TSM x TSN staged through local
//                     memory TSK deep; each work-item computes WPTM x WPTN outputs.
//
// regblock suits CPU OpenCL (PoCL: one work-item's vector arithmetic maps onto SIMD lanes, the
// caches do the tiling); local suits GPUs, where local memory is the fast shared scratchpad.

#define CAT_(a, b) a##b
#define CAT(a, b) CAT_(a, b)

#if FP16
typedef half store_t;
#define LOAD1(p) vload_half(0, (p))
#define LOAD4(p) vload_half4(0, (p))
#define LOADV(p) CAT(vload_half, VW)(0, (p))
#define STOREV(v, p) CAT(vstore_half, VW)((v), 0, (p))
#define STORE1(v, p) vstore_half((v), 0, (p))
#else
typedef float store_t;
#define LOAD1(p) (*(p))
#define LOAD4(p) vload4(0, (p))
#define LOADV(p) CAT(vload, VW)(0, (p))
#define STOREV(v, p) CAT(vstore, VW)((v), 0, (p))
#define STORE1(v, p) (*(p) = (v))
#endif

#ifdef VW
typedef CAT(float, VW) vec_t;

// Global size: (N / VW, M / TM). lda = K, ldb = ldc = N (all padded).
__kernel void gemm_regblock(const int M, const int N, const int K, __global const store_t *A,
                            __global const store_t *B, __global store_t *C)
{
    const int n0 = get_global_id(0) * VW;
    const int m0 = get_global_id(1) * TM;
    (void)M;
    vec_t acc[TM];
    for (int r = 0; r < TM; r++)
        acc[r] = (vec_t)(0.0f);
    __global const store_t *a = A + m0 * K;
    __global const store_t *b = B + n0;
    for (int k = 0; k < K; k += 4) {
        const vec_t b0 = LOADV(b + (k + 0) * N);
        const vec_t b1 = LOADV(b + (k + 1) * N);
        const vec_t b2 = LOADV(b + (k + 2) * N);
        const vec_t b3 = LOADV(b + (k + 3) * N);
        for (int r = 0; r < TM; r++) {
            const float4 av = LOAD4(a + r * K + k);
            acc[r] = mad((vec_t)(av.x), b0, acc[r]);
            acc[r] = mad((vec_t)(av.y), b1, acc[r]);
            acc[r] = mad((vec_t)(av.z), b2, acc[r]);
            acc[r] = mad((vec_t)(av.w), b3, acc[r]);
        }
    }
    for (int r = 0; r < TM; r++)
        STOREV(acc[r], C + (m0 + r) * N + n0);
}
#endif

#ifdef TSM
#define RTSM (TSM / WPTM)
#define RTSN (TSN / WPTN)

// Work-group (RTSN, RTSM); global size (N / WPTN, M / WPTM).
__kernel __attribute__((reqd_work_group_size(RTSN, RTSM, 1))) void gemm_local(
    const int M, const int N, const int K, __global const store_t *A, __global const store_t *B,
    __global store_t *C)
{
    __local float As[TSK][TSM];
    __local float Bs[TSK][TSN + 1];
    (void)M;
    const int tn = get_local_id(0), tm = get_local_id(1);
    const int lid = tm * RTSN + tn;
    const int gm0 = get_group_id(1) * TSM, gn0 = get_group_id(0) * TSN;
    float acc[WPTM][WPTN];
    for (int i = 0; i < WPTM; i++)
        for (int j = 0; j < WPTN; j++)
            acc[i][j] = 0.0f;
    for (int t = 0; t < K; t += TSK) {
        for (int l = lid; l < TSK * TSM; l += RTSM * RTSN) {
            const int r = l / TSK, kk = l % TSK;
            As[kk][r] = LOAD1(A + (gm0 + r) * K + t + kk);
        }
        for (int l = lid; l < TSK * TSN; l += RTSM * RTSN) {
            const int kk = l / TSN, c = l % TSN;
            Bs[kk][c] = LOAD1(B + (t + kk) * N + gn0 + c);
        }
        barrier(CLK_LOCAL_MEM_FENCE);
        for (int kk = 0; kk < TSK; kk++) {
            float breg[WPTN];
            for (int j = 0; j < WPTN; j++)
                breg[j] = Bs[kk][tn + j * RTSN];
            for (int i = 0; i < WPTM; i++) {
                const float a = As[kk][tm + i * RTSM];
                for (int j = 0; j < WPTN; j++)
                    acc[i][j] = mad(a, breg[j], acc[i][j]);
            }
        }
        barrier(CLK_LOCAL_MEM_FENCE);
    }
    for (int i = 0; i < WPTM; i++)
        for (int j = 0; j < WPTN; j++)
            STORE1(acc[i][j], C + (gm0 + tm + i * RTSM) * N + gn0 + tn + j * RTSN);
}
#endif

#ifdef VW
// Packed variant (BLAS-style panels, so the inner loop streams memory sequentially):
//   Ap[M/TM][K][TM]  (TM rows of A interleaved per k)
//   Bp[N/(VW*VN)][K][VW*VN]  (VN vectors of VW columns of B per k)
// Each work-item computes TM x (VN*VW) of C: TM*VN independent vector accumulators hide the
// multiply-add latency (-DVN, default 1).
#ifndef VN
#define VN 1
#endif
#define PW (VW * VN)

__kernel void pack_a(const int K, __global const store_t *A, __global float *Ap)
{
    const int k = get_global_id(0), mb = get_global_id(1);
    for (int r = 0; r < TM; r++)
        Ap[(mb * K + k) * TM + r] = LOAD1(A + (mb * TM + r) * K + k);
}

__kernel void pack_b(const int K, const int N, __global const store_t *B, __global float *Bp)
{
    const int k = get_global_id(0), nb = get_global_id(1);
    for (int v = 0; v < VN; v++)
        CAT(vstore, VW)(LOADV(B + k * N + nb * PW + v * VW), 0, Bp + (nb * K + k) * PW + v * VW);
}

// Global size: (N / (VW*VN), M / TM).
__kernel void gemm_packed(const int M, const int N, const int K, __global const float *Ap,
                          __global const float *Bp, __global store_t *C)
{
    const int nb = get_global_id(0), mb = get_global_id(1);
    (void)M;
    vec_t acc[TM][VN];
    for (int r = 0; r < TM; r++)
        for (int v = 0; v < VN; v++)
            acc[r][v] = (vec_t)(0.0f);
    __global const float *a = Ap + mb * K * TM;
    __global const float *b = Bp + nb * K * PW;
    for (int k = 0; k < K; k++) {
        vec_t bv[VN];
        for (int v = 0; v < VN; v++)
            bv[v] = CAT(vload, VW)(0, b + k * PW + v * VW);
        for (int r = 0; r < TM; r++) {
            const vec_t ar = (vec_t)(a[k * TM + r]);
            for (int v = 0; v < VN; v++)
                acc[r][v] = mad(ar, bv[v], acc[r][v]);
        }
    }
    for (int r = 0; r < TM; r++)
        for (int v = 0; v < VN; v++)
            STOREV(acc[r][v], C + (mb * TM + r) * N + nb * PW + v * VW);
}
#endif
