/*
 * cnn: SqueezeNet v1.0 / v1.1, MobileNetV1 / V2 and ResNet-18 inference benchmark (Motamedi et al.:
 * per-layer time, precision, thread granularity g). Backends cpu, cpu-mt and gpu compute the same
 * network; --verify checks the gpu output against the single-thread cpu path. Weight files and
 * layouts: kernels/cnn/README.md.
 */
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../common/farm.h"
#include "cnn_cpu.h"
#include "cnn_gpu.h"
#include "cnn_tune.h"
#include "net.h"

/* Verification tolerances (element passes when |gpu-cpu| <= atol + rtol*|cpu|, atol scaled by
 * the largest |cpu| value). fp16 storage rounds every layer's output to 11 significant bits, and
 * the two paths may round a different way near ties after reordered sums; half arithmetic also
 * accumulates in half. */
#define TOL_FP32 1e-3
#define TOL_FP16_STORAGE 2e-2
#define TOL_FP16_ARITH 6e-2

typedef struct {
    cnn_net *net;
    int gpu;
    const char *conv; /* "im2col-gemm" | "direct" (gpu) */
    cnn_cpu cpu;
    cnn_gpu gpu_state;
    cnn_tune tune;
    /* measured calls only (reset when the measure phase begins), in bounded memory (quant.c) */
    farm_quant layer_q[CNN_MAX_LAYERS]; /* each layer's time */
    farm_quant pair_q[CNN_MAX_LAYERS];  /* a fused pair's launch (both layers), at the lower index */
    farm_quant host_q[2];               /* gpu host time enqueueing + waiting, reading events after */
    uint64_t layer_min_ns[CNN_MAX_LAYERS];
    size_t exact_cap; /* --exact-iterations */
} app;

/* Starts (or restarts) the statistics of the calls that follow. */
static void stats_begin(void *user)
{
    app *a = user;
    for (int i = 0; i < CNN_MAX_LAYERS; ++i) {
        farm_quant_free(&a->layer_q[i]);
        farm_quant_free(&a->pair_q[i]);
        farm_quant_init(&a->layer_q[i], a->exact_cap);
        farm_quant_init(&a->pair_q[i], a->exact_cap);
        a->layer_min_ns[i] = UINT64_MAX;
    }
    for (int k = 0; k < 2; ++k) {
        farm_quant_free(&a->host_q[k]);
        farm_quant_init(&a->host_q[k], a->exact_cap);
    }
}

static void stats_free(app *a)
{
    for (int i = 0; i < CNN_MAX_LAYERS; ++i) {
        farm_quant_free(&a->layer_q[i]);
        farm_quant_free(&a->pair_q[i]);
    }
    farm_quant_free(&a->host_q[0]);
    farm_quant_free(&a->host_q[1]);
}

/* One call's layer times (fused pairs: each layer's FLOP share of the pair's launch). */
static void record(app *a, const uint64_t *ns)
{
    for (int i = 0; i < a->net->nlayers; ++i) {
        farm_quant_add(&a->layer_q[i], ns[i]);
        a->layer_min_ns[i] = ns[i] < a->layer_min_ns[i] ? ns[i] : a->layer_min_ns[i];
        const int pair = a->gpu && a->gpu_state.conv_gemm ? a->gpu_state.fused_with[i] : -1;
        if (pair > i)
            farm_quant_add(&a->pair_q[i], ns[i] + ns[pair]);
    }
}

static int iterate(void *user, farm_split *split)
{
    app *a = user;
    (void)split; /* gpu: filled by collect, from the profiling events */
    if (a->gpu) {
        cnn_gpu_submit(&a->gpu_state);
        return FARM_EXIT_OK; /* collect records the call */
    }
    uint64_t row[CNN_MAX_LAYERS];
    for (int i = 0; i < a->net->nlayers; ++i) {
        const uint64_t t0 = farm_now_ns();
        cnn_cpu_layer(&a->cpu, i);
        row[i] = farm_now_ns() - t0;
    }
    record(a, row);
    return FARM_EXIT_OK;
}

