/* fortran.c: the Fortran bindings, for Open MPI only. Open MPI 4.1's Fortran symbols
 * (mpi_send_, and the ompi_send_f that `use mpi_f08` calls) go straight to PMPI_Send,
 * past the C wrappers, so they are wrapped here: handles and statuses are converted and
 * the shared rtw_* logic runs, reporting each call once with the Fortran call site.
 * MPICH's Fortran bindings call the C MPI_* entry points, already wrapped: nothing to do
 * (defining these symbols there would report every call twice). */
#include "wrap.h"

#ifdef OPEN_MPI

#include <stdlib.h>

#include "fwrap.h"

/* A C status for a Fortran one, or MPI_STATUS_IGNORE. */
static MPI_Status *cst(F *f, MPI_Status *c) {
    return f == MPI_F_STATUS_IGNORE ? MPI_STATUS_IGNORE : c;
}

static void fst(const MPI_Status *c, F *f) {
    if (f != MPI_F_STATUS_IGNORE) MPI_Status_c2f(c, f);
}

/* Statuses that go out to Fortran: n of them, or none for MPI_F_STATUSES_IGNORE. */
static void fsts(const MPI_Status *c, F *f, int n) {
    if (f == MPI_F_STATUSES_IGNORE || !c) return;
    for (int i = 0; i < n; i++) MPI_Status_c2f(&c[i], &f[i * FSTATUS_SIZE]);
}

/* Fortran request arrays as C ones, with room for their statuses. */
typedef struct creqs {
    int n;
    MPI_Request *r;
    MPI_Status *st; /* NULL when the program ignores statuses */
    MPI_Request r_s[RT_SMALL];
    MPI_Status st_s[RT_SMALL];
} creqs;

static int creqs_init(creqs *c, int n, const F *f, const F *fst_) {
    int big = n > RT_SMALL;
    c->n = n > 0 ? n : 0;
    c->r = big ? malloc((size_t)c->n * sizeof *c->r) : c->r_s;
    c->st = NULL;
    if (fst_ != MPI_F_STATUSES_IGNORE)
        c->st = big ? malloc((size_t)c->n * sizeof *c->st) : c->st_s;
    if (!c->r || (fst_ != MPI_F_STATUSES_IGNORE && !c->st)) return 0;
    for (int i = 0; i < c->n; i++) c->r[i] = MPI_Request_f2c(f[i]);
    return 1;
}

static MPI_Status *creqs_st(creqs *c) { return c->st ? c->st : MPI_STATUSES_IGNORE; }

/* Back to Fortran: requests (completed ones are null now) and `nst` statuses. */
static void creqs_done(creqs *c, F *f, F *fst_, int nst) {
    for (int i = 0; i < c->n; i++) f[i] = MPI_Request_c2f(c->r[i]);
    fsts(c->st, fst_, nst);
    if (c->r != c->r_s) free(c->r);
    if (c->st != c->st_s) free(c->st);
}

/* ---- point-to-point ---- */

void mpi_send_(void *b, F *n, F *t, F *d, F *tag, F *c, F *e) {
    *e = rtw_send(RT_CALLER, RT_SEND, fbuf(b), *n, TY(t), *d, *tag, CM(c));
}
void mpi_ssend_(void *b, F *n, F *t, F *d, F *tag, F *c, F *e) {
    *e = rtw_send(RT_CALLER, RT_SSEND, fbuf(b), *n, TY(t), *d, *tag, CM(c));
}
void mpi_bsend_(void *b, F *n, F *t, F *d, F *tag, F *c, F *e) {
    *e = rtw_send(RT_CALLER, RT_BSEND, fbuf(b), *n, TY(t), *d, *tag, CM(c));
}
void mpi_rsend_(void *b, F *n, F *t, F *d, F *tag, F *c, F *e) {
    *e = rtw_send(RT_CALLER, RT_RSEND, fbuf(b), *n, TY(t), *d, *tag, CM(c));
}
F08(mpi_send_, ompi_send_f)
F08(mpi_ssend_, ompi_ssend_f)
F08(mpi_bsend_, ompi_bsend_f)
F08(mpi_rsend_, ompi_rsend_f)

static void isend(void *caller, int sync, void *b, F *n, F *t, F *d, F *tag, F *c, F *r,
                  F *e) {
    MPI_Request req = MPI_REQUEST_NULL;
    *e = rtw_isend(caller, sync, fbuf(b), *n, TY(t), *d, *tag, CM(c), &req);
    if (*e == MPI_SUCCESS) *r = MPI_Request_c2f(req);
}
void mpi_isend_(void *b, F *n, F *t, F *d, F *tag, F *c, F *r, F *e) {
    isend(RT_CALLER, 0, b, n, t, d, tag, c, r, e);
}
void mpi_issend_(void *b, F *n, F *t, F *d, F *tag, F *c, F *r, F *e) {
    isend(RT_CALLER, 1, b, n, t, d, tag, c, r, e);
}
F08(mpi_isend_, ompi_isend_f)
F08(mpi_issend_, ompi_issend_f)

