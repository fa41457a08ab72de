// CPU devices: im2col straight into the B panels of common/gemm_packed.cl, Bp[N/PW][K][PW]
// (columns past the layer's n_real are zero), so the packed GEMM streams them sequentially.
// Global size: (K, padded N / PW). Follows conv_hooks.cl and gemm_packed.cl in one program.
__kernel void im2col_pack(__global const cstore_t *in, __global float *Bp, const int K, const int n_real,
                          const int hin, const int win, const int wout, const int ksz, const int stride,
                          const int pad)
{
    const int k = get_global_id(0), nb = get_global_id(1);
    __global float *dst = Bp + (nb * K + k) * PW;
    // row k of col fixes the input channel and window offset; walk the PW columns incrementally
    const int kk2 = ksz * ksz, ci = k / kk2, r = k - ci * kk2, kh = r / ksz, kw = r - kh * ksz;
    const int n0 = nb * PW;
    int oh = n0 / wout, ow = n0 - oh * wout;
    __global const cstore_t *plane = in + ci * hin * win;
    for (int j = 0; j < PW; j++) {
        const int ih = oh * stride - pad + kh, iw = ow * stride - pad + kw;
        const int inside = n0 + j < n_real && ih >= 0 && ih < hin && iw >= 0 && iw < win;
        dst[j] = inside ? C_LD(plane, ih * win + iw) : 0.0f;
        if (++ow == wout) {
            ow = 0;
            oh++;
        }
    }
}
