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

/* A conv on the current activation with the given activation (0, 1 or CNN_RELU6). */
static void conv_act(builder *b, const char *name, int cout, int k, int stride, int pad, int relu)
{
    conv(b, name, cout, k, stride, pad);
    if (!b->failed)
        b->net->layer[b->net->total_layers - 1].relu = relu;
}

static void dwconv(builder *b, const char *name, int stride, int relu)
{
    conv_act(b, name, b->net->tensor[b->cur].c, 3, stride, 1, relu);
    if (!b->failed)
        b->net->layer[b->net->total_layers - 1].kind = CNN_DWCONV;
}

/* out = cur + tensor `other` (same shape), then ReLU where relu is set */
static void residual_add(builder *b, const char *name, int other, int relu)
{
    if (b->failed)
        return;
    cnn_layer *l = add_layer(b, name, CNN_ADD, b->cur);
    l->in2 = other;
    l->cout = l->cin;
    l->hout = l->hin;
    l->wout = l->win;
    l->k = l->stride = 1;
    l->relu = relu;
    l->out = b->cur = add_tensor(b, l->cout, l->hout, l->wout);
}

/* Global average pool, then the classifier as a 1x1 conv over the pooled 1x1 map (no activation). */
static void pool_fc(builder *b, int classes)
{
    if (b->failed)
        return;
    cnn_layer *l = add_layer(b, "pool", CNN_AVGPOOL, b->cur);
    l->cout = l->cin;
    l->hout = l->wout = 1;
    l->out = b->cur = add_tensor(b, l->cout, 1, 1);
    conv_act(b, "fc", classes, 1, 1, 0, 0);
}

/* MobileNetV1 (Howard et al. 2017, Table 1), width 1.0: conv 3x3/2, 13 depthwise-separable blocks
 * (dw 3x3 + ReLU6, pw 1x1 + ReLU6), global pool, fc. */
static void mobilenet_v1(builder *b)
{
    static const int cout[13] = {64, 128, 128, 256, 256, 512, 512, 512, 512, 512, 512, 1024, 1024};
    static const int stride[13] = {1, 2, 1, 2, 1, 2, 1, 1, 1, 1, 1, 2, 1};
    conv_act(b, "conv1", 32, 3, 2, 1, CNN_RELU6);
    for (int i = 0; i < 13; ++i) {
        char name[40];
        snprintf(name, sizeof name, "block%d/dw", i + 1);
        dwconv(b, name, stride[i], CNN_RELU6);
        snprintf(name, sizeof name, "block%d/pw", i + 1);
        conv_act(b, name, cout[i], 1, 1, 0, CNN_RELU6);
    }
    pool_fc(b, 1000);
}

/* MobileNetV2 (Sandler et al. 2018, Table 2): conv 3x3/2, 17 inverted residual blocks (expand 1x1 +
 * ReLU6 where t > 1, dw 3x3 + ReLU6, project 1x1 linear, add when stride 1 and channels match), conv
 * 1x1 1280 + ReLU6, global pool, fc. */
static void mobilenet_v2(builder *b)
{
    static const int table[7][4] = {/* t, c, n, s */
                                    {1, 16, 1, 1},  {6, 24, 2, 2},  {6, 32, 3, 2},  {6, 64, 4, 2},
                                    {6, 96, 3, 1},  {6, 160, 3, 2}, {6, 320, 1, 1}};
    conv_act(b, "conv1", 32, 3, 2, 1, CNN_RELU6);
    int block = 0;
    for (int r = 0; r < 7; ++r) {
        for (int i = 0; i < table[r][2]; ++i) {
            if (b->failed)
                return;
            const int t = table[r][0], c = table[r][1], s = i == 0 ? table[r][3] : 1;
            const int block_in = b->cur, cin = b->net->tensor[block_in].c;
            char name[40];
            ++block;
            if (t != 1) {
                snprintf(name, sizeof name, "block%d/expand", block);
                conv_act(b, name, cin * t, 1, 1, 0, CNN_RELU6);
            }
            snprintf(name, sizeof name, "block%d/dw", block);
            dwconv(b, name, s, CNN_RELU6);
            snprintf(name, sizeof name, "block%d/project", block);
            conv_act(b, name, c, 1, 1, 0, 0);
            if (s == 1 && cin == c) {
                snprintf(name, sizeof name, "block%d/add", block);
                residual_add(b, name, block_in, 0);
            }
        }
    }
    conv_act(b, "conv_last", 1280, 1, 1, 0, CNN_RELU6);
    pool_fc(b, 1000);
}

