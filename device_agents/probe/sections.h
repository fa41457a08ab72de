/* The sections of farm-probe's JSON document; each writes one key into the top-level object. */
#ifndef FARM_PROBE_SECTIONS_H
#define FARM_PROBE_SECTIONS_H

#include "../common/jsonw.h"

typedef struct {
    int current_samples;      /* how many current_now readings for the unit/sign hints */
    int sample_interval_ms;   /* spacing of those readings */
    int su_timeout_ms;        /* `su -c id` gets this long */
} probe_opts;

void section_battery(jsonw *w, const probe_opts *o);  /* "battery" */
void section_charging(jsonw *w);                      /* "charging_control" */
void section_gpu(jsonw *w);                           /* "gpu" */

/* Hints from a magnitude, shared with tests through the JSON: */
const char *freq_unit_from_value(long long v); /* "Hz" | "kHz" | "MHz" */
const char *temp_unit_from_value(long long v); /* "mC" | "dC" | "C" */

#endif
