/* p2p.c: the point-to-point wrappers (sends, receives, Sendrecv, probes). Each exported
 * MPI_X passes the program's call site to rtw_x, which the Fortran bindings call too. */
#include <string.h>

#include "wrap.h"

static const char *const SEND_NAMES[] = {"MPI_Send", "MPI_Ssend", "MPI_Bsend", "MPI_Rsend"};

static int psend(enum rt_send_mode m, const void *buf, int count, MPI_Datatype type,
                 int dest, int tag, MPI_Comm comm) {
    switch (m) {
    case RT_SSEND: return PMPI_Ssend(buf, count, type, dest, tag, comm);
    case RT_BSEND: return PMPI_Bsend(buf, count, type, dest, tag, comm);
    case RT_RSEND: return PMPI_Rsend(buf, count, type, dest, tag, comm);
    default: return PMPI_Send(buf, count, type, dest, tag, comm);
    }
}

/* The fields every send shares: destination, tag, content. */
static void send_fields(wcall *w, const void *buf, int count, MPI_Datatype type, int dest,
                        int tag, MPI_Comm comm) {
    wc_comm(w, comm);
    wc_peer(w, comm, dest);
    w->c.tag = rt_norm_tag(tag);
    wc_data(w, type, count);
    w->c.send_buf = buf;
}

int rtw_send(void *caller, enum rt_send_mode m, const void *buf, int count,
             MPI_Datatype type, int dest, int tag, MPI_Comm comm) {
    if (!rt_active()) return psend(m, buf, count, type, dest, tag, comm);
    wcall w;
    wc_begin(&w, SEND_NAMES[m], caller);
    send_fields(&w, buf, count, type, dest, tag, comm);
    rt_start(&w.c);
    const void *b = w.c.edited_buf ? w.c.edited_buf : buf;
    int rc = psend(m, b, count, type, dest, tag, comm);
    rt_stop(&w.c, rc);
    return rc;
}

int rtw_isend(void *caller, int sync, const void *buf, int count, MPI_Datatype type,
              int dest, int tag, MPI_Comm comm, MPI_Request *req) {
    if (!rt_active())
        return sync ? PMPI_Issend(buf, count, type, dest, tag, comm, req)
                    : PMPI_Isend(buf, count, type, dest, tag, comm, req);
    wcall w;
    wc_begin(&w, sync ? "MPI_Issend" : "MPI_Isend", caller);
    send_fields(&w, buf, count, type, dest, tag, comm);
    rt_start(&w.c);
    /* MPI reads the buffer until the request completes, after rt_stop: send a copy. */
    const void *edit = rt_keep_edit(&w);
    const void *b = edit ? edit : buf;
    int rc = sync ? PMPI_Issend(b, count, type, dest, tag, comm, req)
                  : PMPI_Isend(b, count, type, dest, tag, comm, req);
    if (rc == MPI_SUCCESS) {
        int64_t id = MPI_Request_c2f(*req);
        wc_request(&w, id);
        if (edit) rt_own_edit(edit, id);
    }
    rt_stop(&w.c, rc);
    return rc;
}

/* The fields every receive and probe shares; the source may be a wildcard. */
static void recv_fields(wcall *w, int source, int tag, MPI_Comm comm) {
    wc_comm(w, comm);
    wc_peer(w, comm, source);
    w->c.tag = rt_norm_tag(tag);
}

int rtw_recv(void *caller, void *buf, int count, MPI_Datatype type, int source, int tag,
             MPI_Comm comm, MPI_Status *st) {
    if (!rt_active()) return PMPI_Recv(buf, count, type, source, tag, comm, st);
    wcall w;
    MPI_Status local;
    if (st == MPI_STATUS_IGNORE) st = &local;
    wc_begin(&w, "MPI_Recv", caller);
    recv_fields(&w, source, tag, comm);
    wc_data(&w, type, count);
    rt_start(&w.c);
    int rc = PMPI_Recv(buf, count, type, rt_forced_source(&w, source), rt_forced_tag(&w, tag),
                       comm, st);
    wc_received(&w, rc, st);
    rt_stop(&w.c, rc);
    return rc;
}