/* gpu: after each inference's end time is taken, its per-layer profiling events. */
static int collect(void *user, farm_split *split)
{
    app *a = user;
    if (!a->gpu)
        return FARM_EXIT_OK;
    cnn_gpu_collect(&a->gpu_state, split);
    record(a, a->gpu_state.layer_ns);
    farm_quant_add(&a->host_q[0], a->gpu_state.host_enqueue_ns);
    farm_quant_add(&a->host_q[1], a->gpu_state.host_collect_ns);
    return FARM_EXIT_OK;
}

/* A median in whole nanoseconds (exact: the integer mean of the two middle values, as before). */
static uint64_t median_ns(farm_quant *q)
{
    const double m = farm_quant_median(q);
    return m == m ? (uint64_t)floor(m) : 0;
}

static const char *cnn_kind_name(cnn_kind kind)
{
    switch (kind) {
    case CNN_CONV:
        return "conv";
    case CNN_MAXPOOL:
        return "maxpool";
    case CNN_AVGPOOL:
        return "avgpool";
    case CNN_DWCONV:
        return "dwconv";
    case CNN_ADD:
        return "add";
    }
    return "?";
}

/* The single-layer add reads a second tensor of the input's shape: a copy of the input. */
static void fill_second_operands(const cnn_net *net, float *const *tensor)
{
    if (net->input_copy)
        memcpy(tensor[net->input_copy], tensor[0], cnn_tensor_count(net, 0) * sizeof(float));
}

/* One `layer` event per layer: median and minimum over the measured iterations (the statistics
 * restart when the measure phase begins, so warm-up calls are not in them). */
static void emit_layers(app *a, long measured, int elem_bytes)
{
    for (int i = 0; i < a->net->nlayers; ++i) {
        const cnn_layer *l = &a->net->layer[i];
        const uint64_t med = median_ns(&a->layer_q[i]);
        const double flops = cnn_layer_flops(l);
        farm_json j;
        farm_json_begin(&j, "layer");
        farm_json_int(&j, "index", i);
        farm_json_str(&j, "name", l->name);
        farm_json_str(&j, "kind", cnn_kind_name(l->kind));
        farm_json_u64(&j, "time_ns", med);
        farm_json_u64(&j, "min_ns", a->layer_min_ns[i]);
        farm_json_num(&j, "flops", flops);
        farm_json_num(&j, "bytes", cnn_layer_bytes(l, elem_bytes));
        farm_json_num(&j, "gflops", med ? flops / (double)med : NAN);
        if (l->kind == CNN_CONV) {
            /* what the convolution ran as: Augur's resource model prices a conv as the GEMM
             * (m, n, k) of its im2col form, which is what the im2col-gemm path runs */
            size_t gm, gn, gk;
            cnn_gemm_shape(l, &gm, &gn, &gk);
            farm_json_str(&j, "conv_path", a->gpu ? a->conv : "direct");
            farm_json_int(&j, "gemm_m", (long long)gm);
            farm_json_int(&j, "gemm_n", (long long)gn);
            farm_json_int(&j, "gemm_k", (long long)gk);
        }
        if (l->kind == CNN_CONV && a->gpu && a->gpu_state.conv_gemm) {
            /* a fused expand pair is one launch with the expand3x3 layer's configuration: each
             * layer's time_ns is its FLOP share of that launch, fused_ns the launch itself */
            const int pair = a->gpu_state.fused_with[i];
            const int ran = pair > i ? pair : i;
            char params[256];
            cnn_gemm_format(&a->gpu_state.cfg[ran], a->gpu_state.tiled, params, sizeof params);
            farm_json_str(&j, "gemm_kernel", a->gpu_state.tiled ? "local" : "packed");
            farm_json_str(&j, "gemm_params", params);
            farm_json_int(&j, "launches", a->gpu_state.launches[i]);
            if (pair >= 0) {
                farm_json_str(&j, "fused_with", a->net->layer[pair].name);
                farm_json_u64(&j, "fused_ns", median_ns(&a->pair_q[pair > i ? i : pair]));
                farm_json_str(&j, "time_split", "flops");
            }
            farm_json_str(&j, "tune_source", farm_tune_source_name(cnn_tune_layer(&a->tune, ran)->source));
            if (!a->gpu_state.tiled) /* the im2col launch's share, last iteration */
                farm_json_u64(&j, "im2col_ns", a->gpu_state.im2col_ns[i]);
        } else if (l->kind == CNN_CONV && a->gpu) {
            farm_json_int(&j, "g", l->g);
            farm_json_int(&j, "g_requested", l->g_requested);
        }
        char shape[64];
        snprintf(shape, sizeof shape, "[%d,%d,%d]", l->cout, l->hout, l->wout);
        farm_json_raw(&j, "out_shape", shape);
        farm_json_int(&j, "iterations", measured);
        farm_json_str(&j, "quantiles", farm_quant_kind(&a->layer_q[i]));
        farm_json_end(&j);
    }
}

