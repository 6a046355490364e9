/* nbcoll.c: the nonblocking collectives. Each reports what its blocking form reports
 * (communicator, root, this rank's data) and the request it creates, so that the Wait or
 * Test that completes it reports that too. */
#include "wrap.h"

static void nb(wcall *w, const char *name, void *caller, MPI_Comm comm) {
    wc_begin(w, name, caller);
    wc_comm(w, comm);
}

/* After the PMPI call: the request it created, then the `stop`. */
static int nb_end(wcall *w, int rc, const MPI_Request *req) {
    if (rc == MPI_SUCCESS) wc_request(w, MPI_Request_c2f(*req));
    rt_stop(&w->c, rc);
    return rc;
}

/* A contribution that is either the send side's or, in place, the receive side's. */
static void nb_data(wcall *w, const void *s, int sc, MPI_Datatype st, int rc,
                    MPI_Datatype rt) {
    if (s == MPI_IN_PLACE) wc_data(w, rt, rc);
    else wc_data(w, st, sc);
}

/* A vector form's own receive count, for an in-place contribution. */
static int own_count(MPI_Comm comm, const int counts[]) {
    int rank = 0;
    PMPI_Comm_rank(comm, &rank);
    return counts[rank];
}

int rtw_ibarrier(void *caller, MPI_Comm comm, MPI_Request *req) {
    if (!rt_active()) return PMPI_Ibarrier(comm, req);
    wcall w;
    nb(&w, "MPI_Ibarrier", caller, comm);
    rt_start(&w.c);
    return nb_end(&w, PMPI_Ibarrier(comm, req), req);
}

int rtw_ibcast(void *caller, void *buf, int count, MPI_Datatype type, int root,
               MPI_Comm comm, MPI_Request *req) {
    if (!rt_active()) return PMPI_Ibcast(buf, count, type, root, comm, req);
    wcall w;
    nb(&w, "MPI_Ibcast", caller, comm);
    wc_root(&w, root);
    wc_data(&w, type, count);
    rt_start(&w.c);
    return nb_end(&w, PMPI_Ibcast(buf, count, type, root, comm, req), req);
}

int rtw_ireduce(void *caller, const void *s, void *r, int n, MPI_Datatype t, MPI_Op op,
                int root, MPI_Comm comm, MPI_Request *req) {
    if (!rt_active()) return PMPI_Ireduce(s, r, n, t, op, root, comm, req);
    wcall w;
    nb(&w, "MPI_Ireduce", caller, comm);
    wc_root(&w, root);
    wc_data(&w, t, n);
    rt_start(&w.c);
    return nb_end(&w, PMPI_Ireduce(s, r, n, t, op, root, comm, req), req);
}

int rtw_iallreduce(void *caller, const void *s, void *r, int n, MPI_Datatype t, MPI_Op op,
                   MPI_Comm comm, MPI_Request *req) {
    if (!rt_active()) return PMPI_Iallreduce(s, r, n, t, op, comm, req);
    wcall w;
    nb(&w, "MPI_Iallreduce", caller, comm);
    wc_data(&w, t, n);
    rt_start(&w.c);
    return nb_end(&w, PMPI_Iallreduce(s, r, n, t, op, comm, req), req);
}

/* ---- the C entry points ---- */

int MPI_Ibarrier(MPI_Comm comm, MPI_Request *req) {
    return rtw_ibarrier(RT_CALLER, comm, req);
}

int MPI_Ibcast(void *buf, int count, MPI_Datatype type, int root, MPI_Comm comm,
               MPI_Request *req) {
    return rtw_ibcast(RT_CALLER, buf, count, type, root, comm, req);
}

int MPI_Ireduce(const void *s, void *r, int n, MPI_Datatype t, MPI_Op op, int root,
                MPI_Comm comm, MPI_Request *req) {
    return rtw_ireduce(RT_CALLER, s, r, n, t, op, root, comm, req);
}

int MPI_Iallreduce(const void *s, void *r, int n, MPI_Datatype t, MPI_Op op, MPI_Comm comm,
                   MPI_Request *req) {
    return rtw_iallreduce(RT_CALLER, s, r, n, t, op, comm, req);
}

/* Scan and Exscan: one count and type for both buffers, no root. */
int rtw_iscan(void *caller, int ex, const void *s, void *r, int n, MPI_Datatype t,
              MPI_Op op, MPI_Comm comm, MPI_Request *req) {
    if (!rt_active())
        return ex ? PMPI_Iexscan(s, r, n, t, op, comm, req)
                  : PMPI_Iscan(s, r, n, t, op, comm, req);
    wcall w;
    nb(&w, ex ? "MPI_Iexscan" : "MPI_Iscan", caller, comm);
    wc_data(&w, t, n);
    rt_start(&w.c);
    int rc = ex ? PMPI_Iexscan(s, r, n, t, op, comm, req) : PMPI_Iscan(s, r, n, t, op, comm, req);
    return nb_end(&w, rc, req);
}

