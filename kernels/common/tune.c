/* Per-device tuning search and its on-device cache (see tune.h). */
#define _POSIX_C_SOURCE 200809L
#include "tune.h"

#include <ctype.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

const char *const farm_tuned_choices[] = {"use", "ignore", NULL};

#define MAGIC "farm-tune 1"
#define MAX_ENTRIES 256
#define LINE_MAX_BYTES 2048

const char *farm_tune_source_name(farm_tune_source s)
{
    switch (s) {
    case FARM_TUNE_CACHE: return "cache";
    case FARM_TUNE_NEAREST: return "cache-nearest";
    case FARM_TUNE_TUNED: return "tuned";
    case FARM_TUNE_EXPLICIT: return "explicit";
    case FARM_TUNE_PARTIAL: return "cache-partial";
    default: return "default";
    }
}

uint64_t farm_tune_source_key(const char *const *sources, int n)
{
    uint64_t h = FARM_HASH_INIT;
    for (int i = 0; i < n; i++)
        h = farm_hash64(h, sources[i], strlen(sources[i]) + 1);
    return h;
}

static uint64_t device_key(const farm_cl *cl)
{
    uint64_t h = FARM_HASH_INIT;
    const char *parts[] = {cl->platform_name, cl->device_name, cl->device_version, cl->driver_version};
    for (size_t i = 0; i < sizeof parts / sizeof parts[0]; i++)
        h = farm_hash64(h, parts[i], strlen(parts[i]) + 1);
    return h;
}

void farm_tune_begin(farm_tune_state *st, const farm_cl *cl, const char *program, uint64_t source_key,
                     const char *cache_dir, const char *workload)
{
    memset(st, 0, sizeof *st);
    st->source = FARM_TUNE_DEFAULT;
    st->kernel_ms = st->default_ms = NAN;
    snprintf(st->workload, sizeof st->workload, "%s", workload);
    const unsigned long long dk = (unsigned long long)device_key(cl), sk = (unsigned long long)source_key;
    snprintf(st->header, sizeof st->header, "%s %s %016llx %016llx", MAGIC, program, dk, sk);
    if (cache_dir && *cache_dir)
        snprintf(st->path, sizeof st->path, "%s/%s-%016llx-%016llx.tune", cache_dir, program, dk, sk);
}

typedef struct {
    char workload[256];
    char params[1024];
    double kernel_ms, default_ms;
} entry;

static void chomp(char *s)
{
    size_t n = strlen(s);
    while (n && (s[n - 1] == '\n' || s[n - 1] == '\r'))
        s[--n] = 0;
}

/* Reads every entry; 0 ok (also when the file does not exist: *n = 0), -1 damaged (reason in why). */
static int read_entries(const char *path, const char *header, entry *out, int *n, char *why, size_t whylen)
{
    *n = 0;
    FILE *f = fopen(path, "r");
    if (!f)
        return 0;
    char line[LINE_MAX_BYTES];
    int rc = 0, lineno = 0;
    if (!fgets(line, sizeof line, f)) {
        snprintf(why, whylen, "empty file");
        rc = -1;
    } else {
        lineno = 1;
        chomp(line);
        if (strcmp(line, header) != 0) {
            snprintf(why, whylen, "line 1: header is not '%s'", header);
            rc = -1;
        }
    }
    while (rc == 0 && fgets(line, sizeof line, f)) {
        lineno++;
        if (!strchr(line, '\n') && !feof(f)) {
            snprintf(why, whylen, "line %d: longer than %d bytes", lineno, LINE_MAX_BYTES);
            rc = -1;
            break;
        }
        chomp(line);
        if (!*line)
            continue;
        char *last = strrchr(line, '\t');
        char *fields[4] = {line, NULL, NULL, NULL};
        int nf = 1;
        for (char *p = line; last && p < last && nf < 4; p++)
            if (*p == '\t') {
                *p = 0;
                fields[nf++] = p + 1;
            }
        if (!last || nf != 4) {
            snprintf(why, whylen, "line %d: expected 5 tab-separated fields", lineno);
            rc = -1;
            break;
        }
        *last = 0;
        /* the check covers the fields as written: rebuild the tab-joined text */
        uint64_t h = FARM_HASH_INIT;
        for (int i = 0; i < 4; i++) {
            h = farm_hash64(h, fields[i], strlen(fields[i]));
            if (i < 3)
                h = farm_hash64(h, "\t", 1);
        }
        char *end = NULL;
        unsigned long long check = strtoull(last + 1, &end, 16);
        char *e1 = NULL, *e2 = NULL;
        const double km = strtod(fields[2], &e1), dm = strtod(fields[3], &e2);
        if (!end || *end || check != (unsigned long long)h || *e1 || *e2 || e1 == fields[2] || e2 == fields[3] ||
            strlen(fields[0]) >= sizeof out->workload || strlen(fields[1]) >= sizeof out->params) {
            snprintf(why, whylen, "line %d: check does not match the entry", lineno);
            rc = -1;
            break;
        }
        if (*n < MAX_ENTRIES) {
            entry *en = &out[(*n)++];
            snprintf(en->workload, sizeof en->workload, "%s", fields[0]);
            snprintf(en->params, sizeof en->params, "%s", fields[1]);
            en->kernel_ms = km;
            en->default_ms = dm;
        }
    }
    fclose(f);
    return rc;
}

