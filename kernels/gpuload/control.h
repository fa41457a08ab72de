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

/* Closed loop. The plant: counter = gain x own wall-time duty (gain != 1 when the device is
 * shared, when the counter counts busy worker threads, ...). The command is target / gain
 * (feed-forward through the learned gain) plus a slow integral trim; both move only on a new
 * counter window, since a counter republishes the same window until the next one closes. */
typedef struct {
    double target;
    double gain;       /* learned: counter utilisation per unit of own duty */
    double ki;         /* integral gain, 1/s */
    double integral;   /* error x seconds, anti-windup clamped */
    int learned;       /* 0 until the first usable window */
    double last_error;
} gpuload_ctl;

void gpuload_ctl_init(gpuload_ctl *c, double target, double initial_gain, double ki);
/* A new counter window `measured` whose span saw own duty `own_duty`; `coverage` is the part of
 * the window (0..1) that lay inside this run; dt_s since the previous window. */
void gpuload_ctl_window(gpuload_ctl *c, double measured, double own_duty, double coverage, double dt_s);
double gpuload_ctl_duty(const gpuload_ctl *c);

/* Open loop: integral control of own measured duty onto the target. */
typedef struct {
    double target, ki, integral;
} gpuload_open;

void gpuload_open_init(gpuload_open *o, double target, double ki);
void gpuload_open_update(gpuload_open *o, double own_duty, double dt_s);
double gpuload_open_duty(const gpuload_open *o);

#endif
