/* gemm: C = A * B benchmark with cpu, cpu-mt and gpu (OpenCL) backends. See kernels/README.md. */
#include <stdlib.h>
#include <string.h>

#include "gemm.h"
#include "tune.h"

static const char *const kernel_choices[] = {"auto", "regblock", "packed", "local", NULL};
static const char *const transfer_choices[] = {"each", "once", NULL};

typedef struct {
    const gemm_problem *p;
    const char *backend;
    farm_pool *pool;
    gemm_gpu *gpu;
    float *c;
} runner;

/* --tune: candidates and what each evaluation needs. Verification compares sampled rows of C
 * (all rows of a small C; else 15 spread rows and the last, which borders the padding) with the
 * cpu path computing just those rows, so the reference costs a sliver of the product. */
#define MAX_CAND 48
#define VERIFY_ROWS 16
typedef struct {
    farm_cl *cl;
    const gemm_problem *p;
    const char *cache_dir;
    gemm_gpu_opts opts[MAX_CAND];
    const char *params[MAX_CAND];
    char text[MAX_CAND][160];
    int n;
    size_t rows[VERIFY_ROWS];
    int nrows;
    float *ref;   /* nrows x n */
    float *got;   /* m x n */
    double rtol, atol_per_k;
} tuner;

static void tuner_reference(tuner *t)
{
    const gemm_problem *p = t->p;
    t->nrows = p->m <= VERIFY_ROWS ? (int)p->m : VERIFY_ROWS;
    for (int i = 0; i < t->nrows; i++)
        t->rows[i] = p->m <= VERIFY_ROWS ? (size_t)i : (i == t->nrows - 1 ? p->m - 1 : (size_t)i * p->m / VERIFY_ROWS);
    t->ref = farm_alloc((size_t)t->nrows * p->n * sizeof(float));
    for (int i = 0; i < t->nrows; i++) {
        gemm_problem row = {1, p->n, p->k, p->fp16, p->a + t->rows[i] * p->k, p->b};
        gemm_cpu(&row, t->ref + (size_t)i * p->n, NULL);
    }
    t->got = farm_alloc(p->m * p->n * sizeof(float));
}

static int tuner_eval(void *user, int index, double *kernel_ms, int *verified)
{
    tuner *t = user;
    gemm_gpu *g = gemm_gpu_create(t->cl, t->p, &t->opts[index], t->cache_dir);
    *kernel_ms = farm_tune_time(gemm_gpu_time_once, g, 7, 1.0);
    gemm_gpu_read(g, t->got);
    gemm_gpu_destroy(g);
    *verified = 1;
    for (int i = 0; i < t->nrows && *verified; i++) {
        const farm_cmp c = farm_compare(t->got + t->rows[i] * t->p->n, t->ref + (size_t)i * t->p->n, t->p->n, t->rtol,
                                        t->atol_per_k * (double)t->p->k);
        *verified = c.ok;
    }
    return 0;
}

/* Candidates of the chosen kernel family, the default first. */
static void tuner_candidates(tuner *t, const gemm_gpu_opts *def, int half)
{
    t->opts[0] = *def;
    t->n = 1;
    if (!strcmp(def->kernel, "local")) {
        farm_tiled_cfg c[MAX_CAND];
        const int nc = farm_tiled_candidates(t->cl, half ? 2 : 4, c, MAX_CAND);
        for (int i = 0; i < nc && t->n < MAX_CAND; i++) {
            if (!memcmp(&c[i], &def->tiled, sizeof c[i]))
                continue;
            t->opts[t->n] = *def;
            t->opts[t->n++].tiled = c[i];
        }
    } else {
        static const long tm[] = {14, 6, 8, 4, 10, 12, 5, 3}, vec[] = {16, 8}, vecs[] = {2, 1, 3};
        const int packed = !strcmp(def->kernel, "packed");
        for (size_t a = 0; a < sizeof vec / sizeof vec[0]; a++)
            for (size_t b = 0; b < (packed ? sizeof vecs / sizeof vecs[0] : 1); b++)
                for (size_t i = 0; i < sizeof tm / sizeof tm[0] && t->n < MAX_CAND; i++) {
                    gemm_gpu_opts o = *def;
                    o.tile_m = tm[i], o.vec = vec[a], o.vecs = packed ? vecs[b] : 1;
                    if (o.tile_m == def->tile_m && o.vec == def->vec && o.vecs == def->vecs)
                        continue;
                    t->opts[t->n++] = o;
                }
    }
    for (int i = 0; i < t->n; i++) {
        if (!strcmp(def->kernel, "local"))
            farm_tiled_format(&t->opts[i].tiled, t->text[i], sizeof t->text[i]);
        else
            gemm_cpu_params_format(&t->opts[i], t->text[i], sizeof t->text[i]);
        t->params[i] = t->text[i];
    }
}

