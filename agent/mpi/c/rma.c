/* rma.c: one-sided communication. A window's calls name it in `comm` as "win N", N
 * counting the windows this rank's reports named (created ones at their creation, so
 * ranks that create windows together agree on N); its creation reports the real
 * communicator. A call with a target reports it as the peer (a rank of the window's
 * group, with its world rank), and Put, Get and Accumulate the origin's data. The
 * debugger does not model how these synchronize: they never count as waiting for
 * another rank. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "wrap.h"

/* A window's number and, once a call named a target, the world ranks of its group's
 * ranks (NULL until then: a Put per element would otherwise build two groups each). */
struct win_num {
    MPI_Win win;
    int n;
    int size;
    int *world;
};
static struct win_num *wins;
static size_t wins_len, wins_cap;
static int win_next = 1;
/* Win_free may run on any thread, reports on the MPI_Init thread. */
static pthread_mutex_t wins_lock = PTHREAD_MUTEX_INITIALIZER;

/* `win`'s entry, made if it has none yet; NULL when out of memory. Under wins_lock. */
static struct win_num *win_entry(MPI_Win win) {
    for (size_t i = 0; i < wins_len; i++)
        if (wins[i].win == win) return &wins[i];
    if (wins_len == wins_cap) {
        size_t cap = wins_cap ? 2 * wins_cap : 8;
        struct win_num *grown = realloc(wins, cap * sizeof *grown);
        if (!grown) return NULL;
        wins = grown;
        wins_cap = cap;
    }
    wins[wins_len] = (struct win_num){win, win_next++, 0, NULL};
    return &wins[wins_len++];
}

/* `win`'s number, given one if it has none yet; 0 when out of memory. */
static int win_number(MPI_Win win) {
    pthread_mutex_lock(&wins_lock);
    struct win_num *e = win_entry(win);
    int n = e ? e->n : 0;
    pthread_mutex_unlock(&wins_lock);
    return n;
}

static void forget_win(MPI_Win win) {
    pthread_mutex_lock(&wins_lock);
    for (size_t i = 0; i < wins_len; i++)
        if (wins[i].win == win) {
            free(wins[i].world);
            wins[i] = wins[--wins_len];
            break;
        }
    pthread_mutex_unlock(&wins_lock);
}

static void win_begin(wcall *w, const char *name, void *caller, MPI_Win win) {
    wc_begin(w, name, caller);
    int n = win == MPI_WIN_NULL ? 0 : win_number(win);
    if (n) snprintf(w->comm_buf, sizeof w->comm_buf, "win %d", n);
    else snprintf(w->comm_buf, sizeof w->comm_buf, "win ?");
    w->c.comm = w->comm_buf;
}

/* The world ranks of `win`'s group into `e` (left NULL on failure). */
static void fill_world(struct win_num *e, MPI_Win win) {
    MPI_Group group, world;
    int n = 0;
    if (PMPI_Win_get_group(win, &group) != MPI_SUCCESS) return;
    PMPI_Comm_group(MPI_COMM_WORLD, &world);
    PMPI_Group_size(group, &n);
    int *ranks = n > 0 ? malloc(2 * (size_t)n * sizeof(int)) : NULL;
    if (ranks) {
        for (int i = 0; i < n; i++) ranks[i] = i;
        PMPI_Group_translate_ranks(group, n, ranks, world, ranks + n);
        memmove(ranks, ranks + n, (size_t)n * sizeof(int));
        e->world = ranks;
        e->size = n;
    }
    PMPI_Group_free(&group);
    PMPI_Group_free(&world);
}

/* Target `rank` of `win`'s group as the peer, with its world rank. */
static void win_peer(wcall *w, MPI_Win win, int rank) {
    w->c.peer = rt_norm_rank(rank);
    if (rank < 0 || win == MPI_WIN_NULL) return;
    pthread_mutex_lock(&wins_lock);
    struct win_num *e = win_entry(win);
    if (e && !e->world) fill_world(e, win);
    if (e && e->world && rank < e->size && e->world[rank] != MPI_UNDEFINED)
        w->c.peer_world = e->world[rank];
    pthread_mutex_unlock(&wins_lock);
}

/* Win_create and Win_allocate: the communicator, the bytes this rank exposes, and the
 * window named after the call (its first report). */
static int created(wcall *w, int rc, MPI_Win win) {
    if (rc == MPI_SUCCESS) win_number(win);
    rt_stop(&w->c, rc);
    return rc;
}

