/* fortran_coll.c: Open MPI's Fortran bindings of the collectives, the communicator calls
 * and Init/Finalize/Abort/Pcontrol (see fortran.c for why only Open MPI needs them). */
#include "wrap.h"

#ifdef OPEN_MPI

#include <stddef.h>

#include "fwrap.h"

/* ---- collectives ---- */

void mpi_barrier_(F *c, F *e) { *e = rtw_barrier(RT_CALLER, CM(c)); }
F08(mpi_barrier_, ompi_barrier_f)

void mpi_bcast_(void *b, F *n, F *t, F *root, F *c, F *e) {
    *e = rtw_bcast(RT_CALLER, fbuf(b), *n, TY(t), *root, CM(c));
}
F08(mpi_bcast_, ompi_bcast_f)

void mpi_reduce_(void *s, void *r, F *n, F *t, F *op, F *root, F *c, F *e) {
    *e = rtw_reduce(RT_CALLER, fbuf(s), fbuf(r), *n, TY(t), OP(op), *root, CM(c));
}
F08(mpi_reduce_, ompi_reduce_f)

void mpi_allreduce_(void *s, void *r, F *n, F *t, F *op, F *c, F *e) {
    *e = rtw_allreduce(RT_CALLER, fbuf(s), fbuf(r), *n, TY(t), OP(op), CM(c));
}
F08(mpi_allreduce_, ompi_allreduce_f)

void mpi_scan_(void *s, void *r, F *n, F *t, F *op, F *c, F *e) {
    *e = rtw_scan(RT_CALLER, fbuf(s), fbuf(r), *n, TY(t), OP(op), CM(c));
}
F08(mpi_scan_, ompi_scan_f)

void mpi_exscan_(void *s, void *r, F *n, F *t, F *op, F *c, F *e) {
    *e = rtw_exscan(RT_CALLER, fbuf(s), fbuf(r), *n, TY(t), OP(op), CM(c));
}
F08(mpi_exscan_, ompi_exscan_f)

void mpi_reduce_scatter_(void *s, void *r, F *rcs, F *t, F *op, F *c, F *e) {
    *e = rtw_reduce_scatter(RT_CALLER, fbuf(s), fbuf(r), rcs, TY(t), OP(op), CM(c));
}
F08(mpi_reduce_scatter_, ompi_reduce_scatter_f)

void mpi_gather_(void *s, F *sn, F *st, void *r, F *rn, F *rt, F *root, F *c, F *e) {
    *e = rtw_gather(RT_CALLER, fbuf(s), *sn, TY(st), fbuf(r), *rn, TY(rt), *root, CM(c));
}
F08(mpi_gather_, ompi_gather_f)

void mpi_gatherv_(void *s, F *sn, F *st, void *r, F *rcs, F *displs, F *rt, F *root, F *c,
                  F *e) {
    *e = rtw_gatherv(RT_CALLER, fbuf(s), *sn, TY(st), fbuf(r), rcs, displs, TY(rt), *root,
                     CM(c));
}
F08(mpi_gatherv_, ompi_gatherv_f)

void mpi_scatter_(void *s, F *sn, F *st, void *r, F *rn, F *rt, F *root, F *c, F *e) {
    *e = rtw_scatter(RT_CALLER, fbuf(s), *sn, TY(st), fbuf(r), *rn, TY(rt), *root, CM(c));
}
F08(mpi_scatter_, ompi_scatter_f)

void mpi_scatterv_(void *s, F *scs, F *displs, F *st, void *r, F *rn, F *rt, F *root, F *c,
                   F *e) {
    *e = rtw_scatterv(RT_CALLER, fbuf(s), scs, displs, TY(st), fbuf(r), *rn, TY(rt), *root,
                      CM(c));
}
F08(mpi_scatterv_, ompi_scatterv_f)