static void params_text(const gemm_gpu_opts *o, char *out, size_t outlen)
{
    if (!strcmp(o->kernel, "local"))
        farm_tiled_format(&o->tiled, out, outlen);
    else
        gemm_cpu_params_format(o, out, outlen);
}

static int params_parse(const char *text, gemm_gpu_opts *o)
{
    if (!strcmp(o->kernel, "local")) {
        farm_tiled_cfg c;
        if (farm_tiled_parse(text, &c) != 0)
            return -1;
        o->tiled = c;
        return 0;
    }
    return gemm_cpu_params_parse(text, o);
}

static int iter(void *user, farm_split *split)
{
    runner *r = user;
    if (r->gpu)
        return gemm_gpu_iter(r->gpu, r->c, split);
    gemm_cpu(r->p, r->c, r->pool);
    return FARM_EXIT_OK;
}

static float *load_or_generate(const char *path, size_t rows, size_t cols, uint64_t seed, const char *what,
                               size_t *out_rows, size_t *out_cols)
{
    if (!path) {
        float *x = farm_alloc(rows * cols * sizeof *x);
        farm_fill_uniform(x, rows * cols, seed, -1.0f, 1.0f);
        *out_rows = rows;
        *out_cols = cols;
        return x;
    }
    farm_array arr;
    char err[512];
    if (farm_npy_read(path, &arr, err, sizeof err) != 0)
        farm_die(FARM_EXIT_USAGE, "--%s: %s", what, err);
    if (arr.ndim != 2)
        farm_die(FARM_EXIT_USAGE, "--%s: %s: expected a 2-D array, got %d dimension(s)", what, path, arr.ndim);
    *out_rows = arr.shape[0];
    *out_cols = arr.shape[1];
    return arr.data;
}

/* The untuned tile: the shared default (common/tiled.c), except where float4 loads run on a GPU and
 * 128 x 128 tiles still give every compute unit a work-group: there 128x128x8 with 8 x 8 per
 * work-item (H100, n = 2048 / 4096: 46.0 / 47.5 TFLOPS, 96% / 94% of cuBLAS, against 39.6 / 42.5
 * for the shared default with float4 loads and 37.4 / 38.2 with scalar ones;
 * kernels/bench/results-h200.md). The shared default stays for cnn and train, whose operands do
 * not take float4 loads. */
static farm_tiled_cfg default_tile(const farm_cl *cl, const gemm_problem *p, int half_arith, int global_vec)
{
    const farm_tiled_cfg big = {128, 128, 8, 8, 8, 4};
    const size_t tiles = ((p->m + 127) / 128) * ((p->n + 127) / 128);
    char why[160];
    if (global_vec == 4 && !p->fp16 && (cl->device_type & CL_DEVICE_TYPE_GPU) && tiles >= cl->compute_units &&
        farm_tiled_check(&big, cl, 4, why, sizeof why) == 0)
        return big;
    return farm_tiled_default(cl, p->m, p->n, p->k, half_arith ? 2 : 4);
}

