/* CPU paths of the `cnn` benchmark: plain C, one thread or split over output maps on a pool. */
#include "cnn_cpu.h"

#include <stdlib.h>
#include <string.h>

#include "../common/farm.h"

void cnn_cpu_init(cnn_cpu *c, const cnn_net *net, int fp16, farm_pool *pool)
{
    memset(c, 0, sizeof *c);
    c->net = net;
    c->fp16 = fp16;
    c->pool = pool;
    for (int t = 0; t < net->ntensors; ++t)
        c->tensor[t] = farm_alloc(cnn_tensor_count(net, t) * sizeof(float));
}

void cnn_cpu_free(cnn_cpu *c)
{
    for (int t = 0; t < c->net->ntensors; ++t)
        free(c->tensor[t]);
    memset(c, 0, sizeof *c);
}

/* Output maps [co_begin, co_end) of a convolution. The loop order (input channel, kernel row,
 * kernel column, then the output plane) makes the inner loop a contiguous axpy that compilers
 * vectorise, and sums in the same order as the OpenCL kernel. */
static void conv_maps(const cnn_layer *l, const float *in, float *out, int co_begin, int co_end, int fp16)
{
    const int plane = l->hout * l->wout;
    const int s = l->stride;
    for (int co = co_begin; co < co_end; ++co) {
        float *o = out + (size_t)(l->out_c_offset + co) * plane;
        memset(o, 0, sizeof(float) * (size_t)plane);
        for (int ci = 0; ci < l->cin; ++ci) {
            const float *x = in + (size_t)ci * l->hin * l->win;
            for (int kh = 0; kh < l->k; ++kh) {
                for (int kw = 0; kw < l->k; ++kw) {
                    const float wv = l->w[(((size_t)co * l->cin + ci) * l->k + kh) * l->k + kw];
                    /* output columns whose input column iw = ow*s - pad + kw lies inside */
                    const int off = kw - l->pad;
                    int ow_lo = off >= 0 ? 0 : (-off + s - 1) / s;
                    int ow_hi = (l->win - 1 - off) / s; /* inclusive */
                    if (l->win - 1 - off < 0)
                        continue;
                    if (ow_hi > l->wout - 1)
                        ow_hi = l->wout - 1;
                    for (int oh = 0; oh < l->hout; ++oh) {
                        const int ih = oh * s - l->pad + kh;
                        if (ih < 0 || ih >= l->hin)
                            continue;
                        float *orow = o + (size_t)oh * l->wout;
                        const float *xrow = x + (size_t)ih * l->win;
                        if (s == 1)
                            for (int ow = ow_lo; ow <= ow_hi; ++ow)
                                orow[ow] += wv * xrow[ow + off];
                        else
                            for (int ow = ow_lo; ow <= ow_hi; ++ow)
                                orow[ow] += wv * xrow[ow * s + off];
                    }
                }
            }
        }
        const float bias = l->b[co];
        for (int p = 0; p < plane; ++p) {
            float v = o[p] + bias;
            v = (l->relu && v < 0.0f) ? 0.0f : v;
            o[p] = (l->relu == CNN_RELU6 && v > 6.0f) ? 6.0f : v;
        }
        if (fp16)
            farm_round_f16(o, (size_t)plane);
    }
}

static void maxpool_maps(const cnn_layer *l, const float *in, float *out, int c_begin, int c_end)
{
    for (int c = c_begin; c < c_end; ++c) {
        const float *x = in + (size_t)c * l->hin * l->win;
        float *o = out + (size_t)c * l->hout * l->wout;
        for (int oh = 0; oh < l->hout; ++oh) {
            for (int ow = 0; ow < l->wout; ++ow) {
                const int h0 = oh * l->stride, w0 = ow * l->stride;
                const int h1 = h0 + l->k < l->hin ? h0 + l->k : l->hin;
                const int w1 = w0 + l->k < l->win ? w0 + l->k : l->win;
                float m = x[h0 * l->win + w0];
                for (int h = h0; h < h1; ++h)
                    for (int w = w0; w < w1; ++w)
                        m = x[h * l->win + w] > m ? x[h * l->win + w] : m;
                o[oh * l->wout + ow] = m;
            }
        }
    }
}

