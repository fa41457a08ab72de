// CPU devices: im2col straight into the B panels of common/gemm_packed.cl, Bp[N/PW][K][PW]
// (columns past the layer's n_real are zero), so the packed GEMM streams them sequentially.
// Follows conv_hooks.cl and gemm_packed.cl in one program.
//
// PoCL runs a work-group as a loop over work-items that it vectorises along dimension 0, so
// dimension 0 walks adjacent panel columns: adjacent stores, and loads of adjacent pixels. The
// window origin of each pixel comes from the layer's table (ptab, see conv_hooks.cl) instead of two
// integer divisions per element, which do not vectorise. Global size: (PW, K, padded N / PW).
__kernel void im2col_pack(__global const cstore_t *in, __global float *Bp, __global const int4 *ptab, const int K,
                          const int n_real, const int hin, const int win, const int ksz)
{
    const int j = get_global_id(0), k = get_global_id(1), nb = get_global_id(2);
    const int n = nb * PW + j;
    const int kk2 = ksz * ksz, ci = k / kk2, r = k - ci * kk2, kh = r / ksz, kw = r - kh * ksz;
    float v = 0.0f;
    if (n < n_real) {
        const int4 pt = ptab[n];
        const int ih = pt.y + kh, iw = pt.z + kw;
        if ((uint)ih < (uint)hin && (uint)iw < (uint)win)
            v = C_LD(in, (ci * hin + kh) * win + kw + pt.x);
    }
    Bp[(nb * K + k) * PW + j] = v;
}

// 1x1, stride 1, no padding: row k of im2col is input channel k as it is, so the panels are a
// vector copy (as gemm's pack_b), zero-filled past n_real. Global size: (K, padded N / PW).
__kernel void im2col_pack_1x1(__global const cstore_t *in, __global float *Bp, const int K, const int n_real)
{
    const int k = get_global_id(0), nb = get_global_id(1);
    const int n0 = nb * PW;
    __global float *dst = Bp + (nb * K + k) * PW;
    __global const cstore_t *src = in + k * n_real + n0;
    if (n0 + PW <= n_real) {
        for (int v = 0; v < VN; v++)
            PCAT(vstore, VW)(P_LOADV(src + v * VW), 0, dst + v * VW);
    } else {
        for (int j = 0; j < PW; j++)
            dst[j] = n0 + j < n_real ? C_LD(src, j) : 0.0f;
    }
}
