/* idle: sleeps for --seconds while speaking the benchmark programs' JSON Lines contract (info,
 * phase, iter, result; kernels/README.md), burning no CPU and touching no OpenCL. For idle-power
 * baselines and for measuring the orchestration's own cost per run. The measured window is
 * --seconds split into --iters sleeps (the common --min-seconds / --max-seconds bounds apply). */
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <signal.h>
#include <string.h>

#include "farm.h"

static volatile int g_stop = 0;

static void on_signal(int sig)
{
    (void)sig;
    g_stop = 1;
}

typedef struct {
    uint64_t sleep_ns;
} idle_job;

static int iter(void *user, farm_split *split)
{
    (void)split;
    const idle_job *job = user;
    if (!g_stop)
        farm_sleep_ns(job->sleep_ns, &g_stop);
    return FARM_EXIT_OK;
}

int main(int argc, char **argv)
{
    farm_common c;
    farm_common_defaults(&c);
    c.backend = "cpu";
    c.warmup = 0;
    c.iters = 1;
    double seconds = 1.0;
    const farm_opt opts[] = {
        FARM_OPTS_BENCH(&c),
        {"seconds", FARM_OPT_DOUBLE, &seconds, "total time to sleep, split over --iters iterations", 0, 1e6, NULL},
        {0},
    };
    farm_parse_args(argc, argv, "idle",
                    "Sleeps for --seconds and reports it like a benchmark (no CPU, no OpenCL work);\n"
                    "for idle-power baselines and measuring per-run overhead. SIGTERM/SIGINT end it early\n"
                    "(exit 0, the iterations done so far are reported).",
                    "idle --seconds=10 --iters=10", opts);
    farm_common_check(&c);
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGINT, &sa, NULL);
    idle_job job = {(uint64_t)(seconds / (double)c.iters * 1e9)};

    farm_json j;
    farm_json_begin(&j, "info");
    farm_json_str(&j, "program", "idle");
    farm_json_str(&j, "backend", c.backend);
    farm_json_str(&j, "precision", c.precision);
    farm_json_int(&j, "threads", 1);
    farm_json_int(&j, "seed", c.seed);
    farm_json_num(&j, "seconds", seconds);
    farm_json_num(&j, "sleep_ms_per_iter", (double)job.sleep_ns / 1e6);
    farm_json_end(&j);

    farm_stats st;
    const int rc = farm_bench_run(&c, iter, &job, 0, &st);
    if (rc != FARM_EXIT_OK)
        farm_die(rc, "iteration failed");
    farm_json_begin(&j, "result");
    farm_json_stats(&j, &st);
    farm_json_num(&j, "checksum", 0.0);
    farm_json_str(&j, "verify", "skipped");
    farm_json_bool(&j, "interrupted", g_stop);
    farm_json_num(&j, "slept_s", st.measure_s);
    farm_json_end(&j);
    return FARM_EXIT_OK;
}