int main(int argc, char **argv)
{
    farm_common c;
    farm_common_defaults(&c);
    long m = 256, n = 256, k = 256, tile_m = 0, vec = 16, vecs = 0, wg_m = 0, wg_n = 0;
    long tsm = 0, tsn = 0, tsk = 0, wptm = 0, wptn = 0, lvw = 0, global_vec = 4;
    int corrupt = 0;
    const char *a_path = NULL, *b_path = NULL, *kernel = "auto", *transfers = "each";
    const farm_opt opts[] = {
        FARM_OPTS_BENCH(&c),
        FARM_OPTS_CL(&c),
        FARM_OPTS_TUNE(&c),
        {"m", FARM_OPT_INT, &m, "rows of A and C", 1, 1 << 16, NULL},
        {"n", FARM_OPT_INT, &n, "columns of B and C", 1, 1 << 16, NULL},
        {"k", FARM_OPT_INT, &k, "columns of A, rows of B", 1, 1 << 16, NULL},
        {"a", FARM_OPT_STRING, &a_path, "A from a 2-D .npy (M x K) instead of generated data", 0, 0, NULL},
        {"b", FARM_OPT_STRING, &b_path, "B from a 2-D .npy (K x N) instead of generated data", 0, 0, NULL},
        {"kernel", FARM_OPT_CHOICE, &kernel, "gpu kernel (auto: local on GPUs, packed on CPU devices)", 0, 0,
         kernel_choices},
        {"tile-m", FARM_OPT_INT, &tile_m, "regblock/packed: rows of C per work-item (0: 6 regblock, 14 packed)", 0,
         16, NULL},
        {"vec", FARM_OPT_INT, &vec, "regblock/packed: columns of C per work-item (vector width 2, 4, 8 or 16)", 2, 16,
         NULL},
        {"vecs", FARM_OPT_INT, &vecs, "packed: vectors per work-item row, columns = vec x vecs (0: 2)", 0, 4, NULL},
        {"wg-m", FARM_OPT_INT, &wg_m, "regblock/packed: work-group rows (0: driver's choice)", 0, 1024, NULL},
        {"wg-n", FARM_OPT_INT, &wg_n, "regblock/packed: work-group columns (0: driver's choice)", 0, 1024, NULL},
        {"tsm", FARM_OPT_INT, &tsm, "local: rows of C per work-group tile (0: tuned or default)", 0, 1024, NULL},
        {"tsn", FARM_OPT_INT, &tsn, "local: columns of C per work-group tile", 0, 1024, NULL},
        {"tsk", FARM_OPT_INT, &tsk, "local: K depth of the tiles staged in local memory", 0, 256, NULL},
        {"wptm", FARM_OPT_INT, &wptm, "local: rows of C per work-item", 0, 64, NULL},
        {"wptn", FARM_OPT_INT, &wptn, "local: columns of C per work-item", 0, 64, NULL},
        {"lvw", FARM_OPT_INT, &lvw, "local: vector width of local-memory reads (1, 2, 4)", 0, 4, NULL},
        {"global-vec", FARM_OPT_INT, &global_vec,
         "local, fp32: 4 loads the operand tiles from global memory as float4 where the tile splits into whole "
         "float4s per work-item (else scalars), 1 always as scalars",
         1, 4, NULL},
        {"transfers", FARM_OPT_CHOICE, &transfers, "gpu: copy A, B in and C out every iteration, or once", 0, 0,
         transfer_choices},
        {"corrupt-output", FARM_OPT_FLAG, &corrupt,
         "test hook: perturb one gpu output element before --verify (exercises exit 4)", 0, 0, NULL},
        {0},
    };
    farm_parse_args(argc, argv, "gemm",
                    "GEMM benchmark: C[M][N] = A[M][K] * B[K][N], row-major; reports GFLOPS.\n"
                    "fp16 stores A, B and C as half and accumulates in fp32.",
                    "gemm --backend=gpu --m=1024 --n=1024 --k=1024 --iters=10 --verify", opts);
    if (c.list_devices)
        return farm_cl_list_devices();
    farm_common_check(&c);
    if (global_vec != 1 && global_vec != 4)
        farm_die(FARM_EXIT_USAGE, "--global-vec=%ld: use 1 (scalar loads) or 4 (float4 loads)", global_vec);
    if (vec != 2 && vec != 4 && vec != 8 && vec != 16)
        farm_die(FARM_EXIT_USAGE, "--vec: expected 2, 4, 8 or 16, got %ld", vec);
    if ((wg_m > 0) != (wg_n > 0))
        farm_die(FARM_EXIT_USAGE, "--wg-m and --wg-n go together (both 0 lets the driver choose)");

    size_t am, ak, bk, bn;
    float *a = load_or_generate(a_path, (size_t)m, (size_t)k, (uint64_t)c.seed, "a", &am, &ak);
    float *b = load_or_generate(b_path, (size_t)k, (size_t)n, (uint64_t)c.seed + 1, "b", &bk, &bn);
    if (ak != bk)
        farm_die(FARM_EXIT_USAGE, "inner dimensions differ: A is %zux%zu, B is %zux%zu", am, ak, bk, bn);
    const int fp16 = !strcmp(c.precision, "fp16");
    if (fp16) { /* what half storage does to the inputs, on every backend */
        farm_round_f16(a, am * ak);
        farm_round_f16(b, bk * bn);
    }
    gemm_problem p = {am, bn, ak, fp16, a, b};
    float *out = farm_alloc(p.m * p.n * sizeof *out);

    runner r = {&p, c.backend, NULL, NULL, out};
    farm_cl cl;
    const int gpu = !strcmp(c.backend, "gpu");
    if (!strcmp(c.backend, "cpu-mt"))
        r.pool = farm_pool_create((int)c.threads);

    farm_json j;
    farm_tune_state ts;
    int half_arith = 0;
    if (gpu) {
        farm_cl_open(&cl, c.cl_device);
        if (!strcmp(kernel, "auto"))
            kernel = (cl.device_type & CL_DEVICE_TYPE_GPU) ? "local" : "packed";
        const int local = !strcmp(kernel, "local"), packed = !strcmp(kernel, "packed");
        half_arith = local && fp16 && cl.has_fp16;
        const char *cache_dir = farm_cl_cache_dir(c.cl_cache);
        /* Measured on PoCL (AVX-512): packed 14 x (2 x 16) keeps 28 accumulators in registers. */
        const int explicit_cpu = tile_m || vecs || wg_m || wg_n;
        const int explicit_local = tsm || tsn || tsk || wptm || wptn || lvw;
        gemm_gpu_opts go = {kernel, tile_m ? tile_m : packed ? 14 : 6, vec, vecs ? vecs : packed ? 2 : 1, wg_m, wg_n,
                            !strcmp(transfers, "each"), default_tile(&cl, &p, half_arith, (int)global_vec),
                            half_arith, (int)global_vec};
        char workload[256];
        snprintf(workload, sizeof workload, "kernel=%s m=%zu n=%zu k=%zu precision=%s", kernel, p.m, p.n, p.k,
                 half_arith ? "fp16-arith" : c.precision);
        farm_tune_begin(&ts, &cl, "gemm", gemm_source_key(), cache_dir, workload);
        if (local && explicit_local) {
            farm_tiled_cfg t = go.tiled;
            if (tsm) t.tsm = (int)tsm;
            if (tsn) t.tsn = (int)tsn;
            if (tsk) t.tsk = (int)tsk;
            if (wptm) t.wptm = (int)wptm;
            if (wptn) t.wptn = (int)wptn;
            if (lvw) t.vw = (int)lvw;
            char why[160];
            if (farm_tiled_check(&t, &cl, half_arith ? 2 : 4, why, sizeof why) != 0)
                farm_die(FARM_EXIT_USAGE, "--tsm/--tsn/--tsk/--wptm/--wptn/--lvw: %s", why);
            go.tiled = t;
            ts.source = FARM_TUNE_EXPLICIT;
        } else if (!local && explicit_cpu) {
            ts.source = FARM_TUNE_EXPLICIT;
        } else if (c.tune) {
            tuner t;
            memset(&t, 0, sizeof t);
            t.cl = &cl, t.p = &p, t.cache_dir = cache_dir;
            t.rtol = half_arith ? 2e-2 : fp16 ? 4e-3 : 1e-4;
            t.atol_per_k = half_arith ? 2e-3 : fp16 ? 1e-5 + 1e-3 / (double)p.k : 1e-5;
            tuner_reference(&t);
            go.transfers_each = 0;
            tuner_candidates(&t, &go, half_arith);
            const uint64_t t0 = farm_now_ns();
            double best_ms, default_ms;
            const int best = farm_tune_search(t.params, t.n, tuner_eval, &t, c.tune_budget_s, &best_ms, &default_ms,
                                              &ts.candidates);
            ts.tune_s = (double)(farm_now_ns() - t0) / 1e9;
            const int each = !strcmp(transfers, "each");
            go = t.opts[best];
            go.transfers_each = each;
            farm_tune_record(&ts, t.params[best], best_ms, default_ms, ts.candidates, ts.tune_s);
            free(t.ref);
            free(t.got);
        } else if (farm_tune_resolve(&ts, &c, 0)) {
            gemm_gpu_opts tuned = go;
            char why[160];
            if (params_parse(ts.params, &tuned) == 0 &&
                (!local || farm_tiled_check(&tuned.tiled, &cl, half_arith ? 2 : 4, why, sizeof why) == 0))
                go = tuned;
            else
                farm_tune_reject(&ts, local ? "is not a valid configuration of the local kernel on this device"
                                            : "is not a valid configuration");
        }
        params_text(&go, ts.params, sizeof ts.params);
        r.gpu = gemm_gpu_create(&cl, &p, &go, cache_dir);
    }
    farm_json_begin(&j, "info");
    farm_json_str(&j, "program", "gemm");
    farm_json_str(&j, "backend", c.backend);
    farm_json_str(&j, "precision", c.precision);
    farm_json_int(&j, "m", (long long)p.m);
    farm_json_int(&j, "n", (long long)p.n);
    farm_json_int(&j, "k", (long long)p.k);
    farm_json_int(&j, "threads", r.pool ? c.threads : 1);
    farm_json_int(&j, "seed", c.seed);
    if (gpu) {
        farm_cl_info_fields(&j, &cl, gemm_gpu_program(r.gpu));
        gemm_gpu_describe(r.gpu, &j);
        farm_json_str(&j, "precision_mode", half_arith ? "fp16" : fp16 ? "fp16-storage" : "fp32");
        farm_tune_info_fields(&j, &ts);
    }
    farm_json_end(&j);

    farm_stats st;
    int rc = farm_bench_run(&c, iter, &r, gpu, &st);
    if (rc != FARM_EXIT_OK)
        farm_die(rc, "iteration failed");
    if (gpu && strcmp(transfers, "each") != 0)
        gemm_gpu_read(r.gpu, out);

    if (corrupt && gpu)
        out[p.m * p.n / 2] += 1000.0f;
    const char *verdict = "skipped";
    farm_cmp cmp = {1, 0, 0, 0, 0};
    if (c.verify) {
        float *ref = farm_alloc(p.m * p.n * sizeof *ref);
        farm_pool *vp = farm_pool_create(farm_cpu_count());
        gemm_cpu(&p, ref, vp);
        farm_pool_destroy(vp);
        /* Summation order differs between paths: tolerance grows with K. fp16: one half ulp
         * (2^-11) of output rounding on either side plus the same accumulation slack. */
        double rtol = fp16 ? 4e-3 : 1e-4, atol = 1e-5 * (double)p.k + (fp16 ? 1e-3 : 0);
        if (half_arith) /* half accumulators: rounding grows with the partial sums, ~sqrt(K) */
            rtol = 2e-2, atol = 2e-3 * (double)p.k;
        cmp = farm_compare(out, ref, p.m * p.n, rtol, atol);
        verdict = cmp.ok ? "passed" : "failed";
        free(ref);
    }
    const double flop = 2.0 * (double)p.m * (double)p.n * (double)p.k;
    farm_json_begin(&j, "result");
    farm_json_stats(&j, &st);
    farm_json_num(&j, "gflops", flop / (st.median_ms * 1e6));
    farm_json_num(&j, "gflops_kernel", gpu ? flop / (st.median_kernel_ms * 1e6) : flop / (st.median_ms * 1e6));
    farm_json_num(&j, "checksum", farm_checksum(out, p.m * p.n));
    farm_json_str(&j, "verify", verdict);
    if (c.verify) {
        farm_json_num(&j, "max_abs_err", cmp.max_abs_err);
        farm_json_int(&j, "mismatches", (long long)cmp.mismatches);
    }
    farm_json_end(&j);

    if (c.dump_output) {
        char err[512];
        size_t shape[2] = {p.m, p.n};
        if (farm_npy_write(c.dump_output, out, shape, 2, err, sizeof err) != 0)
            farm_die(FARM_EXIT_ERROR, "--dump-output: %s", err);
    }
    if (gpu) {
        gemm_gpu_destroy(r.gpu);
        farm_cl_close(&cl);
    }
    farm_pool_destroy(r.pool);
    free(a);
    free(b);
    free(out);
    if (!cmp.ok)
        farm_die(FARM_EXIT_VERIFY, "verification failed: %zu of %zu elements differ (first at %zu, max abs err %g)",
                 cmp.mismatches, p.m * p.n, cmp.first_bad, cmp.max_abs_err);
    return FARM_EXIT_OK;
}
