#define _GNU_SOURCE
#include "fs.h"

#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static const char *g_root = "";

void fs_set_root(const char *root) { g_root = root; }

const char *fs_path(const char *phone_path) {
    static char bufs[8][FS_PATH_MAX];
    static int next = 0;
    char *b = bufs[next];
    next = (next + 1) % 8;
    snprintf(b, FS_PATH_MAX, "%s%s", g_root, phone_path);
    return b;
}

int fs_exists(const char *phone_path) {
    struct stat st;
    return stat(fs_path(phone_path), &st) == 0;
}

int fs_is_dir(const char *phone_path) {
    struct stat st;
    return stat(fs_path(phone_path), &st) == 0 && S_ISDIR(st.st_mode);
}

int fs_read(const char *phone_path, char *buf, size_t cap) {
    buf[0] = '\0';
    int fd = open(fs_path(phone_path), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
    if (fd < 0) return errno;
    ssize_t n = read(fd, buf, cap - 1);
    int err = n < 0 ? errno : 0;
    close(fd);
    if (n < 0) return err;
    buf[n] = '\0';
    while (n > 0 && (buf[n - 1] == '\n' || buf[n - 1] == ' ' || buf[n - 1] == '\t' ||
                     buf[n - 1] == '\r'))
        buf[--n] = '\0';
    return 0;
}

int fs_read_ll(const char *phone_path, long long *out) {
    char buf[128];
    int err = fs_read(phone_path, buf, sizeof(buf));
    if (err) return err;
    char *end;
    errno = 0;
    long long v = strtoll(buf, &end, 10);
    if (end == buf || errno) return EINVAL;
    *out = v;
    return 0;
}

int fs_writable(const char *phone_path) { return access(fs_path(phone_path), W_OK) == 0; }

/* Natural order, so thermal_zone10 sorts after thermal_zone9 (strverscmp is glibc-only). */
static int natural_cmp(const char *x, const char *y) {
    while (*x && *y) {
        if (isdigit((unsigned char)*x) && isdigit((unsigned char)*y)) {
            while (*x == '0') x++;
            while (*y == '0') y++;
            size_t nx = 0, ny = 0;
            while (isdigit((unsigned char)x[nx])) nx++;
            while (isdigit((unsigned char)y[ny])) ny++;
            if (nx != ny) return nx < ny ? -1 : 1;
            int c = strncmp(x, y, nx);
            if (c) return c;
            x += nx;
            y += ny;
        } else {
            if (*x != *y) return (unsigned char)*x < (unsigned char)*y ? -1 : 1;
            x++;
            y++;
        }
    }
    return (unsigned char)*x - (unsigned char)*y;
}

static int cmp_names(const void *a, const void *b) {
    return natural_cmp(*(const char *const *)a, *(const char *const *)b);
}

int fs_list(const char *phone_dir, const char *prefix, char **names, int max) {
    DIR *d = opendir(fs_path(phone_dir));
    if (!d) return 0;
    int n = 0;
    size_t plen = strlen(prefix);
    struct dirent *e;
    while ((e = readdir(d)) != NULL && n < max) {
        if (e->d_name[0] == '.') continue;
        if (strncmp(e->d_name, prefix, plen) != 0) continue;
        names[n] = strdup(e->d_name);
        if (names[n]) n++;
    }
    closedir(d);
    qsort(names, (size_t)n, sizeof(char *), cmp_names);
    return n;
}

void fs_free_names(char **names, int n) {
    for (int i = 0; i < n; i++) free(names[i]);
}

int jw_node_begin(jsonw *w, const char *key, const char *phone_path, char *buf, size_t cap) {
    int err = fs_read(phone_path, buf, cap);
    jw_obj_open(w, key);
    jw_str(w, "path", phone_path);
    jw_bool(w, "present", err != ENOENT && err != ENOTDIR);
    jw_bool(w, "readable", err == 0);
    jw_str(w, "error", err ? errno_name(err) : NULL);
    jw_str(w, "value", err ? NULL : buf);
    return err;
}

void jw_node(jsonw *w, const char *key, const char *phone_path) {
    char buf[FS_TEXT_MAX];
    jw_node_begin(w, key, phone_path, buf, sizeof(buf));
    jw_obj_close(w);
}
