/* wrap.h: private to the MPI wrappers (*.c here). The helpers every wrapper uses to turn
 * its arguments into an rt_call (names, normalised ranks and tags, sizes) and to report
 * matches and completions, plus the internal entry points (rtw_*) that take the call
 * site as an argument, so the C and the Fortran symbols share one implementation and a
 * call is reported once whichever binding made it. */
#ifndef RACETRACK_WRAP_H
#define RACETRACK_WRAP_H

#include <mpi.h>
#include <stdint.h>

#include "racetrack_mpi.h"

#define RT_HIDDEN __attribute__((visibility("hidden")))
/* The program's call site, as seen from an exported wrapper. */
#define RT_CALLER __builtin_return_address(0)

/* Requests and statuses kept on the wrapper's stack up to this many; more are malloc'd. */
#define RT_SMALL 32

/* An rt_call plus the storage of the names it points to: the wrapper's stack frame keeps
 * them valid until rt_stop returns. */
typedef struct wcall {
    rt_call c;
    char comm_buf[24];
    char type_buf[24];
    char new_comm_buf[24];
} wcall;

/* The implementation the wrappers were compiled for, e.g. "MPICH 4.0.2". */
RT_HIDDEN const char *rtw_impl(void);

/* The program's call site for a wrapper's return address `caller` (the same address
 * unless an MPI library, e.g. MPICH's Fortran bindings, made the call). */
RT_HIDDEN void *rt_program_site(void *caller);
/* Whether `pc` is inside a library that calls MPI on the program's behalf (MPICH's and
 * Open MPI's Fortran bindings). */
RT_HIDDEN int rt_in_shim(uintptr_t pc);
/* Start the sampler of the rank's unreported calls (sample.c), on the MPI_Init thread. */
RT_HIDDEN void rt_sample_setup(void);

/* Zero `w` and set every optional field to "does not apply"; the call site from
 * `caller`, the wrapper's return address. */
RT_HIDDEN void wc_begin(wcall *w, const char *name, void *caller);
RT_HIDDEN void wc_comm(wcall *w, MPI_Comm comm);
/* `rank` of `comm` as the peer, with its world rank. */
RT_HIDDEN void wc_peer(wcall *w, MPI_Comm comm, int rank);
/* `count` elements of `type`: count, datatype name, bytes, element kind and size. */
RT_HIDDEN void wc_data(wcall *w, MPI_Datatype type, int count);
RT_HIDDEN void wc_root(wcall *w, int root);
/* A new communicator (or MPI_COMM_NULL) made by the call. */
RT_HIDDEN void wc_new_comm(wcall *w, MPI_Comm comm);

RT_HIDDEN int32_t rt_norm_rank(int rank);
RT_HIDDEN int32_t rt_norm_tag(int tag);
/* The source or tag to pass to PMPI: the forced one when the core set it, else the
 * program's own. RT_ANY never reaches MPI. */
RT_HIDDEN int rt_forced_source(const wcall *w, int source);
RT_HIDDEN int rt_forced_tag(const wcall *w, int tag);

/* Report the message a receive or probe matched (nothing for MPI_PROC_NULL). */
RT_HIDDEN void wc_matched(wcall *w, const MPI_Status *st);
/* After a receive returned `rc`: its match, when it has one (success, or a message
 * truncated: MPI still fills the status with its source and tag). */
RT_HIDDEN void wc_received(wcall *w, int rc, const MPI_Status *st);
/* Report that request `id` completed with status `st`. */
RT_HIDDEN void wc_completed(wcall *w, int64_t id, const MPI_Status *st);

/* Forget what is cached about `comm` (before it is freed: its handle may be reused). */
RT_HIDDEN void rt_forget_comm(MPI_Comm comm);

/* Edited content of a nonblocking send must outlive rt_stop: the wrappers copy it and
 * free the copy when its request completes, or, when that completion is never seen (the
 * request was given to MPI_Request_free, or completed in a call not wrapped), when its
 * handle is reused or after MPI_Finalize. */
RT_HIDDEN const void *rt_keep_edit(const wcall *w);
RT_HIDDEN void rt_own_edit(const void *copy, int64_t request);
RT_HIDDEN void rt_release_edit(int64_t request);
RT_HIDDEN void rt_release_all_edits(void);
/* A nonblocking call created request `id`: rt_request, after dropping what was kept for
 * an earlier request with the same handle (MPI reuses a handle only once its request
 * completed and was freed, so that one's send is over). */
RT_HIDDEN void wc_request(wcall *w, int64_t id);

