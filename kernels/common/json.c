/* farm common runtime: JSON Lines writer (see farm.h). */
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "farm.h"

static void put(farm_json *j, const char *s, size_t n)
{
    if (j->len + n + 2 > j->cap) {
        size_t cap = j->cap ? j->cap : 256;
        while (j->len + n + 2 > cap)
            cap *= 2;
        char *b = realloc(j->buf, cap);
        if (!b) {
            fputs("farm: out of memory writing JSON\n", stderr);
            exit(FARM_EXIT_ERROR);
        }
        j->buf = b;
        j->cap = cap;
    }
    memcpy(j->buf + j->len, s, n);
    j->len += n;
    j->buf[j->len] = 0;
}

static void puts_(farm_json *j, const char *s) { put(j, s, strlen(s)); }

static void put_escaped(farm_json *j, const char *s)
{
    put(j, "\"", 1);
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        char tmp[8];
        switch (*p) {
        case '"': puts_(j, "\\\""); break;
        case '\\': puts_(j, "\\\\"); break;
        case '\n': puts_(j, "\\n"); break;
        case '\r': puts_(j, "\\r"); break;
        case '\t': puts_(j, "\\t"); break;
        default:
            if (*p < 0x20) {
                snprintf(tmp, sizeof tmp, "\\u%04x", *p);
                puts_(j, tmp);
            } else {
                put(j, (const char *)p, 1);
            }
        }
    }
    put(j, "\"", 1);
}

static void key(farm_json *j, const char *k)
{
    put(j, ",", 1);
    put_escaped(j, k);
    put(j, ":", 1);
}

void farm_json_begin(farm_json *j, const char *event)
{
    j->buf = NULL;
    j->len = j->cap = 0;
    puts_(j, "{\"event\":");
    put_escaped(j, event);
}

void farm_json_str(farm_json *j, const char *k, const char *val)
{
    key(j, k);
    if (val)
        put_escaped(j, val);
    else
        puts_(j, "null");
}

void farm_json_int(farm_json *j, const char *k, long long v)
{
    char tmp[32];
    snprintf(tmp, sizeof tmp, "%lld", v);
    key(j, k);
    puts_(j, tmp);
}

void farm_json_u64(farm_json *j, const char *k, uint64_t v)
{
    char tmp[32];
    snprintf(tmp, sizeof tmp, "%llu", (unsigned long long)v);
    key(j, k);
    puts_(j, tmp);
}

void farm_json_num(farm_json *j, const char *k, double v)
{
    char tmp[40];
    key(j, k);
    if (!isfinite(v)) {
        puts_(j, "null");
        return;
    }
    snprintf(tmp, sizeof tmp, "%.9g", v);
    puts_(j, tmp);
}

void farm_json_bool(farm_json *j, const char *k, int v)
{
    key(j, k);
    puts_(j, v ? "true" : "false");
}

void farm_json_raw(farm_json *j, const char *k, const char *json_text)
{
    key(j, k);
    puts_(j, json_text);
}

void farm_json_end(farm_json *j)
{
    put(j, "}\n", 2);
    flockfile(stdout);
    fwrite(j->buf, 1, j->len, stdout);
    fflush(stdout);
    funlockfile(stdout);
    farm_json_abort(j);
}

void farm_json_abort(farm_json *j)
{
    free(j->buf);
    j->buf = NULL;
    j->len = j->cap = 0;
}
