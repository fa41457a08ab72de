#include "jsonw.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void jw_init(jsonw *w) {
    memset(w, 0, sizeof(*w));
    w->first[0] = 1;
}

void jw_free(jsonw *w) {
    free(w->buf);
    w->buf = NULL;
    w->len = w->cap = 0;
}

static void put(jsonw *w, const char *s, size_t n) {
    if (w->failed) return;
    if (w->len + n + 1 > w->cap) {
        size_t cap = w->cap ? w->cap : 1024;
        while (w->len + n + 1 > cap) cap *= 2;
        char *nb = realloc(w->buf, cap);
        if (!nb) {
            w->failed = 1;
            return;
        }
        w->buf = nb;
        w->cap = cap;
    }
    memcpy(w->buf + w->len, s, n);
    w->len += n;
    w->buf[w->len] = '\0';
}

static void puts_(jsonw *w, const char *s) { put(w, s, strlen(s)); }

static void put_escaped(jsonw *w, const char *s) {
    put(w, "\"", 1);
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        char tmp[8];
        switch (*p) {
            case '"': put(w, "\\\"", 2); break;
            case '\\': put(w, "\\\\", 2); break;
            case '\n': put(w, "\\n", 2); break;
            case '\r': put(w, "\\r", 2); break;
            case '\t': put(w, "\\t", 2); break;
            default:
                if (*p < 0x20 || *p == 0x7f) {
                    snprintf(tmp, sizeof(tmp), "\\u%04x", *p);
                    put(w, tmp, 6);
                } else if (*p >= 0x80) {
                    /* sysfs and props are ASCII in practice; replace bytes we cannot vouch
                     * for as UTF-8 so the document always parses. */
                    put(w, "?", 1);
                } else {
                    put(w, (const char *)p, 1);
                }
        }
    }
    put(w, "\"", 1);
}

static void element(jsonw *w, const char *key) {
    if (!w->first[w->depth]) put(w, ",", 1);
    w->first[w->depth] = 0;
    if (key) {
        put_escaped(w, key);
        put(w, ":", 1);
    }
}

static void open_(jsonw *w, const char *key, const char *bracket) {
    element(w, key);
    puts_(w, bracket);
    if (w->depth + 1 < JSONW_MAX_DEPTH) {
        w->depth++;
        w->first[w->depth] = 1;
    } else {
        w->failed = 1;
    }
}

static void close_(jsonw *w, const char *bracket) {
    if (w->depth > 0) w->depth--;
    puts_(w, bracket);
}

void jw_obj_open(jsonw *w, const char *key) { open_(w, key, "{"); }
void jw_obj_close(jsonw *w) { close_(w, "}"); }
void jw_arr_open(jsonw *w, const char *key) { open_(w, key, "["); }
void jw_arr_close(jsonw *w) { close_(w, "]"); }

void jw_str(jsonw *w, const char *key, const char *value) {
    element(w, key);
    if (value)
        put_escaped(w, value);
    else
        puts_(w, "null");
}

void jw_int(jsonw *w, const char *key, long long value) {
    char tmp[32];
    element(w, key);
    snprintf(tmp, sizeof(tmp), "%lld", value);
    puts_(w, tmp);
}

void jw_num(jsonw *w, const char *key, double value) {
    char tmp[40];
    element(w, key);
    if (isnan(value) || isinf(value)) {
        puts_(w, "null");
        return;
    }
    snprintf(tmp, sizeof(tmp), "%.17g", value);
    puts_(w, tmp);
}

void jw_bool(jsonw *w, const char *key, int value) {
    element(w, key);
    puts_(w, value ? "true" : "false");
}

void jw_null(jsonw *w, const char *key) {
    element(w, key);
    puts_(w, "null");
}