/* Collectives' shared arithmetic (coll.c): the ranks whose counts a vector form takes
 * (the remote group's, for an intercommunicator), their sum (saturated), and whether
 * this rank is a rooted collective's root. */
RT_HIDDEN int rt_coll_size(MPI_Comm comm);
RT_HIDDEN int rt_sum(const int counts[], int n);
RT_HIDDEN int rt_is_root(MPI_Comm comm, int root);

/* ---- internal entry points: one per covered call, taking the call site ---- */
enum rt_send_mode { RT_SEND, RT_SSEND, RT_BSEND, RT_RSEND };

RT_HIDDEN int rtw_send(void *caller, enum rt_send_mode m, const void *buf, int count,
                       MPI_Datatype type, int dest, int tag, MPI_Comm comm);
RT_HIDDEN int rtw_isend(void *caller, int sync, const void *buf, int count,
                        MPI_Datatype type, int dest, int tag, MPI_Comm comm,
                        MPI_Request *req);
RT_HIDDEN int rtw_recv(void *caller, void *buf, int count, MPI_Datatype type, int source,
                       int tag, MPI_Comm comm, MPI_Status *st);
RT_HIDDEN int rtw_irecv(void *caller, void *buf, int count, MPI_Datatype type, int source,
                        int tag, MPI_Comm comm, MPI_Request *req);
RT_HIDDEN int rtw_sendrecv(void *caller, const void *sbuf, int scount, MPI_Datatype stype,
                           int dest, int stag, void *rbuf, int rcount, MPI_Datatype rtype,
                           int source, int rtag, MPI_Comm comm, MPI_Status *st);
RT_HIDDEN int rtw_sendrecv_replace(void *caller, void *buf, int count, MPI_Datatype type,
                                   int dest, int stag, int source, int rtag, MPI_Comm comm,
                                   MPI_Status *st);
RT_HIDDEN int rtw_probe(void *caller, int source, int tag, MPI_Comm comm, MPI_Status *st);
RT_HIDDEN int rtw_iprobe(void *caller, int source, int tag, MPI_Comm comm, int *flag,
                         MPI_Status *st);

RT_HIDDEN int rtw_wait(void *caller, MPI_Request *req, MPI_Status *st);
RT_HIDDEN int rtw_test(void *caller, MPI_Request *req, int *flag, MPI_Status *st);
RT_HIDDEN int rtw_waitall(void *caller, int n, MPI_Request reqs[], MPI_Status sts[]);
RT_HIDDEN int rtw_testall(void *caller, int n, MPI_Request reqs[], int *flag,
                          MPI_Status sts[]);
RT_HIDDEN int rtw_waitany(void *caller, int n, MPI_Request reqs[], int *index,
                          MPI_Status *st);
RT_HIDDEN int rtw_testany(void *caller, int n, MPI_Request reqs[], int *index, int *flag,
                          MPI_Status *st);
RT_HIDDEN int rtw_waitsome(void *caller, int n, MPI_Request reqs[], int *outcount,
                           int indices[], MPI_Status sts[]);
RT_HIDDEN int rtw_testsome(void *caller, int n, MPI_Request reqs[], int *outcount,
                           int indices[], MPI_Status sts[]);

RT_HIDDEN int rtw_barrier(void *caller, MPI_Comm comm);
RT_HIDDEN int rtw_bcast(void *caller, void *buf, int count, MPI_Datatype type, int root,
                        MPI_Comm comm);
RT_HIDDEN int rtw_reduce(void *caller, const void *sbuf, void *rbuf, int count,
                         MPI_Datatype type, MPI_Op op, int root, MPI_Comm comm);
RT_HIDDEN int rtw_allreduce(void *caller, const void *sbuf, void *rbuf, int count,
                            MPI_Datatype type, MPI_Op op, MPI_Comm comm);
RT_HIDDEN int rtw_scan(void *caller, const void *sbuf, void *rbuf, int count,
                       MPI_Datatype type, MPI_Op op, MPI_Comm comm);
RT_HIDDEN int rtw_exscan(void *caller, const void *sbuf, void *rbuf, int count,
                         MPI_Datatype type, MPI_Op op, MPI_Comm comm);
RT_HIDDEN int rtw_reduce_scatter(void *caller, const void *sbuf, void *rbuf,
                                 const int rcounts[], MPI_Datatype type, MPI_Op op,
                                 MPI_Comm comm);