int rtw_win_create(void *caller, void *base, MPI_Aint size, int disp, MPI_Info info,
                   MPI_Comm comm, MPI_Win *win) {
    if (!rt_active()) return PMPI_Win_create(base, size, disp, info, comm, win);
    wcall w;
    wc_begin(&w, "MPI_Win_create", caller);
    wc_comm(&w, comm);
    w.c.bytes = size;
    rt_start(&w.c);
    int rc = PMPI_Win_create(base, size, disp, info, comm, win);
    return created(&w, rc, *win);
}

int rtw_win_allocate(void *caller, MPI_Aint size, int disp, MPI_Info info, MPI_Comm comm,
                     void *base, MPI_Win *win) {
    if (!rt_active()) return PMPI_Win_allocate(size, disp, info, comm, base, win);
    wcall w;
    wc_begin(&w, "MPI_Win_allocate", caller);
    wc_comm(&w, comm);
    w.c.bytes = size;
    rt_start(&w.c);
    int rc = PMPI_Win_allocate(size, disp, info, comm, base, win);
    return created(&w, rc, *win);
}

int rtw_win_free(void *caller, MPI_Win *win) {
    if (!rt_active()) {
        /* Even unreported: a freed handle may be reused by the next window. */
        forget_win(*win);
        return PMPI_Win_free(win);
    }
    wcall w;
    win_begin(&w, "MPI_Win_free", caller, *win);
    forget_win(*win);
    rt_start(&w.c);
    int rc = PMPI_Win_free(win);
    rt_stop(&w.c, rc);
    return rc;
}

/* The calls that synchronize a window with no target: its name only. */
static const char *const SYNC_NAMES[] = {"MPI_Win_fence", "MPI_Win_lock_all",
                                         "MPI_Win_unlock_all", "MPI_Win_flush_all",
                                         "MPI_Win_complete", "MPI_Win_wait"};

static int psync(enum rt_win_sync k, int assert_, MPI_Win win) {
    switch (k) {
    case RT_FENCE: return PMPI_Win_fence(assert_, win);
    case RT_LOCK_ALL: return PMPI_Win_lock_all(assert_, win);
    case RT_UNLOCK_ALL: return PMPI_Win_unlock_all(win);
    case RT_FLUSH_ALL: return PMPI_Win_flush_all(win);
    case RT_COMPLETE: return PMPI_Win_complete(win);
    default: return PMPI_Win_wait(win);
    }
}

int rtw_win_sync(void *caller, enum rt_win_sync k, int assert_, MPI_Win win) {
    if (!rt_active()) return psync(k, assert_, win);
    wcall w;
    win_begin(&w, SYNC_NAMES[k], caller, win);
    rt_start(&w.c);
    int rc = psync(k, assert_, win);
    rt_stop(&w.c, rc);
    return rc;
}

/* Lock, unlock and flush of one target. */
static const char *const TARGET_NAMES[] = {"MPI_Win_lock", "MPI_Win_unlock", "MPI_Win_flush"};

static int ptarget(enum rt_win_target k, int type, int rank, int assert_, MPI_Win win) {
    switch (k) {
    case RT_LOCK: return PMPI_Win_lock(type, rank, assert_, win);
    case RT_UNLOCK: return PMPI_Win_unlock(rank, win);
    default: return PMPI_Win_flush(rank, win);
    }
}

int rtw_win_target(void *caller, enum rt_win_target k, int type, int rank, int assert_,
                   MPI_Win win) {
    if (!rt_active()) return ptarget(k, type, rank, assert_, win);
    wcall w;
    win_begin(&w, TARGET_NAMES[k], caller, win);
    win_peer(&w, win, rank);
    rt_start(&w.c);
    int rc = ptarget(k, type, rank, assert_, win);
    rt_stop(&w.c, rc);
    return rc;
}

/* Post and Start: the size of the group they name, as the count. */
int rtw_win_group(void *caller, int start, MPI_Group group, int assert_, MPI_Win win) {
    if (!rt_active())
        return start ? PMPI_Win_start(group, assert_, win) : PMPI_Win_post(group, assert_, win);
    wcall w;
    int n = 0;
    win_begin(&w, start ? "MPI_Win_start" : "MPI_Win_post", caller, win);
    if (PMPI_Group_size(group, &n) == MPI_SUCCESS) w.c.count = n;
    rt_start(&w.c);
    int rc = start ? PMPI_Win_start(group, assert_, win) : PMPI_Win_post(group, assert_, win);
    rt_stop(&w.c, rc);
    return rc;
}

/* Put, Get, Accumulate (`op` its only): the target and the origin's data. */
static const char *const RMA_NAMES[] = {"MPI_Put", "MPI_Get", "MPI_Accumulate"};

