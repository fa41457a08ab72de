/* farm-probe: GPU family, its busy source (and format) and frequency source (and unit).
 *
 * Candidates are tried in order of quality; the first readable one wins, else the first present
 * one is reported unreadable (so the host can say "this phone has it, the shell may not read
 * it"). Formats are sniffed from the content when readable, because vendors differ from docs.
 */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fs.h"
#include "sections.h"

#define KGSL "/sys/class/kgsl/kgsl-3d0"
#define SKI "/sys/kernel/gpu"
#define MALI_DEV "/sys/class/misc/mali0/device"
#define MAX_CANDIDATES 16

typedef struct {
    char path[FS_PATH_MAX];
    const char *kind; /* busy: documented format; freq: documented unit */
} candidate;

typedef struct {
    candidate c[MAX_CANDIDATES];
    int n;
} candidates;

static void add(candidates *cs, const char *path, const char *kind) {
    if (cs->n >= MAX_CANDIDATES) return;
    snprintf(cs->c[cs->n].path, FS_PATH_MAX, "%s", path);
    cs->c[cs->n].kind = kind;
    cs->n++;
}

const char *freq_unit_from_value(long long v) {
    if (v >= 10000000) return "Hz";  /* >= 10 MHz in Hz */
    if (v >= 10000) return "kHz";     /* 10 MHz .. 10 GHz in kHz */
    return "MHz";
}

static const char *sniff_busy_format(const char *text, const char *documented) {
    if (strchr(text, '%')) return "pct";
    char *end;
    strtod(text, &end);
    if (end == text) return documented;
    char *end2;
    strtod(end, &end2);
    if (end2 != end) return "kgsl"; /* two numbers: busy total */
    return strcmp(documented, "kgsl") == 0 ? "int" : documented;
}

/* Writes the chosen candidate as key (or null) and every candidate under key_candidates. */
static void choose(jsonw *w, const char *key, const candidates *cs, int is_busy) {
    char buf[FS_TEXT_MAX];
    int best = -1, best_err = 0;
    for (int i = 0; i < cs->n && best < 0; i++)
        if (fs_read(cs->c[i].path, buf, sizeof(buf)) == 0) best = i;
    for (int i = 0; i < cs->n && best < 0; i++)
        if (fs_exists(cs->c[i].path)) best = i;
    if (best < 0) {
        jw_null(w, key);
    } else {
        best_err = jw_node_begin(w, key, cs->c[best].path, buf, sizeof(buf));
        const char *kind = cs->c[best].kind;
        if (!best_err && is_busy) kind = sniff_busy_format(buf, kind);
        if (!best_err && !is_busy) {
            long long v = strtoll(buf, NULL, 10);
            if (v > 0) kind = freq_unit_from_value(v);
        }
        jw_str(w, is_busy ? "format" : "unit", kind);
        jw_obj_close(w);
    }
}

static void add_devfreq(candidates *cs) {
    char *names[32];
    int n = fs_list("/sys/class/devfreq", "", names, 32);
    for (int i = 0; i < n; i++) {
        if (strstr(names[i], "mali") || strstr(names[i], "gpu") || strstr(names[i], "g3d")) {
            char p[FS_PATH_MAX];
            snprintf(p, sizeof(p), "/sys/class/devfreq/%s/cur_freq", names[i]);
            add(cs, p, "Hz");
        }
    }
    fs_free_names(names, n);
}

static const char *family(void) {
    if (fs_is_dir(KGSL)) return "adreno";
    if (fs_is_dir("/sys/kernel/ged") || fs_exists("/proc/gpufreq")) return "mediatek";
    if (fs_exists("/sys/class/misc/mali0") || fs_exists("/dev/mali0")) return "mali";
    return "unknown";
}

void section_gpu(jsonw *w) {
    candidates busy = {.n = 0}, freq = {.n = 0};
    const char *fam = family();
    const char *model_path = SKI "/gpu_model";
    if (strcmp(fam, "adreno") == 0) {
        add(&busy, KGSL "/gpubusy", "kgsl");
        add(&busy, KGSL "/gpu_busy_percentage", "pct");
        add(&busy, SKI "/gpu_busy", "pct");
        add(&freq, KGSL "/devfreq/cur_freq", "Hz");
        add(&freq, KGSL "/gpuclk", "Hz");
        add(&freq, KGSL "/clock_mhz", "MHz");
        add(&freq, SKI "/gpu_clock", "MHz");
        model_path = KGSL "/gpu_model";
    } else if (strcmp(fam, "mali") == 0) {
        add(&busy, MALI_DEV "/utilization", "int");
        add(&busy, SKI "/gpu_busy", "pct");
        add_devfreq(&freq);
        add(&freq, MALI_DEV "/clock", "MHz");
        add(&freq, SKI "/gpu_clock", "MHz");
    } else {
        /* MediaTek GED and unknown SoCs share the "SKI" interface; GED's clock is kHz */
        add(&busy, SKI "/gpu_busy", "pct");
        add(&busy, MALI_DEV "/utilization", "int");
        add(&freq, SKI "/gpu_clock", strcmp(fam, "mediatek") == 0 ? "kHz" : "MHz");
        add_devfreq(&freq);
    }
    char model[256];
    jw_obj_open(w, "gpu");
    jw_str(w, "family", fam);
    jw_str(w, "model", fs_read(model_path, model, sizeof(model)) == 0 ? model : NULL);
    choose(w, "busy", &busy, 1);
    choose(w, "freq", &freq, 0);
    jw_arr_open(w, "candidates");
    for (int r = 0; r < 2; r++) {
        const candidates *cs = r == 0 ? &busy : &freq;
        for (int i = 0; i < cs->n; i++) {
            if (!fs_exists(cs->c[i].path)) continue;
            jw_node_begin(w, NULL, cs->c[i].path, model, sizeof(model));
            jw_str(w, "role", r == 0 ? "busy" : "freq");
            jw_obj_close(w);
        }
    }
    jw_arr_close(w);
    jw_obj_close(w);
}