RT_HIDDEN int rtw_gather(void *caller, const void *sbuf, int scount, MPI_Datatype stype,
                         void *rbuf, int rcount, MPI_Datatype rtype, int root,
                         MPI_Comm comm);
RT_HIDDEN int rtw_gatherv(void *caller, const void *sbuf, int scount, MPI_Datatype stype,
                          void *rbuf, const int rcounts[], const int displs[],
                          MPI_Datatype rtype, int root, MPI_Comm comm);
RT_HIDDEN int rtw_scatter(void *caller, const void *sbuf, int scount, MPI_Datatype stype,
                          void *rbuf, int rcount, MPI_Datatype rtype, int root,
                          MPI_Comm comm);
RT_HIDDEN int rtw_scatterv(void *caller, const void *sbuf, const int scounts[],
                           const int displs[], MPI_Datatype stype, void *rbuf, int rcount,
                           MPI_Datatype rtype, int root, MPI_Comm comm);
RT_HIDDEN int rtw_allgather(void *caller, const void *sbuf, int scount, MPI_Datatype stype,
                            void *rbuf, int rcount, MPI_Datatype rtype, MPI_Comm comm);
RT_HIDDEN int rtw_allgatherv(void *caller, const void *sbuf, int scount,
                             MPI_Datatype stype, void *rbuf, const int rcounts[],
                             const int displs[], MPI_Datatype rtype, MPI_Comm comm);
RT_HIDDEN int rtw_alltoall(void *caller, const void *sbuf, int scount, MPI_Datatype stype,
                           void *rbuf, int rcount, MPI_Datatype rtype, MPI_Comm comm);
RT_HIDDEN int rtw_alltoallv(void *caller, const void *sbuf, const int scounts[],
                            const int sdispls[], MPI_Datatype stype, void *rbuf,
                            const int rcounts[], const int rdispls[], MPI_Datatype rtype,
                            MPI_Comm comm);

/* Nonblocking collectives (nbcoll.c). */
RT_HIDDEN int rtw_ibarrier(void *caller, MPI_Comm comm, MPI_Request *req);
RT_HIDDEN int rtw_ibcast(void *caller, void *buf, int count, MPI_Datatype type, int root,
                         MPI_Comm comm, MPI_Request *req);
RT_HIDDEN int rtw_ireduce(void *caller, const void *sbuf, void *rbuf, int count,
                          MPI_Datatype type, MPI_Op op, int root, MPI_Comm comm,
                          MPI_Request *req);
RT_HIDDEN int rtw_iallreduce(void *caller, const void *sbuf, void *rbuf, int count,
                             MPI_Datatype type, MPI_Op op, MPI_Comm comm, MPI_Request *req);
/* (Scan: ex 0; Exscan: ex 1.) */
RT_HIDDEN int rtw_iscan(void *caller, int ex, const void *s, void *r, int n, MPI_Datatype t,
                        MPI_Op op, MPI_Comm comm, MPI_Request *req);
RT_HIDDEN int rtw_ireduce_scatter(void *caller, const void *s, void *r, const int rcounts[],
                                  MPI_Datatype t, MPI_Op op, MPI_Comm comm,
                                  MPI_Request *req);
RT_HIDDEN int rtw_igather(void *caller, const void *s, int sc, MPI_Datatype st, void *r,
                          int rc, MPI_Datatype rt, int root, MPI_Comm comm,
                          MPI_Request *req);
RT_HIDDEN int rtw_igatherv(void *caller, const void *s, int sc, MPI_Datatype st, void *r,
                           const int rcs[], const int displs[], MPI_Datatype rt, int root,
                           MPI_Comm comm, MPI_Request *req);
RT_HIDDEN int rtw_iscatter(void *caller, const void *s, int sc, MPI_Datatype st, void *r,
                           int rc, MPI_Datatype rt, int root, MPI_Comm comm,
                           MPI_Request *req);
RT_HIDDEN int rtw_iscatterv(void *caller, const void *s, const int scs[],
                            const int displs[], MPI_Datatype st, void *r, int rc,
                            MPI_Datatype rt, int root, MPI_Comm comm, MPI_Request *req);
RT_HIDDEN int rtw_iallgather(void *caller, const void *s, int sc, MPI_Datatype st, void *r,
                             int rc, MPI_Datatype rt, MPI_Comm comm, MPI_Request *req);
RT_HIDDEN int rtw_iallgatherv(void *caller, const void *s, int sc, MPI_Datatype st, void *r,
                              const int rcs[], const int displs[], MPI_Datatype rt,
                              MPI_Comm comm, MPI_Request *req);
