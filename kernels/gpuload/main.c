/* gpuload: holds a target GPU utilisation until SIGTERM/SIGINT (or --duration-s).
 *
 * Duty-cycle control: time is cut into slots (--slot-ms); in each slot the program runs short
 * kernels (about --kernel-ms each) for duty x slot, then sleeps. The duty comes from a PI
 * controller: closed loop on the busy counter file (--busy-path) when it is readable, otherwise
 * open loop on the program's own measured kernel duty. Every --period-ms a `load` event reports
 * the achieved utilisation. See kernels/README.md. */
#include <math.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>

#include "control.h"
#include "farm.h"
#include "gpuload_cl.h"

static volatile int g_stop;
static void on_signal(int sig)
{
    (void)sig;
    g_stop = 1;
}

static const char *const intensity_choices[] = {"compute", "memory", NULL};

#define COUNTER_READ_INTERVAL_NS 50000000ULL /* busy counters update ~10-20x/s */
#define MEMORY_BUFFER_FLOAT4 (256 * 1024)   /* 4 MiB per buffer: one pass ~ 1 ms on a phone GPU */

typedef struct {
    farm_cl *cl;
    cl_kernel k;
    cl_mem out, src, dst;
    int memory;
    size_t global, local;
    double units; /* compute: loop trips; memory: float4 elements streamed */
} burst;

static int read_busy(const char *path, double *util)
{
    FILE *f = fopen(path, "r");
    if (!f)
        return -1;
    char buf[128];
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = 0;
    return n ? gpuload_parse_busy(buf, util) : -1;
}

/* Runs one kernel to completion; returns its wall time in ns. */
static uint64_t run_burst(burst *b)
{
    cl_int n = MEMORY_BUFFER_FLOAT4, work;
    if (b->memory) {
        double units = b->units < 1024 ? 1024 : b->units;
        n = units < MEMORY_BUFFER_FLOAT4 ? (cl_int)units : MEMORY_BUFFER_FLOAT4;
        work = (cl_int)(units / n + 0.5);
        clSetKernelArg(b->k, 2, sizeof n, &n);
        clSetKernelArg(b->k, 3, sizeof work, &work);
    } else {
        work = b->units < 1 ? 1 : (cl_int)b->units;
        clSetKernelArg(b->k, 1, sizeof work, &work);
    }
    uint64_t t0 = farm_now_ns();
    farm_cl_check(clEnqueueNDRangeKernel(b->cl->queue, b->k, 1, NULL, &b->global, &b->local, 0, NULL, NULL),
                  "clEnqueueNDRangeKernel(gpuload)");
    farm_cl_check(clFinish(b->cl->queue), "clFinish(gpuload)");
    return farm_now_ns() - t0;
}

/* Keeps one launch near the wanted duration (the device may slow down or be shared). */
static void retune(burst *b, uint64_t took_ns, double want_ns)
{
    double ratio = want_ns / (double)(took_ns ? took_ns : 1);
    ratio = ratio < 0.5 ? 0.5 : ratio > 2.0 ? 2.0 : ratio;
    b->units *= ratio;
    if (b->units < 1)
        b->units = 1;
    if (b->units > 1e9)
        b->units = 1e9;
}

/* Own duty over the last counter window, from per-slot records (a ring). */
#define SLOT_RING 512
typedef struct {
    uint64_t end_ns[SLOT_RING], len_ns[SLOT_RING], busy_ns[SLOT_RING];
    size_t head, n;
} slot_ring;

static void ring_push(slot_ring *r, uint64_t end_ns, uint64_t len_ns, uint64_t busy_ns)
{
    r->end_ns[r->head] = end_ns;
    r->len_ns[r->head] = len_ns;
    r->busy_ns[r->head] = busy_ns;
    r->head = (r->head + 1) % SLOT_RING;
    if (r->n < SLOT_RING)
        r->n++;
}

static double ring_duty(const slot_ring *r, uint64_t now_ns, uint64_t window_ns)
{
    uint64_t len = 0, busy = 0;
    for (size_t i = 0; i < r->n; i++) {
        size_t k = (r->head + SLOT_RING - 1 - i) % SLOT_RING;
        if (now_ns - r->end_ns[k] > window_ns)
            break;
        len += r->len_ns[k];
        busy += r->busy_ns[k];
    }
    return len ? (double)busy / (double)len : 0.0;
}

typedef struct {
    uint64_t t0_ns, busy_ns;
    double counter_sum;
    long counter_n, kernels;
} window;

static void emit_load(const window *w, uint64_t now, double target, double duty, int closed, double units,
                      double gain)
{
    const double own = (double)w->busy_ns / (double)(now - w->t0_ns);
    const double counter = w->counter_n ? w->counter_sum / (double)w->counter_n : -1;
    farm_json j;
    farm_json_begin(&j, "load");
    farm_json_u64(&j, "t_ns", now);
    farm_json_num(&j, "target", target);
    farm_json_num(&j, "achieved", closed && w->counter_n ? counter : own);
    farm_json_num(&j, "own_duty", own);
    farm_json_num(&j, "counter", w->counter_n ? counter : NAN); /* null when no reading */
    farm_json_num(&j, "duty_cmd", duty);
    farm_json_str(&j, "source", closed ? "busy-counter" : "own-duty");
    farm_json_int(&j, "kernels", w->kernels);
    farm_json_num(&j, "work_per_kernel", units);
    if (closed)
        farm_json_num(&j, "gain", gain);
    farm_json_end(&j);
}

