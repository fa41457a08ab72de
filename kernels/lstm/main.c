/* lstm: stacked LSTM inference benchmark (MobiRNN) with cpu, cpu-mt and gpu backends.
 * See lstm.h for the model and kernels/README.md for the .npy layout. */
#include <stdlib.h>
#include <string.h>

#include "lstm.h"
#include "tune.h"

static const char *const gpu_kernel_choices[] = {"auto", "fused", "step", "wave", "persist", "grid", NULL};

typedef struct {
    lstm_cpu *cpu;
    lstm_gpu *gpu;
    float *logits;
} runner;

/* A gpu configuration: strategy, work-group along units, reduction split (wave). As text in the
 * tuning cache: "kernel=wave,wg=32,ks=32". */
typedef struct {
    int strategy;
    long wg, ks;
} lstm_cfg;

static const char *const strategy_names[] = {"step", "fused", "wave", "persist", "grid"};

static void cfg_format(const lstm_cfg *c, char *out, size_t outlen)
{
    snprintf(out, outlen, "kernel=%s,wg=%ld,ks=%ld", strategy_names[c->strategy], c->wg, c->ks);
}

static int cfg_parse(const char *text, lstm_cfg *c)
{
    char name[16], tail;
    long wg, ks;
    if (sscanf(text, "kernel=%15[a-z],wg=%ld,ks=%ld%c", name, &wg, &ks, &tail) != 3 || wg < 0 || wg > 4096 || ks < 1 ||
        ks > 256)
        return -1;
    for (int i = 0; i < 5; i++)
        if (!strcmp(name, strategy_names[i])) {
            c->strategy = i, c->wg = wg, c->ks = ks;
            return 0;
        }
    return -1;
}

/* persist's local memory: h (two slots) and c of every layer, the partial and summed gates. */
static cl_ulong persist_local_bytes(const lstm_shape *s, long wg, long ks)
{
    const long ju = wg ? wg : 32;
    return (cl_ulong)(s->layers * 3 * s->hidden + 4 * ks * ju + 4 * ju) * sizeof(float);
}

/* 0 when c can run on cl: work-group limits, fused's local memory. */
static int cfg_valid(const lstm_cfg *c, const lstm_shape *s, const farm_cl *cl)
{
    const cl_ulong fused_local_bytes = (cl_ulong)(s->layers * 2 * s->hidden) * sizeof(float);
    if (c->strategy == LSTM_FUSED && fused_local_bytes > cl->local_mem_bytes)
        return -1;
    if (c->strategy == LSTM_PERSIST && persist_local_bytes(s, c->wg, c->ks) > cl->local_mem_bytes)
        return -1;
    const size_t wg = (c->strategy == LSTM_WAVE && c->ks > 1) || c->strategy == LSTM_PERSIST || c->strategy == LSTM_GRID ? (size_t)c->ks * (size_t)(c->wg ? c->wg : 32)
                                                             : (size_t)c->wg;
    return wg <= cl->max_wg_size ? 0 : -1;
}

/* --tune: each candidate runs whole inferences, verified against the cpu path's logits and ranked
 * by wall time (an inference's cost on a GPU is mostly the gaps between its dependent launches,
 * which kernel time does not see). */
#define LSTM_MAX_CAND 32
typedef struct {
    farm_cl *cl;
    const lstm_model *m;
    const char *cache_dir;
    lstm_cfg cand[LSTM_MAX_CAND];
    int n;
    lstm_gpu *g;
    float *want, *got;
} lstm_tuner;

static uint64_t time_inference(void *user)
{
    lstm_tuner *t = user;
    farm_split sp = {0, 0, 0};
    const uint64_t t0 = farm_now_ns();
    lstm_gpu_run(t->g, t->got, &sp);
    return farm_now_ns() - t0;
}

static int tune_eval(void *user, int index, double *ms, int *verified)
{
    lstm_tuner *t = user;
    const lstm_cfg *c = &t->cand[index];
    t->g = lstm_gpu_create(t->cl, t->m, c->strategy, c->wg, c->ks, t->cache_dir);
    *ms = farm_tune_time(time_inference, t, 9, 1.0);
    const size_t n = (size_t)(t->m->s.batch * t->m->s.classes);
    *verified = farm_compare(t->got, t->want, n, 1e-3, 1e-4).ok;
    lstm_gpu_destroy(t->g);
    t->g = NULL;
    return 0;
}

/* Candidates, the default first: wave with its reduction split over work-groups of several shapes,
 * then the unsplit kernels; on CPU devices smaller groups. */
