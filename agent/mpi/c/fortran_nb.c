/* fortran_nb.c: Open MPI's Fortran bindings of the most used nonblocking collectives,
 * the persistent requests and MPI_Request_free (see fortran.c for why only Open MPI
 * needs them). */
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
