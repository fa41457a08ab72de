/* gpuload: holds a target GPU utilisation until SIGTERM/SIGINT (or --duration-s).
 *
 * Duty cycle: time is cut into slots (--slot-ms); in each slot the program runs short kernels
 * (about --kernel-ms each) for duty x slot, then sleeps. Closed loop on the busy counter file
 * (--busy-path) when it is readable: the duty is target / gain, the gain (counter utilisation per
 * unit of own duty) learned from every new counter window, plus an integral trim. Otherwise open
 * loop on the program's own measured kernel duty. Every --period-ms a `load` event reports the
 * achieved utilisation. Short kernels and interruptible sleeps make it exit within ~10 ms of
 * SIGTERM. See kernels/README.md. */
#include <math.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>

#include "burst.h"
#include "control.h"
#include "farm.h"

static volatile int g_stop;
static void on_signal(int sig)
{
    (void)sig;
    g_stop = 1;
}

static const char *const intensity_choices[] = {"compute", "memory", NULL};

#define COUNTER_POLL_NS 50000000ULL /* counters update at most ~10-20x/s */

static int read_text(const char *path, char *buf, size_t cap)
{
    FILE *f = fopen(path, "r");
    if (!f)
        return -1;
    size_t n = fread(buf, 1, cap - 1, f);
    fclose(f);
    buf[n] = 0;
    return n ? 0 : -1;
}

static int read_busy(const char *path, char *buf, size_t cap, double *util)
{
    return read_text(path, buf, cap) == 0 ? gpuload_parse_busy(buf, util) : -1;
}

typedef struct { /* one report period */
    uint64_t t0_ns, busy_ns;
    double counter_sum;
    long counter_n, kernels;
} period;

typedef struct { /* the whole run */
    uint64_t busy_ns;
    double counter_sum;
    long counter_n, kernels;
} totals;

static void emit_load(const period *p, uint64_t now, double target, double duty, int closed, double gain,
                      double work)
{
    const double own = (double)p->busy_ns / (double)(now - p->t0_ns);
    const double counter = p->counter_n ? p->counter_sum / (double)p->counter_n : NAN;
    farm_json j;
    farm_json_begin(&j, "load");
    farm_json_u64(&j, "t_ns", now);
    farm_json_num(&j, "target", target);
    farm_json_num(&j, "achieved", closed && p->counter_n ? counter : own);
    farm_json_num(&j, "own_duty", own);
    farm_json_num(&j, "counter", counter);
    farm_json_num(&j, "duty_cmd", duty);
    farm_json_str(&j, "source", closed ? "busy-counter" : "own-duty");
    farm_json_num(&j, "gain", closed ? gain : NAN);
    farm_json_int(&j, "kernels", p->kernels);
    farm_json_num(&j, "work_per_kernel", work);
    farm_json_end(&j);
}

