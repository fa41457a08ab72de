/* gpuload control (see control.h). The command is target + P + I: the feed-forward term gets the
 * load near the target at once, the integral removes the bias between wall-time duty and what the
 * busy counter sees (other processes, driver overhead, counter definition). */
#include <stdio.h>
#include <stdlib.h>

#include "control.h"

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
    if (b <= 0) { /* idle window: kgsl reports "0 0" */
        *util = 0.0;
        return 0;
    }
    double u = a / b;
    *util = u < 0 ? 0 : u > 1 ? 1 : u;
    return 0;
}

static double clamp(double x, double lo, double hi) { return x < lo ? lo : x > hi ? hi : x; }

void gpuload_pi_init(gpuload_pi *pi, double target, double kp, double ki)
{
    pi->target = target;
    pi->kp = kp;
    pi->ki = ki;
    pi->integral = 0.0;
    pi->duty = target;
    pi->correction = 0.0;
}

double gpuload_pi_update(gpuload_pi *pi, double measured, double dt_s)
{
    const double err = pi->target - measured;
    const double limit = pi->ki > 0 ? 1.0 / pi->ki : 0.0; /* the I term alone may span 0..1 */
    pi->integral = clamp(pi->integral + err * dt_s, -limit, limit);
    pi->correction = pi->kp * err + pi->ki * pi->integral;
    pi->duty = clamp(pi->target + pi->correction, 0.0, 1.0);
    return pi->duty;
}

void gpuload_gain_init(gpuload_gain *g, double alpha)
{
    g->gain = 1.0;
    g->alpha = alpha;
}

double gpuload_gain_update(gpuload_gain *g, double measured, double duty)
{
    /* Too little duty says nothing about the gain (and target 0 needs none). */
    if (duty >= 0.05) {
        const double inst = clamp(measured / duty, 0.05, 5.0);
        g->gain += g->alpha * (inst - g->gain);
    }
    return g->gain;
}

double gpuload_closed_duty(const gpuload_pi *pi, const gpuload_gain *g)
{
    return clamp(pi->target / g->gain + pi->correction, 0.0, 1.0);
}
