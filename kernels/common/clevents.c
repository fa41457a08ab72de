/* farm common runtime: OpenCL event profiling split into host-to-device / kernel /
 * device-to-host time (see farm.h). */
#include <stdlib.h>

#include "farm.h"

cl_event *farm_ev_slot(farm_evlist *l, farm_xfer kind)
{
    if (l->n == l->cap) {
        size_t cap = l->cap ? l->cap * 2 : 16;
        cl_event *ev = realloc(l->ev, cap * sizeof *ev);
        unsigned char *k = realloc(l->kind, cap);
        if (!ev || !k)
            farm_die(FARM_EXIT_ERROR, "out of memory (event list)");
        l->ev = ev;
        l->kind = k;
        l->cap = cap;
    }
    l->kind[l->n] = (unsigned char)kind;
    l->ev[l->n] = NULL;
    return &l->ev[l->n++];
}

void farm_ev_collect(farm_evlist *l, farm_split *out)
{
    for (size_t i = 0; i < l->n; i++) {
        if (!l->ev[i])
            continue;
        cl_ulong s = 0, e = 0;
        clWaitForEvents(1, &l->ev[i]);
        if (clGetEventProfilingInfo(l->ev[i], CL_PROFILING_COMMAND_START, sizeof s, &s, NULL) == CL_SUCCESS &&
            clGetEventProfilingInfo(l->ev[i], CL_PROFILING_COMMAND_END, sizeof e, &e, NULL) == CL_SUCCESS &&
            e >= s) {
            uint64_t d = e - s;
            if (l->kind[i] == FARM_H2D)
                out->h2d_ns += d;
            else if (l->kind[i] == FARM_KERNEL)
                out->kernel_ns += d;
            else
                out->d2h_ns += d;
        }
        clReleaseEvent(l->ev[i]);
    }
    l->n = 0;
}

void farm_ev_free(farm_evlist *l)
{
    farm_split ignore = {0, 0, 0};
    farm_ev_collect(l, &ignore);
    free(l->ev);
    free(l->kind);
    l->ev = NULL;
    l->kind = NULL;
    l->cap = 0;
}
