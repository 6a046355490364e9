/* fortran_nb.c: Open MPI's Fortran bindings of the nonblocking collectives, the
 * persistent requests and MPI_Request_free (see fortran.c for why only Open MPI needs
 * them). */
#include "wrap.h"

#ifdef OPEN_MPI

#include <stdlib.h>

#include "fwrap.h"

/* A request the call made, back to Fortran. */
static void fout(F *e, MPI_Request req, F *r) {
    if (*e == MPI_SUCCESS) *r = MPI_Request_c2f(req);
}

/* ---- nonblocking collectives ---- */

void mpi_ibarrier_(F *c, F *r, F *e) {
    MPI_Request req = MPI_REQUEST_NULL;
    *e = rtw_ibarrier(RT_CALLER, CM(c), &req);
    fout(e, req, r);
}
F08(mpi_ibarrier_, ompi_ibarrier_f)

void mpi_ibcast_(void *b, F *n, F *t, F *root, F *c, F *r, F *e) {
    MPI_Request req = MPI_REQUEST_NULL;
    *e = rtw_ibcast(RT_CALLER, fbuf(b), *n, TY(t), *root, CM(c), &req);
    fout(e, req, r);
}
F08(mpi_ibcast_, ompi_ibcast_f)

void mpi_ireduce_(void *s, void *rb, F *n, F *t, F *op, F *root, F *c, F *r, F *e) {
    MPI_Request req = MPI_REQUEST_NULL;
    *e = rtw_ireduce(RT_CALLER, fbuf(s), fbuf(rb), *n, TY(t), OP(op), *root, CM(c), &req);
    fout(e, req, r);
}
F08(mpi_ireduce_, ompi_ireduce_f)

void mpi_iallreduce_(void *s, void *rb, F *n, F *t, F *op, F *c, F *r, F *e) {
    MPI_Request req = MPI_REQUEST_NULL;
    *e = rtw_iallreduce(RT_CALLER, fbuf(s), fbuf(rb), *n, TY(t), OP(op), CM(c), &req);
    fout(e, req, r);
}
F08(mpi_iallreduce_, ompi_iallreduce_f)

void mpi_iscan_(void *s, void *rb, F *n, F *t, F *op, F *c, F *r, F *e) {
    MPI_Request req = MPI_REQUEST_NULL;
    *e = rtw_iscan(RT_CALLER, 0, fbuf(s), fbuf(rb), *n, TY(t), OP(op), CM(c), &req);
    fout(e, req, r);
}
F08(mpi_iscan_, ompi_iscan_f)

void mpi_iexscan_(void *s, void *rb, F *n, F *t, F *op, F *c, F *r, F *e) {
    MPI_Request req = MPI_REQUEST_NULL;
    *e = rtw_iscan(RT_CALLER, 1, fbuf(s), fbuf(rb), *n, TY(t), OP(op), CM(c), &req);
    fout(e, req, r);
}
F08(mpi_iexscan_, ompi_iexscan_f)

void mpi_ireduce_scatter_(void *s, void *rb, F *rcs, F *t, F *op, F *c, F *r, F *e) {
    MPI_Request req = MPI_REQUEST_NULL;
    *e = rtw_ireduce_scatter(RT_CALLER, fbuf(s), fbuf(rb), rcs, TY(t), OP(op), CM(c), &req);
    fout(e, req, r);
}
F08(mpi_ireduce_scatter_, ompi_ireduce_scatter_f)

void mpi_igather_(void *s, F *sn, F *st, void *rb, F *rn, F *rt, F *root, F *c, F *r, F *e) {
    MPI_Request req = MPI_REQUEST_NULL;
    *e = rtw_igather(RT_CALLER, fbuf(s), *sn, TY(st), fbuf(rb), *rn, TY(rt), *root, CM(c),
                     &req);
    fout(e, req, r);
}
F08(mpi_igather_, ompi_igather_f)

void mpi_igatherv_(void *s, F *sn, F *st, void *rb, F *rcs, F *displs, F *rt, F *root, F *c,
                   F *r, F *e) {
    MPI_Request req = MPI_REQUEST_NULL;
    *e = rtw_igatherv(RT_CALLER, fbuf(s), *sn, TY(st), fbuf(rb), rcs, displs, TY(rt), *root,
                      CM(c), &req);
    fout(e, req, r);
}
F08(mpi_igatherv_, ompi_igatherv_f)

void mpi_iscatter_(void *s, F *sn, F *st, void *rb, F *rn, F *rt, F *root, F *c, F *r,
                   F *e) {
    MPI_Request req = MPI_REQUEST_NULL;
    *e = rtw_iscatter(RT_CALLER, fbuf(s), *sn, TY(st), fbuf(rb), *rn, TY(rt), *root, CM(c),
                      &req);
    fout(e, req, r);
}
F08(mpi_iscatter_, ompi_iscatter_f)

void mpi_iscatterv_(void *s, F *scs, F *displs, F *st, void *rb, F *rn, F *rt, F *root,
                    F *c, F *r, F *e) {
    MPI_Request req = MPI_REQUEST_NULL;
    *e = rtw_iscatterv(RT_CALLER, fbuf(s), scs, displs, TY(st), fbuf(rb), *rn, TY(rt), *root,
                       CM(c), &req);
    fout(e, req, r);
}
F08(mpi_iscatterv_, ompi_iscatterv_f)

