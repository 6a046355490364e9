/* racetrack_mpi.h: the seam between the MPI wrappers (racetrack_mpi.c, compiled once per
 * MPI implementation with that implementation's mpicc) and the Rust core
 * (libracetrack_mpi.so, built by cargo without MPI). Nothing here depends on mpi.h: the
 * wrappers normalise handles, constants and statuses before calling the core, and apply
 * what the core decided (a forced match, an edited send buffer) after.
 *
 * Both libraries are preloaded into every rank (LD_PRELOAD); the wrappers' calls to rt_*
 * resolve against the core at load time. Every rt_* function may be called from any
 * thread; only calls made on the thread that called MPI_Init are reported (rt_active()
 * is 0 on the others), so programs using MPI_THREAD_MULTIPLE keep working. */
#ifndef RACETRACK_MPI_H
#define RACETRACK_MPI_H

#include <stdint.h>

/* A field that does not apply to the call. */
#define RT_NONE INT32_MIN
/* MPI_ANY_SOURCE and MPI_ANY_TAG (MPICH: -2 and -1; Open MPI: -1 and -1), normalised. */
#define RT_ANY (-1)
/* MPI_PROC_NULL (MPICH: -1; Open MPI: -2), normalised. */
#define RT_PROC_NULL (-2)
/* MPI_ROOT (intercommunicator collectives), normalised. */
#define RT_ROOT (-3)
/* rt_call.starts: what an MPI_Start started. */
#define RT_STARTS_SEND 1
#define RT_STARTS_RECV 2

/* One MPI call as the core sees it. The wrapper zeroes it, fills the "in" fields, calls
 * rt_start before the PMPI call and rt_stop after it, with the same struct. */
typedef struct rt_call {
    /* ---- in: filled by the wrapper before rt_start ---- */
    const char *name;       /* "MPI_Send" (static string) */
    int32_t peer;           /* destination or source rank in `comm`; RT_ANY, RT_PROC_NULL,
                               RT_ROOT, or RT_NONE */
    int32_t peer_world;     /* the same rank in MPI_COMM_WORLD, or RT_NONE (wildcards,
                               MPI_PROC_NULL, calls without a peer) */
    int32_t tag;            /* the tag, RT_ANY, or RT_NONE */
    int32_t count;          /* elements (send count for collectives), or RT_NONE */
    int32_t root;           /* root of a rooted collective (in `comm`), or RT_NONE */
    int64_t bytes;          /* count * size of datatype, or -1 */
    const char *datatype;   /* "MPI_INT", "MPI_DOUBLE_PRECISION", or "datatype 12" for a
                               derived one (its MPI_Type_c2f); NULL if none. Valid until
                               rt_stop returns. */
    const char *comm;       /* "MPI_COMM_WORLD", "MPI_COMM_SELF", "comm 5" (the 5th
                               other communicator this rank's reports named); NULL if
                               none. Valid until rt_stop returns. */
    const void *send_buf;   /* a send's buffer (`count` elements), or NULL */
    char elem_kind;         /* the send's element type when it is a basic one: 'i' signed
                               integer, 'u' unsigned, 'f' floating point, 'c' character,
                               'b' byte; 0 for anything else (derived types, pairs) */
    int32_t elem_size;      /* bytes per element when elem_kind != 0 (1, 2, 4 or 8) */
    void *caller;           /* the wrapper's return address: the program's call site */
    int32_t source;         /* MPI_Sendrecv(_replace): the receive side's source in `comm`
                               (`peer` is the destination); RT_ANY, RT_PROC_NULL, or
                               RT_NONE for other calls */
    int32_t starts;         /* MPI_Start: RT_STARTS_SEND when it starts a persistent send
                               (a message, as MPI_Isend), RT_STARTS_RECV a persistent
                               receive (its completion reports the match, as MPI_Irecv's);
                               RT_NONE for other calls, or a request not seen created */
    const int64_t *awaits;  /* Wait, Waitall, Waitany, Waitsome, Request_free: the ids
                               (MPI_Request_c2f) of the requests given, valid until
                               rt_start returns; NULL for other calls */
    const unsigned char *awaits_live; /* per request: 0 if it was MPI_REQUEST_NULL */
    int32_t awaits_count;   /* how many requests, or RT_NONE */

    /* ---- out: set by rt_start, applied by the wrapper ---- */
    int32_t forced_source;  /* RT_NONE, or the source (in `comm`) a wildcard receive or
                               probe must match instead of MPI_ANY_SOURCE */
    int32_t forced_tag;     /* RT_NONE, or the tag it must match instead of MPI_ANY_TAG */
    const void *edited_buf; /* NULL, or the content to send instead of send_buf (same
                               count and datatype), valid until rt_stop returns */

    /* ---- in, after the call: filled by the wrapper before rt_stop where they apply ---- */
    int32_t new_rank;       /* Comm_split/dup/create: this rank in the new communicator,
                               or RT_NONE (MPI_COMM_NULL) */
    int32_t new_leader;     /* its rank 0's rank in MPI_COMM_WORLD, or RT_NONE */
    const char *new_comm;   /* the new communicator's name ("comm 7", as `comm` will name
                               it), or NULL */
    int32_t found;          /* Test, Testany, Testall, Testsome, Iprobe: 1 if the call found
                               something (its flag, or an outcount above 0), else 0; RT_NONE
                               for other calls. A run of polls that found nothing is one
                               step (see rt_stop). */

    /* ---- out, replaying a log (RACETRACK_REPLAY): set by rt_start ---- */
    int32_t forced_found;   /* a poll (Test*, Iprobe): RT_NONE (call it), 0 (it must find
                               nothing: do not call MPI, return "nothing"), or 1 (it must
                               find: call the blocking form, Wait*, Probe) */
    int32_t forced_count;   /* RT_NONE, or how many indices forced_indices holds: the
                               requests a Waitany/Testany (1) or Waitsome/Testsome must
                               complete, in order (wait for each) */
    const int32_t *forced_indices; /* valid until rt_stop returns */

    /* ---- the core's own ---- */
    uint64_t core;          /* set by rt_start, read by the other calls; 0 = not reported */
    uint64_t choice;        /* set by rt_start: the call's number + 1 when recording or
                               replaying, else 0 */
} rt_call;

