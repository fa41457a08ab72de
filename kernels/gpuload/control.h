/* gpuload control: busy-counter parsing, own-duty history and the closed-loop controller.
 * Pure functions (no I/O, no clock): the main loop feeds them times and readings. */
#ifndef GPULOAD_CONTROL_H
#define GPULOAD_CONTROL_H
#include <stddef.h>
#include <stdint.h>

/* Parses a GPU busy counter file's text: kgsl `gpubusy` "BUSY TOTAL" (ratio of the last window)
 * or a percentage "NN %" / "NN" (gpu_busy_percentage, Mali utilisation). Returns 0 and the
 * utilisation in [0, 1], or -1 when the text is neither. */
int gpuload_parse_busy(const char *text, double *util);

/* Own kernel duty per slot over the recent past, to compare with a counter's window. */
#define GPULOAD_RING 1024
typedef struct {
    uint64_t end_ns[GPULOAD_RING], len_ns[GPULOAD_RING], busy_ns[GPULOAD_RING];
    size_t head, n;
} gpuload_ring;

void gpuload_ring_push(gpuload_ring *r, uint64_t end_ns, uint64_t len_ns, uint64_t busy_ns);
/* Busy fraction of [now - window, now]; time not covered by any record counts as idle. */
double gpuload_ring_duty(const gpuload_ring *r, uint64_t now_ns, uint64_t window_ns);

/* Slot budgeting with error diffusion: a slot's kernel budget is duty x slot plus what earlier
 * slots over- or under-spent, so whole kernels average out to any duty (no quantisation steps).
 * Launch while busy + kernel/2 <= budget, then carry = budget - busy. */
double gpuload_budget_ns(double duty, double slot_ns, double carry_ns);
double gpuload_carry_ns(double budget_ns, double busy_ns, double slot_ns);

/* Closed loop. The plant: counter = gain x own wall-time duty (gain != 1 when the device is
 * shared, when the counter counts busy worker threads, ...). The command is target / gain
 * (feed-forward through the learned gain) plus a slow integral trim; both move only on a new
 * counter window, since a counter republishes the same window until the next one closes. */
typedef struct {
    double target;
    double gain;       /* learned: counter utilisation per unit of own duty */
    double ki;         /* integral gain, 1/s */
    double integral;   /* error x seconds, anti-windup clamped */
    int learned;       /* 0: initial guess; 1: measured; 2: lower bound from a saturated window */
    double last_error;
    uint64_t start_ns, window_ns, last_window_ns; /* set by gpuload_ctl_start */
    double kp; /* proportional trim on the last window's error (0: off) */
} gpuload_ctl;

void gpuload_ctl_init(gpuload_ctl *c, double target, double initial_gain, double ki);
/* Optional proportional trim: duty += kp x (target - last window) once the gain is measured. */
void gpuload_ctl_set_kp(gpuload_ctl *c, double kp);
/* A new counter window `measured` whose span saw own duty `own_duty`; `coverage` is the part of
 * the window (0..1) that lay inside this run; dt_s since the previous window. */
void gpuload_ctl_window(gpuload_ctl *c, double measured, double own_duty, double coverage, double dt_s);
double gpuload_ctl_duty(const gpuload_ctl *c);

/* The run starts at start_ns; the counter averages over window_ns. */
void gpuload_ctl_start(gpuload_ctl *c, uint64_t start_ns, uint64_t window_ns);
/* One poll of the counter at now_ns: `changed` says its text differs from the last window's. A
 * counter republishes a window until the next one closes, so a poll is a new window only when the
 * text changed or a window and a half passed. Then the gain and trim learn from it, with the own
 * duty of the window's span (time before the run counts as idle). Returns 1 for a new window. */
int gpuload_ctl_poll(gpuload_ctl *c, const gpuload_ring *r, double measured, int changed, uint64_t now_ns);

/* Open loop: integral control of own measured duty onto the target. */
typedef struct {
    double target, ki, integral;
} gpuload_open;

void gpuload_open_init(gpuload_open *o, double target, double ki);
void gpuload_open_update(gpuload_open *o, double own_duty, double dt_s);
double gpuload_open_duty(const gpuload_open *o);

#endif
