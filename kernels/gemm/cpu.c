/* gemm CPU reference paths: i-k-j loop order so the inner loop streams rows of B and C
 * (the compiler vectorises it); cpu-mt splits rows of C over the pool. */
#include <string.h>

#include "gemm.h"

typedef struct {
    const gemm_problem *p;
    float *c;
} job;

static void rows(const gemm_problem *p, float *c, size_t r0, size_t r1)
{
    const size_t n = p->n, k = p->k;
    for (size_t i = r0; i < r1; i++) {
        float *ci = c + i * n;
        memset(ci, 0, n * sizeof *ci);
        const float *ai = p->a + i * k;
        for (size_t kk = 0; kk < k; kk++) {
            const float a = ai[kk];
            const float *bk = p->b + kk * n;
            for (size_t j = 0; j < n; j++)
                ci[j] += a * bk[j];
        }
        if (p->fp16)
            farm_round_f16(ci, n);
    }
}

static void task(void *user, int tid, int nthreads)
{
    job *jb = user;
    size_t r0, r1;
    farm_range(jb->p->m, tid, nthreads, &r0, &r1);
    rows(jb->p, jb->c, r0, r1);
}

void gemm_cpu(const gemm_problem *p, float *c, farm_pool *pool)
{
    job jb = {p, c};
    if (pool)
        farm_pool_run(pool, task, &jb);
    else
        rows(p, c, 0, p->m);
}
