/* farm common runtime: minimal .npy reader/writer (see farm.h).
 * Format: "\x93NUMPY", major, minor, header length (u16 for v1, u32 for v2/3), then an ASCII
 * Python dict {'descr': '<f4', 'fortran_order': False, 'shape': (a, b), } padded with spaces
 * and a newline so that the data starts at a multiple of 64 bytes. */
#define _POSIX_C_SOURCE 200809L
#include <stdlib.h>
#include <string.h>

#include "farm.h"

#define ERR(...) (snprintf(err, errlen, __VA_ARGS__), -1)

static int parse_header(const char *h, char *descr, size_t dlen, int *fortran, size_t *shape, int *ndim)
{
    const char *d = strstr(h, "'descr'");
    const char *f = strstr(h, "'fortran_order'");
    const char *s = strstr(h, "'shape'");
    if (!d || !f || !s)
        return -1;
    d = strchr(d + 7, '\'');
    if (!d)
        return -1;
    const char *e = strchr(d + 1, '\'');
    if (!e || (size_t)(e - d - 1) >= dlen)
        return -1;
    memcpy(descr, d + 1, (size_t)(e - d - 1));
    descr[e - d - 1] = 0;
    f = strchr(f + 15, ':');
    if (!f)
        return -1;
    while (*++f == ' ') {
    }
    *fortran = !strncmp(f, "True", 4);
    s = strchr(s + 7, '(');
    if (!s)
        return -1;
    s++;
    *ndim = 0;
    for (;;) {
        while (*s == ' ' || *s == ',')
            s++;
        if (*s == ')')
            break;
        char *end;
        unsigned long long v = strtoull(s, &end, 10);
        if (end == s || *ndim >= FARM_NPY_MAX_DIMS)
            return -1;
        shape[(*ndim)++] = (size_t)v;
        s = end;
    }
    return 0;
}

int farm_npy_read(const char *path, farm_array *out, char *err, size_t errlen)
{
    memset(out, 0, sizeof *out);
    FILE *fp = fopen(path, "rb");
    if (!fp)
        return ERR("%s: cannot open", path);
    unsigned char pre[10];
    if (fread(pre, 1, 8, fp) != 8 || memcmp(pre, "\x93NUMPY", 6) != 0) {
        fclose(fp);
        return ERR("%s: not a .npy file (bad magic)", path);
    }
    size_t hlen;
    if (pre[6] == 1) {
        if (fread(pre + 8, 1, 2, fp) != 2) {
            fclose(fp);
            return ERR("%s: truncated header", path);
        }
        hlen = (size_t)pre[8] | ((size_t)pre[9] << 8);
    } else {
        unsigned char l[4];
        if (fread(l, 1, 4, fp) != 4) {
            fclose(fp);
            return ERR("%s: truncated header", path);
        }
        hlen = (size_t)l[0] | ((size_t)l[1] << 8) | ((size_t)l[2] << 16) | ((size_t)l[3] << 24);
    }
    char *hdr = malloc(hlen + 1);
    if (!hdr || fread(hdr, 1, hlen, fp) != hlen) {
        free(hdr);
        fclose(fp);
        return ERR("%s: truncated header", path);
    }
    hdr[hlen] = 0;
    char descr[16];
    int fortran = 0;
    if (parse_header(hdr, descr, sizeof descr, &fortran, out->shape, &out->ndim) != 0) {
        free(hdr);
        fclose(fp);
        return ERR("%s: cannot parse .npy header", path);
    }
    free(hdr);
    size_t esize = !strcmp(descr, "<f4") ? 4 : !strcmp(descr, "<f8") ? 8 : !strcmp(descr, "<f2") ? 2 : 0;
    if (!esize || fortran) {
        fclose(fp);
        return ERR("%s: dtype '%s'%s not supported (need little-endian float16/32/64, C order)", path, descr,
                   fortran ? " in Fortran order" : "");
    }
    out->count = 1;
    for (int i = 0; i < out->ndim; i++)
        out->count *= out->shape[i];
    unsigned char *raw = malloc(out->count * esize + 1);
    out->data = malloc(out->count * sizeof(float) + 1);
    if (!raw || !out->data) {
        free(raw);
        fclose(fp);
        farm_array_free(out);
        return ERR("%s: out of memory", path);
    }
    if (fread(raw, esize, out->count, fp) != out->count) {
        free(raw);
        fclose(fp);
        farm_array_free(out);
        return ERR("%s: truncated data", path);
    }
    fclose(fp);
    for (size_t i = 0; i < out->count; i++) {
        if (esize == 4) {
            memcpy(&out->data[i], raw + 4 * i, 4);
        } else if (esize == 8) {
            double d;
            memcpy(&d, raw + 8 * i, 8);
            out->data[i] = (float)d;
        } else {
            uint16_t h;
            memcpy(&h, raw + 2 * i, 2);
            out->data[i] = farm_f16_to_f32(h);
        }
    }
    free(raw);
    return 0;
}

int farm_npy_write(const char *path, const float *data, const size_t *shape, int ndim, char *err, size_t errlen)
{
    char dict[512], dims[300] = "";
    size_t count = 1;
    for (int i = 0; i < ndim; i++) {
        char t[40];
        snprintf(t, sizeof t, "%s%zu%s", i ? ", " : "", shape[i], ndim == 1 ? "," : "");
        strncat(dims, t, sizeof dims - strlen(dims) - 1);
        count *= shape[i];
    }
    int n = snprintf(dict, sizeof dict, "{'descr': '<f4', 'fortran_order': False, 'shape': (%s), }", dims);
    size_t total = 10 + (size_t)n + 1;
    size_t pad = (64 - total % 64) % 64;
    size_t hlen = (size_t)n + pad + 1;
    FILE *fp = fopen(path, "wb");
    if (!fp)
        return ERR("%s: cannot create", path);
    unsigned char pre[10] = {0x93, 'N', 'U', 'M', 'P', 'Y', 1, 0, (unsigned char)(hlen & 0xff),
                             (unsigned char)(hlen >> 8)};
    int ok = fwrite(pre, 1, 10, fp) == 10 && fwrite(dict, 1, (size_t)n, fp) == (size_t)n;
    for (size_t i = 0; i < pad && ok; i++)
        ok = fputc(' ', fp) != EOF;
    ok = ok && fputc('\n', fp) != EOF;
    ok = ok && fwrite(data, sizeof(float), count, fp) == count;
    ok = (fclose(fp) == 0) && ok;
    return ok ? 0 : ERR("%s: write failed", path);
}

void farm_array_free(farm_array *a)
{
    free(a->data);
    a->data = NULL;
    a->count = 0;
}