int MPI_Iscan(const void *s, void *r, int n, MPI_Datatype t, MPI_Op op, MPI_Comm comm,
              MPI_Request *req) {
    return rtw_iscan(RT_CALLER, 0, s, r, n, t, op, comm, req);
}

int MPI_Iexscan(const void *s, void *r, int n, MPI_Datatype t, MPI_Op op, MPI_Comm comm,
                MPI_Request *req) {
    return rtw_iscan(RT_CALLER, 1, s, r, n, t, op, comm, req);
}

int rtw_ireduce_scatter(void *caller, const void *s, void *r, const int rcounts[],
                        MPI_Datatype t, MPI_Op op, MPI_Comm comm, MPI_Request *req) {
    if (!rt_active()) return PMPI_Ireduce_scatter(s, r, rcounts, t, op, comm, req);
    wcall w;
    nb(&w, "MPI_Ireduce_scatter", caller, comm);
    wc_data(&w, t, rt_sum(rcounts, rt_coll_size(comm)));
    rt_start(&w.c);
    return nb_end(&w, PMPI_Ireduce_scatter(s, r, rcounts, t, op, comm, req), req);
}

int MPI_Ireduce_scatter(const void *s, void *r, const int rcounts[], MPI_Datatype t,
                        MPI_Op op, MPI_Comm comm, MPI_Request *req) {
    return rtw_ireduce_scatter(RT_CALLER, s, r, rcounts, t, op, comm, req);
}

int rtw_igather(void *caller, const void *s, int sc, MPI_Datatype st, void *r, int rc,
                MPI_Datatype rt, int root, MPI_Comm comm, MPI_Request *req) {
    if (!rt_active()) return PMPI_Igather(s, sc, st, r, rc, rt, root, comm, req);
    wcall w;
    nb(&w, "MPI_Igather", caller, comm);
    wc_root(&w, root);
    nb_data(&w, s, sc, st, rc, rt);
    rt_start(&w.c);
    return nb_end(&w, PMPI_Igather(s, sc, st, r, rc, rt, root, comm, req), req);
}

int MPI_Igather(const void *s, int sc, MPI_Datatype st, void *r, int rc, MPI_Datatype rt,
                int root, MPI_Comm comm, MPI_Request *req) {
    return rtw_igather(RT_CALLER, s, sc, st, r, rc, rt, root, comm, req);
}

int rtw_igatherv(void *caller, const void *s, int sc, MPI_Datatype st, void *r,
                 const int rcs[], const int displs[], MPI_Datatype rt, int root,
                 MPI_Comm comm, MPI_Request *req) {
    if (!rt_active()) return PMPI_Igatherv(s, sc, st, r, rcs, displs, rt, root, comm, req);
    wcall w;
    nb(&w, "MPI_Igatherv", caller, comm);
    wc_root(&w, root);
    if (s == MPI_IN_PLACE) wc_data(&w, rt, own_count(comm, rcs));
    else wc_data(&w, st, sc);
    rt_start(&w.c);
    return nb_end(&w, PMPI_Igatherv(s, sc, st, r, rcs, displs, rt, root, comm, req), req);
}

int MPI_Igatherv(const void *s, int sc, MPI_Datatype st, void *r, const int rcs[],
                 const int displs[], MPI_Datatype rt, int root, MPI_Comm comm,
                 MPI_Request *req) {
    return rtw_igatherv(RT_CALLER, s, sc, st, r, rcs, displs, rt, root, comm, req);
}

int rtw_iscatter(void *caller, const void *s, int sc, MPI_Datatype st, void *r, int rc,
                 MPI_Datatype rt, int root, MPI_Comm comm, MPI_Request *req) {
    if (!rt_active()) return PMPI_Iscatter(s, sc, st, r, rc, rt, root, comm, req);
    wcall w;
    nb(&w, "MPI_Iscatter", caller, comm);
    wc_root(&w, root);
    if (rt_is_root(comm, root)) wc_data(&w, st, sc);
    else wc_data(&w, rt, rc);
    rt_start(&w.c);
    return nb_end(&w, PMPI_Iscatter(s, sc, st, r, rc, rt, root, comm, req), req);
}

int MPI_Iscatter(const void *s, int sc, MPI_Datatype st, void *r, int rc, MPI_Datatype rt,
                 int root, MPI_Comm comm, MPI_Request *req) {
    return rtw_iscatter(RT_CALLER, s, sc, st, r, rc, rt, root, comm, req);
}