static void tune_candidates(lstm_tuner *t, const lstm_cfg *def, const farm_cl *cl)
{
    const int gpu = (cl->device_type & CL_DEVICE_TYPE_GPU) != 0;
    static const long gpu_split[][2] = {{32, 32}, {32, 16}, {16, 32}, {32, 8}, {64, 16}, {16, 16}, {64, 8}, {32, 4}};
    static const long cpu_split[][2] = {{16, 4}, {32, 4}, {8, 8}, {16, 8}, {32, 2}, {64, 2}};
    t->n = 0;
    t->cand[t->n++] = *def;
    const long(*sp)[2] = gpu ? gpu_split : cpu_split;
    const int nsp = gpu ? (int)(sizeof gpu_split / sizeof gpu_split[0]) : (int)(sizeof cpu_split / sizeof cpu_split[0]);
    lstm_cfg more[LSTM_MAX_CAND];
    int nm = 0;
    for (int i = 0; i < nsp; i++)
        more[nm++] = (lstm_cfg){LSTM_WAVE, sp[i][0], sp[i][1]};
    more[nm++] = (lstm_cfg){LSTM_WAVE, 0, 1};
    more[nm++] = (lstm_cfg){LSTM_STEP, 0, 1};
    more[nm++] = (lstm_cfg){LSTM_FUSED, 0, 1};
    for (int i = 0; i < nm && t->n < LSTM_MAX_CAND; i++) {
        const lstm_cfg *c = &more[i];
        if (cfg_valid(c, &t->m->s, cl) == 0 &&
            !(c->strategy == def->strategy && c->wg == def->wg && c->ks == def->ks))
            t->cand[t->n++] = *c;
    }
}

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
    long wg = 0, ks = 0;
    const char *gpu_kernel = "auto";
    const char *weights = NULL, *input = NULL;
    const farm_opt opts[] = {
        FARM_OPTS_BENCH(&c),
        FARM_OPTS_CL(&c),
        FARM_OPTS_TUNE(&c),
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
         "diagonals), persist (one launch per inference, a work-group of wg x ks per batch element splitting "
         "each unit's gate reduction), grid (one launch per inference, each layer's units over several work-groups "
         "of wg x ks per batch element, at most one per compute unit, a barrier across them per diagonal: GPUs); auto: fused on CPU devices when hidden <= 64 or batch >= compute units (launches "
         "dominate), else step on CPU devices and wave on GPUs", 0, 0,
         gpu_kernel_choices},
        {"wg", FARM_OPT_INT, &wg,
         "gpu: work-group size along hidden units (0: fused H, step driver's choice, split wave 32)", 0, 4096, NULL},
        {"ks", FARM_OPT_INT, &ks,
         "gpu wave: work-items sharing each unit's gate reduction (1: one work-item per unit; 0: tuned, or 32 on "
         "GPUs)", 0, 256,
         NULL},
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
    farm_tune_state ts;
    if (gpu) {
        farm_cl_open(&cl, c.cl_device);
        /* fused runs a batch element on one compute unit: it wins where launches dominate (CPU
         * devices, small H) or the batch fills the device; step spreads every step over all. */
        const cl_ulong fused_local_bytes = (cl_ulong)(s.layers * 2 * s.hidden) * sizeof(float);
        const int explicit_knobs = strcmp(gpu_kernel, "auto") != 0 || ks != 0 || wg != 0;
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
        lstm_cfg run = {!strcmp(gpu_kernel, "fused")     ? LSTM_FUSED
                        : !strcmp(gpu_kernel, "wave")    ? LSTM_WAVE
                        : !strcmp(gpu_kernel, "persist") ? LSTM_PERSIST
                        : !strcmp(gpu_kernel, "grid")    ? LSTM_GRID
                                                         : LSTM_STEP,
                        wg, 1};
        if (run.strategy == LSTM_PERSIST) {
            /* 32 units x 32 slices on GPUs as the split wave; CPU devices 4 slices (PoCL here, 2 layers
             * x 128 steps, H=512: 1.93 s per inference where 1 slice took 3.35, step 3.58; H=128 the
             * same within this host's noise; kernels/bench/results-h200.md) */
            run.wg = wg ? wg : 32;
            run.ks = ks ? ks : (cl.device_type & CL_DEVICE_TYPE_GPU) ? 32 : 4;
            while (!ks && run.ks > 1 && (size_t)(run.ks * run.wg) > cl.max_wg_size)
                run.ks /= 2;
            if (cfg_valid(&run, &s, &cl) != 0)
                farm_die(FARM_EXIT_USAGE,
                         "--gpu-kernel=persist: --wg=%ld x --ks=%ld work-items and %llu bytes of local memory exceed "
                         "the device (limits %zu work-items, %llu bytes): lower --wg or --ks, or use --gpu-kernel=wave",
                         run.wg, run.ks, (unsigned long long)persist_local_bytes(&s, run.wg, run.ks), cl.max_wg_size,
                         (unsigned long long)cl.local_mem_bytes);
        }
        if (run.strategy == LSTM_GRID) {
            /* 8 units x 32 slices per work-group: H=128 spreads over 16 work-groups, H=512 over as many
             * as there are compute units per batch element */
            run.wg = wg ? wg : 8;
            run.ks = ks ? ks : (cl.device_type & CL_DEVICE_TYPE_GPU) ? 32 : 4;
            while (!ks && run.ks > 1 && (size_t)(run.ks * run.wg) > cl.max_wg_size)
                run.ks /= 2;
            if ((size_t)(run.ks * run.wg) > cl.max_wg_size)
                farm_die(FARM_EXIT_USAGE, "--gpu-kernel=grid: --ks=%ld x --wg=%ld work-items exceed the device's "
                         "work-group limit %zu", run.ks, run.wg, cl.max_wg_size);
            if (s.batch > (long)(cl.compute_units ? cl.compute_units : 1))
                farm_die(FARM_EXIT_USAGE,
                         "--gpu-kernel=grid: --batch=%ld needs at least %ld work-groups resident at once, the device "
                         "has %u compute units (use --gpu-kernel=persist or wave)",
                         s.batch, s.batch, cl.compute_units);
        }
        /* the split wave on GPUs: 32 units x 32 slices (H200: 1.8 ms per 2-layer H=128 window where one
         * work-item per unit took 6.6; H=512 2.4 vs 22.9), fewer slices where groups are smaller */
        if (run.strategy == LSTM_WAVE) {
            const long ju = wg ? wg : 32;
            run.ks = ks ? ks : (cl.device_type & CL_DEVICE_TYPE_GPU) ? 32 : 1;
            while (!ks && run.ks > 1 && (size_t)(run.ks * ju) > cl.max_wg_size)
                run.ks /= 2;
            if (run.ks > 1 && (size_t)(run.ks * ju) > cl.max_wg_size)
                farm_die(FARM_EXIT_USAGE, "--ks=%ld x --wg=%ld work-items exceed the device's work-group limit %zu",
                         run.ks, ju, cl.max_wg_size);
            run.wg = run.ks > 1 ? ju : wg;
        }
        const char *cache_dir = farm_cl_cache_dir(c.cl_cache);
        char workload[256];
        snprintf(workload, sizeof workload, "lstm hidden=%ld layers=%ld input_dim=%ld batch=%ld seq_len=%ld precision=%s",
                 s.hidden, s.layers, s.input_dim, s.batch, s.seq_len, c.precision);
        farm_tune_begin(&ts, &cl, "lstm", lstm_gpu_source_key(), cache_dir, workload);
        if (c.tune && !explicit_knobs) {
            static lstm_tuner t;
            memset(&t, 0, sizeof t);
            t.cl = &cl, t.m = &m, t.cache_dir = cache_dir;
            const size_t nout_t = (size_t)(s.batch * s.classes);
            t.want = farm_alloc(nout_t * sizeof(float));
            t.got = farm_alloc(nout_t * sizeof(float));
            lstm_cpu *ref = lstm_cpu_create(&m, NULL);
            lstm_cpu_run(ref, t.want);
            lstm_cpu_destroy(ref);
            tune_candidates(&t, &run, &cl);
            char text[LSTM_MAX_CAND][64];
            const char *params[LSTM_MAX_CAND];
            for (int i = 0; i < t.n; i++) {
                cfg_format(&t.cand[i], text[i], sizeof text[i]);
                params[i] = text[i];
            }
            double best_ms, default_ms;
            int evaluated;
            const uint64_t t0 = farm_now_ns();
            const int best = farm_tune_search_for(workload, "wall", params, t.n, tune_eval, &t, c.tune_budget_s,
                                                  &best_ms, &default_ms, &evaluated);
            run = t.cand[best];
            farm_tune_record(&ts, params[best], best_ms, default_ms, evaluated, (double)(farm_now_ns() - t0) / 1e9);
            free(t.want);
            free(t.got);
        } else if (farm_tune_resolve(&ts, &c, explicit_knobs)) {
            lstm_cfg cached;
            if (cfg_parse(ts.params, &cached) == 0 && cfg_valid(&cached, &s, &cl) == 0)
                run = cached;
            else
                farm_tune_reject(&ts, "is not a valid configuration on this device");
        }
        cfg_format(&run, ts.params, sizeof ts.params);
        gpu_kernel = strategy_names[run.strategy];
        wg = run.wg;
        r.gpu = lstm_gpu_create(&cl, &m, run.strategy, run.wg, run.ks, cache_dir);
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
        /* lstm computes in fp32 on every device: fp16 is half storage of weights and inputs */
        farm_json_str(&j, "precision_mode", s.fp16 ? "fp16-storage" : "fp32");
        farm_json_int(&j, "wg", wg);
        farm_json_int(&j, "ks", lstm_gpu_ks(r.gpu));
        farm_json_int(&j, "ju", lstm_gpu_ju(r.gpu));
        farm_json_int(&j, "groups_per_batch_element", lstm_gpu_groups(r.gpu));
        farm_json_int(&j, "compute_units", (long)cl.compute_units);
        farm_json_int(&j, "launches_per_inference", lstm_gpu_launches(r.gpu));
        farm_tune_info_fields(&j, &ts);
        farm_json_str(&j, "tune_metric", "wall");
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
