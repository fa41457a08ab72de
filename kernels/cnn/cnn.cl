// SqueezeNet layers for the `cnn` benchmark. Layout: CHW (batch 1), weights OIHW.
//
// Precision is chosen at build time by the host:
//   (default)                 fp32 storage, fp32 arithmetic
//   -DFARM_FP16               half storage (vload_half/vstore_half, core OpenCL), fp32 arithmetic;
//                             used where the device lacks cl_khr_fp16 (flagged by the host)
//   -DFARM_FP16 -DFARM_HALF_ARITH  half storage and half arithmetic (needs cl_khr_fp16)
#ifdef FARM_FP16
#ifdef FARM_HALF_ARITH
#pragma OPENCL EXTENSION cl_khr_fp16 : enable
typedef half acc_t;
#define LD(p, i) ((p)[(i)])
#define ST(v, i, p) ((p)[(i)] = (v))
#else
typedef float acc_t;
#define LD(p, i) vload_half((i), (p))
#define ST(v, i, p) vstore_half((v), (i), (p))
#endif
typedef half data_t;
#else
typedef float acc_t;
typedef float data_t;
#define LD(p, i) ((p)[(i)])
#define ST(v, i, p) ((p)[(i)] = (v))
#endif

// One work item computes G output feature maps at one output pixel; G is the paper's thread
// granularity, a compile-time constant so the accumulators stay in registers.
// Output channels land at out_c_offset inside an output tensor of out_c_total maps, which is how a
// fire module's two expand convolutions concatenate without a copy.
#define DEFINE_CONV(G)                                                                              \
    __kernel void conv_g##G(__global const data_t* in, __global const data_t* w,                   \
                            __global const data_t* bias, __global data_t* out, int cin, int hin,   \
                            int win, int hout, int wout, int k, int stride, int pad,               \
                            int out_c_offset, int relu) {                                          \
        const int pix = get_global_id(0);                                                          \
        const int co0 = (int)get_global_id(1) * G;                                                 \
        if (pix >= hout * wout) return;                                                            \
        const int oh = pix / wout;                                                                 \
        const int ow = pix - oh * wout;                                                            \
        const int ih0 = oh * stride - pad;                                                         \
        const int iw0 = ow * stride - pad;                                                         \
        const int wstride = cin * k * k;                                                           \
        acc_t acc[G];                                                                              \
        for (int j = 0; j < G; ++j) acc[j] = 0;                                                    \
        for (int ci = 0; ci < cin; ++ci) {                                                         \
            for (int kh = 0; kh < k; ++kh) {                                                       \
                const int ih = ih0 + kh;                                                           \
                if (ih < 0 || ih >= hin) continue;                                                 \
                for (int kw = 0; kw < k; ++kw) {                                                   \
                    const int iw = iw0 + kw;                                                       \
                    if (iw < 0 || iw >= win) continue;                                             \
                    const acc_t x = LD(in, (ci * hin + ih) * win + iw);                            \
                    const int widx = co0 * wstride + (ci * k + kh) * k + kw;                       \
                    for (int j = 0; j < G; ++j) acc[j] += x * LD(w, widx + j * wstride);           \
                }                                                                                  \
            }                                                                                      \
        }                                                                                          \
        const int plane = hout * wout;                                                             \
        for (int j = 0; j < G; ++j) {                                                              \
            acc_t v = acc[j] + LD(bias, co0 + j);                                                  \
            if (relu && v < (acc_t)0) v = (acc_t)0;                                                \
            if (relu == 2 && v > (acc_t)6) v = (acc_t)6;                                           \
            ST(v, (out_c_offset + co0 + j) * plane + pix, out);                                    \
        }                                                                                          \
    }

// The granularities of the paper (Motamedi et al.): 1..64 output maps per work item.
DEFINE_CONV(1)
DEFINE_CONV(2)
DEFINE_CONV(4)
DEFINE_CONV(6)
DEFINE_CONV(8)
DEFINE_CONV(12)
DEFINE_CONV(16)
DEFINE_CONV(24)
DEFINE_CONV(32)
DEFINE_CONV(48)
DEFINE_CONV(64)

// Max pooling without padding, ceil mode (windows clipped at the right/bottom edge), as Caffe and
// torchvision's SqueezeNet do. gid0 = output pixel, gid1 = channel.
__kernel void maxpool(__global const data_t* in, __global data_t* out, int hin, int win, int hout,
                      int wout, int k, int stride) {
    const int pix = get_global_id(0);
    const int c = get_global_id(1);
    if (pix >= hout * wout) return;
    const int oh = pix / wout;
    const int ow = pix - oh * wout;
    const int h0 = oh * stride;
    const int w0 = ow * stride;
    const int h1 = min(h0 + k, hin);
    const int w1 = min(w0 + k, win);
    acc_t m = LD(in, (c * hin + h0) * win + w0);
    for (int h = h0; h < h1; ++h)
        for (int x = w0; x < w1; ++x) m = max(m, (acc_t)LD(in, (c * hin + h) * win + x));
    ST(m, c * hout * wout + pix, out);
}

// Global average pooling (conv10 -> 1000 class scores). gid0 = channel (padded to the work-group). Sums in fp32 always: the
// plane has up to 13*13 values and this layer is negligible in time.
__kernel void avgpool(__global const data_t* in, __global data_t* out, int plane, int channels) {
    const int c = get_global_id(0);
    if (c >= channels) return;
    float s = 0.0f;
    for (int i = 0; i < plane; ++i) s += (float)LD(in, c * plane + i);
    ST((acc_t)(s / (float)plane), c, out);
}

// Depthwise convolution (single-layer mode): channel c under its own k x k filter, + bias, ReLU.
// gid0 = output pixel, gid1 = channel.
__kernel void dwconv(__global const data_t* in, __global const data_t* w, __global const data_t* bias,
                     __global data_t* out, int hin, int win, int hout, int wout, int k, int stride, int pad,
                     int relu) {
    const int pix = get_global_id(0);
    const int c = get_global_id(1);
    if (pix >= hout * wout) return;
    const int oh = pix / wout;
    const int ow = pix - oh * wout;
    acc_t acc = 0;
    for (int kh = 0; kh < k; ++kh) {
        const int ih = oh * stride - pad + kh;
        if (ih < 0 || ih >= hin) continue;
        for (int kw = 0; kw < k; ++kw) {
            const int iw = ow * stride - pad + kw;
            if (iw < 0 || iw >= win) continue;
            acc += (acc_t)LD(in, (c * hin + ih) * win + iw) * (acc_t)LD(w, (c * k + kh) * k + kw);
        }
    }
    acc_t v = acc + (acc_t)LD(bias, c);
    if (relu && v < (acc_t)0) v = (acc_t)0;
    if (relu == 2 && v > (acc_t)6) v = (acc_t)6;
    ST(v, c * hout * wout + pix, out);
}

// Element-wise sum of two tensors of n values (a residual add), then ReLU where relu is set
// (ResNet's blocks). gid0 = element.
__kernel void add(__global const data_t* a, __global const data_t* b, __global data_t* out, int n, int relu) {
    const int i = get_global_id(0);
    if (i >= n) return;
    acc_t v = (acc_t)LD(a, i) + (acc_t)LD(b, i);
    if (relu && v < (acc_t)0) v = (acc_t)0;
    ST(v, i, out);
}
