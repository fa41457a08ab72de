// The three GEMMs of a fully connected layer on farm's tiled GEMM kernel (common/gemm_tiled.cl),
// each with its epilogue fused. Row-major: X [batch][nin], W [nout][nin], Y, dY [batch][nout].
// The host includes gemm_tiled.cl after each part (FC_PART 1, 2, 3):
//   1 fc_forward_tiled:  Y = act(X W^T + bias)      M = batch, N = nout, K = nin (B = W, N x K)
//   2 fc_backward_tiled: dX = (dY W) * relu'(X)     M = batch, N = nin,  K = nout
//   3 fc_update_tiled:   W -= lr * dY^T X            M = nout,  N = nin,  K = batch (A = dY, K x M)
// C is the output (Y, dX, or W itself for the update, read then written by the same work-item).
#ifndef BOUNDS
#define BOUNDS 1
#endif
#undef TRANS_A
#undef TRANS_B
#if FC_PART == 1
#define TRANS_B 1
#define TILED_NAME fc_forward_tiled
#define TILED_EXTRA , __global const tstore_t *bias, const int relu
#define TILED_STORE(m, n, v)                                                                       \
    {                                                                                              \
        tacc_t y_ = (v) + T_LD(bias, (n));                                                         \
        if (relu && y_ < (tacc_t)0)                                                                \
            y_ = (tacc_t)0;                                                                        \
        T_ST(y_, (m) * ldc + (n), C);                                                              \
    }
#elif FC_PART == 2
#define TILED_NAME fc_backward_tiled
#define TILED_EXTRA , __global const tstore_t *x
#define TILED_STORE(m, n, v) T_ST(T_LD(x, (m) * ldc + (n)) > (tacc_t)0 ? (v) : (tacc_t)0, (m) * ldc + (n), C)
#else
#define TRANS_A 1
#define TILED_NAME fc_update_tiled
#define TILED_EXTRA , const float lr
#define TILED_STORE(m, n, v) T_ST((tacc_t)((float)T_LD(C, (m) * ldc + (n)) - lr * (float)(v)), (m) * ldc + (n), C)
#endif
