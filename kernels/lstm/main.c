/* lstm: stacked LSTM inference benchmark (MobiRNN) with cpu, cpu-mt and gpu backends.
 * See lstm.h for the model and kernels/README.md for the .npy layout. */
#include <stdlib.h>
#include <string.h>

#include "lstm.h"

static const char *const gpu_kernel_choices[] = {"auto", "fused", "step", "wave", NULL};

typedef struct {
    lstm_cpu *cpu;
    lstm_gpu *gpu;
    float *logits;
} runner;

static int iter(void *user, farm_split *split)
{
    runner *r = user;
    if (r->gpu)
        return lstm_gpu_run(r->gpu, r->logits, split);
    lstm_cpu_run(r->cpu, r->logits);
    return FARM_EXIT_OK;
}

int main(int argc, char **argv)
{
    farm_common c;
    farm_common_defaults(&c);
    lstm_shape s = {128, 9, 32, 1, 6, 1, 0};
    long wg = 0;
    const char *gpu_kernel = "auto";
    const char *weights = NULL, *input = NULL;
    const farm_opt opts[] = {
        FARM_OPTS_BENCH(&c),
        FARM_OPTS_CL(&c),
        {"seq-len", FARM_OPT_INT, &s.seq_len, "time steps per window", 1, 100000, NULL},
        {"input-dim", FARM_OPT_INT, &s.input_dim, "input channels per step", 1, 65536, NULL},
        {"hidden", FARM_OPT_INT, &s.hidden, "hidden units per layer", 1, 8192, NULL},
        {"layers", FARM_OPT_INT, &s.layers, "stacked LSTM layers", 1, LSTM_MAX_LAYERS, NULL},
        {"classes", FARM_OPT_INT, &s.classes, "output classes (logits)", 1, 65536, NULL},
        {"batch", FARM_OPT_INT, &s.batch, "windows per inference", 1, 100000, NULL},
        {"weights", FARM_OPT_STRING, &weights,
         "directory of .npy weights: lstm{l}_kernel (D+H, 4H; gates i,f,g,o), lstm{l}_bias (4H), dense_kernel "
         "(H, classes), dense_bias (classes)",
         0, 0, NULL},
        {"input", FARM_OPT_STRING, &input, ".npy inputs (batch, seq_len, input_dim)", 0, 0, NULL},
        {"gpu-kernel", FARM_OPT_CHOICE, &gpu_kernel,
         "gpu strategy: fused (one launch per inference, a work-group per batch element), step (one launch "
         "per step and layer, all units in parallel), wave (one launch per step for all layers along "
         "diagonals); auto: fused on CPU devices when hidden <= 64 or batch >= compute units (launches "
         "dominate), else step on CPU devices and wave on GPUs", 0, 0,
         gpu_kernel_choices},
        {"wg", FARM_OPT_INT, &wg, "gpu: work-group size along hidden units (0: fused H, step driver's choice)", 0,
         4096, NULL},
        {0},
    };
    farm_parse_args(argc, argv, "lstm",
                    "Stacked LSTM inference (MobiRNN, UCI HAR shapes); logits = dense(h_T of the last layer).\n"
                    "Weights and inputs come from --seed or from .npy files; fp16 stores them as half.",
                    "lstm --backend=gpu --hidden=128 --layers=2 --batch=1 --iters=20 --verify", opts);
    if (c.list_devices)
        return farm_cl_list_devices();
    farm_common_check(&c);
    s.fp16 = !strcmp(c.precision, "fp16");

    lstm_model m;
    lstm_model_init(&m, &s, (uint64_t)c.seed, weights, input);
    const size_t nout = (size_t)(s.batch * s.classes);
    runner r = {NULL, NULL, farm_alloc(nout * sizeof(float))};
    farm_pool *pool = !strcmp(c.backend, "cpu-mt") ? farm_pool_create((int)c.threads) : NULL;
    const int gpu = !strcmp(c.backend, "gpu");
    farm_cl cl;
    if (gpu) {
        farm_cl_open(&cl, c.cl_device);
        /* fused runs a batch element on one compute unit: it wins where launches dominate (CPU
         * devices, small H) or the batch fills the device; step spreads every step over all. */
        const cl_ulong fused_local_bytes = (cl_ulong)(s.layers * 2 * s.hidden) * sizeof(float);
        if (!strcmp(gpu_kernel, "auto"))
            gpu_kernel = !(cl.device_type & CL_DEVICE_TYPE_GPU) && fused_local_bytes <= cl.local_mem_bytes &&
                                 (s.hidden <= 64 || s.batch >= (long)(cl.compute_units ? cl.compute_units : 1))
                             ? "fused"
                         : (cl.device_type & CL_DEVICE_TYPE_GPU) ? "wave"
                                                                 : "step";
        if (!strcmp(gpu_kernel, "fused") && fused_local_bytes > cl.local_mem_bytes)
            farm_die(FARM_EXIT_USAGE,
                     "--gpu-kernel=fused keeps h of every layer in local memory: %llu bytes needed, the device "
                     "has %llu (use --gpu-kernel=step)",
                     (unsigned long long)fused_local_bytes, (unsigned long long)cl.local_mem_bytes);
        const int strategy = !strcmp(gpu_kernel, "fused") ? LSTM_FUSED : !strcmp(gpu_kernel, "wave") ? LSTM_WAVE : LSTM_STEP;
        r.gpu = lstm_gpu_create(&cl, &m, strategy, wg, farm_cl_cache_dir(c.cl_cache));
    } else {
        r.cpu = lstm_cpu_create(&m, pool);
    }

    farm_json j;
    farm_json_begin(&j, "info");
    farm_json_str(&j, "program", "lstm");
    farm_json_str(&j, "backend", c.backend);
    farm_json_str(&j, "precision", c.precision);
    farm_json_int(&j, "seq_len", s.seq_len);
    farm_json_int(&j, "input_dim", s.input_dim);
    farm_json_int(&j, "hidden", s.hidden);
    farm_json_int(&j, "layers", s.layers);
    farm_json_int(&j, "classes", s.classes);
    farm_json_int(&j, "batch", s.batch);
    farm_json_int(&j, "threads", pool ? c.threads : 1);
    farm_json_str(&j, "weights", weights ? weights : "seed");
    farm_json_int(&j, "seed", c.seed);
    if (gpu) {
        farm_cl_info_fields(&j, &cl, lstm_gpu_program(r.gpu));
        farm_json_str(&j, "gpu_kernel", gpu_kernel);
        farm_json_int(&j, "wg", wg);
        farm_json_int(&j, "launches_per_inference", lstm_gpu_launches(r.gpu));
    }
    farm_json_end(&j);

    farm_stats st;
    int rc = farm_bench_run(&c, iter, &r, gpu, &st);
    if (rc != FARM_EXIT_OK)
        farm_die(rc, "iteration failed");

    const char *verdict = "skipped";
    farm_cmp cmp = {1, 0, 0, 0, 0};
    if (c.verify) {
        float *ref = farm_alloc(nout * sizeof(float));
        lstm_cpu *ref_cpu = lstm_cpu_create(&m, NULL);
        lstm_cpu_run(ref_cpu, ref);
        lstm_cpu_destroy(ref_cpu);
        /* Same rounded weights on both paths; only summation order and exp/tanh differ. */
        cmp = farm_compare(r.logits, ref, nout, 1e-3, 1e-4);
        verdict = cmp.ok ? "passed" : "failed";
        free(ref);
    }
    /* flops of one inference: 2 per multiply-add of the gate matmuls and the dense layer */
    double flop = 0;
    for (long l = 0; l < s.layers; l++)
        flop += 2.0 * (double)(lstm_in_dim(&s, l) + s.hidden) * 4.0 * (double)s.hidden;
    flop = (flop * (double)s.seq_len + 2.0 * (double)(s.hidden * s.classes)) * (double)s.batch;
    farm_json_begin(&j, "result");
    farm_json_stats(&j, &st);
    farm_json_num(&j, "gflops", flop / (st.median_ms * 1e6));
    farm_json_num(&j, "ms_per_window", st.median_ms / (double)s.batch);
    farm_json_num(&j, "checksum", farm_checksum(r.logits, nout));
    farm_json_str(&j, "verify", verdict);
    if (c.verify) {
        farm_json_num(&j, "max_abs_err", cmp.max_abs_err);
        farm_json_int(&j, "mismatches", (long long)cmp.mismatches);
    }
    farm_json_end(&j);

    if (c.dump_output) {
        char err[512];
        size_t shape[2] = {(size_t)s.batch, (size_t)s.classes};
        if (farm_npy_write(c.dump_output, r.logits, shape, 2, err, sizeof err) != 0)
            farm_die(FARM_EXIT_ERROR, "--dump-output: %s", err);
    }
    if (gpu) {
        lstm_gpu_destroy(r.gpu);
        farm_cl_close(&cl);
    }
    lstm_cpu_destroy(r.cpu);
    farm_pool_destroy(pool);
    lstm_model_free(&m);
    free(r.logits);
    if (!cmp.ok)
        farm_die(FARM_EXIT_VERIFY, "verification failed: %zu of %zu logits differ (first at %zu, max abs err %g)",
                 cmp.mismatches, nout, cmp.first_bad, cmp.max_abs_err);
    return FARM_EXIT_OK;
}
