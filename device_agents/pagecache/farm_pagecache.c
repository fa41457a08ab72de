/* farm-pagecache: how much of each file is in the page cache, and (--drop) drop it, with proof.
 *
 *   farm-pagecache [--drop] FILE...
 *
 * One line per file on stdout, the path last (it may hold spaces):
 *
 *   pages=P resident=R drop=ok resident_after=A counts=cache path=FILE     with --drop
 *   pages=P resident=R drop=- resident_after=- counts=cache path=FILE      without
 *   error=ENAME at=open|fstat|mmap|malloc|mincore|fdatasync|fadvise path=FILE
 *
 * A cold start of a program that reads FILE (a language model's load) needs FILE's pages out of
 * the page cache, and a proof that they are. Why this way:
 *  - posix_fadvise(POSIX_FADV_DONTNEED) drops one file's clean, unmapped pages for any process
 *    that can open the file for reading: no root, unlike /proc/sys/vm/drop_caches, which drops
 *    every file's pages (on a virtual phone the host's) and which production Android refuses;
 *  - DONTNEED skips dirty pages, and a file just pushed may still be dirty: fdatasync first (it
 *    works on a read-only descriptor);
 *  - it also skips pages some process has mapped, so the drop is checked, never assumed: mincore
 *    over a mapping of the file counts its resident pages. Our own mapping is never touched, so
 *    it faults nothing in and keeps nothing resident;
 *  - since Linux 5.0 (commit "mm/mincore.c: make mincore() more conservative", CVE-2019-5489)
 *    mincore reports the page cache only for a file the caller owns or may write (or as root);
 *    for any other file only the caller's own mapped pages, which here are none: a count that
 *    proves nothing. `counts=cache` says the count is the page cache's, `counts=own-mappings`
 *    that it may not be (adb's pushes are the shell user's own files: cache).
 * Exit codes: 0 every file measured (and dropped), 1 some file failed (its error line says
 * where), 2 bad arguments.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../common/errname.h"

typedef struct {
    size_t pages;
    size_t resident;
} residency;

/* Resident pages of the first `bytes` of the mapping at `base` (bytes > 0); -1 with errno. */
static int count_resident(void *base, size_t bytes, size_t page, unsigned char *vec, residency *out) {
    size_t pages = (bytes + page - 1) / page;
    if (mincore(base, bytes, vec) != 0)
        return -1;
    size_t resident = 0;
    for (size_t i = 0; i < pages; i++)
        resident += vec[i] & 1u;
    out->pages = pages;
    out->resident = resident;
    return 0;
}

static int fail(const char *at, int err, const char *path) {
    printf("error=%s at=%s path=%s\n", errno_name(err), at, path);
    return 1;
}

/* One file: its residency, then (drop) the drop and its residency after. 0 ok, 1 failed. */
static int one_file(const char *path, int drop, size_t page) {
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return fail("open", errno, path);
    struct stat st;
    if (fstat(fd, &st) != 0) {
        int err = errno;
        close(fd);
        return fail("fstat", err, path);
    }
    size_t bytes = (size_t)st.st_size;
    int cache = geteuid() == 0 || st.st_uid == geteuid() || access(path, W_OK) == 0;
    const char *counts = cache ? "cache" : "own-mappings";
    residency before = {0, 0}, after = {0, 0};
    void *base = NULL;
    unsigned char *vec = NULL;
    int status = 0;
    if (bytes > 0) {
        base = mmap(NULL, bytes, PROT_READ, MAP_SHARED, fd, 0);
        if (base == MAP_FAILED) {
            int err = errno;
            close(fd);
            return fail("mmap", err, path);
        }
        vec = malloc((bytes + page - 1) / page);
        if (vec == NULL) {
            status = fail("malloc", ENOMEM, path);
            goto done;
        }
        if (count_resident(base, bytes, page, vec, &before) != 0) {
            status = fail("mincore", errno, path);
            goto done;
        }
    }
    if (!drop) {
        printf("pages=%zu resident=%zu drop=- resident_after=- counts=%s path=%s\n", before.pages, before.resident,
               counts, path);
        goto done;
    }
    if (fdatasync(fd) != 0 && errno != EINVAL && errno != EROFS) { /* EINVAL/EROFS: nothing to sync */
        status = fail("fdatasync", errno, path);
        goto done;
    }
    int err = posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED); /* returns the error, sets no errno */
    if (err != 0) {
        status = fail("fadvise", err, path);
        goto done;
    }
    if (bytes > 0 && count_resident(base, bytes, page, vec, &after) != 0) {
        status = fail("mincore", errno, path);
        goto done;
    }
    printf("pages=%zu resident=%zu drop=ok resident_after=%zu counts=%s path=%s\n", before.pages, before.resident,
           after.resident, counts, path);
done:
    free(vec);
    if (base != NULL)
        munmap(base, bytes);
    close(fd);
    return status;
}

int main(int argc, char **argv) {
    int drop = 0, first = 1;
    if (argc > 1 && strcmp(argv[1], "--drop") == 0) {
        drop = 1;
        first = 2;
    }
    if (first >= argc || argv[first][0] == '-') {
        fprintf(stderr, "usage: farm-pagecache [--drop] FILE...\n");
        return 2;
    }
    long page = sysconf(_SC_PAGESIZE);
    if (page <= 0)
        page = 4096;
    int status = 0;
    for (int i = first; i < argc; i++)
        status |= one_file(argv[i], drop, (size_t)page);
    return fflush(stdout) == 0 ? status : 1;
}
