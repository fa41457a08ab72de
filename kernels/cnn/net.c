/* SqueezeNet layout, granularity spec, weights (see net.h). */
#define _POSIX_C_SOURCE 200809L
#include "net.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../common/farm.h"

const int cnn_g_values[] = {1, 2, 4, 6, 8, 12, 16, 24, 32, 48, 64};
const int cnn_g_count = (int)(sizeof cnn_g_values / sizeof cnn_g_values[0]);

typedef struct {
    cnn_net *net;
    int cur;      /* tensor holding the current activation */
    char *err;
    size_t errlen;
    int failed;
} builder;

static int add_tensor(builder *b, int c, int h, int w)
{
    cnn_net *n = b->net;
    n->tensor[n->ntensors] = (cnn_dims){c, h, w};
    return n->ntensors++;
}

static cnn_layer *add_layer(builder *b, const char *name, cnn_kind kind, int in)
{
    cnn_layer *l = &b->net->layer[b->net->total_layers++];
    memset(l, 0, sizeof *l);
    snprintf(l->name, sizeof l->name, "%s", name);
    l->kind = kind;
    l->in = in;
    l->cin = b->net->tensor[in].c;
    l->hin = b->net->tensor[in].h;
    l->win = b->net->tensor[in].w;
    l->g = l->g_requested = 1;
    return l;
}

static int conv_into(builder *b, const char *name, int in, int out, int c_offset, int cout, int k,
                     int stride, int pad)
{
    cnn_layer *l = add_layer(b, name, CNN_CONV, in);
    l->cout = cout;
    l->k = k;
    l->stride = stride;
    l->pad = pad;
    l->relu = 1;
    l->hout = (l->hin + 2 * pad - k) / stride + 1;
    l->wout = (l->win + 2 * pad - k) / stride + 1;
    if (l->hin + 2 * pad < k) {
        b->failed = 1;
        snprintf(b->err, b->errlen, "--input-size too small: %s sees %dx%d, needs at least %dx%d", name,
                 l->hin, l->win, k, k);
        return in;
    }
    if (out < 0)
        out = add_tensor(b, cout, l->hout, l->wout);
    l->out = out;
    l->out_c_offset = c_offset;
    return out;
}

static void conv(builder *b, const char *name, int cout, int k, int stride, int pad)
{
    if (!b->failed)
        b->cur = conv_into(b, name, b->cur, -1, 0, cout, k, stride, pad);
}

static void maxpool(builder *b, const char *name)
{
    if (b->failed)
        return;
    cnn_layer *l = add_layer(b, name, CNN_MAXPOOL, b->cur);
    l->k = 3;
    l->stride = 2;
    l->cout = l->cin;
    if (l->hin < l->k) {
        b->failed = 1;
        snprintf(b->err, b->errlen, "--input-size too small: %s sees %dx%d, needs at least 3x3", name,
                 l->hin, l->win);
        return;
    }
    /* ceil mode, as Caffe's and torchvision's SqueezeNet */
    l->hout = (l->hin - l->k + l->stride - 1) / l->stride + 1;
    l->wout = (l->win - l->k + l->stride - 1) / l->stride + 1;
    l->out = b->cur = add_tensor(b, l->cout, l->hout, l->wout);
}

static void fire(builder *b, int index, int squeeze, int expand)
{
    if (b->failed)
        return;
    char name[40];
    snprintf(name, sizeof name, "fire%d/squeeze1x1", index);
    int s = conv_into(b, name, b->cur, -1, 0, squeeze, 1, 1, 0);
    if (b->failed)
        return;
    const cnn_dims sd = b->net->tensor[s];
    int e = add_tensor(b, 2 * expand, sd.h, sd.w);
    snprintf(name, sizeof name, "fire%d/expand1x1", index);
    conv_into(b, name, s, e, 0, expand, 1, 1, 0);
    snprintf(name, sizeof name, "fire%d/expand3x3", index);
    conv_into(b, name, s, e, expand, expand, 3, 1, 1);
    b->cur = e;
}

