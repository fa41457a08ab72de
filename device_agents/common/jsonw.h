/* Minimal JSON writer into a growable buffer, shared by farm-probe and farm-sampler.
 *
 * Why our own: the agents are static binaries for phones, so no libraries; the JSON we emit is
 * small and flat. Commas are handled by the writer (a stack of "first element" flags), so the
 * callers read like the document they produce.
 */
#ifndef FARM_JSONW_H
#define FARM_JSONW_H

#include <stddef.h>

#define JSONW_MAX_DEPTH 16

typedef struct {
    char *buf;
    size_t len;
    size_t cap;
    int depth;
    int first[JSONW_MAX_DEPTH];
    int failed; /* out of memory: the document is incomplete */
} jsonw;

void jw_init(jsonw *w);
void jw_free(jsonw *w);

void jw_obj_open(jsonw *w, const char *key);  /* key NULL inside arrays / at top level */
void jw_obj_close(jsonw *w);
void jw_arr_open(jsonw *w, const char *key);
void jw_arr_close(jsonw *w);

void jw_str(jsonw *w, const char *key, const char *value); /* value NULL writes null */
void jw_int(jsonw *w, const char *key, long long value);
void jw_num(jsonw *w, const char *key, double value); /* NaN/inf write null */
void jw_bool(jsonw *w, const char *key, int value);
void jw_null(jsonw *w, const char *key);

#endif
