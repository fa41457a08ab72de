/* gpuload control: busy-counter parsing and the duty-cycle PI controller (pure functions). */
#ifndef GPULOAD_CONTROL_H
#define GPULOAD_CONTROL_H

/* Parses a GPU busy counter file's text: kgsl `gpubusy` "BUSY TOTAL" (ratio of the last window)
 * or a percentage "NN %" / "NN" (gpu_busy_percentage, Mali utilisation). Returns 0 and the
 * utilisation in [0, 1], or -1 when the text is neither. */
int gpuload_parse_busy(const char *text, double *util);

typedef struct {
    double target;   /* wanted utilisation 0..1 */
    double kp, ki;   /* proportional gain, integral gain per second */
    double integral; /* accumulated error x seconds, clamped (anti-windup) */
    double duty;       /* open-loop command: target + correction, clamped to 0..1 */
    double correction; /* P + I terms (unclamped) */
} gpuload_pi;

void gpuload_pi_init(gpuload_pi *pi, double target, double kp, double ki);
/* One controller step with a new measurement taken dt_s after the previous one; returns duty. */
double gpuload_pi_update(gpuload_pi *pi, double measured, double dt_s);

/* Plant-gain estimate: how much counter utilisation one unit of wall-time kernel duty produces
 * (below 1 when the device is shared or the counter counts differently, above 1 when kernels keep
 * the device busy beyond their wall time). The closed loop commands target / gain, so it lands
 * near the target as soon as one counter window has been seen; the PI trims what is left. */
typedef struct {
    double gain;  /* current estimate, starts at 1 */
    double alpha; /* smoothing of new estimates, 0..1 */
} gpuload_gain;

void gpuload_gain_init(gpuload_gain *g, double alpha);
/* New counter reading `measured` while the program's own duty over the same window was `duty`. */
double gpuload_gain_update(gpuload_gain *g, double measured, double duty);

/* Closed-loop command: feed-forward through the gain estimate plus the PI correction. */
double gpuload_closed_duty(const gpuload_pi *pi, const gpuload_gain *g);

#endif