void mpi_iallgather_(void *s, F *sn, F *st, void *rb, F *rn, F *rt, F *c, F *r, F *e) {
    MPI_Request req = MPI_REQUEST_NULL;
    *e = rtw_iallgather(RT_CALLER, fbuf(s), *sn, TY(st), fbuf(rb), *rn, TY(rt), CM(c), &req);
    fout(e, req, r);
}
F08(mpi_iallgather_, ompi_iallgather_f)

void mpi_iallgatherv_(void *s, F *sn, F *st, void *rb, F *rcs, F *displs, F *rt, F *c,
                      F *r, F *e) {
    MPI_Request req = MPI_REQUEST_NULL;
    *e = rtw_iallgatherv(RT_CALLER, fbuf(s), *sn, TY(st), fbuf(rb), rcs, displs, TY(rt),
                         CM(c), &req);
    fout(e, req, r);
}
F08(mpi_iallgatherv_, ompi_iallgatherv_f)

void mpi_ialltoall_(void *s, F *sn, F *st, void *rb, F *rn, F *rt, F *c, F *r, F *e) {
    MPI_Request req = MPI_REQUEST_NULL;
    *e = rtw_ialltoall(RT_CALLER, fbuf(s), *sn, TY(st), fbuf(rb), *rn, TY(rt), CM(c), &req);
    fout(e, req, r);
}
F08(mpi_ialltoall_, ompi_ialltoall_f)

void mpi_ialltoallv_(void *s, F *scs, F *sds, F *st, void *rb, F *rcs, F *rds, F *rt, F *c,
                     F *r, F *e) {
    MPI_Request req = MPI_REQUEST_NULL;
    *e = rtw_ialltoallv(RT_CALLER, fbuf(s), scs, sds, TY(st), fbuf(rb), rcs, rds, TY(rt),
                        CM(c), &req);
    fout(e, req, r);
}
F08(mpi_ialltoallv_, ompi_ialltoallv_f)

/* ---- persistent requests ---- */

static void send_init(void *caller, enum rt_send_mode m, void *b, F *n, F *t, F *d, F *tag,
                      F *c, F *r, F *e) {
    MPI_Request req = MPI_REQUEST_NULL;
    *e = rtw_send_init(caller, m, fbuf(b), *n, TY(t), *d, *tag, CM(c), &req);
    fout(e, req, r);
}
void mpi_send_init_(void *b, F *n, F *t, F *d, F *tag, F *c, F *r, F *e) {
    send_init(RT_CALLER, RT_SEND, b, n, t, d, tag, c, r, e);
}
void mpi_ssend_init_(void *b, F *n, F *t, F *d, F *tag, F *c, F *r, F *e) {
    send_init(RT_CALLER, RT_SSEND, b, n, t, d, tag, c, r, e);
}
void mpi_bsend_init_(void *b, F *n, F *t, F *d, F *tag, F *c, F *r, F *e) {
    send_init(RT_CALLER, RT_BSEND, b, n, t, d, tag, c, r, e);
}
void mpi_rsend_init_(void *b, F *n, F *t, F *d, F *tag, F *c, F *r, F *e) {
    send_init(RT_CALLER, RT_RSEND, b, n, t, d, tag, c, r, e);
}
F08(mpi_send_init_, ompi_send_init_f)
F08(mpi_ssend_init_, ompi_ssend_init_f)
F08(mpi_bsend_init_, ompi_bsend_init_f)
F08(mpi_rsend_init_, ompi_rsend_init_f)

void mpi_recv_init_(void *b, F *n, F *t, F *s, F *tag, F *c, F *r, F *e) {
    MPI_Request req = MPI_REQUEST_NULL;
    *e = rtw_recv_init(RT_CALLER, fbuf(b), *n, TY(t), *s, *tag, CM(c), &req);
    fout(e, req, r);
}
F08(mpi_recv_init_, ompi_recv_init_f)

void mpi_start_(F *r, F *e) {
    MPI_Request req = MPI_Request_f2c(*r);
    *e = rtw_start(RT_CALLER, &req);
    *r = MPI_Request_c2f(req);
}
F08(mpi_start_, ompi_start_f)

void mpi_startall_(F *n, F *r, F *e) {
    MPI_Request small[RT_SMALL];
    int k = *n > 0 ? *n : 0;
    MPI_Request *c = k > RT_SMALL ? malloc((size_t)k * sizeof *c) : small;
    if (!c) {
        *e = MPI_ERR_NO_MEM;
        return;
    }
    for (int i = 0; i < k; i++) c[i] = MPI_Request_f2c(r[i]);
    *e = rtw_startall(RT_CALLER, k, c);
    for (int i = 0; i < k; i++) r[i] = MPI_Request_c2f(c[i]);
    if (c != small) free(c);
}
F08(mpi_startall_, ompi_startall_f)

void mpi_request_free_(F *r, F *e) {
    MPI_Request req = MPI_Request_f2c(*r);
    *e = rtw_request_free(RT_CALLER, &req);
    if (*e == MPI_SUCCESS) *r = MPI_Request_c2f(req);
}
F08(mpi_request_free_, ompi_request_free_f)

#else
/* MPICH: no Fortran symbols (see fortran.c). ISO C wants a declaration in every file. */
typedef int rt_no_fortran_nonblocking;
#endif