/* Distance between two workloads "a=1 b=x ...": HUGE_VAL unless both have the same keys and equal
 * non-numeric values; else the sum of |ln(x/y)| over numeric values. */
static double distance(const char *a, const char *b)
{
    char ca[256], cb[256];
    snprintf(ca, sizeof ca, "%.255s", a);
    snprintf(cb, sizeof cb, "%.255s", b);
    char *sa = NULL, *sb = NULL;
    char *ta = strtok_r(ca, " ", &sa), *tb = strtok_r(cb, " ", &sb);
    double d = 0.0;
    for (; ta && tb; ta = strtok_r(NULL, " ", &sa), tb = strtok_r(NULL, " ", &sb)) {
        char *ea = strchr(ta, '='), *eb = strchr(tb, '=');
        if (!ea && !eb && !strcmp(ta, tb)) /* a bare word ("conv"): must match */
            continue;
        if (!ea || !eb || (size_t)(ea - ta) != (size_t)(eb - tb) || strncmp(ta, tb, (size_t)(ea - ta)) != 0)
            return HUGE_VAL;
        char *na = NULL, *nb = NULL;
        const double va = strtod(ea + 1, &na), vb = strtod(eb + 1, &nb);
        const int numeric = *na == 0 && *nb == 0 && na != ea + 1 && nb != eb + 1 && va > 0 && vb > 0;
        if (numeric)
            d += fabs(log(va / vb));
        else if (strcmp(ea + 1, eb + 1) != 0)
            return HUGE_VAL;
    }
    return ta || tb ? HUGE_VAL : d;
}

static void warn(farm_tune_state *st, const char *why)
{
    snprintf(st->warning, sizeof st->warning, "ignoring tuning cache %s (%s): using defaults; --tune rewrites it",
             st->path, why);
    fprintf(stderr, "%s: warning: %s\n", farm_prog(), st->warning);
}

int farm_tune_lookup(farm_tune_state *st)
{
    if (!st->path[0])
        return 0;
    static entry entries[MAX_ENTRIES];
    int n = 0;
    char why[512] = "";
    if (read_entries(st->path, st->header, entries, &n, why, sizeof why) != 0) {
        warn(st, why);
        return 0;
    }
    int best = -1;
    double best_d = HUGE_VAL;
    for (int i = 0; i < n; i++) {
        const double d = distance(st->workload, entries[i].workload);
        if (d < best_d)
            best = i, best_d = d;
    }
    /* a neighbour more than a factor 4 away in total is another problem, not a nearby one */
    if (best < 0 || best_d > 1.3863)
        return 0;
    st->source = best_d == 0.0 ? FARM_TUNE_CACHE : FARM_TUNE_NEAREST;
    snprintf(st->params, sizeof st->params, "%s", entries[best].params);
    snprintf(st->entry, sizeof st->entry, "%s", entries[best].workload);
    st->kernel_ms = entries[best].kernel_ms;
    st->default_ms = entries[best].default_ms;
    return 1;
}

static void mkdirs(const char *path)
{
    char dir[1024];
    snprintf(dir, sizeof dir, "%s", path);
    char *slash = strrchr(dir, '/');
    if (!slash)
        return;
    *slash = 0;
    for (char *p = dir + 1; *p; p++)
        if (*p == '/') {
            *p = 0;
            mkdir(dir, 0755);
            *p = '/';
        }
    mkdir(dir, 0755);
}

