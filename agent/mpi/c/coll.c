/* coll.c: the collective wrappers. A collective reports its communicator, its root when
 * it has one, and the data this rank contributes: the send count and type, or the
 * receive ones where the send side is not significant here (MPI_IN_PLACE, a Scatter's
 * non-root ranks). Vector forms report the total over the ranks (a Scatterv's root: all
 * it sends). */
#include "wrap.h"

/* Start a collective on `comm`. */
static void coll(wcall *w, const char *name, void *caller, MPI_Comm comm) {
    wc_begin(w, name, caller);
    wc_comm(w, comm);
}

int rt_coll_size(MPI_Comm comm) {
    int inter = 0, n = 0;
    PMPI_Comm_test_inter(comm, &inter);
    if (inter) PMPI_Comm_remote_size(comm, &n);
    else PMPI_Comm_size(comm, &n);
    return n;
}

int rt_sum(const int counts[], int n) {
    int64_t s = 0;
    for (int i = 0; i < n; i++) s += counts[i];
    return s > INT32_MAX ? INT32_MAX : (int)s;
}

/* The root of a rooted collective (intracommunicator) or the root group's root
 * (MPI_ROOT, intercommunicator). */
int rt_is_root(MPI_Comm comm, int root) {
    int rank = -1;
    if (root == MPI_ROOT) return 1;
    PMPI_Comm_rank(comm, &rank);
    return rank == root;
}

int rtw_barrier(void *caller, MPI_Comm comm) {
    if (!rt_active()) return PMPI_Barrier(comm);
    wcall w;
    coll(&w, "MPI_Barrier", caller, comm);
    rt_start(&w.c);
    int rc = PMPI_Barrier(comm);
    rt_stop(&w.c, rc);
    return rc;
}

int rtw_bcast(void *caller, void *buf, int count, MPI_Datatype type, int root,
              MPI_Comm comm) {
    if (!rt_active()) return PMPI_Bcast(buf, count, type, root, comm);
    wcall w;
    coll(&w, "MPI_Bcast", caller, comm);
    wc_root(&w, root);
    wc_data(&w, type, count);
    rt_start(&w.c);
    int rc = PMPI_Bcast(buf, count, type, root, comm);
    rt_stop(&w.c, rc);
    return rc;
}

/* Reduce, Allreduce, Scan, Exscan: one count and type for both buffers. */
enum red { RED_REDUCE, RED_ALL, RED_SCAN, RED_EXSCAN };
static const char *const RED_NAMES[] = {"MPI_Reduce", "MPI_Allreduce", "MPI_Scan", "MPI_Exscan"};

static int pred(enum red k, const void *s, void *r, int n, MPI_Datatype t, MPI_Op op,
                int root, MPI_Comm comm) {
    switch (k) {
    case RED_REDUCE: return PMPI_Reduce(s, r, n, t, op, root, comm);
    case RED_ALL: return PMPI_Allreduce(s, r, n, t, op, comm);
    case RED_EXSCAN: return PMPI_Exscan(s, r, n, t, op, comm);
    default: return PMPI_Scan(s, r, n, t, op, comm);
    }
}

static int reduction(void *caller, enum red k, const void *s, void *r, int n,
                     MPI_Datatype t, MPI_Op op, int root, MPI_Comm comm) {
    if (!rt_active()) return pred(k, s, r, n, t, op, root, comm);
    wcall w;
    coll(&w, RED_NAMES[k], caller, comm);
    if (k == RED_REDUCE) wc_root(&w, root);
    wc_data(&w, t, n);
    rt_start(&w.c);
    int rc = pred(k, s, r, n, t, op, root, comm);
    rt_stop(&w.c, rc);
    return rc;
}

int rtw_reduce(void *caller, const void *s, void *r, int n, MPI_Datatype t, MPI_Op op,
               int root, MPI_Comm comm) {
    return reduction(caller, RED_REDUCE, s, r, n, t, op, root, comm);
}

int rtw_allreduce(void *caller, const void *s, void *r, int n, MPI_Datatype t, MPI_Op op,
                  MPI_Comm comm) {
    return reduction(caller, RED_ALL, s, r, n, t, op, 0, comm);
}

int rtw_scan(void *caller, const void *s, void *r, int n, MPI_Datatype t, MPI_Op op,
             MPI_Comm comm) {
    return reduction(caller, RED_SCAN, s, r, n, t, op, 0, comm);
}

int rtw_exscan(void *caller, const void *s, void *r, int n, MPI_Datatype t, MPI_Op op,
               MPI_Comm comm) {
    return reduction(caller, RED_EXSCAN, s, r, n, t, op, 0, comm);
}

int rtw_reduce_scatter(void *caller, const void *s, void *r, const int rcounts[],
                       MPI_Datatype t, MPI_Op op, MPI_Comm comm) {
    if (!rt_active()) return PMPI_Reduce_scatter(s, r, rcounts, t, op, comm);
    wcall w;
    coll(&w, "MPI_Reduce_scatter", caller, comm);
    wc_data(&w, t, rt_sum(rcounts, rt_coll_size(comm)));
    rt_start(&w.c);
    int rc = PMPI_Reduce_scatter(s, r, rcounts, t, op, comm);
    rt_stop(&w.c, rc);
    return rc;
}