static int prma(enum rt_rma k, const void *o, int oc, MPI_Datatype ot, int target,
                MPI_Aint disp, int tc, MPI_Datatype tt, MPI_Op op, MPI_Win win) {
    switch (k) {
    case RT_PUT: return PMPI_Put(o, oc, ot, target, disp, tc, tt, win);
    case RT_GET: return PMPI_Get((void *)o, oc, ot, target, disp, tc, tt, win);
    default: return PMPI_Accumulate(o, oc, ot, target, disp, tc, tt, op, win);
    }
}

int rtw_rma(void *caller, enum rt_rma k, const void *o, int oc, MPI_Datatype ot, int target,
            MPI_Aint disp, int tc, MPI_Datatype tt, MPI_Op op, MPI_Win win) {
    if (!rt_active()) return prma(k, o, oc, ot, target, disp, tc, tt, op, win);
    wcall w;
    win_begin(&w, RMA_NAMES[k], caller, win);
    win_peer(&w, win, target);
    wc_data(&w, ot, oc);
    rt_start(&w.c);
    int rc = prma(k, o, oc, ot, target, disp, tc, tt, op, win);
    rt_stop(&w.c, rc);
    return rc;
}

/* ---- the C entry points ---- */

int MPI_Win_create(void *base, MPI_Aint size, int disp, MPI_Info info, MPI_Comm comm,
                   MPI_Win *win) {
    return rtw_win_create(RT_CALLER, base, size, disp, info, comm, win);
}

int MPI_Win_allocate(MPI_Aint size, int disp, MPI_Info info, MPI_Comm comm, void *base,
                     MPI_Win *win) {
    return rtw_win_allocate(RT_CALLER, size, disp, info, comm, base, win);
}

int MPI_Win_free(MPI_Win *win) { return rtw_win_free(RT_CALLER, win); }

int MPI_Win_fence(int assert_, MPI_Win win) {
    return rtw_win_sync(RT_CALLER, RT_FENCE, assert_, win);
}
int MPI_Win_lock_all(int assert_, MPI_Win win) {
    return rtw_win_sync(RT_CALLER, RT_LOCK_ALL, assert_, win);
}
int MPI_Win_unlock_all(MPI_Win win) { return rtw_win_sync(RT_CALLER, RT_UNLOCK_ALL, 0, win); }
int MPI_Win_flush_all(MPI_Win win) { return rtw_win_sync(RT_CALLER, RT_FLUSH_ALL, 0, win); }
int MPI_Win_complete(MPI_Win win) { return rtw_win_sync(RT_CALLER, RT_COMPLETE, 0, win); }
int MPI_Win_wait(MPI_Win win) { return rtw_win_sync(RT_CALLER, RT_WAIT, 0, win); }

int MPI_Win_lock(int type, int rank, int assert_, MPI_Win win) {
    return rtw_win_target(RT_CALLER, RT_LOCK, type, rank, assert_, win);
}
int MPI_Win_unlock(int rank, MPI_Win win) {
    return rtw_win_target(RT_CALLER, RT_UNLOCK, 0, rank, 0, win);
}
int MPI_Win_flush(int rank, MPI_Win win) {
    return rtw_win_target(RT_CALLER, RT_FLUSH, 0, rank, 0, win);
}

int MPI_Win_post(MPI_Group group, int assert_, MPI_Win win) {
    return rtw_win_group(RT_CALLER, 0, group, assert_, win);
}
int MPI_Win_start(MPI_Group group, int assert_, MPI_Win win) {
    return rtw_win_group(RT_CALLER, 1, group, assert_, win);
}

int MPI_Put(const void *o, int oc, MPI_Datatype ot, int target, MPI_Aint disp, int tc,
            MPI_Datatype tt, MPI_Win win) {
    return rtw_rma(RT_CALLER, RT_PUT, o, oc, ot, target, disp, tc, tt, MPI_OP_NULL, win);
}

int MPI_Get(void *o, int oc, MPI_Datatype ot, int target, MPI_Aint disp, int tc,
            MPI_Datatype tt, MPI_Win win) {
    return rtw_rma(RT_CALLER, RT_GET, o, oc, ot, target, disp, tc, tt, MPI_OP_NULL, win);
}

int MPI_Accumulate(const void *o, int oc, MPI_Datatype ot, int target, MPI_Aint disp,
                   int tc, MPI_Datatype tt, MPI_Op op, MPI_Win win) {
    return rtw_rma(RT_CALLER, RT_ACCUMULATE, o, oc, ot, target, disp, tc, tt, op, win);
}