/* Top-5 classes of softmax(scores) as a JSON array. */
static void top5_json(const float *scores, size_t n, char *out, size_t outlen)
{
    double mx = -INFINITY, sum = 0.0;
    for (size_t i = 0; i < n; ++i)
        mx = fmax(mx, scores[i]);
    for (size_t i = 0; i < n; ++i)
        sum += exp((double)scores[i] - mx);
    size_t best[5];
    int nb = 0;
    for (size_t i = 0; i < n; ++i) {
        int pos = nb < 5 ? nb : 5;
        while (pos > 0 && scores[i] > scores[best[pos - 1]])
            pos--;
        if (pos >= 5)
            continue;
        for (int k = (nb < 5 ? nb : 4); k > pos; --k)
            best[k] = best[k - 1];
        best[pos] = i;
        if (nb < 5)
            nb++;
    }
    size_t used = (size_t)snprintf(out, outlen, "[");
    for (int k = 0; k < nb && used < outlen; ++k) {
        const double p = exp((double)scores[best[k]] - mx) / sum;
        char prob[32] = "null"; /* JSON has no NaN: a non-finite output (e.g. from a NaN input) */
        if (isfinite(p))
            snprintf(prob, sizeof prob, "%.6g", p);
        used += (size_t)snprintf(out + used, outlen - used, "%s{\"class\":%zu,\"prob\":%s}", k ? "," : "",
                                 best[k], prob);
    }
    if (used < outlen)
        snprintf(out + used, outlen - used, "]");
}

static float *load_input(const char *path, long *input_size, long channels)
{
    farm_array a;
    char err[512];
    if (farm_npy_read(path, &a, err, sizeof err))
        farm_die(FARM_EXIT_USAGE, "--input: %s", err);
    const size_t *s = a.shape + (a.ndim == 4 ? 1 : 0);
    const int ok = (a.ndim == 3 || (a.ndim == 4 && a.shape[0] == 1)) && s[0] == (size_t)channels && s[1] == s[2];
    if (!ok)
        farm_die(FARM_EXIT_USAGE, "--input: %s: expected shape (%ld,N,N) or (1,%ld,N,N) float32 (CHW)", path,
                 channels, channels);
    if (*input_size && (size_t)*input_size != s[1])
        farm_die(FARM_EXIT_USAGE, "--input-size=%ld but %s is %zux%zu", *input_size, path, s[1], s[2]);
    *input_size = (long)s[1];
    return a.data;
}

static void dump(const cnn_net *net, const float *result, const char *path)
{
    const cnn_layer *l = &net->layer[net->nlayers - 1];
    size_t shape[3] = {(size_t)(l->out_c_offset + l->cout), (size_t)l->hout, (size_t)l->wout};
    char err[512];
    if (farm_npy_write(path, result, shape, l->kind == CNN_AVGPOOL ? 1 : 3, err, sizeof err))
        farm_die(FARM_EXIT_ERROR, "--dump-output: %s", err);
}

/* Recomputes the network on the single-thread cpu path and compares; atol scales with the
 * largest reference value so the tolerance reads as a fraction of the output's range. */
