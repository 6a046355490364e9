/* mprobe.c: matched probes. MPI_Mprobe and MPI_Improbe are probes (a wildcard one can be
 * forced, as MPI_Probe's); the message handle they return carries no communicator, so
 * the communicator, source and tag are kept here by handle until MPI_Mrecv or
 * MPI_Imrecv receives it: those report them as their comm, peer and tag, and their
 * match as a receive's (Imrecv's at its completion), so the debugger links the message
 * to its send. */
#include <pthread.h>

#include "wrap.h"

/* Probed messages not received yet. A program holds few at a time: the oldest is
 * dropped when full (its receive is then reported without communicator or peer). */
#define RT_PROBED 64
static struct probed {
    MPI_Message m;
    MPI_Comm comm;
    int source, tag;
} probed[RT_PROBED];
static unsigned probed_next;
static pthread_mutex_t probed_lock = PTHREAD_MUTEX_INITIALIZER;

static void remember(MPI_Message m, MPI_Comm comm, const MPI_Status *st) {
    if (m == MPI_MESSAGE_NULL || m == MPI_MESSAGE_NO_PROC) return;
    pthread_mutex_lock(&probed_lock);
    probed[probed_next++ % RT_PROBED] = (struct probed){m, comm, st->MPI_SOURCE, st->MPI_TAG};
    pthread_mutex_unlock(&probed_lock);
}

/* The receive of message `m`: its communicator, peer and tag, as its probe matched. */
static void received_fields(wcall *w, MPI_Message m) {
    if (m == MPI_MESSAGE_NO_PROC) {
        w->c.peer = RT_PROC_NULL;
        return;
    }
    struct probed p = {MPI_MESSAGE_NULL, MPI_COMM_NULL, 0, 0};
    pthread_mutex_lock(&probed_lock);
    for (int i = 0; i < RT_PROBED; i++)
        if (probed[i].m == m && m != MPI_MESSAGE_NULL) {
            p = probed[i];
            probed[i].m = MPI_MESSAGE_NULL;
            break;
        }
    pthread_mutex_unlock(&probed_lock);
    if (p.m == MPI_MESSAGE_NULL) return;
    wc_comm(w, p.comm);
    wc_peer(w, p.comm, p.source);
    w->c.tag = rt_norm_tag(p.tag);
}

static void probe_fields(wcall *w, const char *name, void *caller, int source, int tag,
                         MPI_Comm comm) {
    wc_begin(w, name, caller);
    wc_comm(w, comm);
    wc_peer(w, comm, source);
    w->c.tag = rt_norm_tag(tag);
}

int rtw_mprobe(void *caller, int source, int tag, MPI_Comm comm, MPI_Message *m,
                  MPI_Status *st) {
    if (!rt_active()) return PMPI_Mprobe(source, tag, comm, m, st);
    wcall w;
    MPI_Status local;
    if (st == MPI_STATUS_IGNORE) st = &local;
    probe_fields(&w, "MPI_Mprobe", caller, source, tag, comm);
    rt_start(&w.c);
    int rc = PMPI_Mprobe(rt_forced_source(&w, source), rt_forced_tag(&w, tag), comm, m, st);
    if (rc == MPI_SUCCESS) {
        remember(*m, comm, st);
        wc_matched(&w, st);
    }
    rt_stop(&w.c, rc);
    return rc;
}

int rtw_improbe(void *caller, int source, int tag, MPI_Comm comm, int *flag,
                   MPI_Message *m, MPI_Status *st) {
    if (!rt_active()) return PMPI_Improbe(source, tag, comm, flag, m, st);
    wcall w;
    MPI_Status local;
    if (st == MPI_STATUS_IGNORE) st = &local;
    probe_fields(&w, "MPI_Improbe", caller, source, tag, comm);
    rt_start(&w.c);
    int rc, s = rt_forced_source(&w, source), t = rt_forced_tag(&w, tag);
    if (w.c.forced_found == 0) {
        /* A replay: the recorded run's poll found nothing here. */
        *flag = 0;
        rc = MPI_SUCCESS;
    } else if (w.c.forced_found == 1) {
        /* It found this message: wait for it, however late it comes this time. */
        rc = PMPI_Mprobe(s, t, comm, m, st);
        *flag = rc == MPI_SUCCESS;
    } else {
        rc = PMPI_Improbe(s, t, comm, flag, m, st);
    }
    w.c.found = *flag != 0;
    if (rc == MPI_SUCCESS && *flag) {
        remember(*m, comm, st);
        wc_matched(&w, st);
    }
    rt_stop(&w.c, rc);
    return rc;
}

int rtw_mrecv(void *caller, void *buf, int count, MPI_Datatype type, MPI_Message *m,
                 MPI_Status *st) {
    if (!rt_active()) return PMPI_Mrecv(buf, count, type, m, st);
    wcall w;
    MPI_Status local;
    if (st == MPI_STATUS_IGNORE) st = &local;
    wc_begin(&w, "MPI_Mrecv", caller);
    received_fields(&w, *m);
    wc_data(&w, type, count);
    rt_start(&w.c);
    int rc = PMPI_Mrecv(buf, count, type, m, st);
    wc_received(&w, rc, st);
    rt_stop(&w.c, rc);
    return rc;
}

int rtw_imrecv(void *caller, void *buf, int count, MPI_Datatype type, MPI_Message *m,
                  MPI_Request *req) {
    if (!rt_active()) return PMPI_Imrecv(buf, count, type, m, req);
    wcall w;
    wc_begin(&w, "MPI_Imrecv", caller);
    received_fields(&w, *m);
    wc_data(&w, type, count);
    rt_start(&w.c);
    int rc = PMPI_Imrecv(buf, count, type, m, req);
    if (rc == MPI_SUCCESS) wc_request(&w, MPI_Request_c2f(*req));
    rt_stop(&w.c, rc);
    return rc;
}

/* ---- the C entry points ---- */

int MPI_Mprobe(int source, int tag, MPI_Comm comm, MPI_Message *m, MPI_Status *st) {
    return rtw_mprobe(RT_CALLER, source, tag, comm, m, st);
}

int MPI_Improbe(int source, int tag, MPI_Comm comm, int *flag, MPI_Message *m,
                MPI_Status *st) {
    return rtw_improbe(RT_CALLER, source, tag, comm, flag, m, st);
}

int MPI_Mrecv(void *buf, int count, MPI_Datatype type, MPI_Message *m, MPI_Status *st) {
    return rtw_mrecv(RT_CALLER, buf, count, type, m, st);
}

int MPI_Imrecv(void *buf, int count, MPI_Datatype type, MPI_Message *m, MPI_Request *req) {
    return rtw_imrecv(RT_CALLER, buf, count, type, m, req);
}
