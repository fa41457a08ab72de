/* Small file helpers for farm-probe. Every path goes through fs_path(), which prepends the
 * --sysfs-root prefix (host unit tests only; on a phone the prefix is empty). */
#ifndef FARM_PROBE_FS_H
#define FARM_PROBE_FS_H

#include <stddef.h>

#include "../common/errname.h"
#include "../common/jsonw.h"

#define FS_PATH_MAX 512
#define FS_TEXT_MAX 4096

void fs_set_root(const char *root);
/* Rooted path of an absolute phone path, in a rotating static buffer (valid for 8 calls). */
const char *fs_path(const char *phone_path);

int fs_exists(const char *phone_path);
int fs_is_dir(const char *phone_path);
/* Reads the file, strips trailing whitespace. Returns 0, or the errno (ENOENT, EACCES...). */
int fs_read(const char *phone_path, char *buf, size_t cap);
/* Reads an integer (the first token). Returns 0, errno, or EINVAL when not a number. */
int fs_read_ll(const char *phone_path, long long *out);
int fs_writable(const char *phone_path);

/* Sorted entry names of a directory whose names start with prefix ("" for all). Returns the
 * count (<= max); names are malloc'd, free them with fs_free_names. */
int fs_list(const char *phone_dir, const char *prefix, char **names, int max);
void fs_free_names(char **names, int n);

/* Writes {"path", "present", "readable", "error", "value"} for a node, as its own object. */
void jw_node(jsonw *w, const char *key, const char *phone_path);
/* Same fields, but leaves the object open for more keys (close it with jw_obj_close); returns
 * the read's errno (0 when readable) and the text in buf. */
int jw_node_begin(jsonw *w, const char *key, const char *phone_path, char *buf, size_t cap);

#endif
