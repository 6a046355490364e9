/* comm.c: communicator creation and release, and the calls that frame a rank's life:
 * Init (where the agent starts and the rank first waits for the debugger), Finalize,
 * Abort, and Pcontrol (reporting on/off, labels). */
#include <stdarg.h>
#include <stddef.h>

#include "wrap.h"

/* Comm_split, Comm_dup, Comm_create: report the new communicator after the call. */
int rtw_comm_split(void *caller, MPI_Comm comm, int color, int key, MPI_Comm *out) {
    if (!rt_active()) return PMPI_Comm_split(comm, color, key, out);
    wcall w;
    wc_begin(&w, "MPI_Comm_split", caller);
    wc_comm(&w, comm);
    rt_start(&w.c);
    int rc = PMPI_Comm_split(comm, color, key, out);
    if (rc == MPI_SUCCESS) wc_new_comm(&w, *out);
    rt_stop(&w.c, rc);
    return rc;
}

int rtw_comm_dup(void *caller, MPI_Comm comm, MPI_Comm *out) {
    if (!rt_active()) return PMPI_Comm_dup(comm, out);
    wcall w;
    wc_begin(&w, "MPI_Comm_dup", caller);
    wc_comm(&w, comm);
    rt_start(&w.c);
    int rc = PMPI_Comm_dup(comm, out);
    if (rc == MPI_SUCCESS) wc_new_comm(&w, *out);
    rt_stop(&w.c, rc);
    return rc;
}

int rtw_comm_create(void *caller, MPI_Comm comm, MPI_Group group, MPI_Comm *out) {
    if (!rt_active()) return PMPI_Comm_create(comm, group, out);
    wcall w;
    wc_begin(&w, "MPI_Comm_create", caller);
    wc_comm(&w, comm);
    rt_start(&w.c);
    int rc = PMPI_Comm_create(comm, group, out);
    if (rc == MPI_SUCCESS) wc_new_comm(&w, *out);
    rt_stop(&w.c, rc);
    return rc;
}

int rtw_comm_free(void *caller, MPI_Comm *comm) {
    if (!rt_active()) {
        /* Even unreported: a freed handle may be reused by the next new communicator. */
        rt_forget_comm(*comm);
        return PMPI_Comm_free(comm);
    }
    wcall w;
    wc_begin(&w, "MPI_Comm_free", caller);
    /* Named (into w's buffer) before its number is forgotten. */
    wc_comm(&w, *comm);
    rt_forget_comm(*comm);
    rt_start(&w.c);
    int rc = PMPI_Comm_free(comm);
    rt_stop(&w.c, rc);
    return rc;
}

/* After PMPI_Init*: start the agent, then report the Init call itself, whose start is
 * where the rank first waits for the debugger. */
static void after_init(void *caller, const char *name, int rc) {
    int rank = 0, size = 1;
    if (rc != MPI_SUCCESS) return;
    PMPI_Comm_rank(MPI_COMM_WORLD, &rank);
    PMPI_Comm_size(MPI_COMM_WORLD, &size);
    rt_init(rank, size, rtw_impl());
    rt_sample_setup();
    if (!rt_active()) return;
    wcall w;
    wc_begin(&w, name, caller);
    rt_start(&w.c);
    rt_stop(&w.c, rc);
}

int rtw_init(void *caller, int *argc, char ***argv) {
    int rc = PMPI_Init(argc, argv);
    after_init(caller, "MPI_Init", rc);
    return rc;
}

int rtw_init_thread(void *caller, int *argc, char ***argv, int required, int *provided) {
    int rc = PMPI_Init_thread(argc, argv, required, provided);
    after_init(caller, "MPI_Init_thread", rc);
    return rc;
}

int rtw_finalize(void *caller) {
    if (rt_active()) {
        wcall w;
        wc_begin(&w, "MPI_Finalize", caller);
        rt_start(&w.c);
        rt_stop(&w.c, MPI_SUCCESS);
    }
    /* Always: events batched before reporting was switched off still go out. */
    rt_finalize();
    int rc = PMPI_Finalize();
    /* Every send is over now, those whose completion was never seen included. */
    rt_release_all_edits();
    return rc;
}

int rtw_abort(void *caller, MPI_Comm comm, int code) {
    if (rt_active()) {
        wcall w;
        wc_begin(&w, "MPI_Abort", caller);
        wc_comm(&w, comm);
        w.c.count = code;
        rt_start(&w.c);
    }
    rt_finalize();
    return PMPI_Abort(comm, code);
}

int rtw_pcontrol(int level, const char *label) {
    /* Not gated by rt_active(): level 1 is how reporting comes back on. */
    rt_pcontrol(level, label);
    return level == 2 ? PMPI_Pcontrol(level, label) : PMPI_Pcontrol(level);
}

/* ---- the C entry points ---- */

int MPI_Comm_split(MPI_Comm comm, int color, int key, MPI_Comm *out) {
    return rtw_comm_split(RT_CALLER, comm, color, key, out);
}

int MPI_Comm_dup(MPI_Comm comm, MPI_Comm *out) { return rtw_comm_dup(RT_CALLER, comm, out); }

int MPI_Comm_create(MPI_Comm comm, MPI_Group group, MPI_Comm *out) {
    return rtw_comm_create(RT_CALLER, comm, group, out);
}

int MPI_Comm_free(MPI_Comm *comm) { return rtw_comm_free(RT_CALLER, comm); }

int MPI_Init(int *argc, char ***argv) { return rtw_init(RT_CALLER, argc, argv); }

int MPI_Init_thread(int *argc, char ***argv, int required, int *provided) {
    return rtw_init_thread(RT_CALLER, argc, argv, required, provided);
}

int MPI_Finalize(void) { return rtw_finalize(RT_CALLER); }

int MPI_Abort(MPI_Comm comm, int code) { return rtw_abort(RT_CALLER, comm, code); }

/* Level 2's first variadic argument is the label (a C string), by this library's
 * convention; MPI leaves Pcontrol's arguments to the profiling library. */
int MPI_Pcontrol(const int level, ...) {
    const char *label = NULL;
    if (level == 2) {
        va_list ap;
        va_start(ap, level);
        label = va_arg(ap, const char *);
        va_end(ap);
    }
    return rtw_pcontrol(level, label);
}