int cnn_build(cnn_net *net, const char *model, int input_size, char *err, size_t errlen)
{
    memset(net, 0, sizeof *net);
    builder b = {net, 0, err, errlen, 0};
    add_tensor(&b, 3, input_size, input_size);
    const int v10 = strcmp(model, "squeezenet1.0") == 0;
    if (!v10 && strcmp(model, "squeezenet1.1") != 0) {
        snprintf(err, errlen, "--model=%s: expected squeezenet1.0 or squeezenet1.1", model);
        return -1;
    }
    static const int squeeze[] = {16, 16, 32, 32, 48, 48, 64, 64};
    static const int expand[] = {64, 64, 128, 128, 192, 192, 256, 256};
    if (v10)
        conv(&b, "conv1", 96, 7, 2, 0);
    else
        conv(&b, "conv1", 64, 3, 2, 0);
    maxpool(&b, "pool1");
    for (int f = 2; f <= 9; ++f) {
        fire(&b, f, squeeze[f - 2], expand[f - 2]);
        /* v1.0 pools after fire4 and fire8, v1.1 after fire3 and fire5 */
        if ((v10 && (f == 4 || f == 8)) || (!v10 && (f == 3 || f == 5))) {
            char name[16];
            snprintf(name, sizeof name, "pool%d", f);
            maxpool(&b, name);
        }
    }
    conv(&b, "conv10", 1000, 1, 1, 0);
    if (b.failed)
        return -1;
    cnn_layer *l = add_layer(&b, "pool10", CNN_AVGPOOL, b.cur);
    l->cout = l->cin;
    l->hout = l->wout = 1;
    l->out = add_tensor(&b, l->cout, 1, 1);
    net->nlayers = net->total_layers;
    return 0;
}

int cnn_build_layer(cnn_net *net, const char *kind, int cin, int size, int cout, int k, int stride, int pad,
                    char *err, size_t errlen)
{
    memset(net, 0, sizeof *net);
    builder b = {net, 0, err, errlen, 0};
    add_tensor(&b, cin, size, size);
    if (!strcmp(kind, "conv") || !strcmp(kind, "fc")) {
        const int fc = !strcmp(kind, "fc");
        if (fc) {
            k = size;
            stride = 1;
            pad = 0;
        }
        if (cout < 1) {
            snprintf(err, errlen, "--layer=%s needs --out-channels >= 1", kind);
            return -1;
        }
        conv(&b, "layer", cout, k, stride, pad);
    } else if (!strcmp(kind, "dwconv")) {
        conv(&b, "layer", cin, k, stride, pad);
        if (!b.failed)
            net->layer[0].kind = CNN_DWCONV;
    } else if (!strcmp(kind, "maxpool")) {
        maxpool(&b, "layer");
        if (!b.failed && (k != 3 || stride != 2)) { /* recompute for the asked window (ceil mode) */
            cnn_layer *l = &net->layer[0];
            if (size < k) {
                snprintf(err, errlen, "--layer=maxpool: input %dx%d smaller than the %dx%d window", size, size, k, k);
                return -1;
            }
            l->k = k;
            l->stride = stride;
            l->hout = l->wout = (size - k + stride - 1) / stride + 1;
            net->tensor[l->out] = (cnn_dims){l->cout, l->hout, l->wout};
        }
    } else if (!strcmp(kind, "avgpool")) {
        cnn_layer *l = add_layer(&b, "layer", CNN_AVGPOOL, 0);
        l->cout = cin;
        l->hout = l->wout = 1;
        l->out = add_tensor(&b, cin, 1, 1);
    } else if (!strcmp(kind, "add")) {
        /* the second operand is a tensor of the input's shape, filled like the input */
        const int second = add_tensor(&b, cin, size, size);
        cnn_layer *l = add_layer(&b, "layer", CNN_ADD, 0);
        l->in2 = second;
        l->cout = cin;
        l->hout = l->wout = size;
        l->k = l->stride = 1;
        l->out = add_tensor(&b, cin, size, size);
    } else {
        snprintf(err, errlen, "--layer=%s: expected conv, dwconv, maxpool, avgpool, fc or add", kind);
        return -1;
    }
    if (b.failed)
        return -1;
    net->nlayers = net->total_layers;
    return 0;
}

