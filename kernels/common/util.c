/* farm common runtime: clock, fatal errors, RNG, fp16, hashing, comparison (see farm.h). */
#define _GNU_SOURCE /* sched_getaffinity, CPU_COUNT (glibc and bionic) */
#include <errno.h>
#include <math.h>
#include <sched.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "farm.h"

static const char *g_prog = "farm";

void farm_set_prog(const char *name) { g_prog = name; }
const char *farm_prog(void) { return g_prog; }

void farm_die(int code, const char *fmt, ...)
{
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    /* Keep the stderr line single: replace newlines (e.g. from build logs). */
    for (char *p = msg; *p; p++)
        if (*p == '\n' || *p == '\r')
            *p = ' ';
    farm_json j;
    farm_json_begin(&j, "error");
    farm_json_str(&j, "message", msg);
    farm_json_int(&j, "exit_code", code);
    farm_json_end(&j);
    fprintf(stderr, "%s: %s\n", g_prog, msg);
    fflush(stderr);
    exit(code);
}

uint64_t farm_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec;
}

void farm_sleep_ns(uint64_t ns, volatile int *stop)
{
    struct timespec req = {(time_t)(ns / 1000000000ULL), (long)(ns % 1000000000ULL)}, rem;
    while (nanosleep(&req, &rem) != 0 && errno == EINTR) {
        if (stop && *stop)
            return;
        req = rem;
    }
}

uint64_t farm_rng_next(uint64_t *s)
{
    uint64_t z = (*s += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

float farm_rng_uniform(uint64_t *s, float lo, float hi)
{
    /* 24 random bits -> [0, 1) exactly representable in float */
    float u = (float)(farm_rng_next(s) >> 40) * (1.0f / 16777216.0f);
    return lo + (hi - lo) * u;
}

void farm_fill_uniform(float *x, size_t n, uint64_t seed, float lo, float hi)
{
    uint64_t s = seed;
    for (size_t i = 0; i < n; i++)
        x[i] = farm_rng_uniform(&s, lo, hi);
}

uint16_t farm_f32_to_f16(float f)
{
    uint32_t x;
    memcpy(&x, &f, 4);
    uint32_t sign = (x >> 16) & 0x8000u;
    uint32_t exp = (x >> 23) & 0xffu;
    uint32_t man = x & 0x7fffffu;
    if (exp == 0xff) /* inf / nan */
        return (uint16_t)(sign | 0x7c00u | (man ? 0x200u : 0));
    int e = (int)exp - 127 + 15;
    if (e >= 31)
        return (uint16_t)(sign | 0x7c00u);
    if (e <= 0) { /* subnormal or zero */
        if (e < -10)
            return (uint16_t)sign;
        man |= 0x800000u;
        uint32_t shift = (uint32_t)(14 - e);
        uint32_t h = man >> shift;
        uint32_t rem = man & ((1u << shift) - 1);
        uint32_t half = 1u << (shift - 1);
        if (rem > half || (rem == half && (h & 1u)))
            h++;
        return (uint16_t)(sign | h);
    }
    uint32_t h = ((uint32_t)e << 10) | (man >> 13);
    uint32_t rem = man & 0x1fffu;
    if (rem > 0x1000u || (rem == 0x1000u && (h & 1u)))
        h++; /* may carry into the exponent, which is the correct rounding (up to inf) */
    return (uint16_t)(sign | h);
}

float farm_f16_to_f32(uint16_t h)
{
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
    uint32_t exp = (h >> 10) & 0x1fu;
    uint32_t man = h & 0x3ffu;
    uint32_t x;
    if (exp == 0) {
        if (man == 0) {
            x = sign;
        } else { /* subnormal: normalise */
            int e = -1;
            do {
                e++;
                man <<= 1;
            } while (!(man & 0x400u));
            x = sign | ((uint32_t)(127 - 15 - e) << 23) | ((man & 0x3ffu) << 13);
        }
    } else if (exp == 31) {
        x = sign | 0x7f800000u | (man << 13);
    } else {
        x = sign | ((exp - 15 + 127) << 23) | (man << 13);
    }
    float f;
    memcpy(&f, &x, 4);
    return f;
}

void farm_round_f16(float *x, size_t n)
{
    for (size_t i = 0; i < n; i++)
        x[i] = farm_f16_to_f32(farm_f32_to_f16(x[i]));
}

uint64_t farm_hash64(uint64_t h, const void *data, size_t n)
{
    const unsigned char *p = data;
    for (size_t i = 0; i < n; i++) {
        h ^= p[i];
        h *= 0x100000001b3ULL;
    }
    return h;
}

double farm_checksum(const float *x, size_t n)
{
    double s = 0;
    for (size_t i = 0; i < n; i++)
        s += x[i];
    return s;
}

farm_cmp farm_compare(const float *got, const float *ref, size_t n, double rtol, double atol)
{
    farm_cmp c = {1, 0, 0, 0.0, 0.0};
    for (size_t i = 0; i < n; i++) {
        double g = got[i], r = ref[i];
        double err = fabs(g - r);
        if (isnan(g) != isnan(r))
            err = INFINITY;
        double rel = err / fmax(fabs(r), 1e-30);
        if (err > c.max_abs_err)
            c.max_abs_err = err;
        if (rel > c.max_rel_err)
            c.max_rel_err = rel;
        if (!(err <= atol + rtol * fabs(r)) && !(isnan(g) && isnan(r))) {
            if (c.ok)
                c.first_bad = i;
            c.ok = 0;
            c.mismatches++;
        }
    }
    return c;
}

/* CPUs this process may run on: its affinity mask (a cpuset or taskset narrows it; a
 * virtual phone that shows 8 CPUs on a 2-core host runs on 2), else the online count. */
int farm_cpu_count(void)
{
    cpu_set_t set;
    if (sched_getaffinity(0, sizeof set, &set) == 0 && CPU_COUNT(&set) > 0)
        return CPU_COUNT(&set);
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    return n > 0 ? (int)n : 1;
}

void *farm_alloc(size_t bytes)
{
    void *p = calloc(1, bytes ? bytes : 1);
    if (!p)
        farm_die(FARM_EXIT_ERROR, "out of memory allocating %zu bytes", bytes);
    return p;
}