int main(int argc, char **argv)
{
    farm_common c;
    farm_common_defaults(&c);
    double target = 0.5, duration_s = 0, kernel_ms = 2.0, slot_ms = 25.0, kp = 0.1, ki = 0.5;
    long period_ms = 500, counter_window_ms = 1000;
    const char *busy_path = NULL, *intensity = "compute";
    const farm_opt opts[] = {
        FARM_OPTS_CL(&c),
        {"target", FARM_OPT_DOUBLE, &target, "utilisation to hold, 0..1", 0, 1, NULL},
        {"busy-path", FARM_OPT_STRING, &busy_path,
         "GPU busy counter file for closed-loop control (kgsl 'busy total' or 'NN %')", 0, 0, NULL},
        {"intensity", FARM_OPT_CHOICE, &intensity, "kind of load", 0, 0, intensity_choices},
        {"period-ms", FARM_OPT_INT, &period_ms, "report period of `load` events", 10, 600000, NULL},
        {"kernel-ms", FARM_OPT_DOUBLE, &kernel_ms, "duration of one kernel launch", 0.1, 50, NULL},
        {"slot-ms", FARM_OPT_DOUBLE, &slot_ms, "duty-cycle slot (kernels then sleep)", 2, 1000, NULL},
        {"kp", FARM_OPT_DOUBLE, &kp, "controller proportional gain", 0, 10, NULL},
        {"ki", FARM_OPT_DOUBLE, &ki, "controller integral gain (1/s)", 0, 100, NULL},
        {"counter-window-ms", FARM_OPT_INT, &counter_window_ms,
         "averaging window of the busy counter (gain estimate compares own duty over it)", 10, 60000, NULL},
        {"duration-s", FARM_OPT_DOUBLE, &duration_s, "stop after this long (0: run until SIGTERM)", 0, 1e7, NULL},
        {0},
    };
    farm_parse_args(argc, argv, "gpuload",
                    "Holds a target GPU utilisation until SIGTERM, as a duty cycle of short kernels.\n"
                    "Closed loop on --busy-path when readable, else open loop on its own kernel duty.",
                    "gpuload --target=0.7 --busy-path=/sys/class/kgsl/kgsl-3d0/gpubusy --period-ms=500", opts);
    if (c.list_devices)
        return farm_cl_list_devices();

    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal; /* no SA_RESTART: sleeps end at once */
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGINT, &sa, NULL);

    farm_cl cl;
    farm_cl_open(&cl, c.cl_device);
    farm_cl_program prog;
    farm_cl_build(&cl, "gpuload", gpuload_cl_source, "-cl-mad-enable", farm_cl_cache_dir(c.cl_cache), &prog);
    burst b = {&cl, NULL, NULL, NULL, NULL, !strcmp(intensity, "memory"), 0, 0, 0};
    /* Several work-groups per compute unit so every core/shader cluster is kept busy. */
    b.local = cl.max_wg_size >= 64 ? 64 : cl.max_wg_size;
    b.global = (size_t)(cl.compute_units ? cl.compute_units : 1) * 8 * b.local;
    b.out = farm_cl_buffer(&cl, CL_MEM_WRITE_ONLY, b.global * sizeof(float), NULL);
    if (b.memory) {
        b.k = farm_cl_kernel(&prog, "load_memory");
        b.src = farm_cl_buffer(&cl, CL_MEM_READ_ONLY, MEMORY_BUFFER_FLOAT4 * 16, NULL);
        b.dst = farm_cl_buffer(&cl, CL_MEM_WRITE_ONLY, MEMORY_BUFFER_FLOAT4 * 16, NULL);
        const float zero = 0.0f;
        farm_cl_check(clEnqueueFillBuffer(cl.queue, b.src, &zero, sizeof zero, 0, MEMORY_BUFFER_FLOAT4 * 16, 0,
                                          NULL, NULL),
                      "clEnqueueFillBuffer");
        farm_cl_check(clSetKernelArg(b.k, 0, sizeof b.src, &b.src), "clSetKernelArg");
        farm_cl_check(clSetKernelArg(b.k, 1, sizeof b.dst, &b.dst), "clSetKernelArg");
        b.units = 4096;
    } else {
        b.k = farm_cl_kernel(&prog, "load_compute");
        farm_cl_check(clSetKernelArg(b.k, 0, sizeof b.out, &b.out), "clSetKernelArg");
        b.units = 16;
    }
    const double kernel_ns = kernel_ms * 1e6;
    run_burst(&b); /* first launch pays one-time costs */
    for (int i = 0; i < 4; i++)
        retune(&b, run_burst(&b), kernel_ns);

    double util;
    int closed = busy_path && read_busy(busy_path, &util) == 0;
    farm_json j;
    farm_json_begin(&j, "info");
    farm_json_str(&j, "program", "gpuload");
    farm_cl_info_fields(&j, &cl, &prog);
    farm_json_num(&j, "target", target);
    farm_json_str(&j, "intensity", intensity);
    farm_json_str(&j, "busy_path", busy_path);
    farm_json_str(&j, "mode", closed ? "closed-loop" : "open-loop");
    farm_json_num(&j, "kernel_ms", kernel_ms);
    farm_json_num(&j, "slot_ms", slot_ms);
    farm_json_int(&j, "period_ms", period_ms);
    farm_json_end(&j);

    gpuload_pi pi, own_pi;
    gpuload_pi_init(&pi, target, kp, ki);
    gpuload_pi_init(&own_pi, target, 0.0, 2.0);
    gpuload_gain gain;
    gpuload_gain_init(&gain, 0.3);
    slot_ring *ring = farm_alloc(sizeof *ring);
    const uint64_t counter_window_ns = (uint64_t)counter_window_ms * 1000000ULL;
    const uint64_t slot_ns = (uint64_t)(slot_ms * 1e6), period_ns = (uint64_t)period_ms * 1000000ULL;
    const uint64_t start = farm_now_ns();
    const uint64_t end = duration_s > 0 ? start + (uint64_t)(duration_s * 1e9) : UINT64_MAX;
    uint64_t last_read = start, last_update = start;
    window w = {start, 0, 0, 0, 0};
    uint64_t total_busy = 0;
    double total_counter = 0;
    long total_counter_n = 0, total_kernels = 0;
    int lost_counter = 0;

    while (!g_stop && farm_now_ns() < end) {
        const uint64_t slot_start = farm_now_ns();
        const double duty = closed ? gpuload_closed_duty(&pi, &gain) : own_pi.duty;
        const double budget = duty * (double)slot_ns;
        uint64_t busy = 0;
        /* Launch while at least half a kernel of budget is left: rounding, not truncation. */
        while (!g_stop && (double)busy + 0.5 * kernel_ns <= budget) {
            uint64_t took = run_burst(&b);
            busy += took;
            w.kernels++;
            retune(&b, took, kernel_ns);
        }
        const uint64_t now = farm_now_ns();
        if (now < slot_start + slot_ns)
            farm_sleep_ns(slot_start + slot_ns - now, &g_stop);
        const uint64_t slot_end = farm_now_ns();
        w.busy_ns += busy;
        ring_push(ring, slot_end, slot_end - slot_start, busy);
        gpuload_pi_update(&own_pi, (double)busy / (double)(slot_end - slot_start), (double)(slot_end - slot_start) / 1e9);

        if (closed && slot_end - last_read >= COUNTER_READ_INTERVAL_NS) {
            last_read = slot_end;
            if (read_busy(busy_path, &util) == 0) {
                /* The counter describes us only once its window lies entirely in our run. */
                if (slot_end - start >= counter_window_ns) {
                    gpuload_gain_update(&gain, util, ring_duty(ring, slot_end, counter_window_ns));
                    gpuload_pi_update(&pi, util, (double)(slot_end - last_update) / 1e9);
                }
                last_update = slot_end;
                w.counter_sum += util;
                w.counter_n++;
            } else if (!lost_counter) {
                lost_counter = 1; /* counter vanished: keep going open loop, say so once */
                closed = 0;
                farm_json_begin(&j, "info");
                farm_json_str(&j, "mode", "open-loop");
                farm_json_str(&j, "reason", "busy counter became unreadable");
                farm_json_end(&j);
            }
        }
        if (slot_end - w.t0_ns >= period_ns) {
            emit_load(&w, slot_end, target, closed ? gpuload_closed_duty(&pi, &gain) : own_pi.duty, closed, b.units,
                      gain.gain);
            total_busy += w.busy_ns;
            total_counter += w.counter_sum;
            total_counter_n += w.counter_n;
            total_kernels += w.kernels;
            w = (window){slot_end, 0, 0, 0, 0};
        }
    }
    total_busy += w.busy_ns;
    total_counter += w.counter_sum;
    total_counter_n += w.counter_n;
    total_kernels += w.kernels;
    const double elapsed_s = (double)(farm_now_ns() - start) / 1e9;
    farm_json_begin(&j, "result");
    farm_json_str(&j, "stopped_by", g_stop ? "signal" : "duration");
    farm_json_num(&j, "duration_s", elapsed_s);
    farm_json_num(&j, "target", target);
    farm_json_num(&j, "own_duty", (double)total_busy / (elapsed_s * 1e9));
    farm_json_num(&j, "counter_mean", total_counter_n ? total_counter / (double)total_counter_n : NAN);
    farm_json_int(&j, "kernels", total_kernels);
    farm_json_end(&j);

    free(ring);
    clReleaseKernel(b.k);
    clReleaseMemObject(b.out);
    if (b.src)
        clReleaseMemObject(b.src);
    if (b.dst)
        clReleaseMemObject(b.dst);
    farm_cl_program_release(&prog);
    farm_cl_close(&cl);
    return FARM_EXIT_OK;
}
