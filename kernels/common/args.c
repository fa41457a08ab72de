/* farm common runtime: `--name=value` arguments and --help (see farm.h). */
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "farm.h"

const char *const farm_backend_choices[] = {"cpu", "cpu-mt", "gpu", NULL};
const char *const farm_precision_choices[] = {"fp32", "fp16", NULL};

void farm_common_defaults(farm_common *c)
{
    memset(c, 0, sizeof *c);
    c->backend = "gpu";
    c->threads = farm_cpu_count();
    c->warmup = 2;
    c->iters = 10;
    c->min_seconds = 0.0;
    c->max_seconds = 60.0;
    c->precision = "fp32";
    c->seed = 1;
    c->tune_budget_s = 30.0;
    c->tuned = "use";
    c->iteration_events = FARM_ITERATION_EVENTS_DEFAULT;
    c->exact_iterations = FARM_EXACT_ITERATIONS_DEFAULT;
}

void farm_common_check(const farm_common *c)
{
    if (c->verify && strcmp(c->backend, "gpu") != 0)
        farm_die(FARM_EXIT_USAGE, "--verify compares the gpu backend with the cpu path: use --backend=gpu");
    if (c->max_seconds > 0 && c->min_seconds > c->max_seconds)
        farm_die(FARM_EXIT_USAGE, "--min-seconds=%g exceeds --max-seconds=%g", c->min_seconds, c->max_seconds);
    if (c->tune && strcmp(c->backend, "gpu") != 0)
        farm_die(FARM_EXIT_USAGE, "--tune tunes the OpenCL kernels: use --backend=gpu");
}

static void print_default(const farm_opt *o)
{
    switch (o->kind) {
    case FARM_OPT_INT:
        printf(" (default %ld)", *(long *)o->target);
        break;
    case FARM_OPT_DOUBLE:
        printf(" (default %g)", *(double *)o->target);
        break;
    case FARM_OPT_STRING:
    case FARM_OPT_CHOICE: {
        const char *v = *(const char **)o->target;
        if (v)
            printf(" (default %s)", v);
        break;
    }
    case FARM_OPT_FLAG:
        break;
    }
}

static void print_help(const char *prog, const char *summary, const char *example, const farm_opt *opts)
{
    printf("usage: %s [--name=value ...]\n\n%s\n\noptions:\n", prog, summary);
    for (const farm_opt *o = opts; o->name; o++) {
        char left[64];
        const char *meta = o->kind == FARM_OPT_INT      ? "=N"
                           : o->kind == FARM_OPT_DOUBLE ? "=X"
                           : o->kind == FARM_OPT_FLAG   ? ""
                                                        : "=S";
        snprintf(left, sizeof left, "--%s%s", o->name, meta);
        printf("  %-22s %s", left, o->help);
        if (o->kind == FARM_OPT_CHOICE) {
            printf(" [");
            for (const char *const *c = o->choices; *c; c++)
                printf("%s%s", c == o->choices ? "" : "|", *c);
            printf("]");
        }
        print_default(o);
        printf("\n");
    }
    printf("  %-22s %s\n", "--help", "show this help and exit");
    printf("\nOutput: JSON Lines on stdout (events info, phase, iter, result, error).\n"
           "Exit codes: 0 ok, 2 bad arguments, 3 no usable OpenCL device, 4 verification failed,\n"
           "5 other error.\n");
    if (example)
        printf("\nexample:\n  %s\n", example);
}

static int parse_long(const char *s, long *out)
{
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (errno || end == s || *end)
        return -1;
    *out = v;
    return 0;
}

static int parse_double(const char *s, double *out)
{
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (errno || end == s || *end || !isfinite(v))
        return -1;
    *out = v;
    return 0;
}

static void set_value(const farm_opt *o, const char *arg, const char *val)
{
    switch (o->kind) {
    case FARM_OPT_INT: {
        long v;
        if (!val || parse_long(val, &v) || v < o->min || v > o->max)
            farm_die(FARM_EXIT_USAGE, "--%s: expected an integer in %.0f..%.0f, got '%s'", o->name, o->min,
                     o->max, val ? val : "");
        *(long *)o->target = v;
        break;
    }
    case FARM_OPT_DOUBLE: {
        double v;
        if (!val || parse_double(val, &v) || v < o->min || v > o->max)
            farm_die(FARM_EXIT_USAGE, "--%s: expected a number in %g..%g, got '%s'", o->name, o->min, o->max,
                     val ? val : "");
        *(double *)o->target = v;
        break;
    }
    case FARM_OPT_STRING:
        if (!val || !*val)
            farm_die(FARM_EXIT_USAGE, "--%s: expected --%s=VALUE", o->name, o->name);
        *(const char **)o->target = val;
        break;
    case FARM_OPT_FLAG:
        if (!val || !strcmp(val, "1") || !strcmp(val, "true"))
            *(int *)o->target = 1;
        else if (!strcmp(val, "0") || !strcmp(val, "false"))
            *(int *)o->target = 0;
        else
            farm_die(FARM_EXIT_USAGE, "%s: a flag takes no value or one of 1, 0, true, false", arg);
        break;
    case FARM_OPT_CHOICE:
        if (val)
            for (const char *const *c = o->choices; *c; c++)
                if (!strcmp(*c, val)) {
                    *(const char **)o->target = *c;
                    return;
                }
        {
            char list[256] = "";
            for (const char *const *c = o->choices; *c; c++) {
                strncat(list, c == o->choices ? "" : ", ", sizeof list - strlen(list) - 1);
                strncat(list, *c, sizeof list - strlen(list) - 1);
            }
            farm_die(FARM_EXIT_USAGE, "--%s: expected one of %s, got '%s'", o->name, list, val ? val : "");
        }
    }
}

void farm_parse_args(int argc, char **argv, const char *prog, const char *summary, const char *example,
                     const farm_opt *opts)
{
    farm_set_prog(prog);
    for (int i = 1; i < argc; i++)
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
            print_help(prog, summary, example, opts);
            exit(FARM_EXIT_OK);
        }
    for (int i = 1; i < argc; i++) {
        const char *arg = argv[i];
        if (strncmp(arg, "--", 2) != 0)
            farm_die(FARM_EXIT_USAGE, "unexpected argument '%s': options are --name=value (see --help)", arg);
        const char *name = arg + 2;
        const char *eq = strchr(name, '=');
        size_t len = eq ? (size_t)(eq - name) : strlen(name);
        const farm_opt *found = NULL;
        for (const farm_opt *o = opts; o->name; o++)
            if (strlen(o->name) == len && !strncmp(o->name, name, len)) {
                found = o;
                break;
            }
        if (!found)
            farm_die(FARM_EXIT_USAGE, "unknown argument '%s' (see --help)", arg);
        if (!eq && found->kind != FARM_OPT_FLAG)
            farm_die(FARM_EXIT_USAGE, "--%s needs a value: --%s=VALUE", found->name, found->name);
        set_value(found, arg, eq ? eq + 1 : NULL);
    }
}
