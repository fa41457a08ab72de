// MLP training step for the `train` benchmark: fully connected layers, ReLU hidden, softmax
// cross-entropy, plain SGD. Row-major: activations [batch][features], weights [out][in].
//
// Precision (host build options): default fp32; -DFARM_FP16 stores activations, gradients and
// weights as half (vload_half/vstore_half, core OpenCL) with fp32 arithmetic; adding
// -DFARM_HALF_ARITH (needs cl_khr_fp16) also does the arithmetic in half.
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

// y[b][o] = act(sum_i x[b][i] * w[o][i] + bias[o]). gid0 = o, gid1 = b.
__kernel void fc_forward(__global const data_t* x, __global const data_t* w,
                         __global const data_t* bias, __global data_t* y, int nin, int nout,
                         int relu) {
    const int o = get_global_id(0);
    const int b = get_global_id(1);
    acc_t acc = 0;
    for (int i = 0; i < nin; ++i) acc += LD(x, b * nin + i) * LD(w, o * nin + i);
    acc += LD(bias, o);
    if (relu && acc < (acc_t)0) acc = (acc_t)0;
    ST(acc, b * nout + o, y);
}

// Softmax cross-entropy per sample, always in fp32 (exp/log in half would saturate).
// loss[b] = logsumexp(z) - z[label]; dz[b][j] = (softmax(z)[j] - onehot[j]) / batch. gid0 = b.
__kernel void softmax_xent(__global const data_t* z, __global const int* labels,
                           __global data_t* dz, __global float* loss, int n, int batch) {
    const int b = get_global_id(0);
    float m = (float)LD(z, b * n);
    for (int j = 1; j < n; ++j) m = fmax(m, (float)LD(z, b * n + j));
    float s = 0.0f;
    for (int j = 0; j < n; ++j) s += exp((float)LD(z, b * n + j) - m);
    const int label = labels[b];
    loss[b] = log(s) - ((float)LD(z, b * n + label) - m);
    const float inv_batch = 1.0f / (float)batch;
    for (int j = 0; j < n; ++j) {
        const float p = exp((float)LD(z, b * n + j) - m) / s;
        ST((acc_t)((p - (j == label ? 1.0f : 0.0f)) * inv_batch), b * n + j, dz);
    }
}

// dx[b][i] = (sum_o dy[b][o] * w[o][i]) * relu'(x[b][i]); x is the layer's input, which is the
// previous layer's ReLU output, so x > 0 exactly where the derivative is 1. gid0 = i, gid1 = b.
__kernel void fc_backward_input(__global const data_t* dy, __global const data_t* w,
                                __global const data_t* x, __global data_t* dx, int nin, int nout) {
    const int i = get_global_id(0);
    const int b = get_global_id(1);
    acc_t acc = 0;
    for (int o = 0; o < nout; ++o) acc += LD(dy, b * nout + o) * LD(w, o * nin + i);
    if (!(LD(x, b * nin + i) > (acc_t)0)) acc = (acc_t)0;
    ST(acc, b * nin + i, dx);
}

// Gradient and SGD update fused: column i < nin updates w[o][i], column nin updates bias[o].
// Must run after fc_backward_input of the same layer (which reads the old weights); the in-order
// queue guarantees it. gid0 = i in [0, nin], gid1 = o.
__kernel void fc_update(__global const data_t* dy, __global const data_t* x, __global data_t* w,
                        __global data_t* bias, int nin, int nout, int batch, float lr) {
    const int i = get_global_id(0);
    const int o = get_global_id(1);
    float g = 0.0f;
    if (i < nin) {
        for (int b = 0; b < batch; ++b) g += (float)LD(dy, b * nout + o) * (float)LD(x, b * nin + i);
        ST((acc_t)((float)LD(w, o * nin + i) - lr * g), o * nin + i, w);
    } else {
        for (int b = 0; b < batch; ++b) g += (float)LD(dy, b * nout + o);
        ST((acc_t)((float)LD(bias, o) - lr * g), o, bias);
    }
}

// Bias gradient and SGD step of the tiled path: bias[o] -= lr * sum_b dy[b][o]. gid0 = o.
__kernel void bias_update(__global const data_t* dy, __global data_t* bias, int nout, int batch, float lr) {
    const int o = get_global_id(0);
    if (o >= nout) return;
    float g = 0.0f;
    for (int b = 0; b < batch; ++b) g += (float)LD(dy, b * nout + o);
    ST((acc_t)((float)LD(bias, o) - lr * g), o, bias);
}