static farm_cmp verify_against_cpu(const cnn_net *net, const float *input, int fp16, const float *got, double tol)
{
    cnn_cpu ref;
    cnn_cpu_init(&ref, net, fp16, NULL);
    memcpy(ref.tensor[0], input, cnn_tensor_count(net, 0) * sizeof(float));
    fill_second_operands(net, ref.tensor);
    for (int i = 0; i < net->nlayers; ++i)
        cnn_cpu_layer(&ref, i);
    const float *want = cnn_cpu_result(&ref);
    const size_t n = cnn_result_count(net);
    double scale = 0.0;
    for (size_t i = 0; i < n; ++i)
        scale = fmax(scale, fabs((double)want[i]));
    farm_cmp cmp = farm_compare(got, want, n, tol, tol * scale);
    cnn_cpu_free(&ref);
    return cmp;
}

int main(int argc, char **argv)
{
    farm_common common;
    farm_common_defaults(&common);
    static const char *const models[] = {"squeezenet1.0", "squeezenet1.1", "mobilenetv1", "mobilenetv2",
                                         "resnet18",      "layer",         NULL};
    static const char *const layer_kinds[] = {"conv", "dwconv", "maxpool", "avgpool", "fc", "add", NULL};
    const char *layer_kind = "conv";
    long channels = 3, out_channels = 16, kernel = 3, stride = 1, pad = 0;
    static const char *const convs[] = {"auto", "im2col-gemm", "direct", NULL};
    const char *conv = "auto", *gemm_kernel = "auto";
    static const char *const gemm_kernels[] = {"auto", "local", "packed", NULL};
    static const char *const gathers[] = {"auto", "tab", "hoist", "arith", "window", NULL};
    const char *gather = "auto";
    const char *model = "squeezenet1.0", *weights_dir = NULL, *input_path = NULL, *g_spec = "1";
    long input_size = 0, layers_limit = 0, wg = 64, flush_every = 0;
    int fuse_expand = 1, list_layers = 0;
    farm_opt opts[] = {
        FARM_OPTS_BENCH(&common),
        FARM_OPTS_CL(&common),
        FARM_OPTS_TUNE(&common),
        {"model", FARM_OPT_CHOICE, &model, "network", 0, 0, models},
        {"list-layers", FARM_OPT_FLAG, &list_layers,
         "print the network's layers as farm's descriptor (YAML: shapes, kernel, stride, pad, groups) and exit",
         0, 0, NULL},
        {"layer", FARM_OPT_CHOICE, &layer_kind,
         "--model=layer: the one kernel to run (fc: a conv whose window is the whole input; add: input + a "
         "copy of it in a second buffer)",
         0, 0, layer_kinds},
        {"channels", FARM_OPT_INT, &channels, "--model=layer: input channels", 1, 65536, NULL},
        {"out-channels", FARM_OPT_INT, &out_channels, "--model=layer: output maps (conv, fc)", 1, 65536, NULL},
        {"kernel", FARM_OPT_INT, &kernel, "--model=layer: window side (conv, dwconv, maxpool)", 1, 64, NULL},
        {"stride", FARM_OPT_INT, &stride, "--model=layer: stride (conv, dwconv, maxpool)", 1, 64, NULL},
        {"pad", FARM_OPT_INT, &pad, "--model=layer: zero padding (conv, dwconv)", 0, 64, NULL},
        {"input-size", FARM_OPT_INT, &input_size, "square input side (0: 227 for squeezenet1.0, 224 for the other networks)", 0, 4096, NULL},
        {"input", FARM_OPT_STRING, &input_path, ".npy image, float32 (3,N,N) CHW (default: seeded uniform)", 0, 0, NULL},
        {"weights-dir", FARM_OPT_STRING, &weights_dir,
         "dir of <layer>.weight.npy / <layer>.bias.npy, '/' in names as '.' (default: seeded)", 0, 0, NULL},
        {"layers-limit", FARM_OPT_INT, &layers_limit, "run only the first N layers (0: all)", 0, CNN_MAX_LAYERS, NULL},
        {"wg", FARM_OPT_INT, &wg, "gpu work-group size along output pixels (0: driver's choice)", 0, 1024, NULL},
        {"conv", FARM_OPT_CHOICE, &conv,
         "gpu convolutions: im2col + farm's GEMM kernel, or the direct kernel with --g (auto: direct when --g is "
         "given, else im2col-gemm)",
         0, 0, convs},
        {"gemm-kernel", FARM_OPT_CHOICE, &gemm_kernel,
         "im2col-gemm: gemm's tiled local-memory kernel or its packed kernel (auto: local on GPUs, packed on CPU "
         "devices)",
         0, 0, gemm_kernels},
        {"gather", FARM_OPT_CHOICE, &gather,
         "im2col-gemm on GPUs: how the GEMM's B-tile loads gather im2col: index tables per load (tab), the "
         "pixel's table entry kept in registers (hoist), that plus the window compiled in (arith), or K in "
         "window-major order, one window position per K tile (window; auto, arith where the K tile does not "
         "divide cin)",
         0, 0, gathers},
        {"fuse-expand", FARM_OPT_FLAG, &fuse_expand,
         "im2col-gemm on GPUs: each fire module's expand1x1 and expand3x3 as one launch (=0: a launch each)", 0, 0,
         NULL},
        {"flush-every", FARM_OPT_INT, &flush_every,
         "gpu: clFlush after every N kernel launches of an inference, so the device starts while the host "
         "enqueues (0: only the final wait submits)",
         0, 1000, NULL},
        {"g", FARM_OPT_STRING, &g_spec,
         "output maps per work item: N for all conv layers and/or layer:N,... (must divide the maps)", 0, 0, NULL},
        {0},
    };
    const char *g_default = g_spec;
    farm_parse_args(argc, argv, "cnn",
                    "SqueezeNet inference: per-layer time events, top-5 and checksum in the result.",
                    "cnn --backend=gpu --model=squeezenet1.1 --precision=fp16 --g=4,conv10:8 --iters=20", opts);
    farm_common_check(&common);
    if (common.list_devices)
        return farm_cl_list_devices();

    char err[512];
    const int single = strcmp(model, "layer") == 0;
    float *input = input_path ? load_input(input_path, &input_size, single ? channels : 3) : NULL;
    if (!input_size)
        input_size = single ? 56 : strcmp(model, "squeezenet1.0") == 0 ? 227 : 224;
    static cnn_net net;
    const int built = single ? cnn_build_layer(&net, layer_kind, (int)channels, (int)input_size, (int)out_channels,
                                               (int)kernel, (int)stride, (int)pad, err, sizeof err)
                             : cnn_build(&net, model, (int)input_size, err, sizeof err);
    if (built)
        farm_die(FARM_EXIT_USAGE, "%s", err);
    if (list_layers) {
        cnn_print_descriptor(&net, model, stdout);
        return 0;
    }
    if (layers_limit && layers_limit < net.total_layers)
        net.nlayers = (int)layers_limit;
    if (cnn_apply_g(&net, g_spec, err, sizeof err))
        farm_die(FARM_EXIT_USAGE, "%s", err);
    if (weights_dir) {
        if (cnn_load_weights(&net, weights_dir, err, sizeof err))
            farm_die(FARM_EXIT_USAGE, "--weights-dir: %s", err);
    } else {
        cnn_init_weights(&net, (uint64_t)common.seed);
    }
    const size_t in_count = cnn_tensor_count(&net, 0);
    if (!input) {
        input = farm_alloc(in_count * sizeof(float));
        farm_fill_uniform(input, in_count, (uint64_t)common.seed ^ 0x5eedULL, 0.0f, 1.0f);
    }
    const int fp16 = strcmp(common.precision, "fp16") == 0;
    if (fp16) {
        cnn_round_weights_f16(&net);
        farm_round_f16(input, in_count);
    }

    app a;
    memset(&a, 0, sizeof a);
    a.net = &net;
    a.gpu = strcmp(common.backend, "gpu") == 0;
    farm_cl cl;
    farm_pool *pool = NULL;
    const char *mode = fp16 ? "fp16-storage" : "fp32";
    int fused_pairs = 0;
    if (a.gpu) {
        farm_cl_open(&cl, common.cl_device);
        cnn_gpu_init(&a.gpu_state, &cl, &net, fp16, input, farm_cl_cache_dir(common.cl_cache));
        cnn_gpu_set_wg(&a.gpu_state, (size_t)wg);
        a.gpu_state.flush_every = (int)flush_every;
        if (a.gpu_state.half_arith)
            mode = "fp16";
        if (!strcmp(conv, "auto"))
            conv = g_spec != g_default ? "direct" : "im2col-gemm";
        a.conv = conv;
        if (strcmp(gemm_kernel, "auto") != 0)
            a.gpu_state.tiled = !strcmp(gemm_kernel, "local");
        /* auto: window-major K where the K tile divides cin (cnn_gemm_set_gather falls back to
         * arith elsewhere): on the H200 its 3x3 layers ran 1.13-1.55x of the gemm kernel on their
         * shapes against arith's 1.36-1.62x, its fused pairs faster in 15 of 16
         * (kernels/bench/results-h200.md) */
        cnn_gather gather_choice = CNN_GATHER_WINDOW;
        for (int i = 0; cnn_gather_names[i]; ++i)
            if (!strcmp(gather, cnn_gather_names[i]))
                gather_choice = (cnn_gather)i;
        if (!strcmp(conv, "im2col-gemm")) {
            static cnn_gemm_cfg cfg[CNN_MAX_LAYERS];
            for (int i = 0; i < net.nlayers; ++i)
                if (net.layer[i].kind == CNN_CONV)
                    cfg[i] = cnn_gemm_default(&cl, &net.layer[i], a.gpu_state.half_arith, gather_choice);
            cnn_gpu_use_gemm(&a.gpu_state, cfg);
            const double vtol = !fp16 ? TOL_FP32 : a.gpu_state.half_arith ? TOL_FP16_ARITH : TOL_FP16_STORAGE;
            cnn_tune_choose(&a.tune, &a.gpu_state, &common, cfg, strcmp(gather, "auto") != 0, model, vtol);
            if (fuse_expand)
                fused_pairs = cnn_gpu_fuse_expand(&a.gpu_state);
        } else if (common.tune) {
            fprintf(stderr, "cnn: warning: --tune: the direct convolution kernel has no tuned parameters (use "
                            "--conv=im2col-gemm)\n");
        }
    } else {
        pool = strcmp(common.backend, "cpu-mt") == 0 ? farm_pool_create((int)common.threads) : NULL;
        cnn_cpu_init(&a.cpu, &net, fp16, pool);
        memcpy(a.cpu.tensor[0], input, in_count * sizeof(float));
        fill_second_operands(&net, a.cpu.tensor);
    }

    farm_json j;
    farm_json_begin(&j, "info");
    farm_json_str(&j, "program", "cnn");
    farm_json_str(&j, "backend", common.backend);
    if (pool)
        farm_json_int(&j, "threads", farm_pool_size(pool));
    farm_json_str(&j, "model", model);
    farm_json_int(&j, "input_size", input_size);
    farm_json_int(&j, "layers", net.nlayers);
    farm_json_int(&j, "layers_total", net.total_layers);
    farm_json_str(&j, "precision", common.precision);
    farm_json_str(&j, "precision_mode", mode);
    if (fp16 && a.gpu && !a.gpu_state.half_arith)
        farm_json_str(&j, "fp16_fallback", "device lacks cl_khr_fp16: half storage, fp32 arithmetic");
    farm_json_str(&j, "weights", weights_dir ? weights_dir : "seeded");
    /* memory the network holds on the device (Augur's model: weights + feature maps) */
    double weight_values = 0.0, activation_values = 0.0;
    for (int i = 0; i < net.nlayers; ++i)
        if (net.layer[i].kind == CNN_CONV)
            weight_values += (double)net.layer[i].cout * (net.layer[i].cin * net.layer[i].k * net.layer[i].k + 1);
        else if (net.layer[i].kind == CNN_DWCONV)
            weight_values += (double)net.layer[i].cout * (net.layer[i].k * net.layer[i].k + 1);
    for (int t = 0; t < net.ntensors; ++t)
        activation_values += (double)cnn_tensor_count(&net, t);
    farm_json_num(&j, "weights_bytes", weight_values * (fp16 ? 2 : 4));
    farm_json_num(&j, "activations_bytes", activation_values * (fp16 ? 2 : 4));
    farm_json_str(&j, "g", g_spec);
    if (a.gpu) {
        farm_json_str(&j, "conv", conv);
        farm_json_u64(&j, "wg", a.gpu_state.wg);
        farm_json_int(&j, "flush_every", flush_every);
        if (a.gpu_state.conv_gemm) {
            farm_json_bool(&j, "fuse_expand", fused_pairs > 0);
            farm_json_int(&j, "fused_pairs", fused_pairs);
        }
        int launches = 0;
        for (int i = 0; i < net.nlayers; ++i)
            launches += net.layer[i].kind != CNN_CONV || !a.gpu_state.conv_gemm ? 1 : a.gpu_state.launches[i];
        farm_json_int(&j, "launches_per_inference", launches);
        farm_cl_info_fields(&j, &cl, &a.gpu_state.prog);
        if (a.gpu_state.conv_gemm)
            cnn_tune_info_fields(&j, &a.tune);
    }
    farm_json_end(&j);

    farm_stats stats;
    a.exact_cap = (size_t)common.exact_iterations;
    stats_begin(&a);
    const farm_bench_hooks hooks = {iterate, collect, NULL, stats_begin};
    int rc = farm_bench_run_hooks(&common, &hooks, &a, a.gpu, &stats);
    if (rc != FARM_EXIT_OK)
        farm_die(rc, "benchmark iteration failed");
    const int elem_bytes = fp16 ? 2 : 4;
    emit_layers(&a, stats.iterations, elem_bytes);

    const float *result = a.gpu ? a.gpu_state.result : cnn_cpu_result(&a.cpu);
    const size_t n = cnn_result_count(&net);
    if (common.dump_output)
        dump(&net, result, common.dump_output);

    farm_cmp cmp = {1, 0, 0, 0.0, 0.0};
    const double tol = !fp16 ? TOL_FP32 : a.gpu_state.half_arith ? TOL_FP16_ARITH : TOL_FP16_STORAGE;
    if (common.verify)
        cmp = verify_against_cpu(&net, input, fp16, result, tol);

    double total_flops = 0.0;
    for (int i = 0; i < net.nlayers; ++i)
        total_flops += cnn_layer_flops(&net.layer[i]);
    farm_json_begin(&j, "result");
    farm_json_str(&j, "program", "cnn");
    farm_json_str(&j, "backend", common.backend);
    farm_json_str(&j, "model", model);
    farm_json_str(&j, "precision", common.precision);
    farm_json_stats(&j, &stats);
    farm_json_num(&j, "flops", total_flops);
    farm_json_num(&j, "gflops", total_flops / (stats.median_ms * 1e6));
    farm_json_num(&j, "checksum", farm_checksum(result, n));
    if (a.gpu) { /* where an inference's wall time goes on the host (medians over measured iterations) */
        farm_json_num(&j, "median_host_enqueue_ms", (double)median_ns(&a.host_q[0]) / 1e6);
        farm_json_num(&j, "median_host_collect_ms", (double)median_ns(&a.host_q[1]) / 1e6);
    }
    if (net.nlayers == net.total_layers) {
        char top[512];
        top5_json(result, n, top, sizeof top);
        farm_json_raw(&j, "top5", top);
    }
    if (common.verify) {
        farm_json_bool(&j, "verified", cmp.ok);
        farm_json_num(&j, "tolerance", tol);
        farm_json_num(&j, "max_abs_err", cmp.max_abs_err);
        farm_json_num(&j, "max_rel_err", cmp.max_rel_err);
        farm_json_u64(&j, "mismatches", cmp.mismatches);
    }
    farm_json_end(&j);
    if (!cmp.ok)
        farm_die(FARM_EXIT_VERIFY, "verify: %zu of %zu outputs differ from the cpu path beyond %g (first at %zu)",
                 cmp.mismatches, n, tol, cmp.first_bad);

    if (a.gpu) {
        cnn_gpu_free(&a.gpu_state);
        farm_cl_close(&cl);
    } else {
        cnn_cpu_free(&a.cpu);
    }
    if (pool)
        farm_pool_destroy(pool);
    cnn_tune_free(&a.tune);
    cnn_free_weights(&net);
    free(input);
    stats_free(&a);
    return FARM_EXIT_OK;
}
