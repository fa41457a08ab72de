/* farm common runtime: a persistent pthread pool for the cpu-mt backends (see farm.h).
 * Threads are created once, so per-step dispatch (e.g. every LSTM time step) costs a
 * wake-up, not a thread creation. */
#define _POSIX_C_SOURCE 200809L
#include <pthread.h>
#include <stdlib.h>

#include "farm.h"

struct farm_pool {
    int n;
    pthread_t *threads;
    pthread_mutex_t mu;
    pthread_cond_t go, done;
    unsigned long generation;
    int pending;
    int quit;
    farm_task_fn fn;
    void *user;
};

typedef struct {
    farm_pool *p;
    int tid;
} worker_arg;

static void *worker(void *arg)
{
    worker_arg *w = arg;
    farm_pool *p = w->p;
    int tid = w->tid;
    free(w);
    unsigned long seen = 0;
    for (;;) {
        pthread_mutex_lock(&p->mu);
        while (!p->quit && p->generation == seen)
            pthread_cond_wait(&p->go, &p->mu);
        if (p->quit) {
            pthread_mutex_unlock(&p->mu);
            return NULL;
        }
        seen = p->generation;
        farm_task_fn fn = p->fn;
        void *user = p->user;
        pthread_mutex_unlock(&p->mu);
        fn(user, tid, p->n);
        pthread_mutex_lock(&p->mu);
        if (--p->pending == 0)
            pthread_cond_signal(&p->done);
        pthread_mutex_unlock(&p->mu);
    }
}

farm_pool *farm_pool_create(int nthreads)
{
    farm_pool *p = farm_alloc(sizeof *p);
    p->n = nthreads < 1 ? 1 : nthreads;
    p->threads = farm_alloc(sizeof(pthread_t) * (size_t)p->n);
    pthread_mutex_init(&p->mu, NULL);
    pthread_cond_init(&p->go, NULL);
    pthread_cond_init(&p->done, NULL);
    for (int t = 1; t < p->n; t++) {
        worker_arg *w = farm_alloc(sizeof *w);
        w->p = p;
        w->tid = t;
        if (pthread_create(&p->threads[t], NULL, worker, w) != 0)
            farm_die(FARM_EXIT_ERROR, "pthread_create failed for thread %d of %d", t, p->n);
    }
    return p;
}

void farm_pool_run(farm_pool *p, farm_task_fn fn, void *user)
{
    if (p->n == 1) {
        fn(user, 0, 1);
        return;
    }
    pthread_mutex_lock(&p->mu);
    p->fn = fn;
    p->user = user;
    p->pending = p->n - 1;
    p->generation++;
    pthread_cond_broadcast(&p->go);
    pthread_mutex_unlock(&p->mu);
    fn(user, 0, p->n);
    pthread_mutex_lock(&p->mu);
    while (p->pending > 0)
        pthread_cond_wait(&p->done, &p->mu);
    pthread_mutex_unlock(&p->mu);
}

int farm_pool_size(const farm_pool *p) { return p->n; }

void farm_pool_destroy(farm_pool *p)
{
    if (!p)
        return;
    pthread_mutex_lock(&p->mu);
    p->quit = 1;
    pthread_cond_broadcast(&p->go);
    pthread_mutex_unlock(&p->mu);
    for (int t = 1; t < p->n; t++)
        pthread_join(p->threads[t], NULL);
    pthread_mutex_destroy(&p->mu);
    pthread_cond_destroy(&p->go);
    pthread_cond_destroy(&p->done);
    free(p->threads);
    free(p);
}

void farm_range(size_t n, int tid, int nthreads, size_t *begin, size_t *end)
{
    size_t per = n / (size_t)nthreads, rem = n % (size_t)nthreads, t = (size_t)tid;
    *begin = t * per + (t < rem ? t : rem);
    *end = *begin + per + (t < rem ? 1 : 0);
}