int main(int argc, char **argv)
{
    farm_common c;
    farm_common_defaults(&c);
    double target = 0.5, duration_s = 0, kernel_ms = 2.0, slot_ms = 25.0, ki = 0.0, kp = 0.0, initial_gain = 0;
    long period_ms = 500, window_ms = 1000;
    const char *busy_path = NULL, *intensity = "compute";
    const farm_opt opts[] = {
        FARM_OPTS_CL(&c),
        {"target", FARM_OPT_DOUBLE, &target, "utilisation to hold, 0..1", 0, 1, NULL},
        {"busy-path", FARM_OPT_STRING, &busy_path,
         "GPU busy counter file for closed-loop control (kgsl 'busy total' or 'NN %')", 0, 0, NULL},
        {"intensity", FARM_OPT_CHOICE, &intensity, "kind of load", 0, 0, intensity_choices},
        {"period-ms", FARM_OPT_INT, &period_ms, "report period of `load` events", 10, 600000, NULL},
        {"kernel-ms", FARM_OPT_DOUBLE, &kernel_ms, "duration of one kernel launch", 0.1, 50, NULL},
        {"slot-ms", FARM_OPT_DOUBLE, &slot_ms, "duty-cycle slot (kernels, then sleep)", 2, 1000, NULL},
        {"counter-window-ms", FARM_OPT_INT, &window_ms, "window the busy counter averages over", 10, 60000,
         NULL},
        {"initial-gain", FARM_OPT_DOUBLE, &initial_gain,
         "counter utilisation per unit of duty before the first window (0: compute units on CPU "
         "OpenCL devices, whose counters count busy worker threads; else 1)",
         0, 64, NULL},
        {"kp", FARM_OPT_DOUBLE, &kp, "proportional trim on the last window's error (0: off)", 0, 10, NULL},
        {"ki", FARM_OPT_DOUBLE, &ki, "integral trim gain (1/s; 0: the learned gain alone)", 0, 100, NULL},
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
    sa.sa_handler = on_signal; /* no SA_RESTART: a sleep ends at once */
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGINT, &sa, NULL);

    farm_cl cl;
    farm_cl_open(&cl, c.cl_device);
    gpuload_burst *burst =
        gpuload_burst_create(&cl, !strcmp(intensity, "memory"), kernel_ms, farm_cl_cache_dir(c.cl_cache));
    if (initial_gain <= 0)
        initial_gain = (cl.device_type & CL_DEVICE_TYPE_CPU) && cl.compute_units ? (double)cl.compute_units : 1.0;

    char text[128] = "", last_text[128] = "";
    double util = 0;
    int closed = busy_path && read_busy(busy_path, last_text, sizeof last_text, &util) == 0;
    farm_json j;
    farm_json_begin(&j, "info");
    farm_json_str(&j, "program", "gpuload");
    farm_cl_info_fields(&j, &cl, gpuload_burst_program(burst));
    farm_json_num(&j, "target", target);
    farm_json_str(&j, "intensity", intensity);
    farm_json_str(&j, "busy_path", busy_path);
    farm_json_str(&j, "mode", closed ? "closed-loop" : "open-loop");
    farm_json_num(&j, "initial_gain", initial_gain);
    farm_json_num(&j, "kernel_ms", kernel_ms);
    farm_json_num(&j, "slot_ms", slot_ms);
    farm_json_int(&j, "period_ms", period_ms);
    farm_json_end(&j);

    gpuload_ctl ctl;
    gpuload_ctl_init(&ctl, target, initial_gain, ki);
    gpuload_ctl_set_kp(&ctl, kp);
    gpuload_open open;
    gpuload_open_init(&open, target, 2.0);
    gpuload_ring *ring = farm_alloc(sizeof *ring);
    const double kernel_ns = kernel_ms * 1e6;
    const uint64_t slot_ns = (uint64_t)(slot_ms * 1e6), period_ns = (uint64_t)period_ms * 1000000ULL;
    const uint64_t window_ns = (uint64_t)window_ms * 1000000ULL;
    const uint64_t start = farm_now_ns();
    const uint64_t end = duration_s > 0 ? start + (uint64_t)(duration_s * 1e9) : UINT64_MAX;
    uint64_t last_poll = start;
    double carry_ns = 0;
    gpuload_ctl_start(&ctl, start, window_ns);
    period p = {start, 0, 0, 0, 0};
    totals tot = {0, 0, 0, 0};

    while (!g_stop && farm_now_ns() < end) {
        const uint64_t slot_start = farm_now_ns();
        const double duty = closed ? gpuload_ctl_duty(&ctl) : gpuload_open_duty(&open);
        const double budget = gpuload_budget_ns(duty, (double)slot_ns, carry_ns);
        uint64_t busy = 0;
        while (!g_stop && (double)busy + 0.5 * kernel_ns <= budget) {
            busy += gpuload_burst_run(burst);
            p.kernels++;
        }
        carry_ns = gpuload_carry_ns(budget, (double)busy, (double)slot_ns);
        const uint64_t now = farm_now_ns();
        if (now < slot_start + slot_ns)
            farm_sleep_ns(slot_start + slot_ns - now, &g_stop);
        const uint64_t slot_end = farm_now_ns();
        p.busy_ns += busy;
        gpuload_ring_push(ring, slot_end, slot_end - slot_start, busy);
        gpuload_open_update(&open, (double)busy / (double)(slot_end - slot_start),
                            (double)(slot_end - slot_start) / 1e9);

        if (closed && slot_end - last_poll >= COUNTER_POLL_NS) {
            last_poll = slot_end;
            if (read_busy(busy_path, text, sizeof text, &util) == 0) {
                p.counter_sum += util;
                p.counter_n++;
                if (gpuload_ctl_poll(&ctl, ring, util, strcmp(text, last_text) != 0, slot_end))
                    memcpy(last_text, text, sizeof last_text);
            } else {
                closed = 0; /* the counter vanished: carry on open loop, and say so */
                farm_json_begin(&j, "info");
                farm_json_str(&j, "mode", "open-loop");
                farm_json_str(&j, "reason", "busy counter became unreadable");
                farm_json_end(&j);
            }
        }
        if (slot_end - p.t0_ns >= period_ns) {
            emit_load(&p, slot_end, target, closed ? gpuload_ctl_duty(&ctl) : gpuload_open_duty(&open), closed,
                      ctl.gain, gpuload_burst_work(burst));
            tot.busy_ns += p.busy_ns;
            tot.counter_sum += p.counter_sum;
            tot.counter_n += p.counter_n;
            tot.kernels += p.kernels;
            p = (period){slot_end, 0, 0, 0, 0};
        }
    }
    tot.busy_ns += p.busy_ns;
    tot.counter_sum += p.counter_sum;
    tot.counter_n += p.counter_n;
    tot.kernels += p.kernels;
    const double elapsed_s = (double)(farm_now_ns() - start) / 1e9;
    farm_json_begin(&j, "result");
    farm_json_str(&j, "stopped_by", g_stop ? "signal" : "duration");
    farm_json_num(&j, "duration_s", elapsed_s);
    farm_json_num(&j, "target", target);
    farm_json_num(&j, "own_duty", (double)tot.busy_ns / (elapsed_s * 1e9));
    farm_json_num(&j, "counter_mean", tot.counter_n ? tot.counter_sum / (double)tot.counter_n : NAN);
    farm_json_num(&j, "gain", ctl.gain);
    farm_json_int(&j, "kernels", tot.kernels);
    farm_json_end(&j);

    free(ring);
    gpuload_burst_destroy(burst);
    farm_cl_close(&cl);
    return FARM_EXIT_OK;
}