void mpi_recv_(void *b, F *n, F *t, F *s, F *tag, F *c, F *st, F *e) {
    MPI_Status cs;
    *e = rtw_recv(RT_CALLER, fbuf(b), *n, TY(t), *s, *tag, CM(c), cst(st, &cs));
    if (*e == MPI_SUCCESS) fst(&cs, st);
}
F08(mpi_recv_, ompi_recv_f)

void mpi_irecv_(void *b, F *n, F *t, F *s, F *tag, F *c, F *r, F *e) {
    MPI_Request req = MPI_REQUEST_NULL;
    *e = rtw_irecv(RT_CALLER, fbuf(b), *n, TY(t), *s, *tag, CM(c), &req);
    if (*e == MPI_SUCCESS) *r = MPI_Request_c2f(req);
}
F08(mpi_irecv_, ompi_irecv_f)

void mpi_sendrecv_(void *sb, F *sn, F *stt, F *d, F *stag, void *rb, F *rn, F *rt, F *s,
                   F *rtag, F *c, F *st, F *e) {
    MPI_Status cs;
    *e = rtw_sendrecv(RT_CALLER, fbuf(sb), *sn, TY(stt), *d, *stag, fbuf(rb), *rn, TY(rt),
                      *s, *rtag, CM(c), cst(st, &cs));
    if (*e == MPI_SUCCESS) fst(&cs, st);
}
F08(mpi_sendrecv_, ompi_sendrecv_f)

void mpi_sendrecv_replace_(void *b, F *n, F *t, F *d, F *stag, F *s, F *rtag, F *c, F *st,
                           F *e) {
    MPI_Status cs;
    *e = rtw_sendrecv_replace(RT_CALLER, fbuf(b), *n, TY(t), *d, *stag, *s, *rtag, CM(c),
                              cst(st, &cs));
    if (*e == MPI_SUCCESS) fst(&cs, st);
}
F08(mpi_sendrecv_replace_, ompi_sendrecv_replace_f)

void mpi_probe_(F *s, F *tag, F *c, F *st, F *e) {
    MPI_Status cs;
    *e = rtw_probe(RT_CALLER, *s, *tag, CM(c), cst(st, &cs));
    if (*e == MPI_SUCCESS) fst(&cs, st);
}
F08(mpi_probe_, ompi_probe_f)

/* `use mpi_f08`'s MPI_Iprobe and MPI_Test* call the Fortran profiling symbols (pmpi_x_)
 * rather than ompi_x_f: those names are taken too, or such programs' matches would go
 * unreported. */
void mpi_iprobe_(F *s, F *tag, F *c, F *flag, F *st, F *e) {
    MPI_Status cs;
    int f = 0;
    *e = rtw_iprobe(RT_CALLER, *s, *tag, CM(c), &f, cst(st, &cs));
    *flag = f ? 1 : 0;
    if (*e == MPI_SUCCESS && f) fst(&cs, st);
}
F08(mpi_iprobe_, pmpi_iprobe_)

/* Matched probes: the message handle goes back to Fortran as the C call left it (a
 * received message's is MPI_MESSAGE_NULL). */
void mpi_mprobe_(F *s, F *tag, F *c, F *m, F *st, F *e) {
    MPI_Status cs;
    MPI_Message msg = MPI_MESSAGE_NULL;
    *e = rtw_mprobe(RT_CALLER, *s, *tag, CM(c), &msg, cst(st, &cs));
    if (*e != MPI_SUCCESS) return;
    *m = MPI_Message_c2f(msg);
    fst(&cs, st);
}
F08(mpi_mprobe_, ompi_mprobe_f)

/* As MPI_Iprobe's, `use mpi_f08`'s MPI_Improbe calls the profiling symbol. */
void mpi_improbe_(F *s, F *tag, F *c, F *flag, F *m, F *st, F *e) {
    MPI_Status cs;
    MPI_Message msg = MPI_MESSAGE_NULL;
    int f = 0;
    *e = rtw_improbe(RT_CALLER, *s, *tag, CM(c), &f, &msg, cst(st, &cs));
    *flag = f ? 1 : 0;
    if (*e != MPI_SUCCESS || !f) return;
    *m = MPI_Message_c2f(msg);
    fst(&cs, st);
}
F08(mpi_improbe_, pmpi_improbe_)

void mpi_mrecv_(void *b, F *n, F *t, F *m, F *st, F *e) {
    MPI_Status cs;
    MPI_Message msg = MPI_Message_f2c(*m);
    *e = rtw_mrecv(RT_CALLER, fbuf(b), *n, TY(t), &msg, cst(st, &cs));
    if (*e != MPI_SUCCESS) return;
    *m = MPI_Message_c2f(msg);
    fst(&cs, st);
}
F08(mpi_mrecv_, ompi_mrecv_f)