static void avgpool_maps(const cnn_layer *l, const float *in, float *out, int c_begin, int c_end, int fp16)
{
    const int plane = l->hin * l->win;
    for (int c = c_begin; c < c_end; ++c) {
        float s = 0.0f;
        for (int i = 0; i < plane; ++i)
            s += in[(size_t)c * plane + i];
        out[c] = s / (float)plane;
        if (fp16)
            farm_round_f16(&out[c], 1);
    }
}

/* Depthwise: channel c of the output is channel c of the input under its own k x k filter. */
static void dwconv_maps(const cnn_layer *l, const float *in, float *out, int c_begin, int c_end, int fp16)
{
    for (int c = c_begin; c < c_end; ++c) {
        const float *x = in + (size_t)c * l->hin * l->win;
        const float *wk = l->w + (size_t)c * l->k * l->k;
        float *o = out + (size_t)c * l->hout * l->wout;
        for (int oh = 0; oh < l->hout; ++oh) {
            for (int ow = 0; ow < l->wout; ++ow) {
                float acc = 0.0f;
                for (int kh = 0; kh < l->k; ++kh) {
                    const int ih = oh * l->stride - l->pad + kh;
                    if (ih < 0 || ih >= l->hin)
                        continue;
                    for (int kw = 0; kw < l->k; ++kw) {
                        const int iw = ow * l->stride - l->pad + kw;
                        if (iw >= 0 && iw < l->win)
                            acc += x[ih * l->win + iw] * wk[kh * l->k + kw];
                    }
                }
                float v = acc + l->b[c];
                v = (l->relu && v < 0.0f) ? 0.0f : v;
                o[oh * l->wout + ow] = (l->relu == CNN_RELU6 && v > 6.0f) ? 6.0f : v;
            }
        }
        if (fp16)
            farm_round_f16(o, (size_t)l->hout * l->wout);
    }
}

static void add_maps(const cnn_layer *l, const float *a, const float *b, float *out, int c_begin, int c_end,
                     int fp16)
{
    const size_t plane = (size_t)l->hout * l->wout;
    for (size_t i = (size_t)c_begin * plane; i < (size_t)c_end * plane; ++i) {
        const float v = a[i] + b[i];
        out[i] = (l->relu && v < 0.0f) ? 0.0f : v;
    }
    if (fp16)
        farm_round_f16(out + (size_t)c_begin * plane, (size_t)(c_end - c_begin) * plane);
}

typedef struct {
    const cnn_cpu *c;
    const cnn_layer *l;
} layer_task;

static void run_range(const cnn_cpu *c, const cnn_layer *l, int begin, int end)
{
    const float *in = c->tensor[l->in];
    float *out = c->tensor[l->out];
    switch (l->kind) {
    case CNN_CONV:
        conv_maps(l, in, out, begin, end, c->fp16);
        break;
    case CNN_MAXPOOL:
        maxpool_maps(l, in, out, begin, end);
        break;
    case CNN_AVGPOOL:
        avgpool_maps(l, in, out, begin, end, c->fp16);
        break;
    case CNN_DWCONV:
        dwconv_maps(l, in, out, begin, end, c->fp16);
        break;
    case CNN_ADD:
        add_maps(l, in, c->tensor[l->in2], out, begin, end, c->fp16);
        break;
    }
}

static void layer_worker(void *user, int tid, int nthreads)
{
    const layer_task *t = user;
    size_t b, e;
    farm_range((size_t)t->l->cout, tid, nthreads, &b, &e);
    if (b < e)
        run_range(t->c, t->l, (int)b, (int)e);
}

void cnn_cpu_layer(cnn_cpu *c, int index)
{
    const cnn_layer *l = &c->net->layer[index];
    if (c->pool && farm_pool_size(c->pool) > 1) {
        layer_task t = {c, l};
        farm_pool_run(c->pool, layer_worker, &t);
    } else {
        run_range(c, l, 0, l->cout);
    }
}

const float *cnn_cpu_result(const cnn_cpu *c)
{
    return c->tensor[c->net->layer[c->net->nlayers - 1].out];
}