int rtw_gather(void *caller, const void *s, int sc, MPI_Datatype st, void *r, int rc_,
               MPI_Datatype rt, int root, MPI_Comm comm) {
    if (!rt_active()) return PMPI_Gather(s, sc, st, r, rc_, rt, root, comm);
    wcall w;
    coll(&w, "MPI_Gather", caller, comm);
    wc_root(&w, root);
    if (s == MPI_IN_PLACE) wc_data(&w, rt, rc_);
    else wc_data(&w, st, sc);
    rt_start(&w.c);
    int rc = PMPI_Gather(s, sc, st, r, rc_, rt, root, comm);
    rt_stop(&w.c, rc);
    return rc;
}

int rtw_gatherv(void *caller, const void *s, int sc, MPI_Datatype st, void *r,
                const int rcs[], const int displs[], MPI_Datatype rt, int root,
                MPI_Comm comm) {
    if (!rt_active()) return PMPI_Gatherv(s, sc, st, r, rcs, displs, rt, root, comm);
    wcall w;
    coll(&w, "MPI_Gatherv", caller, comm);
    wc_root(&w, root);
    if (s == MPI_IN_PLACE) {
        int rank = 0;
        PMPI_Comm_rank(comm, &rank);
        wc_data(&w, rt, rcs[rank]);
    } else {
        wc_data(&w, st, sc);
    }
    rt_start(&w.c);
    int rc = PMPI_Gatherv(s, sc, st, r, rcs, displs, rt, root, comm);
    rt_stop(&w.c, rc);
    return rc;
}

int rtw_scatter(void *caller, const void *s, int sc, MPI_Datatype st, void *r, int rc_,
                MPI_Datatype rt, int root, MPI_Comm comm) {
    if (!rt_active()) return PMPI_Scatter(s, sc, st, r, rc_, rt, root, comm);
    wcall w;
    coll(&w, "MPI_Scatter", caller, comm);
    wc_root(&w, root);
    if (rt_is_root(comm, root)) wc_data(&w, st, sc);
    else wc_data(&w, rt, rc_);
    rt_start(&w.c);
    int rc = PMPI_Scatter(s, sc, st, r, rc_, rt, root, comm);
    rt_stop(&w.c, rc);
    return rc;
}

int rtw_scatterv(void *caller, const void *s, const int scs[], const int displs[],
                 MPI_Datatype st, void *r, int rc_, MPI_Datatype rt, int root,
                 MPI_Comm comm) {
    if (!rt_active()) return PMPI_Scatterv(s, scs, displs, st, r, rc_, rt, root, comm);
    wcall w;
    coll(&w, "MPI_Scatterv", caller, comm);
    wc_root(&w, root);
    if (rt_is_root(comm, root)) wc_data(&w, st, rt_sum(scs, rt_coll_size(comm)));
    else wc_data(&w, rt, rc_);
    rt_start(&w.c);
    int rc = PMPI_Scatterv(s, scs, displs, st, r, rc_, rt, root, comm);
    rt_stop(&w.c, rc);
    return rc;
}

int rtw_allgather(void *caller, const void *s, int sc, MPI_Datatype st, void *r, int rc_,
                  MPI_Datatype rt, MPI_Comm comm) {
    if (!rt_active()) return PMPI_Allgather(s, sc, st, r, rc_, rt, comm);
    wcall w;
    coll(&w, "MPI_Allgather", caller, comm);
    if (s == MPI_IN_PLACE) wc_data(&w, rt, rc_);
    else wc_data(&w, st, sc);
    rt_start(&w.c);
    int rc = PMPI_Allgather(s, sc, st, r, rc_, rt, comm);
    rt_stop(&w.c, rc);
    return rc;
}

int rtw_allgatherv(void *caller, const void *s, int sc, MPI_Datatype st, void *r,
                   const int rcs[], const int displs[], MPI_Datatype rt, MPI_Comm comm) {
    if (!rt_active()) return PMPI_Allgatherv(s, sc, st, r, rcs, displs, rt, comm);
    wcall w;
    coll(&w, "MPI_Allgatherv", caller, comm);
    if (s == MPI_IN_PLACE) {
        int rank = 0;
        PMPI_Comm_rank(comm, &rank);
        wc_data(&w, rt, rcs[rank]);
    } else {
        wc_data(&w, st, sc);
    }
    rt_start(&w.c);
    int rc = PMPI_Allgatherv(s, sc, st, r, rcs, displs, rt, comm);
    rt_stop(&w.c, rc);
    return rc;
}

