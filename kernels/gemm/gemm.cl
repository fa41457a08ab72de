// farm gemm kernels: C[M][N] = A[M][K] * B[K][N], row-major, on buffers padded by the host to
// multiples of the tile (padding is zero, so no bounds checks in the inner loops).
//
// Build options (set by gpu.c):
//   -DFP16=0|1        storage type: float, or half via vload_half/vstore_half (fp32 arithmetic;
//                     works without cl_khr_fp16)
//   -DTM=n -DVW=n     gemm_regblock: each work-item computes TM rows x VW columns of C, VW as one
//                     vector (2, 4, 8, 16); K is consumed 4 at a time with float4 loads of A.
// The packed kernels are common/gemm_packed.cl (shared with cnn's convolutions on CPU devices).
//
// regblock and packed suit CPU OpenCL (PoCL: one work-item's vector arithmetic maps onto SIMD
// lanes, the caches do the tiling). The GPU kernel (`--kernel=local`) is common/gemm_tiled.cl,
// shared with cnn and train.

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
