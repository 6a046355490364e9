/* persist.c: persistent requests and MPI_Request_free. An *_init call reports what the
 * request will do; MPI_Start reports it again, as the Isend or Irecv it amounts to: a
 * started send is a message (its `send` event, without content: the request is bound to
 * the program's buffer, so an edit could not be applied), a started receive's completion
 * in a Wait or Test reports its match. The requests made while reporting are kept here,
 * by MPI_Request_c2f, until MPI_Request_free. MPI_Startall is reported as one call (its
 * count: the requests), without their messages. */
#include <pthread.h>
#include <stdlib.h>

#include "wrap.h"

/* What a persistent request does. */
struct persist {
    int64_t id;
    int sends;
    int count;
    MPI_Datatype type;
    int peer;
    int tag;
    MPI_Comm comm;
};

static struct persist *table;
static size_t table_len, table_cap;
/* Request_free may run on any thread, reports on the MPI_Init thread. table_len is
 * written under the lock, atomically: Request_free peeks at it without. */
static pthread_mutex_t table_lock = PTHREAD_MUTEX_INITIALIZER;

/* Keep `p` (replacing what an earlier request with its handle did); out of memory: not
 * kept, and its Starts are reported without their message. */
static void keep(const struct persist *p) {
    pthread_mutex_lock(&table_lock);
    size_t i = 0;
    while (i < table_len && table[i].id != p->id) i++;
    if (i == table_len && table_len == table_cap) {
        size_t cap = table_cap ? 2 * table_cap : 16;
        struct persist *grown = realloc(table, cap * sizeof *grown);
        if (grown) {
            table = grown;
            table_cap = cap;
        }
    }
    if (i < table_cap) {
        table[i] = *p;
        if (i == table_len) __atomic_store_n(&table_len, table_len + 1, __ATOMIC_RELAXED);
    }
    pthread_mutex_unlock(&table_lock);
}

static int find(int64_t id, struct persist *out) {
    int found = 0;
    pthread_mutex_lock(&table_lock);
    for (size_t i = 0; i < table_len && !found; i++)
        if (table[i].id == id) {
            *out = table[i];
            found = 1;
        }
    pthread_mutex_unlock(&table_lock);
    return found;
}

static void forget(int64_t id) {
    pthread_mutex_lock(&table_lock);
    for (size_t i = 0; i < table_len; i++)
        if (table[i].id == id) {
            table[i] = table[table_len - 1];
            __atomic_store_n(&table_len, table_len - 1, __ATOMIC_RELAXED);
            break;
        }
    pthread_mutex_unlock(&table_lock);
}

/* The fields of the communication `p` describes. */
static void fields(wcall *w, const struct persist *p) {
    wc_comm(w, p->comm);
    wc_peer(w, p->comm, p->peer);
    w->c.tag = rt_norm_tag(p->tag);
    wc_data(w, p->type, p->count);
}

static const char *const INIT_NAMES[] = {"MPI_Send_init", "MPI_Ssend_init", "MPI_Bsend_init",
                                         "MPI_Rsend_init"};

static int psend_init(enum rt_send_mode m, const void *buf, int count, MPI_Datatype type,
                      int dest, int tag, MPI_Comm comm, MPI_Request *req) {
    switch (m) {
    case RT_SSEND: return PMPI_Ssend_init(buf, count, type, dest, tag, comm, req);
    case RT_BSEND: return PMPI_Bsend_init(buf, count, type, dest, tag, comm, req);
    case RT_RSEND: return PMPI_Rsend_init(buf, count, type, dest, tag, comm, req);
    default: return PMPI_Send_init(buf, count, type, dest, tag, comm, req);
    }
}

/* An *_init call made request `req` for `p`: report it, then keep it. */
static int made(wcall *w, int rc, const MPI_Request *req, struct persist *p) {
    if (rc == MPI_SUCCESS) {
        p->id = MPI_Request_c2f(*req);
        keep(p);
    }
    rt_stop(&w->c, rc);
    return rc;
}

int rtw_send_init(void *caller, enum rt_send_mode m, const void *buf, int count,
                  MPI_Datatype type, int dest, int tag, MPI_Comm comm, MPI_Request *req) {
    if (!rt_active()) return psend_init(m, buf, count, type, dest, tag, comm, req);
    wcall w;
    struct persist p = {0, 1, count, type, dest, tag, comm};
    wc_begin(&w, INIT_NAMES[m], caller);
    fields(&w, &p);
    rt_start(&w.c);
    return made(&w, psend_init(m, buf, count, type, dest, tag, comm, req), req, &p);
}