int rtw_iscatterv(void *caller, const void *s, const int scs[], const int displs[],
                  MPI_Datatype st, void *r, int rc, MPI_Datatype rt, int root,
                  MPI_Comm comm, MPI_Request *req) {
    if (!rt_active()) return PMPI_Iscatterv(s, scs, displs, st, r, rc, rt, root, comm, req);
    wcall w;
    nb(&w, "MPI_Iscatterv", caller, comm);
    wc_root(&w, root);
    if (rt_is_root(comm, root)) wc_data(&w, st, rt_sum(scs, rt_coll_size(comm)));
    else wc_data(&w, rt, rc);
    rt_start(&w.c);
    return nb_end(&w, PMPI_Iscatterv(s, scs, displs, st, r, rc, rt, root, comm, req), req);
}

int MPI_Iscatterv(const void *s, const int scs[], const int displs[], MPI_Datatype st,
                  void *r, int rc, MPI_Datatype rt, int root, MPI_Comm comm,
                  MPI_Request *req) {
    return rtw_iscatterv(RT_CALLER, s, scs, displs, st, r, rc, rt, root, comm, req);
}

int rtw_iallgather(void *caller, const void *s, int sc, MPI_Datatype st, void *r, int rc,
                   MPI_Datatype rt, MPI_Comm comm, MPI_Request *req) {
    if (!rt_active()) return PMPI_Iallgather(s, sc, st, r, rc, rt, comm, req);
    wcall w;
    nb(&w, "MPI_Iallgather", caller, comm);
    nb_data(&w, s, sc, st, rc, rt);
    rt_start(&w.c);
    return nb_end(&w, PMPI_Iallgather(s, sc, st, r, rc, rt, comm, req), req);
}

int MPI_Iallgather(const void *s, int sc, MPI_Datatype st, void *r, int rc, MPI_Datatype rt,
                   MPI_Comm comm, MPI_Request *req) {
    return rtw_iallgather(RT_CALLER, s, sc, st, r, rc, rt, comm, req);
}

int rtw_iallgatherv(void *caller, const void *s, int sc, MPI_Datatype st, void *r,
                    const int rcs[], const int displs[], MPI_Datatype rt, MPI_Comm comm,
                    MPI_Request *req) {
    if (!rt_active()) return PMPI_Iallgatherv(s, sc, st, r, rcs, displs, rt, comm, req);
    wcall w;
    nb(&w, "MPI_Iallgatherv", caller, comm);
    if (s == MPI_IN_PLACE) wc_data(&w, rt, own_count(comm, rcs));
    else wc_data(&w, st, sc);
    rt_start(&w.c);
    return nb_end(&w, PMPI_Iallgatherv(s, sc, st, r, rcs, displs, rt, comm, req), req);
}

int MPI_Iallgatherv(const void *s, int sc, MPI_Datatype st, void *r, const int rcs[],
                    const int displs[], MPI_Datatype rt, MPI_Comm comm, MPI_Request *req) {
    return rtw_iallgatherv(RT_CALLER, s, sc, st, r, rcs, displs, rt, comm, req);
}

int rtw_ialltoall(void *caller, const void *s, int sc, MPI_Datatype st, void *r, int rc,
                  MPI_Datatype rt, MPI_Comm comm, MPI_Request *req) {
    if (!rt_active()) return PMPI_Ialltoall(s, sc, st, r, rc, rt, comm, req);
    wcall w;
    nb(&w, "MPI_Ialltoall", caller, comm);
    nb_data(&w, s, sc, st, rc, rt);
    rt_start(&w.c);
    return nb_end(&w, PMPI_Ialltoall(s, sc, st, r, rc, rt, comm, req), req);
}

int MPI_Ialltoall(const void *s, int sc, MPI_Datatype st, void *r, int rc, MPI_Datatype rt,
                  MPI_Comm comm, MPI_Request *req) {
    return rtw_ialltoall(RT_CALLER, s, sc, st, r, rc, rt, comm, req);
}

int rtw_ialltoallv(void *caller, const void *s, const int scs[], const int sdispls[],
                   MPI_Datatype st, void *r, const int rcs[], const int rdispls[],
                   MPI_Datatype rt, MPI_Comm comm, MPI_Request *req) {
    if (!rt_active())
        return PMPI_Ialltoallv(s, scs, sdispls, st, r, rcs, rdispls, rt, comm, req);
    wcall w;
    nb(&w, "MPI_Ialltoallv", caller, comm);
    if (s == MPI_IN_PLACE) wc_data(&w, rt, rt_sum(rcs, rt_coll_size(comm)));
    else wc_data(&w, st, rt_sum(scs, rt_coll_size(comm)));
    rt_start(&w.c);
    return nb_end(&w, PMPI_Ialltoallv(s, scs, sdispls, st, r, rcs, rdispls, rt, comm, req),
                  req);
}

int MPI_Ialltoallv(const void *s, const int scs[], const int sdispls[], MPI_Datatype st,
                   void *r, const int rcs[], const int rdispls[], MPI_Datatype rt,
                   MPI_Comm comm, MPI_Request *req) {
    return rtw_ialltoallv(RT_CALLER, s, scs, sdispls, st, r, rcs, rdispls, rt, comm, req);
}