int rtw_irecv(void *caller, void *buf, int count, MPI_Datatype type, int source, int tag,
              MPI_Comm comm, MPI_Request *req) {
    if (!rt_active()) return PMPI_Irecv(buf, count, type, source, tag, comm, req);
    wcall w;
    wc_begin(&w, "MPI_Irecv", caller);
    recv_fields(&w, source, tag, comm);
    wc_data(&w, type, count);
    rt_start(&w.c);
    int rc = PMPI_Irecv(buf, count, type, rt_forced_source(&w, source),
                        rt_forced_tag(&w, tag), comm, req);
    if (rc == MPI_SUCCESS) wc_request(&w, MPI_Request_c2f(*req));
    rt_stop(&w.c, rc);
    return rc;
}

/* Sendrecv reports its send side (peer, tag, content) and its source; the receive side's
 * match appears through rt_matched, and a wildcard source can be forced as for MPI_Recv. */
int rtw_sendrecv(void *caller, const void *sbuf, int scount, MPI_Datatype stype, int dest,
                 int stag, void *rbuf, int rcount, MPI_Datatype rtype, int source, int rtag,
                 MPI_Comm comm, MPI_Status *st) {
    if (!rt_active())
        return PMPI_Sendrecv(sbuf, scount, stype, dest, stag, rbuf, rcount, rtype, source,
                             rtag, comm, st);
    wcall w;
    MPI_Status local;
    if (st == MPI_STATUS_IGNORE) st = &local;
    wc_begin(&w, "MPI_Sendrecv", caller);
    send_fields(&w, sbuf, scount, stype, dest, stag, comm);
    w.c.source = rt_norm_rank(source);
    rt_start(&w.c);
    const void *b = w.c.edited_buf ? w.c.edited_buf : sbuf;
    int rc = PMPI_Sendrecv(b, scount, stype, dest, stag, rbuf, rcount, rtype,
                           rt_forced_source(&w, source), rt_forced_tag(&w, rtag), comm, st);
    wc_received(&w, rc, st);
    rt_stop(&w.c, rc);
    return rc;
}

int rtw_sendrecv_replace(void *caller, void *buf, int count, MPI_Datatype type, int dest,
                         int stag, int source, int rtag, MPI_Comm comm, MPI_Status *st) {
    if (!rt_active())
        return PMPI_Sendrecv_replace(buf, count, type, dest, stag, source, rtag, comm, st);
    wcall w;
    MPI_Status local;
    if (st == MPI_STATUS_IGNORE) st = &local;
    wc_begin(&w, "MPI_Sendrecv_replace", caller);
    send_fields(&w, buf, count, type, dest, stag, comm);
    w.c.source = rt_norm_rank(source);
    rt_start(&w.c);
    /* The buffer is overwritten by the receive anyway: an edit goes into it. Only basic
     * types (contiguous, bytes = count × size) can be edited. */
    if (w.c.edited_buf && w.c.elem_kind && w.c.bytes > 0)
        memcpy(buf, w.c.edited_buf, (size_t)w.c.bytes);
    int rc = PMPI_Sendrecv_replace(buf, count, type, dest, stag, rt_forced_source(&w, source),
                                   rt_forced_tag(&w, rtag), comm, st);
    wc_received(&w, rc, st);
    rt_stop(&w.c, rc);
    return rc;
}

int rtw_probe(void *caller, int source, int tag, MPI_Comm comm, MPI_Status *st) {
    if (!rt_active()) return PMPI_Probe(source, tag, comm, st);
    wcall w;
    MPI_Status local;
    if (st == MPI_STATUS_IGNORE) st = &local;
    wc_begin(&w, "MPI_Probe", caller);
    recv_fields(&w, source, tag, comm);
    rt_start(&w.c);
    int rc = PMPI_Probe(rt_forced_source(&w, source), rt_forced_tag(&w, tag), comm, st);
    if (rc == MPI_SUCCESS) wc_matched(&w, st);
    rt_stop(&w.c, rc);
    return rc;
}

