/* farm common runtime: a persistent pthread pool for the cpu-mt backends (see farm.h).
 * Threads are created once. A dispatch is a generation counter bump: workers spin briefly on it
 * before sleeping on a condition variable, and the caller spins (yielding) until all are done, so
 * back-to-back dispatches (every LSTM time step) cost well under the ~30 us of a sleep/wake-up. */
#define _POSIX_C_SOURCE 200809L
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdlib.h>

#include "farm.h"

#define SPIN_ITERS 20000 /* ~50-100 us of polling before a worker goes to sleep */

struct farm_pool {
    int n;
    pthread_t *threads;
    pthread_mutex_t mu;
    pthread_cond_t go;
    atomic_ulong generation;
    atomic_int pending;
    atomic_int sleepers;
    atomic_int quit;
    farm_task_fn fn; /* published by the release increment of generation */
    void *user;
};

typedef struct {
    farm_pool *p;
    int tid;
} worker_arg;

static unsigned long wait_generation(farm_pool *p, unsigned long seen)
{
    for (int i = 0; i < SPIN_ITERS; i++) {
        unsigned long g = atomic_load_explicit(&p->generation, memory_order_acquire);
        if (g != seen || atomic_load(&p->quit))
            return g;
    }
    pthread_mutex_lock(&p->mu);
    atomic_fetch_add(&p->sleepers, 1);
    unsigned long g;
    while ((g = atomic_load(&p->generation)) == seen && !atomic_load(&p->quit))
        pthread_cond_wait(&p->go, &p->mu);
    atomic_fetch_sub(&p->sleepers, 1);
    pthread_mutex_unlock(&p->mu);
    return g;
}

static void *worker(void *arg)
{
    worker_arg *w = arg;
    farm_pool *p = w->p;
    int tid = w->tid;
    free(w);
    unsigned long seen = 0;
    for (;;) {
        seen = wait_generation(p, seen);
        if (atomic_load(&p->quit))
            return NULL;
        p->fn(p->user, tid, p->n);
        atomic_fetch_sub_explicit(&p->pending, 1, memory_order_release);
    }
}

farm_pool *farm_pool_create(int nthreads)
{
    farm_pool *p = farm_alloc(sizeof *p);
    p->n = nthreads < 1 ? 1 : nthreads;
    p->threads = farm_alloc(sizeof(pthread_t) * (size_t)p->n);
    pthread_mutex_init(&p->mu, NULL);
    pthread_cond_init(&p->go, NULL);
    atomic_init(&p->generation, 0);
    atomic_init(&p->pending, 0);
    atomic_init(&p->sleepers, 0);
    atomic_init(&p->quit, 0);
    for (int t = 1; t < p->n; t++) {
        worker_arg *w = farm_alloc(sizeof *w);
        w->p = p;
        w->tid = t;
        if (pthread_create(&p->threads[t], NULL, worker, w) != 0)
            farm_die(FARM_EXIT_ERROR, "pthread_create failed for thread %d of %d", t, p->n);
    }
    return p;
}

static void wake_sleepers(farm_pool *p)
{
    /* Dekker-style, all seq_cst: a worker increments `sleepers` then re-reads the generation; the
     * caller bumps the generation then reads `sleepers`. One of them sees the other's write; and a
     * worker holds the mutex from that re-check until it waits, so the broadcast cannot be missed. */
    if (atomic_load(&p->sleepers) > 0) {
        pthread_mutex_lock(&p->mu);
        pthread_cond_broadcast(&p->go);
        pthread_mutex_unlock(&p->mu);
    }
}

void farm_pool_run(farm_pool *p, farm_task_fn fn, void *user)
{
    if (p->n == 1) {
        fn(user, 0, 1);
        return;
    }
    p->fn = fn;
    p->user = user;
    atomic_store_explicit(&p->pending, p->n - 1, memory_order_relaxed);
    atomic_fetch_add(&p->generation, 1); /* seq_cst: see wake_sleepers */
    wake_sleepers(p);
    fn(user, 0, p->n);
    for (int i = 0; atomic_load_explicit(&p->pending, memory_order_acquire) > 0; i++)
        if (i >= SPIN_ITERS)
            sched_yield(); /* the host may have fewer free cores than threads */
}

int farm_pool_size(const farm_pool *p) { return p->n; }

void farm_pool_destroy(farm_pool *p)
{
    if (!p)
        return;
    atomic_store(&p->quit, 1);
    pthread_mutex_lock(&p->mu);
    pthread_cond_broadcast(&p->go);
    pthread_mutex_unlock(&p->mu);
    for (int t = 1; t < p->n; t++)
        pthread_join(p->threads[t], NULL);
    pthread_mutex_destroy(&p->mu);
    pthread_cond_destroy(&p->go);
    free(p->threads);
    free(p);
}

void farm_range(size_t n, int tid, int nthreads, size_t *begin, size_t *end)
{
    size_t per = n / (size_t)nthreads, rem = n % (size_t)nthreads, t = (size_t)tid;
    *begin = t * per + (t < rem ? t : rem);
    *end = *begin + per + (t < rem ? 1 : 0);
}