int farm_tune_store(farm_tune_state *st)
{
    if (!st->path[0])
        return -1;
    static entry entries[MAX_ENTRIES];
    int n = 0;
    char why[512] = "";
    if (read_entries(st->path, st->header, entries, &n, why, sizeof why) != 0)
        n = 0; /* a damaged file is replaced */
    int slot = n;
    for (int i = 0; i < n; i++)
        if (!strcmp(entries[i].workload, st->workload))
            slot = i;
    if (slot == MAX_ENTRIES)
        slot = 0; /* full: the oldest entry goes */
    else if (slot == n)
        n++;
    snprintf(entries[slot].workload, sizeof entries[slot].workload, "%s", st->workload);
    snprintf(entries[slot].params, sizeof entries[slot].params, "%s", st->params);
    entries[slot].kernel_ms = st->kernel_ms;
    entries[slot].default_ms = st->default_ms;

    mkdirs(st->path);
    char tmp[1100];
    snprintf(tmp, sizeof tmp, "%s.%ld.tmp", st->path, (long)getpid());
    FILE *f = fopen(tmp, "w");
    int ok = f != NULL;
    if (f) {
        ok = fprintf(f, "%s\n", st->header) > 0;
        for (int i = 0; i < n && ok; i++) {
            char line[LINE_MAX_BYTES];
            snprintf(line, sizeof line, "%.255s\t%.1023s\t%.6g\t%.6g", entries[i].workload, entries[i].params,
                     entries[i].kernel_ms, entries[i].default_ms);
            const uint64_t h = farm_hash64(FARM_HASH_INIT, line, strlen(line));
            ok = fprintf(f, "%s\t%016llx\n", line, (unsigned long long)h) > 0;
        }
        ok = (fclose(f) == 0) && ok;
    }
    if (!ok || rename(tmp, st->path) != 0) {
        unlink(tmp);
        snprintf(st->warning, sizeof st->warning, "could not write tuning cache %s: the choice is not kept",
                 st->path);
        fprintf(stderr, "%s: warning: %s\n", farm_prog(), st->warning);
        return -1;
    }
    return 0;
}

void farm_tune_info_fields(farm_json *j, const farm_tune_state *st) { farm_tune_info_fields_as(j, st, st->params); }

void farm_tune_info_fields_as(farm_json *j, const farm_tune_state *st, const char *params)
{
    farm_json_str(j, "tune_source", farm_tune_source_name(st->source));
    farm_json_str(j, "tune_params", params);
    farm_json_str(j, "tune_workload", st->workload);
    farm_json_str(j, "tune_entry", st->entry[0] ? st->entry : NULL);
    farm_json_num(j, "tune_kernel_ms", st->kernel_ms);
    farm_json_num(j, "tune_default_ms", st->default_ms);
    if (st->source == FARM_TUNE_TUNED) {
        farm_json_int(j, "tune_candidates", st->candidates);
        farm_json_num(j, "tune_seconds", st->tune_s);
    }
    farm_json_str(j, "tune_cache_path", st->path[0] ? st->path : NULL);
    farm_json_str(j, "tune_warning", st->warning[0] ? st->warning : NULL);
}

int farm_tune_resolve(farm_tune_state *st, const farm_common *c, int explicit_knobs)
{
    if (explicit_knobs) {
        st->source = FARM_TUNE_EXPLICIT;
        return 0;
    }
    return strcmp(c->tuned, "use") == 0 && farm_tune_lookup(st);
}

void farm_tune_reject(farm_tune_state *st, const char *why)
{
    snprintf(st->warning, sizeof st->warning, "ignoring tuning cache %.500s: entry '%.300s' %.300s; using defaults",
             st->path, st->params, why);
    fprintf(stderr, "%s: warning: %s\n", farm_prog(), st->warning);
    st->source = FARM_TUNE_DEFAULT;
    st->entry[0] = 0;
    st->kernel_ms = st->default_ms = NAN;
}

farm_tune_source farm_tune_weakest(const farm_tune_state *const *parts, int n)
{
    int counts[FARM_TUNE_PARTIAL + 1] = {0};
    for (int i = 0; i < n; i++)
        counts[parts[i]->source]++;
    return counts[FARM_TUNE_TUNED]                ? FARM_TUNE_TUNED
           : counts[FARM_TUNE_EXPLICIT]           ? FARM_TUNE_EXPLICIT
           : counts[FARM_TUNE_DEFAULT] == n       ? FARM_TUNE_DEFAULT
           : counts[FARM_TUNE_DEFAULT]            ? FARM_TUNE_PARTIAL
           : counts[FARM_TUNE_NEAREST]            ? FARM_TUNE_NEAREST
                                                  : FARM_TUNE_CACHE;
}