int rtw_iprobe(void *caller, int source, int tag, MPI_Comm comm, int *flag,
               MPI_Status *st) {
    if (!rt_active()) return PMPI_Iprobe(source, tag, comm, flag, st);
    wcall w;
    MPI_Status local;
    if (st == MPI_STATUS_IGNORE) st = &local;
    wc_begin(&w, "MPI_Iprobe", caller);
    recv_fields(&w, source, tag, comm);
    rt_start(&w.c);
    int rc;
    if (w.c.forced_found == 0) {
        /* A replay: the recorded run's poll found nothing here. */
        *flag = 0;
        rc = MPI_SUCCESS;
    } else if (w.c.forced_found == 1) {
        /* It found this message: wait for it, however late it comes this time. */
        rc = PMPI_Probe(rt_forced_source(&w, source), rt_forced_tag(&w, tag), comm, st);
        *flag = rc == MPI_SUCCESS;
    } else {
        rc = PMPI_Iprobe(rt_forced_source(&w, source), rt_forced_tag(&w, tag), comm, flag, st);
    }
    w.c.found = *flag != 0;
    if (rc == MPI_SUCCESS && *flag) wc_matched(&w, st);
    rt_stop(&w.c, rc);
    return rc;
}

/* ---- the C entry points ---- */

int MPI_Send(const void *buf, int count, MPI_Datatype type, int dest, int tag,
             MPI_Comm comm) {
    return rtw_send(RT_CALLER, RT_SEND, buf, count, type, dest, tag, comm);
}

int MPI_Ssend(const void *buf, int count, MPI_Datatype type, int dest, int tag,
              MPI_Comm comm) {
    return rtw_send(RT_CALLER, RT_SSEND, buf, count, type, dest, tag, comm);
}

int MPI_Bsend(const void *buf, int count, MPI_Datatype type, int dest, int tag,
              MPI_Comm comm) {
    return rtw_send(RT_CALLER, RT_BSEND, buf, count, type, dest, tag, comm);
}

int MPI_Rsend(const void *buf, int count, MPI_Datatype type, int dest, int tag,
              MPI_Comm comm) {
    return rtw_send(RT_CALLER, RT_RSEND, buf, count, type, dest, tag, comm);
}

int MPI_Isend(const void *buf, int count, MPI_Datatype type, int dest, int tag,
              MPI_Comm comm, MPI_Request *req) {
    return rtw_isend(RT_CALLER, 0, buf, count, type, dest, tag, comm, req);
}

int MPI_Issend(const void *buf, int count, MPI_Datatype type, int dest, int tag,
               MPI_Comm comm, MPI_Request *req) {
    return rtw_isend(RT_CALLER, 1, buf, count, type, dest, tag, comm, req);
}

int MPI_Recv(void *buf, int count, MPI_Datatype type, int source, int tag, MPI_Comm comm,
             MPI_Status *st) {
    return rtw_recv(RT_CALLER, buf, count, type, source, tag, comm, st);
}

int MPI_Irecv(void *buf, int count, MPI_Datatype type, int source, int tag, MPI_Comm comm,
              MPI_Request *req) {
    return rtw_irecv(RT_CALLER, buf, count, type, source, tag, comm, req);
}

int MPI_Sendrecv(const void *sbuf, int scount, MPI_Datatype stype, int dest, int stag,
                 void *rbuf, int rcount, MPI_Datatype rtype, int source, int rtag,
                 MPI_Comm comm, MPI_Status *st) {
    return rtw_sendrecv(RT_CALLER, sbuf, scount, stype, dest, stag, rbuf, rcount, rtype,
                        source, rtag, comm, st);
}

int MPI_Sendrecv_replace(void *buf, int count, MPI_Datatype type, int dest, int stag,
                         int source, int rtag, MPI_Comm comm, MPI_Status *st) {
    return rtw_sendrecv_replace(RT_CALLER, buf, count, type, dest, stag, source, rtag, comm,
                                st);
}

int MPI_Probe(int source, int tag, MPI_Comm comm, MPI_Status *st) {
    return rtw_probe(RT_CALLER, source, tag, comm, st);
}

int MPI_Iprobe(int source, int tag, MPI_Comm comm, int *flag, MPI_Status *st) {
    return rtw_iprobe(RT_CALLER, source, tag, comm, flag, st);
}