/* ResNet-18 (He et al. 2016): conv 7x7/2 + ReLU, max pool 3x3/2, 4 stages of 2 basic blocks (3x3
 * + ReLU, 3x3 linear, + shortcut, ReLU; the first block of stages 2-4 strides 2 and its shortcut is
 * a 1x1/2 conv), global pool, fc. The max pool is the program's unpadded ceil-mode pool: the same
 * 56x56 output as torchvision's padded one, its windows one pixel further right and down. */
static void resnet18(builder *b)
{
    conv_act(b, "conv1", 64, 7, 2, 3, 1);
    maxpool(b, "pool1");
    for (int stage = 1; stage <= 4; ++stage) {
        const int c = 64 << (stage - 1);
        for (int blk = 0; blk < 2; ++blk) {
            if (b->failed)
                return;
            const int s = stage > 1 && blk == 0 ? 2 : 1;
            const int block_in = b->cur;
            char name[40];
            int shortcut = block_in;
            if (s != 1 || b->net->tensor[block_in].c != c) {
                snprintf(name, sizeof name, "layer%d.%d/downsample", stage, blk);
                conv_act(b, name, c, 1, s, 0, 0);
                shortcut = b->cur;
                b->cur = block_in;
            }
            snprintf(name, sizeof name, "layer%d.%d/conv1", stage, blk);
            conv_act(b, name, c, 3, s, 1, 1);
            snprintf(name, sizeof name, "layer%d.%d/conv2", stage, blk);
            conv_act(b, name, c, 3, 1, 1, 0);
            snprintf(name, sizeof name, "layer%d.%d/add", stage, blk);
            residual_add(b, name, shortcut, 1);
        }
    }
    pool_fc(b, 1000);
}

int cnn_build(cnn_net *net, const char *model, int input_size, char *err, size_t errlen)
{
    memset(net, 0, sizeof *net);
    builder b = {net, 0, err, errlen, 0};
    add_tensor(&b, 3, input_size, input_size);
    void (*other)(builder *) = !strcmp(model, "mobilenetv1")   ? mobilenet_v1
                               : !strcmp(model, "mobilenetv2") ? mobilenet_v2
                               : !strcmp(model, "resnet18")    ? resnet18
                                                               : NULL;
    if (other) {
        other(&b);
        if (b.failed)
            return -1;
        net->nlayers = net->total_layers;
        return 0;
    }
    const int v10 = strcmp(model, "squeezenet1.0") == 0;
    if (!v10 && strcmp(model, "squeezenet1.1") != 0) {
        snprintf(err, errlen, "--model=%s: expected squeezenet1.0, squeezenet1.1, mobilenetv1, mobilenetv2 or resnet18", model);
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
        l->in2 = net->input_copy = second;
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

/* The layer that last wrote tensor t before layer `before` ("input" for the image). */
static const char *producer(const cnn_net *net, int t, int before)
{
    for (int i = before - 1; i >= 0; --i)
        if (net->layer[i].out == t)
            return net->layer[i].name;
    return "input";
}

static const char *kind_name(const cnn_layer *l)
{
    switch (l->kind) {
    case CNN_CONV:
        return "conv";
    case CNN_DWCONV:
        return "dwconv";
    case CNN_MAXPOOL:
        return "maxpool";
    case CNN_AVGPOOL:
        return "avgpool";
    case CNN_ADD:
        return "add";
    }
    return "?";
}

void cnn_print_descriptor(const cnn_net *net, const char *model, FILE *out)
{
    const cnn_dims in = net->tensor[0];
    fprintf(out, "# cnn --model=%s --input-size=%d --list-layers (kernels/cnn/net.c)\n", model, in.h);
    fprintf(out, "network: %s\ninput: [%d, %d, %d]\nlayers:\n", model, in.c, in.h, in.w);
    for (int i = 0; i < net->total_layers; ++i) {
        const cnn_layer *l = &net->layer[i];
        fprintf(out, "  - {name: %s, kind: %s, from: ", l->name, kind_name(l));
        if (l->kind == CNN_ADD)
            fprintf(out, "[%s, %s]", producer(net, l->in, i), producer(net, l->in2, i));
        else
            fprintf(out, "%s", producer(net, l->in, i));
        fprintf(out, ", in: [%d, %d, %d], out: [%d, %d, %d], kernel: %d, stride: %d, pad: %d, groups: %d",
                l->cin, l->hin, l->win, l->cout, l->hout, l->wout, l->k, l->stride, l->pad,
                l->kind == CNN_DWCONV ? l->cin : 1);
        if (l->kind == CNN_CONV || l->kind == CNN_DWCONV || l->kind == CNN_ADD)
            fprintf(out, ", act: %s", l->relu == CNN_RELU6 ? "relu6" : l->relu ? "relu" : "none");
        const int buffer = net->tensor[l->out].c;
        if (buffer != l->cout)
            fprintf(out, ", out_buffer: %d", buffer);
        fprintf(out, "}\n");
    }
}
