/* gpuload control (see control.h). */
#include <stdlib.h>

#include "control.h"

#define MIN_COVERAGE 0.3    /* a window mostly from before the run says little about us */
#define MIN_DUTY 0.02       /* too little duty says nothing about the gain */
#define SATURATED 0.98      /* counter pinned at 100%: the gain is at least measured/duty */
#define SATURATED_STEP 1.5  /* ... so assume more, to get out of saturation in one window */

static double clamp(double x, double lo, double hi) { return x < lo ? lo : x > hi ? hi : x; }

int gpuload_parse_busy(const char *text, double *util)
{
    char *end;
    double a = strtod(text, &end);
    if (end == text || a < 0)
        return -1;
    const char *p = end;
    while (*p == ' ' || *p == '\t')
        p++;
    if (*p == '%' || *p == '\n' || *p == '\0') { /* "NN %" or "NN" */
        if (a > 100)
            return -1;
        *util = a / 100.0;
        return 0;
    }
    double b = strtod(p, &end);
    if (end == p)
        return -1;
    if (b <= 0) { /* kgsl reports "0 0" before its first window */
        *util = 0.0;
        return 0;
    }
    *util = clamp(a / b, 0.0, 1.0);
    return 0;
}

double gpuload_budget_ns(double duty, double slot_ns, double carry_ns)
{
    return duty <= 0 ? 0.0 : duty * slot_ns + carry_ns;
}

double gpuload_carry_ns(double budget_ns, double busy_ns, double slot_ns)
{
    return clamp(budget_ns - busy_ns, -slot_ns, slot_ns); /* bounded: a stall is not paid back forever */
}

void gpuload_ring_push(gpuload_ring *r, uint64_t end_ns, uint64_t len_ns, uint64_t busy_ns)
{
    r->end_ns[r->head] = end_ns;
    r->len_ns[r->head] = len_ns;
    r->busy_ns[r->head] = busy_ns;
    r->head = (r->head + 1) % GPULOAD_RING;
    if (r->n < GPULOAD_RING)
        r->n++;
}

double gpuload_ring_duty(const gpuload_ring *r, uint64_t now_ns, uint64_t window_ns)
{
    if (window_ns == 0)
        return 0.0;
    const uint64_t lo = now_ns > window_ns ? now_ns - window_ns : 0;
    double busy = 0.0;
    for (size_t i = 0; i < r->n; i++) {
        size_t k = (r->head + GPULOAD_RING - 1 - i) % GPULOAD_RING;
        uint64_t end = r->end_ns[k] < now_ns ? r->end_ns[k] : now_ns;
        uint64_t start = r->end_ns[k] - r->len_ns[k];
        if (r->end_ns[k] <= lo)
            break;
        if (start < lo)
            start = lo;
        if (end > start && r->len_ns[k])
            busy += (double)r->busy_ns[k] * (double)(end - start) / (double)r->len_ns[k];
    }
    return clamp(busy / (double)window_ns, 0.0, 1.0);
}

void gpuload_ctl_init(gpuload_ctl *c, double target, double initial_gain, double ki)
{
    c->target = target;
    c->gain = initial_gain > 0 ? initial_gain : 1.0;
    c->ki = ki;
    c->integral = 0.0;
    c->learned = 0;
    c->last_error = 0.0;
    c->kp = 0.0;
}

void gpuload_ctl_set_kp(gpuload_ctl *c, double kp) { c->kp = kp; }

void gpuload_ctl_window(gpuload_ctl *c, double measured, double own_duty, double coverage, double dt_s)
{
    if (coverage < MIN_COVERAGE)
        return;
    if (own_duty >= MIN_DUTY) {
        double inst = measured / own_duty;
        if (measured >= SATURATED) {
            inst *= SATURATED_STEP;
            if (inst < c->gain)
                inst = c->gain * SATURATED_STEP;
        }
        inst = clamp(inst, 0.05, 20.0);
        /* A guess (the initial one, or one from a saturated window) is replaced; a measured gain
         * is smoothed lightly against noise. */
        c->gain = c->learned == 1 ? 0.3 * c->gain + 0.7 * inst : inst;
        c->learned = measured >= SATURATED ? 2 : 1;
    }
    /* Integral trim only for the residual once the gain is known (and only for full windows). */
    c->last_error = c->target - measured;
    if (c->learned == 1 && coverage >= 0.999 && c->ki > 0) {
        const double limit = 0.3 / c->ki;
        c->integral = clamp(c->integral + c->last_error * dt_s, -limit, limit);
    }
}

double gpuload_ctl_duty(const gpuload_ctl *c)
{
    if (c->target <= 0)
        return 0.0;
    const double p = c->learned == 1 ? c->kp * c->last_error : 0.0;
    return clamp(c->target / c->gain + c->ki * c->integral + p, 0.0, 1.0);
}

void gpuload_ctl_start(gpuload_ctl *c, uint64_t start_ns, uint64_t window_ns)
{
    c->start_ns = c->last_window_ns = start_ns;
    c->window_ns = window_ns;
}

int gpuload_ctl_poll(gpuload_ctl *c, const gpuload_ring *r, double measured, int changed, uint64_t now_ns)
{
    if (!changed && now_ns - c->last_window_ns < c->window_ns + c->window_ns / 2)
        return 0;
    const double since_start = (double)(now_ns - c->start_ns) / (double)c->window_ns;
    gpuload_ctl_window(c, measured, gpuload_ring_duty(r, now_ns, c->window_ns), since_start < 1 ? since_start : 1,
                       (double)(now_ns - c->last_window_ns) / 1e9);
    c->last_window_ns = now_ns;
    return 1;
}

void gpuload_open_init(gpuload_open *o, double target, double ki)
{
    o->target = target;
    o->ki = ki;
    o->integral = 0.0;
}

void gpuload_open_update(gpuload_open *o, double own_duty, double dt_s)
{
    const double limit = o->ki > 0 ? 0.5 / o->ki : 0.0;
    o->integral = clamp(o->integral + (o->target - own_duty) * dt_s, -limit, limit);
}

double gpuload_open_duty(const gpuload_open *o)
{
    if (o->target <= 0)
        return 0.0;
    return clamp(o->target + o->ki * o->integral, 0.0, 1.0);
}
