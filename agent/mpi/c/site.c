/* site.c: the program's call site when an MPI library stands between the program and
 * the wrapper. MPICH's Fortran bindings (libmpichfort) call the C MPI_* entry points,
 * so the wrapper's return address lies inside libmpichfort; the site the user wants is
 * the Fortran program's call, one or more frames further up. Those are found by
 * unwinding (gfortran code has unwind tables) only when the return address is inside
 * such a library: a range check, cheap for every other call. Open MPI's `use mpi_f08`
 * module (libmpi_usempif08) is such a library too: it calls ompi_x_f. */
#define _GNU_SOURCE
#include <link.h>
#include <pthread.h>
#include <stdint.h>
#include <string.h>
#include <unwind.h>

#include "wrap.h"

/* Text ranges of the libraries whose calls to MPI_* are on the program's behalf. */
#define RT_SHIMS 4
static struct {
    uintptr_t lo, hi;
} shims[RT_SHIMS];
static int nshims;
static pthread_once_t shims_once = PTHREAD_ONCE_INIT;

static int is_shim_name(const char *name) {
    return name && (strstr(name, "libmpichfort") || strstr(name, "libmpifort") ||
                    strstr(name, "libmpi_usempif08"));
}

static int add_shim(struct dl_phdr_info *info, size_t size, void *data) {
    (void)size;
    (void)data;
    if (!is_shim_name(info->dlpi_name) || nshims == RT_SHIMS) return 0;
    for (int i = 0; i < info->dlpi_phnum; i++) {
        const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
        if (ph->p_type != PT_LOAD || !(ph->p_flags & PF_X) || nshims == RT_SHIMS) continue;
        shims[nshims].lo = info->dlpi_addr + ph->p_vaddr;
        shims[nshims].hi = shims[nshims].lo + ph->p_memsz;
        nshims++;
    }
    return 0;
}

static void find_shims(void) { dl_iterate_phdr(add_shim, NULL); }

int rt_in_shim(uintptr_t pc) {
    pthread_once(&shims_once, find_shims);
    for (int i = 0; i < nshims; i++)
        if (pc >= shims[i].lo && pc < shims[i].hi) return 1;
    return 0;
}

/* Unwinding state: the first frame above a shim frame that is not in a shim. */
struct walk {
    int seen_shim;
    uintptr_t site;
};

static _Unwind_Reason_Code step(struct _Unwind_Context *ctx, void *arg) {
    struct walk *w = arg;
    uintptr_t pc = _Unwind_GetIP(ctx);
    if (rt_in_shim(pc)) {
        w->seen_shim = 1;
    } else if (w->seen_shim) {
        w->site = pc;
        return _URC_END_OF_STACK;
    }
    return _URC_NO_REASON;
}

void *rt_program_site(void *caller) {
    pthread_once(&shims_once, find_shims);
    if (!nshims || !rt_in_shim((uintptr_t)caller)) return caller;
    struct walk w = {0, 0};
    _Unwind_Backtrace(step, &w);
    return w.site ? (void *)w.site : caller;
}