static int g_allowed(int g)
{
    for (int i = 0; i < cnn_g_count; ++i)
        if (cnn_g_values[i] == g)
            return 1;
    return 0;
}

static int parse_g(const char *s, int *g, char *err, size_t errlen)
{
    char *end;
    long v = strtol(s, &end, 10);
    if (end == s || *end || !g_allowed((int)v)) {
        snprintf(err, errlen, "--g: '%s' is not one of 1,2,4,6,8,12,16,24,32,48,64", s);
        return -1;
    }
    *g = (int)v;
    return 0;
}

int cnn_apply_g(cnn_net *net, const char *spec, char *err, size_t errlen)
{
    char buf[1024];
    if (strlen(spec) >= sizeof buf) {
        snprintf(err, errlen, "--g: spec too long");
        return -1;
    }
    snprintf(buf, sizeof buf, "%s", spec);
    int global = 1;
    char *save = NULL;
    /* first pass: the global value (a bare number) */
    for (char *tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save))
        if (!strchr(tok, ':') && parse_g(tok, &global, err, errlen))
            return -1;
    for (int i = 0; i < net->total_layers; ++i) {
        cnn_layer *l = &net->layer[i];
        if (l->kind != CNN_CONV)
            continue;
        l->g_requested = global;
        l->g = 1;
        for (int k = cnn_g_count - 1; k >= 0; --k)
            if (cnn_g_values[k] <= global && l->cout % cnn_g_values[k] == 0) {
                l->g = cnn_g_values[k];
                break;
            }
    }
    snprintf(buf, sizeof buf, "%s", spec);
    for (char *tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
        char *colon = strchr(tok, ':');
        if (!colon)
            continue;
        *colon = 0;
        int g;
        if (parse_g(colon + 1, &g, err, errlen))
            return -1;
        cnn_layer *found = NULL;
        for (int i = 0; i < net->total_layers; ++i)
            if (net->layer[i].kind == CNN_CONV && strcmp(net->layer[i].name, tok) == 0)
                found = &net->layer[i];
        if (!found) {
            snprintf(err, errlen, "--g: no conv layer '%s' (names: conv1, fire2/squeeze1x1, "
                     "fire2/expand1x1, fire2/expand3x3, ..., conv10)", tok);
            return -1;
        }
        if (found->cout % g) {
            snprintf(err, errlen, "--g: %s has %d output maps; g=%d does not divide them", tok,
                     found->cout, g);
            return -1;
        }
        found->g = found->g_requested = g;
    }
    return 0;
}

static size_t weight_count(const cnn_layer *l)
{
    if (l->kind == CNN_DWCONV)
        return (size_t)l->cout * (size_t)l->k * (size_t)l->k;
    return (size_t)l->cout * (size_t)l->cin * (size_t)l->k * (size_t)l->k;
}

int cnn_init_weights(cnn_net *net, uint64_t seed)
{
    for (int i = 0; i < net->nlayers; ++i) {
        cnn_layer *l = &net->layer[i];
        if (l->kind != CNN_CONV && l->kind != CNN_DWCONV)
            continue;
        const size_t n = weight_count(l);
        l->w = farm_alloc(n * sizeof(float));
        l->b = farm_alloc((size_t)l->cout * sizeof(float));
        /* He-uniform keeps activations in range through 26 ReLU convs (and inside fp16) */
        const int fan_in = l->kind == CNN_DWCONV ? l->k * l->k : l->cin * l->k * l->k;
        const float bound = sqrtf(6.0f / (float)fan_in);
        farm_fill_uniform(l->w, n, seed * 1000003u + (uint64_t)i * 2u, -bound, bound);
        farm_fill_uniform(l->b, (size_t)l->cout, seed * 1000003u + (uint64_t)i * 2u + 1u, -0.05f, 0.05f);
    }
    return 0;
}

