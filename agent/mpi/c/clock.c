/* clock.c: the clocks a program may decide by. A recording keeps what they read on the
 * MPI_Init thread, a replay gives the program the recorded readings (rt_clock): how long a
 * benchmark loops, which rank a seed from time(NULL) picks. Readings made by libraries
 * (the MPI library's own, libc's) are neither kept nor replayed. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <time.h>

#include "wrap.h"

double MPI_Wtime(void) {
    double t = PMPI_Wtime();
    return rt_active() ? rt_clock(t, RT_CALLER, 0) : t;
}

time_t time(time_t *out) {
    static time_t (*real)(time_t *);
    if (!real) real = (time_t(*)(time_t *))dlsym(RTLD_NEXT, "time");
    time_t t = real ? real(NULL) : (time_t)-1;
    if (rt_active()) t = (time_t)rt_clock((double)t, RT_CALLER, 1);
    if (out) *out = t;
    return t;
}