int rtw_recv_init(void *caller, void *buf, int count, MPI_Datatype type, int source,
                  int tag, MPI_Comm comm, MPI_Request *req) {
    if (!rt_active()) return PMPI_Recv_init(buf, count, type, source, tag, comm, req);
    wcall w;
    struct persist p = {0, 0, count, type, source, tag, comm};
    wc_begin(&w, "MPI_Recv_init", caller);
    fields(&w, &p);
    rt_start(&w.c);
    return made(&w, PMPI_Recv_init(buf, count, type, source, tag, comm, req), req, &p);
}

int rtw_start(void *caller, MPI_Request *req) {
    if (!rt_active()) return PMPI_Start(req);
    wcall w;
    struct persist p;
    int64_t id = *req == MPI_REQUEST_NULL ? 0 : MPI_Request_c2f(*req);
    wc_begin(&w, "MPI_Start", caller);
    if (id && find(id, &p)) {
        fields(&w, &p);
        w.c.starts = p.sends ? RT_STARTS_SEND : RT_STARTS_RECV;
    }
    rt_start(&w.c);
    int rc = PMPI_Start(req);
    if (rc == MPI_SUCCESS && id) wc_request(&w, id);
    rt_stop(&w.c, rc);
    return rc;
}

int rtw_startall(void *caller, int n, MPI_Request reqs[]) {
    if (!rt_active()) return PMPI_Startall(n, reqs);
    wcall w;
    wc_begin(&w, "MPI_Startall", caller);
    w.c.count = n;
    rt_start(&w.c);
    int rc = PMPI_Startall(n, reqs);
    rt_stop(&w.c, rc);
    return rc;
}

/* A freed request's send may still be reading an edited copy (rt_keep_edit): that is
 * released when the handle is reused or after MPI_Finalize, not here. */
int rtw_request_free(void *caller, MPI_Request *req) {
    /* Even unreported: a freed handle may name the next persistent request. An unlocked
     * peek first: with nothing kept, Open MPI's c2f (which may allocate a Fortran index)
     * is not worth calling. */
    if (*req != MPI_REQUEST_NULL && __atomic_load_n(&table_len, __ATOMIC_RELAXED))
        forget(MPI_Request_c2f(*req));
    if (!rt_active()) return PMPI_Request_free(req);
    wcall w;
    wc_begin(&w, "MPI_Request_free", caller);
    /* The request is forgotten: a receive freed before it completed is not counted as
     * posted any more (its completion is never seen). */
    int64_t id = MPI_Request_c2f(*req);
    unsigned char live = *req != MPI_REQUEST_NULL;
    w.c.awaits = &id;
    w.c.awaits_live = &live;
    w.c.awaits_count = 1;
    rt_start(&w.c);
    int rc = PMPI_Request_free(req);
    rt_stop(&w.c, rc);
    return rc;
}

/* ---- the C entry points ---- */

int MPI_Send_init(const void *buf, int count, MPI_Datatype type, int dest, int tag,
                  MPI_Comm comm, MPI_Request *req) {
    return rtw_send_init(RT_CALLER, RT_SEND, buf, count, type, dest, tag, comm, req);
}

int MPI_Ssend_init(const void *buf, int count, MPI_Datatype type, int dest, int tag,
                   MPI_Comm comm, MPI_Request *req) {
    return rtw_send_init(RT_CALLER, RT_SSEND, buf, count, type, dest, tag, comm, req);
}

int MPI_Bsend_init(const void *buf, int count, MPI_Datatype type, int dest, int tag,
                   MPI_Comm comm, MPI_Request *req) {
    return rtw_send_init(RT_CALLER, RT_BSEND, buf, count, type, dest, tag, comm, req);
}

int MPI_Rsend_init(const void *buf, int count, MPI_Datatype type, int dest, int tag,
                   MPI_Comm comm, MPI_Request *req) {
    return rtw_send_init(RT_CALLER, RT_RSEND, buf, count, type, dest, tag, comm, req);
}

int MPI_Recv_init(void *buf, int count, MPI_Datatype type, int source, int tag,
                  MPI_Comm comm, MPI_Request *req) {
    return rtw_recv_init(RT_CALLER, buf, count, type, source, tag, comm, req);
}

int MPI_Start(MPI_Request *req) { return rtw_start(RT_CALLER, req); }

int MPI_Startall(int n, MPI_Request reqs[]) { return rtw_startall(RT_CALLER, n, reqs); }

int MPI_Request_free(MPI_Request *req) { return rtw_request_free(RT_CALLER, req); }
