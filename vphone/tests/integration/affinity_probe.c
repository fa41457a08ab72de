/* affinity_probe: a phone program that calls sched_setaffinity / sched_getaffinity itself (raw
 * syscalls, as libc, OpenMP and benchmarks do), for tests/integration/virtual/
 * test_phone_affinity_syscalls.py. One line per answer: `ok RET MASKHEX` or `err ERRNO`.
 *
 *   affinity_probe get [PID [LEN]]          sched_getaffinity (LEN default 128, as glibc's)
 *   affinity_probe set MASKHEX [PID [LEN]]  sched_setaffinity of a LEN-byte mask (default 8)
 *   affinity_probe edges                    bad pointers, lengths, the bytes past the answer
 *   affinity_probe threads                  pin, a thread inherits, re-pins itself; both read
 *   affinity_probe fork MASKHEX             pin, then a child reads its own
 *   affinity_probe cost N                   median ns of N getaffinity calls and N getppid calls
 *   affinity_probe loop MASKHEX ITERS       pin, then seconds of a fixed CPU-bound loop
 */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static long get_raw(long pid, unsigned long len, void *buf) {
    return syscall(SYS_sched_getaffinity, pid, len, buf);
}

static long set_raw(long pid, unsigned long len, const void *buf) {
    return syscall(SYS_sched_setaffinity, pid, len, buf);
}

static void print_get(long pid, unsigned long len) {
    unsigned char buf[256];
    memset(buf, 0, sizeof buf);
    long rc = get_raw(pid, len, buf);
    if (rc < 0) {
        printf("err %d\n", errno);
        return;
    }
    uint64_t mask = 0;
    memcpy(&mask, buf, 8);
    printf("ok %ld %llx\n", rc, (unsigned long long)mask);
}

static void print_set(uint64_t mask, long pid, unsigned long len) {
    unsigned char buf[256];
    memset(buf, 0, sizeof buf);
    memcpy(buf, &mask, 8);
    long rc = set_raw(pid, len, buf);
    if (rc < 0) printf("err %d\n", errno);
    else printf("ok %ld\n", rc);
}

static uint64_t self_mask(void) {
    uint64_t mask = 0;
    unsigned char buf[128];
    if (get_raw(0, sizeof buf, buf) < 0) return 0;
    memcpy(&mask, buf, 8);
    return mask;
}

static void edges(void) {
    /* EFAULT: the mask at an unmapped address; a read-only answer buffer. */
    long rc = set_raw(0, 8, (void *)16);
    printf("set_unmapped %ld %d\n", rc, rc < 0 ? errno : 0);
    void *ro = mmap(NULL, 4096, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    rc = get_raw(0, 8, ro);
    printf("get_readonly %ld %d %d\n", rc, rc < 0 ? errno : 0, ((unsigned char *)ro)[0]);
    /* EINVAL: a length not a multiple of sizeof(long), or shorter than the CPUs. */
    unsigned char buf[64];
    memset(buf, 0xaa, sizeof buf);
    rc = get_raw(0, 12, buf);
    printf("get_len12 %ld %d\n", rc, rc < 0 ? errno : 0);
    rc = get_raw(0, 0, buf);
    printf("get_len0 %ld %d\n", rc, rc < 0 ? errno : 0);
    /* 64 bytes asked: the kernel writes its mask size only; the rest stays as it was. */
    rc = get_raw(0, 64, buf);
    int untouched = 1;
    for (long i = rc > 0 ? rc : 0; i < 64; i++) untouched &= buf[i] == 0xaa;
    printf("get_len64 %ld untouched=%d\n", rc, untouched);
    /* A mask of 4 bytes is zero-filled to the mask size; len 0 is an empty mask (EINVAL). */
    uint32_t low = 0x1;
    rc = set_raw(0, 4, &low);
    printf("set_len4 %ld %d %llx\n", rc, rc < 0 ? errno : 0, (unsigned long long)self_mask());
    rc = set_raw(0, 0, buf);
    printf("set_len0 %ld %d\n", rc, rc < 0 ? errno : 0);
}

static void *thread_main(void *arg) {
    (void)arg;
    uint64_t inherited = self_mask();
    uint64_t one = 1;
    set_raw(0, 8, &one);
    printf("thread inherited=%llx own=%llx\n", (unsigned long long)inherited, (unsigned long long)self_mask());
    return NULL;
}

static void threads(void) {
    uint64_t seven = 0x80;
    set_raw(0, 8, &seven);
    pthread_t t;
    pthread_create(&t, NULL, thread_main, NULL);
    pthread_join(t, NULL);
    printf("main own=%llx\n", (unsigned long long)self_mask());
}

static int cmp_long(const void *a, const void *b) {
    long x = *(const long *)a, y = *(const long *)b;
    return (x > y) - (x < y);
}

static long now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1000000000L + ts.tv_nsec;
}

static void cost(int n) {
    long *notified = calloc((size_t)n, sizeof(long)), *plain = calloc((size_t)n, sizeof(long));
    unsigned char buf[128];
    for (int i = 0; i < n; i++) {
        long t0 = now_ns();
        get_raw(0, sizeof buf, buf);
        long t1 = now_ns();
        syscall(SYS_getppid);
        long t2 = now_ns();
        notified[i] = t1 - t0;
        plain[i] = t2 - t1;
    }
    qsort(notified, (size_t)n, sizeof(long), cmp_long);
    qsort(plain, (size_t)n, sizeof(long), cmp_long);
    printf("notified_ns %ld plain_ns %ld\n", notified[n / 2], plain[n / 2]);
}

static void loop(uint64_t mask, long iters) {
    if (set_raw(0, 8, &mask) != 0) {
        printf("err %d\n", errno);
        return;
    }
    volatile uint64_t x = 1;
    long t0 = now_ns();
    for (long i = 0; i < iters; i++) x = x * 6364136223846793005ULL + 1442695040888963407ULL;
    printf("seconds %.6f\n", (double)(now_ns() - t0) / 1e9);
}

int main(int argc, char **argv) {
    setvbuf(stdout, NULL, _IOLBF, 0);
    if (argc >= 2 && !strcmp(argv[1], "get")) {
        print_get(argc > 2 ? atol(argv[2]) : 0, argc > 3 ? strtoul(argv[3], NULL, 10) : 128);
    } else if (argc >= 3 && !strcmp(argv[1], "set")) {
        print_set(strtoull(argv[2], NULL, 16), argc > 3 ? atol(argv[3]) : 0,
                  argc > 4 ? strtoul(argv[4], NULL, 10) : 8);
    } else if (argc == 2 && !strcmp(argv[1], "edges")) {
        edges();
    } else if (argc == 2 && !strcmp(argv[1], "threads")) {
        threads();
    } else if (argc == 3 && !strcmp(argv[1], "fork")) {
        uint64_t mask = strtoull(argv[2], NULL, 16);
        set_raw(0, 8, &mask);
        pid_t child = fork();
        if (child == 0) {
            printf("child %llx\n", (unsigned long long)self_mask());
            _exit(0);
        }
        waitpid(child, NULL, 0);
    } else if (argc == 3 && !strcmp(argv[1], "cost")) {
        cost(atoi(argv[2]));
    } else if (argc == 4 && !strcmp(argv[1], "loop")) {
        loop(strtoull(argv[2], NULL, 16), atol(argv[3]));
    } else {
        fputs("usage: affinity_probe get|set|edges|threads|fork|cost|loop ...\n", stderr);
        return 2;
    }
    return 0;
}