void farm_tune_record(farm_tune_state *st, const char *params, double best_ms, double default_ms, int candidates,
                      double seconds)
{
    st->source = FARM_TUNE_TUNED;
    snprintf(st->params, sizeof st->params, "%s", params);
    st->kernel_ms = best_ms;
    st->default_ms = default_ms;
    st->candidates = candidates;
    st->tune_s = seconds;
    farm_tune_store(st);
}

int farm_tune_search(const char *const *params, int n, farm_tune_eval_fn eval, void *user, double budget_s,
                     double *best_ms, double *default_ms, int *evaluated)
{
    return farm_tune_search_for(NULL, "kernel", params, n, eval, user, budget_s, best_ms, default_ms, evaluated);
}

void farm_tune_progress_init(farm_tune_progress *p)
{
    p->best = 0;
    p->evaluated = 0;
    p->best_ms = p->default_ms = NAN;
    p->t0 = farm_now_ns();
}

void farm_tune_try(farm_tune_progress *p, const char *workload, const char *metric, int index, const char *params,
                   farm_tune_eval_fn eval, void *user)
{
    double ms = NAN;
    int verified = 0;
    const int rc = eval(user, index, &ms, &verified);
    p->evaluated++;
    farm_json j;
    farm_json_begin(&j, "tune");
    if (workload)
        farm_json_str(&j, "workload", workload);
    farm_json_str(&j, "metric", metric);
    farm_json_int(&j, "candidate", index);
    farm_json_str(&j, "params", params);
    farm_json_num(&j, "kernel_ms", rc == 0 ? ms : NAN);
    farm_json_bool(&j, "verified", rc == 0 && verified);
    farm_json_num(&j, "elapsed_s", (double)(farm_now_ns() - p->t0) / 1e9);
    farm_json_end(&j);
    if (rc != 0 || !verified || !(ms > 0))
        return;
    if (index == 0)
        p->default_ms = ms;
    if (!(p->best_ms <= ms)) { /* also when best_ms is NaN */
        p->best = index;
        p->best_ms = ms;
    }
}

int farm_tune_pick(farm_tune_progress *p)
{
    /* Within 3% of the default is noise, not a gain: keep the default then. */
    if (p->best != 0 && p->default_ms > 0 && p->best_ms > 0.97 * p->default_ms) {
        p->best = 0;
        p->best_ms = p->default_ms;
    }
    return p->best;
}

int farm_tune_search_for(const char *workload, const char *metric, const char *const *params, int n,
                         farm_tune_eval_fn eval, void *user, double budget_s, double *best_ms, double *default_ms,
                         int *evaluated)
{
    farm_tune_progress p;
    farm_tune_progress_init(&p);
    for (int i = 0; i < n; i++) {
        if (i > 0 && (double)(farm_now_ns() - p.t0) / 1e9 >= budget_s)
            break;
        farm_tune_try(&p, workload, metric, i, params[i], eval, user);
    }
    const int best = farm_tune_pick(&p);
    *best_ms = p.best_ms;
    *default_ms = p.default_ms;
    *evaluated = p.evaluated;
    return best;
}

static int cmp_double(const void *a, const void *b)
{
    const double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

double farm_tune_time(farm_tune_time_fn fn, void *user, int reps, double max_s)
{
    const uint64_t w0 = farm_now_ns();
    if (fn(user) == 0)
        return NAN;
    const double once_s = (double)(farm_now_ns() - w0) / 1e9;
    if (once_s > 0 && reps > 1 && once_s * reps > max_s)
        reps = (int)(max_s / once_s) > 1 ? (int)(max_s / once_s) : 1;
    double v[64];
    if (reps > 64)
        reps = 64;
    for (int i = 0; i < reps; i++) {
        const uint64_t ns = fn(user);
        if (ns == 0)
            return NAN;
        v[i] = (double)ns / 1e6;
    }
    qsort(v, (size_t)reps, sizeof v[0], cmp_double);
    return reps % 2 ? v[reps / 2] : 0.5 * (v[reps / 2 - 1] + v[reps / 2]);
}