int rtw_alltoall(void *caller, const void *s, int sc, MPI_Datatype st, void *r, int rc_,
                 MPI_Datatype rt, MPI_Comm comm) {
    if (!rt_active()) return PMPI_Alltoall(s, sc, st, r, rc_, rt, comm);
    wcall w;
    coll(&w, "MPI_Alltoall", caller, comm);
    if (s == MPI_IN_PLACE) wc_data(&w, rt, rc_);
    else wc_data(&w, st, sc);
    rt_start(&w.c);
    int rc = PMPI_Alltoall(s, sc, st, r, rc_, rt, comm);
    rt_stop(&w.c, rc);
    return rc;
}

int rtw_alltoallv(void *caller, const void *s, const int scs[], const int sdispls[],
                  MPI_Datatype st, void *r, const int rcs[], const int rdispls[],
                  MPI_Datatype rt, MPI_Comm comm) {
    if (!rt_active()) return PMPI_Alltoallv(s, scs, sdispls, st, r, rcs, rdispls, rt, comm);
    wcall w;
    coll(&w, "MPI_Alltoallv", caller, comm);
    if (s == MPI_IN_PLACE) wc_data(&w, rt, rt_sum(rcs, rt_coll_size(comm)));
    else wc_data(&w, st, rt_sum(scs, rt_coll_size(comm)));
    rt_start(&w.c);
    int rc = PMPI_Alltoallv(s, scs, sdispls, st, r, rcs, rdispls, rt, comm);
    rt_stop(&w.c, rc);
    return rc;
}

/* ---- the C entry points ---- */

int MPI_Barrier(MPI_Comm comm) { return rtw_barrier(RT_CALLER, comm); }

int MPI_Bcast(void *buf, int count, MPI_Datatype type, int root, MPI_Comm comm) {
    return rtw_bcast(RT_CALLER, buf, count, type, root, comm);
}

int MPI_Reduce(const void *s, void *r, int n, MPI_Datatype t, MPI_Op op, int root,
               MPI_Comm comm) {
    return rtw_reduce(RT_CALLER, s, r, n, t, op, root, comm);
}

int MPI_Allreduce(const void *s, void *r, int n, MPI_Datatype t, MPI_Op op, MPI_Comm comm) {
    return rtw_allreduce(RT_CALLER, s, r, n, t, op, comm);
}

int MPI_Scan(const void *s, void *r, int n, MPI_Datatype t, MPI_Op op, MPI_Comm comm) {
    return rtw_scan(RT_CALLER, s, r, n, t, op, comm);
}

int MPI_Exscan(const void *s, void *r, int n, MPI_Datatype t, MPI_Op op, MPI_Comm comm) {
    return rtw_exscan(RT_CALLER, s, r, n, t, op, comm);
}

int MPI_Reduce_scatter(const void *s, void *r, const int rcounts[], MPI_Datatype t,
                       MPI_Op op, MPI_Comm comm) {
    return rtw_reduce_scatter(RT_CALLER, s, r, rcounts, t, op, comm);
}

int MPI_Gather(const void *s, int sc, MPI_Datatype st, void *r, int rc, MPI_Datatype rt,
               int root, MPI_Comm comm) {
    return rtw_gather(RT_CALLER, s, sc, st, r, rc, rt, root, comm);
}

int MPI_Gatherv(const void *s, int sc, MPI_Datatype st, void *r, const int rcs[],
                const int displs[], MPI_Datatype rt, int root, MPI_Comm comm) {
    return rtw_gatherv(RT_CALLER, s, sc, st, r, rcs, displs, rt, root, comm);
}

int MPI_Scatter(const void *s, int sc, MPI_Datatype st, void *r, int rc, MPI_Datatype rt,
                int root, MPI_Comm comm) {
    return rtw_scatter(RT_CALLER, s, sc, st, r, rc, rt, root, comm);
}

int MPI_Scatterv(const void *s, const int scs[], const int displs[], MPI_Datatype st,
                 void *r, int rc, MPI_Datatype rt, int root, MPI_Comm comm) {
    return rtw_scatterv(RT_CALLER, s, scs, displs, st, r, rc, rt, root, comm);
}

int MPI_Allgather(const void *s, int sc, MPI_Datatype st, void *r, int rc, MPI_Datatype rt,
                  MPI_Comm comm) {
    return rtw_allgather(RT_CALLER, s, sc, st, r, rc, rt, comm);
}

int MPI_Allgatherv(const void *s, int sc, MPI_Datatype st, void *r, const int rcs[],
                   const int displs[], MPI_Datatype rt, MPI_Comm comm) {
    return rtw_allgatherv(RT_CALLER, s, sc, st, r, rcs, displs, rt, comm);
}

int MPI_Alltoall(const void *s, int sc, MPI_Datatype st, void *r, int rc, MPI_Datatype rt,
                 MPI_Comm comm) {
    return rtw_alltoall(RT_CALLER, s, sc, st, r, rc, rt, comm);
}

int MPI_Alltoallv(const void *s, const int scs[], const int sdispls[], MPI_Datatype st,
                  void *r, const int rcs[], const int rdispls[], MPI_Datatype rt,
                  MPI_Comm comm) {
    return rtw_alltoallv(RT_CALLER, s, scs, sdispls, st, r, rcs, rdispls, rt, comm);
}