static float *load_param(const char *dir, const char *layer, const char *what, const size_t *shape,
                         int ndim, char *err, size_t errlen)
{
    char file[256], path[1280];
    snprintf(file, sizeof file, "%s.%s.npy", layer, what);
    for (char *p = file; *p; ++p)
        if (*p == '/')
            *p = '.';
    snprintf(path, sizeof path, "%s/%s", dir, file);
    farm_array a;
    if (farm_npy_read(path, &a, err, errlen))
        return NULL;
    int same = a.ndim == ndim;
    for (int d = 0; same && d < ndim; ++d)
        same = a.shape[d] == shape[d];
    if (!same) {
        char want[96] = "";
        size_t used = 0;
        for (int d = 0; d < ndim; ++d)
            used += (size_t)snprintf(want + used, sizeof want - used, "%s%zu", d ? "," : "", shape[d]);
        snprintf(err, errlen, "%s: expected shape (%s) for %s %s", path, want, layer, what);
        farm_array_free(&a);
        return NULL;
    }
    return a.data;
}

int cnn_load_weights(cnn_net *net, const char *dir, char *err, size_t errlen)
{
    for (int i = 0; i < net->nlayers; ++i) {
        cnn_layer *l = &net->layer[i];
        if (l->kind != CNN_CONV && l->kind != CNN_DWCONV)
            continue;
        const size_t wshape[4] = {(size_t)l->cout, l->kind == CNN_DWCONV ? 1 : (size_t)l->cin, (size_t)l->k,
                                  (size_t)l->k};
        const size_t bshape[1] = {(size_t)l->cout};
        l->w = load_param(dir, l->name, "weight", wshape, 4, err, errlen);
        if (!l->w)
            return -1;
        l->b = load_param(dir, l->name, "bias", bshape, 1, err, errlen);
        if (!l->b)
            return -1;
    }
    return 0;
}

void cnn_round_weights_f16(cnn_net *net)
{
    for (int i = 0; i < net->nlayers; ++i) {
        cnn_layer *l = &net->layer[i];
        if (l->kind != CNN_CONV && l->kind != CNN_DWCONV)
            continue;
        farm_round_f16(l->w, weight_count(l));
        farm_round_f16(l->b, (size_t)l->cout);
    }
}

void cnn_free_weights(cnn_net *net)
{
    for (int i = 0; i < net->total_layers; ++i) {
        free(net->layer[i].w);
        free(net->layer[i].b);
        net->layer[i].w = net->layer[i].b = NULL;
    }
}

double cnn_layer_flops(const cnn_layer *l)
{
    const double out = (double)l->cout * l->hout * l->wout;
    switch (l->kind) {
    case CNN_CONV:
        return 2.0 * out * l->cin * l->k * l->k;
    case CNN_MAXPOOL:
        return out * l->k * l->k;
    case CNN_AVGPOOL:
        return (double)l->cin * l->hin * l->win;
    case CNN_DWCONV:
        return 2.0 * out * l->k * l->k;
    case CNN_ADD:
        return out;
    }
    return 0.0;
}

double cnn_layer_bytes(const cnn_layer *l, int elem_bytes)
{
    double values = (double)l->cin * l->hin * l->win + (double)l->cout * l->hout * l->wout;
    if (l->kind == CNN_CONV || l->kind == CNN_DWCONV)
        values += (double)weight_count(l) + l->cout;
    if (l->kind == CNN_ADD)
        values += (double)l->cin * l->hin * l->win;
    return values * elem_bytes;
}

size_t cnn_tensor_count(const cnn_net *net, int t)
{
    const cnn_dims d = net->tensor[t];
    return (size_t)d.c * (size_t)d.h * (size_t)d.w;
}

size_t cnn_result_count(const cnn_net *net)
{
    const cnn_layer *l = &net->layer[net->nlayers - 1];
    return (size_t)(l->out_c_offset + l->cout) * (size_t)l->hout * (size_t)l->wout;
}