/* After PMPI_Init / PMPI_Init_thread returned: start the agent (as the environment says)
 * for rank `world_rank` of `world_size`. `impl` names the implementation the wrappers were
 * built for ("MPICH 4.0.2", "Open MPI 4.1.4"). Called once. */
void rt_init(int32_t world_rank, int32_t world_size, const char *impl);

/* Nonzero if this call should be reported (a debugger attached or the start hold pending,
 * reporting not switched off by MPI_Pcontrol; or the rank records or replays a log), and
 * this is the MPI_Init thread. Zero: the wrapper calls PMPI directly and reports nothing.
 * One atomic read. */
int rt_active(void);

/* Before the PMPI call: the `start` event (it may hold the rank until the debugger
 * continues), then, for a send, the `send` event with the content (it may hold too, and
 * be edited: then edited_buf is set). For a held wildcard receive or probe, the debugger
 * may force its match: then forced_source / forced_tag are set. */
void rt_start(rt_call *c);

/* After the PMPI call returned `rc`: the `stop` event. A poll that found nothing (`found`
 * 0, rc MPI_SUCCESS), held by nothing, does not end its step: the next identical poll
 * (same call, site and parameters) continues it, and the step's `stop` (with `polls`) is
 * reported when a poll finds something or the rank makes another call. */
void rt_stop(rt_call *c, int32_t rc);

/* A receive or probe of this call matched a message from `source` (in the call's
 * communicator) with `tag` and `bytes` bytes: a `recv` event for receives (not probes),
 * and the match in the `stop` event. Between rt_start and rt_stop. */
void rt_matched(rt_call *c, int32_t source, int32_t tag, int64_t bytes);

/* A Waitany/Testany/Waitsome/Testsome completed the requests at `indices[0 .. n)` (a
 * replay log records which). Between rt_start and rt_stop. */
void rt_indices(rt_call *c, const int32_t *indices, int32_t n);

/* A nonblocking call (Isend, Irecv, ...) created request `request` (MPI_Request_c2f):
 * the core remembers what it was for, to report its completion. Between rt_start and
 * rt_stop. */
void rt_request(rt_call *c, int64_t request);

/* A completion call (Wait, Test, Waitall, ...) `c` completed request `request`
 * (MPI_Request_c2f, taken before the call since MPI frees it); for a receive, its status
 * said `source`, `tag` and `bytes`; `cancelled` if it was cancelled. Reports the `recv`
 * of a completed receive. Between rt_start and rt_stop. */
void rt_completed(rt_call *c, int64_t request, int32_t source, int32_t tag, int64_t bytes,
                  int32_t cancelled);

/* A clock, called from `caller` (its return address), read `t`: what it returns (when
 * recording, `t`, kept; when replaying, the recorded reading). `libc`: 0 for MPI_Wtime
 * (readings by the MPI library itself are neither kept nor replayed), 1 for time() (only
 * the program's own calls, from its executable, are). Called only when rt_active(). */
double rt_clock(double t, const void *caller, int32_t libc);

/* MPI_Pcontrol(level, ...): level 0 stops reporting this rank's calls, 1 resumes, 2 sets
 * `label` (the first variadic argument, a C string) as a mark in the graph. */
void rt_pcontrol(int32_t level, const char *label);

/* In MPI_Finalize, before PMPI_Finalize: flush every event to the debugger. */
void rt_finalize(void);

/* Where the MPI_Init thread is: 1 when it is inside an MPI call the wrappers do not
 * cover (its name, as the C binding spells it, into `name` of `cap` bytes, and the
 * program's call site, a return address, into `*site`, NULL if unknown), 2 (with the
 * same) when it is inside a wrapper, 0 when it is not in MPI, -1 when it could not be
 * sampled. Called on the core's own thread, never on the MPI_Init thread. */
typedef int32_t (*rt_sample_fn)(char *name, int32_t cap, void **site);

/* Whether rt_init started a core for this rank (a debugger to report to). */
int32_t rt_has_core(void);

/* After rt_init, on the MPI_Init thread (kernel thread id `tid`): the wrappers can
 * sample it (sample.c), with signal `sig`. Not called when sampling is off. */
void rt_sampler(rt_sample_fn sample, int32_t tid, int32_t sig);

#endif