RT_HIDDEN int rtw_ialltoall(void *caller, const void *s, int sc, MPI_Datatype st, void *r,
                            int rc, MPI_Datatype rt, MPI_Comm comm, MPI_Request *req);
RT_HIDDEN int rtw_ialltoallv(void *caller, const void *s, const int scs[],
                             const int sdispls[], MPI_Datatype st, void *r, const int rcs[],
                             const int rdispls[], MPI_Datatype rt, MPI_Comm comm,
                             MPI_Request *req);

/* Matched probes (mprobe.c). */
RT_HIDDEN int rtw_mprobe(void *caller, int source, int tag, MPI_Comm comm, MPI_Message *m,
                         MPI_Status *st);
RT_HIDDEN int rtw_improbe(void *caller, int source, int tag, MPI_Comm comm, int *flag,
                          MPI_Message *m, MPI_Status *st);
RT_HIDDEN int rtw_mrecv(void *caller, void *buf, int count, MPI_Datatype type,
                        MPI_Message *m, MPI_Status *st);
RT_HIDDEN int rtw_imrecv(void *caller, void *buf, int count, MPI_Datatype type,
                         MPI_Message *m, MPI_Request *req);

/* Persistent requests (persist.c). */
RT_HIDDEN int rtw_send_init(void *caller, enum rt_send_mode m, const void *buf, int count,
                            MPI_Datatype type, int dest, int tag, MPI_Comm comm,
                            MPI_Request *req);
RT_HIDDEN int rtw_recv_init(void *caller, void *buf, int count, MPI_Datatype type,
                            int source, int tag, MPI_Comm comm, MPI_Request *req);
RT_HIDDEN int rtw_start(void *caller, MPI_Request *req);
RT_HIDDEN int rtw_startall(void *caller, int n, MPI_Request reqs[]);
RT_HIDDEN int rtw_request_free(void *caller, MPI_Request *req);

/* One-sided communication (rma.c). */
enum rt_win_sync { RT_FENCE, RT_LOCK_ALL, RT_UNLOCK_ALL, RT_FLUSH_ALL, RT_COMPLETE, RT_WAIT };
enum rt_win_target { RT_LOCK, RT_UNLOCK, RT_FLUSH };
enum rt_rma { RT_PUT, RT_GET, RT_ACCUMULATE };
RT_HIDDEN int rtw_win_create(void *caller, void *base, MPI_Aint size, int disp,
                             MPI_Info info, MPI_Comm comm, MPI_Win *win);
RT_HIDDEN int rtw_win_allocate(void *caller, MPI_Aint size, int disp, MPI_Info info,
                               MPI_Comm comm, void *base, MPI_Win *win);
RT_HIDDEN int rtw_win_free(void *caller, MPI_Win *win);
RT_HIDDEN int rtw_win_sync(void *caller, enum rt_win_sync k, int assert_, MPI_Win win);
/* `type`, `assert_`: Win_lock's only. */
RT_HIDDEN int rtw_win_target(void *caller, enum rt_win_target k, int type, int rank,
                             int assert_, MPI_Win win);
/* Win_start (`start` 1) and Win_post (0). */
RT_HIDDEN int rtw_win_group(void *caller, int start, MPI_Group group, int assert_,
                            MPI_Win win);
/* Put, Get (whose origin buffer is written), Accumulate (`op`: its only). */
RT_HIDDEN int rtw_rma(void *caller, enum rt_rma k, const void *o, int oc, MPI_Datatype ot,
                      int target, MPI_Aint disp, int tc, MPI_Datatype tt, MPI_Op op,
                      MPI_Win win);

RT_HIDDEN int rtw_comm_split(void *caller, MPI_Comm comm, int color, int key,
                             MPI_Comm *out);
RT_HIDDEN int rtw_comm_dup(void *caller, MPI_Comm comm, MPI_Comm *out);
RT_HIDDEN int rtw_comm_create(void *caller, MPI_Comm comm, MPI_Group group, MPI_Comm *out);
RT_HIDDEN int rtw_comm_free(void *caller, MPI_Comm *comm);

RT_HIDDEN int rtw_init(void *caller, int *argc, char ***argv);
RT_HIDDEN int rtw_init_thread(void *caller, int *argc, char ***argv, int required,
                              int *provided);
RT_HIDDEN int rtw_finalize(void *caller);
RT_HIDDEN int rtw_abort(void *caller, MPI_Comm comm, int code);
RT_HIDDEN int rtw_pcontrol(int level, const char *label);

#endif