void mpi_allgather_(void *s, F *sn, F *st, void *r, F *rn, F *rt, F *c, F *e) {
    *e = rtw_allgather(RT_CALLER, fbuf(s), *sn, TY(st), fbuf(r), *rn, TY(rt), CM(c));
}
F08(mpi_allgather_, ompi_allgather_f)

void mpi_allgatherv_(void *s, F *sn, F *st, void *r, F *rcs, F *displs, F *rt, F *c, F *e) {
    *e = rtw_allgatherv(RT_CALLER, fbuf(s), *sn, TY(st), fbuf(r), rcs, displs, TY(rt), CM(c));
}
F08(mpi_allgatherv_, ompi_allgatherv_f)

void mpi_alltoall_(void *s, F *sn, F *st, void *r, F *rn, F *rt, F *c, F *e) {
    *e = rtw_alltoall(RT_CALLER, fbuf(s), *sn, TY(st), fbuf(r), *rn, TY(rt), CM(c));
}
F08(mpi_alltoall_, ompi_alltoall_f)

void mpi_alltoallv_(void *s, F *scs, F *sds, F *st, void *r, F *rcs, F *rds, F *rt, F *c,
                    F *e) {
    *e = rtw_alltoallv(RT_CALLER, fbuf(s), scs, sds, TY(st), fbuf(r), rcs, rds, TY(rt), CM(c));
}
F08(mpi_alltoallv_, ompi_alltoallv_f)

/* ---- communicators ---- */

void mpi_comm_split_(F *c, F *color, F *key, F *out, F *e) {
    MPI_Comm n = MPI_COMM_NULL;
    *e = rtw_comm_split(RT_CALLER, CM(c), *color, *key, &n);
    if (*e == MPI_SUCCESS) *out = MPI_Comm_c2f(n);
}
F08(mpi_comm_split_, ompi_comm_split_f)

void mpi_comm_dup_(F *c, F *out, F *e) {
    MPI_Comm n = MPI_COMM_NULL;
    *e = rtw_comm_dup(RT_CALLER, CM(c), &n);
    if (*e == MPI_SUCCESS) *out = MPI_Comm_c2f(n);
}
F08(mpi_comm_dup_, ompi_comm_dup_f)

void mpi_comm_create_(F *c, F *g, F *out, F *e) {
    MPI_Comm n = MPI_COMM_NULL;
    *e = rtw_comm_create(RT_CALLER, CM(c), MPI_Group_f2c(*g), &n);
    if (*e == MPI_SUCCESS) *out = MPI_Comm_c2f(n);
}
F08(mpi_comm_create_, ompi_comm_create_f)

void mpi_comm_free_(F *c, F *e) {
    MPI_Comm comm = CM(c);
    *e = rtw_comm_free(RT_CALLER, &comm);
    if (*e == MPI_SUCCESS) *c = MPI_Comm_c2f(comm);
}
F08(mpi_comm_free_, ompi_comm_free_f)

/* ---- a rank's life ---- */

void mpi_init_(F *e) { *e = rtw_init(RT_CALLER, NULL, NULL); }
F08(mpi_init_, ompi_init_f)

void mpi_init_thread_(F *required, F *provided, F *e) {
    int p = 0;
    *e = rtw_init_thread(RT_CALLER, NULL, NULL, *required, &p);
    *provided = p;
}
F08(mpi_init_thread_, ompi_init_thread_f)

void mpi_finalize_(F *e) { *e = rtw_finalize(RT_CALLER); }
F08(mpi_finalize_, ompi_finalize_f)

void mpi_abort_(F *c, F *code, F *e) { *e = rtw_abort(RT_CALLER, CM(c), *code); }
F08(mpi_abort_, ompi_abort_f)

/* Fortran's MPI_PCONTROL has no label and no error argument. */
void mpi_pcontrol_(F *level) { rtw_pcontrol(*level, NULL); }
F08(mpi_pcontrol_, ompi_pcontrol_f)

#else
/* MPICH: no Fortran symbols (see fortran.c). ISO C wants a declaration in every file. */
typedef int rt_no_fortran_collectives;
#endif
