/* gemm: C = A * B benchmark with cpu, cpu-mt and gpu (OpenCL) backends. See kernels/README.md. */
#include <stdlib.h>
#include <string.h>

#include "gemm.h"

static const char *const kernel_choices[] = {"auto", "regblock", "packed", "local", NULL};
static const char *const transfer_choices[] = {"each", "once", NULL};

typedef struct {
    const gemm_problem *p;
    const char *backend;
    farm_pool *pool;
    gemm_gpu *gpu;
    float *c;
} runner;

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

int main(int argc, char **argv)
{
    farm_common c;
    farm_common_defaults(&c);
    long m = 256, n = 256, k = 256, tile_m = 0, vec = 16, vecs = 0, wg_m = 0, wg_n = 0;
    int corrupt = 0;
    const char *a_path = NULL, *b_path = NULL, *kernel = "auto", *transfers = "each";
    const farm_opt opts[] = {
        FARM_OPTS_BENCH(&c),
        FARM_OPTS_CL(&c),
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
    if (gpu) {
        farm_cl_open(&cl, c.cl_device);
        if (!strcmp(kernel, "auto"))
            kernel = (cl.device_type & CL_DEVICE_TYPE_GPU) ? "local" : "packed";
        /* Measured on PoCL (AVX-512): packed 14 x (2 x 16) keeps 28 accumulators in registers. */
        const int packed = !strcmp(kernel, "packed");
        if (tile_m == 0)
            tile_m = packed ? 14 : 6;
        if (vecs == 0)
            vecs = packed ? 2 : 1;
        gemm_gpu_opts go = {kernel, tile_m, vec, vecs, wg_m, wg_n, !strcmp(transfers, "each")};
        r.gpu = gemm_gpu_create(&cl, &p, &go, farm_cl_cache_dir(c.cl_cache));
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
