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

#include "wrap.h"

struct win_num {
    MPI_Win win;
    int n;
};
static struct win_num *wins;
static size_t wins_len, wins_cap;
static int win_next = 1;
static pthread_mutex_t wins_lock = PTHREAD_MUTEX_INITIALIZER;

/* `win`'s number, given one if it has none yet; 0 when out of memory. */
static int win_number(MPI_Win win) {
    int n = 0;
    pthread_mutex_lock(&wins_lock);
    for (size_t i = 0; i < wins_len && !n; i++)
        if (wins[i].win == win) n = wins[i].n;
    if (!n && wins_len == wins_cap) {
        size_t cap = wins_cap ? 2 * wins_cap : 8;
        struct win_num *grown = realloc(wins, cap * sizeof *grown);
        if (grown) {
            wins = grown;
            wins_cap = cap;
        }
    }
    if (!n && wins_len < wins_cap) {
        n = win_next++;
        wins[wins_len++] = (struct win_num){win, n};
    }
    pthread_mutex_unlock(&wins_lock);
    return n;
}

static void forget_win(MPI_Win win) {
    pthread_mutex_lock(&wins_lock);
    for (size_t i = 0; i < wins_len; i++)
        if (wins[i].win == win) {
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

/* Target `rank` of `win`'s group as the peer, with its world rank. */
static void win_peer(wcall *w, MPI_Win win, int rank) {
    w->c.peer = rt_norm_rank(rank);
    if (rank < 0) return;
    MPI_Group group, world;
    int out = MPI_UNDEFINED;
    if (PMPI_Win_get_group(win, &group) != MPI_SUCCESS) return;
    PMPI_Comm_group(MPI_COMM_WORLD, &world);
    PMPI_Group_translate_ranks(group, 1, &rank, world, &out);
    PMPI_Group_free(&group);
    PMPI_Group_free(&world);
    if (out != MPI_UNDEFINED) w->c.peer_world = out;
}

/* Win_create and Win_allocate: the communicator, the bytes this rank exposes, and the
 * window named after the call (its first report). */
static int created(wcall *w, int rc, MPI_Win win) {
    if (rc == MPI_SUCCESS) win_number(win);
    rt_stop(&w->c, rc);
    return rc;
}

int MPI_Win_create(void *base, MPI_Aint size, int disp, MPI_Info info, MPI_Comm comm,
                   MPI_Win *win) {
    if (!rt_active()) return PMPI_Win_create(base, size, disp, info, comm, win);
    wcall w;
    wc_begin(&w, "MPI_Win_create", RT_CALLER);
    wc_comm(&w, comm);
    w.c.bytes = size;
    rt_start(&w.c);
    int rc = PMPI_Win_create(base, size, disp, info, comm, win);
    return created(&w, rc, *win);
}

int MPI_Win_allocate(MPI_Aint size, int disp, MPI_Info info, MPI_Comm comm, void *base,
                     MPI_Win *win) {
    if (!rt_active()) return PMPI_Win_allocate(size, disp, info, comm, base, win);
    wcall w;
    wc_begin(&w, "MPI_Win_allocate", RT_CALLER);
    wc_comm(&w, comm);
    w.c.bytes = size;
    rt_start(&w.c);
    int rc = PMPI_Win_allocate(size, disp, info, comm, base, win);
    return created(&w, rc, *win);
}

int MPI_Win_free(MPI_Win *win) {
    if (!rt_active()) {
        /* Even unreported: a freed handle may be reused by the next window. */
        forget_win(*win);
        return PMPI_Win_free(win);
    }
    wcall w;
    win_begin(&w, "MPI_Win_free", RT_CALLER, *win);
    forget_win(*win);
    rt_start(&w.c);
    int rc = PMPI_Win_free(win);
    rt_stop(&w.c, rc);
    return rc;
}

/* The calls that synchronize a window with no target: its name only. */
enum sync { S_FENCE, S_LOCK_ALL, S_UNLOCK_ALL, S_FLUSH_ALL, S_COMPLETE, S_WAIT };
static const char *const SYNC_NAMES[] = {"MPI_Win_fence", "MPI_Win_lock_all",
                                         "MPI_Win_unlock_all", "MPI_Win_flush_all",
                                         "MPI_Win_complete", "MPI_Win_wait"};

static int psync(enum sync k, int assert_, MPI_Win win) {
    switch (k) {
    case S_FENCE: return PMPI_Win_fence(assert_, win);
    case S_LOCK_ALL: return PMPI_Win_lock_all(assert_, win);
    case S_UNLOCK_ALL: return PMPI_Win_unlock_all(win);
    case S_FLUSH_ALL: return PMPI_Win_flush_all(win);
    case S_COMPLETE: return PMPI_Win_complete(win);
    default: return PMPI_Win_wait(win);
    }
}

static int sync_call(void *caller, enum sync k, int assert_, MPI_Win win) {
    if (!rt_active()) return psync(k, assert_, win);
    wcall w;
    win_begin(&w, SYNC_NAMES[k], caller, win);
    rt_start(&w.c);
    int rc = psync(k, assert_, win);
    rt_stop(&w.c, rc);
    return rc;
}

int MPI_Win_fence(int assert_, MPI_Win win) {
    return sync_call(RT_CALLER, S_FENCE, assert_, win);
}
int MPI_Win_lock_all(int assert_, MPI_Win win) {
    return sync_call(RT_CALLER, S_LOCK_ALL, assert_, win);
}
int MPI_Win_unlock_all(MPI_Win win) { return sync_call(RT_CALLER, S_UNLOCK_ALL, 0, win); }
int MPI_Win_flush_all(MPI_Win win) { return sync_call(RT_CALLER, S_FLUSH_ALL, 0, win); }
int MPI_Win_complete(MPI_Win win) { return sync_call(RT_CALLER, S_COMPLETE, 0, win); }
int MPI_Win_wait(MPI_Win win) { return sync_call(RT_CALLER, S_WAIT, 0, win); }

/* Lock, unlock and flush of one target. */
enum target { T_LOCK, T_UNLOCK, T_FLUSH };
static const char *const TARGET_NAMES[] = {"MPI_Win_lock", "MPI_Win_unlock", "MPI_Win_flush"};

static int ptarget(enum target k, int type, int rank, int assert_, MPI_Win win) {
    switch (k) {
    case T_LOCK: return PMPI_Win_lock(type, rank, assert_, win);
    case T_UNLOCK: return PMPI_Win_unlock(rank, win);
    default: return PMPI_Win_flush(rank, win);
    }
}

static int target_call(void *caller, enum target k, int type, int rank, int assert_,
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

int MPI_Win_lock(int type, int rank, int assert_, MPI_Win win) {
    return target_call(RT_CALLER, T_LOCK, type, rank, assert_, win);
}
int MPI_Win_unlock(int rank, MPI_Win win) {
    return target_call(RT_CALLER, T_UNLOCK, 0, rank, 0, win);
}
int MPI_Win_flush(int rank, MPI_Win win) {
    return target_call(RT_CALLER, T_FLUSH, 0, rank, 0, win);
}

/* Post and Start: the size of the group they name, as the count. */
static int group_call(void *caller, int start, MPI_Group group, int assert_, MPI_Win win) {
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

int MPI_Win_post(MPI_Group group, int assert_, MPI_Win win) {
    return group_call(RT_CALLER, 0, group, assert_, win);
}
int MPI_Win_start(MPI_Group group, int assert_, MPI_Win win) {
    return group_call(RT_CALLER, 1, group, assert_, win);
}

/* Put, Get, Accumulate: the target and the origin's data. */
static void access_fields(wcall *w, const char *name, void *caller, MPI_Win win, int target,
                          MPI_Datatype type, int count) {
    win_begin(w, name, caller, win);
    win_peer(w, win, target);
    wc_data(w, type, count);
}

int MPI_Put(const void *o, int oc, MPI_Datatype ot, int target, MPI_Aint disp, int tc,
            MPI_Datatype tt, MPI_Win win) {
    if (!rt_active()) return PMPI_Put(o, oc, ot, target, disp, tc, tt, win);
    wcall w;
    access_fields(&w, "MPI_Put", RT_CALLER, win, target, ot, oc);
    rt_start(&w.c);
    int rc = PMPI_Put(o, oc, ot, target, disp, tc, tt, win);
    rt_stop(&w.c, rc);
    return rc;
}

int MPI_Get(void *o, int oc, MPI_Datatype ot, int target, MPI_Aint disp, int tc,
            MPI_Datatype tt, MPI_Win win) {
    if (!rt_active()) return PMPI_Get(o, oc, ot, target, disp, tc, tt, win);
    wcall w;
    access_fields(&w, "MPI_Get", RT_CALLER, win, target, ot, oc);
    rt_start(&w.c);
    int rc = PMPI_Get(o, oc, ot, target, disp, tc, tt, win);
    rt_stop(&w.c, rc);
    return rc;
}

int MPI_Accumulate(const void *o, int oc, MPI_Datatype ot, int target, MPI_Aint disp,
                   int tc, MPI_Datatype tt, MPI_Op op, MPI_Win win) {
    if (!rt_active()) return PMPI_Accumulate(o, oc, ot, target, disp, tc, tt, op, win);
    wcall w;
    access_fields(&w, "MPI_Accumulate", RT_CALLER, win, target, ot, oc);
    rt_start(&w.c);
    int rc = PMPI_Accumulate(o, oc, ot, target, disp, tc, tt, op, win);
    rt_stop(&w.c, rc);
    return rc;
}