void mpi_imrecv_(void *b, F *n, F *t, F *m, F *r, F *e) {
    MPI_Request req = MPI_REQUEST_NULL;
    MPI_Message msg = MPI_Message_f2c(*m);
    *e = rtw_imrecv(RT_CALLER, fbuf(b), *n, TY(t), &msg, &req);
    if (*e != MPI_SUCCESS) return;
    *m = MPI_Message_c2f(msg);
    *r = MPI_Request_c2f(req);
}
F08(mpi_imrecv_, ompi_imrecv_f)

/* ---- completion ---- */

void mpi_wait_(F *r, F *st, F *e) {
    MPI_Status cs;
    MPI_Request req = MPI_Request_f2c(*r);
    *e = rtw_wait(RT_CALLER, &req, cst(st, &cs));
    *r = MPI_Request_c2f(req);
    if (*e == MPI_SUCCESS) fst(&cs, st);
}
F08(mpi_wait_, ompi_wait_f)

void mpi_test_(F *r, F *flag, F *st, F *e) {
    MPI_Status cs;
    int f = 0;
    MPI_Request req = MPI_Request_f2c(*r);
    *e = rtw_test(RT_CALLER, &req, &f, cst(st, &cs));
    *r = MPI_Request_c2f(req);
    *flag = f ? 1 : 0;
    if (*e == MPI_SUCCESS && f) fst(&cs, st);
}
F08(mpi_test_, pmpi_test_)

void mpi_waitall_(F *n, F *r, F *st, F *e) {
    creqs c;
    if (!creqs_init(&c, *n, r, st)) { *e = MPI_ERR_NO_MEM; return; }
    *e = rtw_waitall(RT_CALLER, *n, c.r, creqs_st(&c));
    creqs_done(&c, r, st, *n);
}
F08(mpi_waitall_, ompi_waitall_f)

void mpi_testall_(F *n, F *r, F *flag, F *st, F *e) {
    creqs c;
    int f = 0;
    if (!creqs_init(&c, *n, r, st)) { *e = MPI_ERR_NO_MEM; return; }
    *e = rtw_testall(RT_CALLER, *n, c.r, &f, creqs_st(&c));
    *flag = f ? 1 : 0;
    creqs_done(&c, r, st, f ? *n : 0);
}
F08(mpi_testall_, pmpi_testall_)

void mpi_waitany_(F *n, F *r, F *index, F *st, F *e) {
    creqs c;
    MPI_Status cs;
    int i = MPI_UNDEFINED;
    if (!creqs_init(&c, *n, r, MPI_F_STATUSES_IGNORE)) { *e = MPI_ERR_NO_MEM; return; }
    *e = rtw_waitany(RT_CALLER, *n, c.r, &i, cst(st, &cs));
    *index = i == MPI_UNDEFINED ? i : i + 1;
    creqs_done(&c, r, MPI_F_STATUSES_IGNORE, 0);
    if (*e == MPI_SUCCESS) fst(&cs, st);
}
F08(mpi_waitany_, ompi_waitany_f)

void mpi_testany_(F *n, F *r, F *index, F *flag, F *st, F *e) {
    creqs c;
    MPI_Status cs;
    int i = MPI_UNDEFINED, f = 0;
    if (!creqs_init(&c, *n, r, MPI_F_STATUSES_IGNORE)) { *e = MPI_ERR_NO_MEM; return; }
    *e = rtw_testany(RT_CALLER, *n, c.r, &i, &f, cst(st, &cs));
    *index = i == MPI_UNDEFINED ? i : i + 1;
    *flag = f ? 1 : 0;
    creqs_done(&c, r, MPI_F_STATUSES_IGNORE, 0);
    if (*e == MPI_SUCCESS && f) fst(&cs, st);
}
F08(mpi_testany_, pmpi_testany_)

static void somef(void *caller, int test, F *n, F *r, F *out, F *idx, F *st, F *e) {
    creqs c;
    int o = 0;
    if (!creqs_init(&c, *n, r, st)) { *e = MPI_ERR_NO_MEM; return; }
    *e = test ? rtw_testsome(caller, *n, c.r, &o, idx, creqs_st(&c))
              : rtw_waitsome(caller, *n, c.r, &o, idx, creqs_st(&c));
    *out = o;
    for (int k = 0; o != MPI_UNDEFINED && k < o; k++) idx[k] += 1;
    creqs_done(&c, r, st, o == MPI_UNDEFINED ? 0 : o);
}
void mpi_waitsome_(F *n, F *r, F *out, F *idx, F *st, F *e) {
    somef(RT_CALLER, 0, n, r, out, idx, st, e);
}
void mpi_testsome_(F *n, F *r, F *out, F *idx, F *st, F *e) {
    somef(RT_CALLER, 1, n, r, out, idx, st, e);
}
F08(mpi_waitsome_, ompi_waitsome_f)
F08(mpi_testsome_, pmpi_testsome_)

#else
/* MPICH: no Fortran symbols (see above). ISO C wants a declaration in every file. */
typedef int rt_no_fortran_wrappers;
#endif
