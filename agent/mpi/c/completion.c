/* completion.c: the completion wrappers (Wait, Test and their all/any/some forms). Each
 * request's id (MPI_Request_c2f) is taken before the call, since MPI sets a completed
 * request to MPI_REQUEST_NULL; then every request that completed is reported with its
 * status, so a wildcard Irecv's completion tells what it matched. Statuses the program
 * ignores are still received into a local array for that. */
#include <stdlib.h>

#include "wrap.h"

/* The requests of one completion call: ids and liveness before it, and statuses. */
typedef struct reqset {
    int n;
    int64_t *ids;
    unsigned char *live;
    MPI_Status *st;
    int64_t ids_s[RT_SMALL];
    unsigned char live_s[RT_SMALL];
    MPI_Status st_s[RT_SMALL];
} reqset;

/* Fill `r` from `reqs`; `sts` is the program's status array (or MPI_STATUSES_IGNORE),
 * replaced by a local one when ignored; `multi` is 0 when the call has a single status
 * (not kept here). Zero if out of memory (then nothing is reported but the call runs). */
static int reqset_init(reqset *r, int n, const MPI_Request reqs[], MPI_Status *sts,
                       int multi) {
    r->n = n > 0 ? n : 0;
    r->ids = r->ids_s;
    r->live = r->live_s;
    r->st = sts;
    if (r->n > RT_SMALL) {
        r->ids = malloc((size_t)r->n * sizeof *r->ids);
        r->live = malloc((size_t)r->n);
    }
    if (multi && sts == MPI_STATUSES_IGNORE)
        r->st = r->n > RT_SMALL ? malloc((size_t)r->n * sizeof *r->st) : r->st_s;
    if (!r->ids || !r->live || (multi && !r->st)) return 0;
    for (int i = 0; i < r->n; i++) {
        r->live[i] = reqs[i] != MPI_REQUEST_NULL;
        r->ids[i] = r->live[i] ? MPI_Request_c2f(reqs[i]) : 0;
    }
    return 1;
}

static void reqset_free(reqset *r, MPI_Status *sts) {
    if (r->ids != r->ids_s) free(r->ids);
    if (r->live != r->live_s) free(r->live);
    if (r->st != sts && r->st != r->st_s) free(r->st);
}

/* What a Wait* call waits on, for the debugger's deadlock model (a Test* waits on
 * nothing: it returns at once). */
static void awaits(wcall *w, const reqset *r, int ok, int test) {
    if (!ok || test) return;
    w->c.awaits = r->ids;
    w->c.awaits_live = r->live;
    w->c.awaits_count = r->n;
}

/* Request i completed with status `st` (if it was live: null requests are skipped). */
static void done(wcall *w, const reqset *r, int i, const MPI_Status *st) {
    if (i >= 0 && i < r->n && r->live[i]) wc_completed(w, r->ids[i], st);
}

/* Under MPI_ERR_IN_STATUS, requests whose status says MPI_ERR_PENDING did not complete. */
static int completed_in(int rc, const MPI_Status *st) {
    return rc == MPI_SUCCESS || (rc == MPI_ERR_IN_STATUS && st->MPI_ERROR != MPI_ERR_PENDING);
}

/* A single completion's `rc`: the request completed, successfully or with its message
 * truncated (MPI then still fills the status with its source and tag, and frees the
 * request, as a truncated MPI_Recv does). Multiple completions say it per status:
 * MPI_ERR_IN_STATUS, and the status's error (not MPI_ERR_PENDING), above. */
static int completed_rc(int rc) {
    int cls = MPI_SUCCESS;
    if (rc != MPI_SUCCESS) PMPI_Error_class(rc, &cls);
    return cls == MPI_SUCCESS || cls == MPI_ERR_TRUNCATE;
}

int rtw_wait(void *caller, MPI_Request *req, MPI_Status *st) {
    if (!rt_active()) return PMPI_Wait(req, st);
    wcall w;
    MPI_Status local;
    if (st == MPI_STATUS_IGNORE) st = &local;
    int live = *req != MPI_REQUEST_NULL;
    int64_t id = live ? MPI_Request_c2f(*req) : 0;
    wc_begin(&w, "MPI_Wait", caller);
    unsigned char lv = (unsigned char)live;
    w.c.awaits = &id;
    w.c.awaits_live = &lv;
    w.c.awaits_count = 1;
    rt_start(&w.c);
    int rc = PMPI_Wait(req, st);
    if (completed_rc(rc) && live) wc_completed(&w, id, st);
    rt_stop(&w.c, rc);
    return rc;
}

int rtw_test(void *caller, MPI_Request *req, int *flag, MPI_Status *st) {
    if (!rt_active()) return PMPI_Test(req, flag, st);
    wcall w;
    MPI_Status local;
    if (st == MPI_STATUS_IGNORE) st = &local;
    int live = *req != MPI_REQUEST_NULL;
    int64_t id = live ? MPI_Request_c2f(*req) : 0;
    wc_begin(&w, "MPI_Test", caller);
    rt_start(&w.c);
    int rc;
    if (w.c.forced_found == 0) {
        /* A replay: the recorded run's test found nothing here. */
        *flag = 0;
        rc = MPI_SUCCESS;
    } else if (w.c.forced_found == 1) {
        rc = PMPI_Wait(req, st);
        *flag = 1;
    } else {
        rc = PMPI_Test(req, flag, st);
    }
    w.c.found = *flag != 0;
    if (completed_rc(rc) && live && *flag) wc_completed(&w, id, st);
    rt_stop(&w.c, rc);
    return rc;
}

/* Waitall and Testall: every live request completed (Testall: when `flag`). */
static int all(void *caller, int test, int n, MPI_Request reqs[], int *flag,
               MPI_Status sts[]) {
    wcall w;
    reqset r;
    int ok = reqset_init(&r, n, reqs, sts, 1);
    MPI_Status *s = ok ? r.st : sts;
    wc_begin(&w, test ? "MPI_Testall" : "MPI_Waitall", caller);
    awaits(&w, &r, ok, test);
    rt_start(&w.c);
    int rc;
    if (test && w.c.forced_found == 0) {
        *flag = 0;
        rc = MPI_SUCCESS;
    } else if (test && w.c.forced_found == 1) {
        rc = PMPI_Waitall(n, reqs, s);
        *flag = 1;
    } else {
        rc = test ? PMPI_Testall(n, reqs, flag, s) : PMPI_Waitall(n, reqs, s);
    }
    if (test) w.c.found = *flag != 0;
    if (ok && (!test || *flag))
        for (int i = 0; i < r.n; i++)
            if (completed_in(rc, &s[i])) done(&w, &r, i, &s[i]);
    rt_stop(&w.c, rc);
    reqset_free(&r, sts);
    return rc;
}

int rtw_waitall(void *caller, int n, MPI_Request reqs[], MPI_Status sts[]) {
    if (!rt_active()) return PMPI_Waitall(n, reqs, sts);
    return all(caller, 0, n, reqs, NULL, sts);
}

int rtw_testall(void *caller, int n, MPI_Request reqs[], int *flag, MPI_Status sts[]) {
    if (!rt_active()) return PMPI_Testall(n, reqs, flag, sts);
    return all(caller, 1, n, reqs, flag, sts);
}

/* Waitany and Testany: the request at `*index` completed (Testany: when `flag`). */
static int any(void *caller, int test, int n, MPI_Request reqs[], int *index, int *flag,
               MPI_Status *st) {
    wcall w;
    reqset r;
    MPI_Status local;
    if (st == MPI_STATUS_IGNORE) st = &local;
    int ok = reqset_init(&r, n, reqs, NULL, 0);
    wc_begin(&w, test ? "MPI_Testany" : "MPI_Waitany", caller);
    awaits(&w, &r, ok, test);
    rt_start(&w.c);
    int rc;
    const int32_t *fi = w.c.forced_indices;
    if (w.c.forced_count == 1 && fi && fi[0] >= 0 && fi[0] < n) {
        /* A replay: the recorded run's call completed this request. */
        rc = PMPI_Wait(&reqs[fi[0]], st);
        *index = fi[0];
        if (test) *flag = 1;
    } else if (test && w.c.forced_found == 0) {
        *flag = 0;
        *index = MPI_UNDEFINED;
        rc = MPI_SUCCESS;
    } else if (test && w.c.forced_found == 1) {
        rc = PMPI_Waitany(n, reqs, index, st);
        *flag = 1;
    } else {
        rc = test ? PMPI_Testany(n, reqs, index, flag, st) : PMPI_Waitany(n, reqs, index, st);
    }
    if (test) w.c.found = *flag != 0;
    if (completed_rc(rc) && (!test || *flag) && *index != MPI_UNDEFINED) {
        int32_t i = *index;
        rt_indices(&w.c, &i, 1);
        if (ok) done(&w, &r, *index, st);
    }
    rt_stop(&w.c, rc);
    reqset_free(&r, NULL);
    return rc;
}

int rtw_waitany(void *caller, int n, MPI_Request reqs[], int *index, MPI_Status *st) {
    if (!rt_active()) return PMPI_Waitany(n, reqs, index, st);
    return any(caller, 0, n, reqs, index, NULL, st);
}

int rtw_testany(void *caller, int n, MPI_Request reqs[], int *index, int *flag,
                MPI_Status *st) {
    if (!rt_active()) return PMPI_Testany(n, reqs, index, flag, st);
    return any(caller, 1, n, reqs, index, flag, st);
}

/* Waitsome and Testsome: the requests at indices[0 .. *outcount) completed, the k-th
 * with status k. */
static int some(void *caller, int test, int n, MPI_Request reqs[], int *outcount,
                int indices[], MPI_Status sts[]) {
    wcall w;
    reqset r;
    int ok = reqset_init(&r, n, reqs, sts, 1);
    MPI_Status *s = ok ? r.st : sts;
    wc_begin(&w, test ? "MPI_Testsome" : "MPI_Waitsome", caller);
    awaits(&w, &r, ok, test);
    rt_start(&w.c);
    int rc;
    const int32_t *fi = w.c.forced_indices;
    if (w.c.forced_count != RT_NONE && fi) {
        /* A replay: the recorded run's call completed these requests. */
        rc = MPI_SUCCESS;
        *outcount = 0;
        for (int k = 0; k < w.c.forced_count; k++) {
            if (fi[k] < 0 || fi[k] >= n) continue;
            MPI_Status *sk = s == MPI_STATUSES_IGNORE ? MPI_STATUS_IGNORE : &s[*outcount];
            int rk = PMPI_Wait(&reqs[fi[k]], sk);
            if (rk != MPI_SUCCESS) {
                rc = MPI_ERR_IN_STATUS;
                if (sk != MPI_STATUS_IGNORE) sk->MPI_ERROR = rk;
            } else if (sk != MPI_STATUS_IGNORE) {
                sk->MPI_ERROR = MPI_SUCCESS;
            }
            indices[(*outcount)++] = fi[k];
        }
    } else if (test && w.c.forced_found == 0) {
        int live = 0;
        for (int i = 0; i < n; i++) live |= reqs[i] != MPI_REQUEST_NULL;
        *outcount = live ? 0 : MPI_UNDEFINED;
        rc = MPI_SUCCESS;
    } else if (test && w.c.forced_found == 1) {
        rc = PMPI_Waitsome(n, reqs, outcount, indices, s);
    } else {
        rc = test ? PMPI_Testsome(n, reqs, outcount, indices, s)
                  : PMPI_Waitsome(n, reqs, outcount, indices, s);
    }
    if (test) w.c.found = *outcount != MPI_UNDEFINED && *outcount > 0;
    if ((rc == MPI_SUCCESS || rc == MPI_ERR_IN_STATUS) && *outcount != MPI_UNDEFINED &&
        *outcount > 0) {
        /* int is int32_t on every platform MPI ships for here. */
        rt_indices(&w.c, (const int32_t *)indices, *outcount);
    }
    if (ok && (rc == MPI_SUCCESS || rc == MPI_ERR_IN_STATUS) && *outcount != MPI_UNDEFINED)
        for (int k = 0; k < *outcount; k++)
            if (completed_in(rc, &s[k])) done(&w, &r, indices[k], &s[k]);
    rt_stop(&w.c, rc);
    reqset_free(&r, sts);
    return rc;
}

int rtw_waitsome(void *caller, int n, MPI_Request reqs[], int *outcount, int indices[],
                 MPI_Status sts[]) {
    if (!rt_active()) return PMPI_Waitsome(n, reqs, outcount, indices, sts);
    return some(caller, 0, n, reqs, outcount, indices, sts);
}

int rtw_testsome(void *caller, int n, MPI_Request reqs[], int *outcount, int indices[],
                 MPI_Status sts[]) {
    if (!rt_active()) return PMPI_Testsome(n, reqs, outcount, indices, sts);
    return some(caller, 1, n, reqs, outcount, indices, sts);
}

/* ---- the C entry points ---- */

int MPI_Wait(MPI_Request *req, MPI_Status *st) { return rtw_wait(RT_CALLER, req, st); }

int MPI_Test(MPI_Request *req, int *flag, MPI_Status *st) {
    return rtw_test(RT_CALLER, req, flag, st);
}

int MPI_Waitall(int n, MPI_Request reqs[], MPI_Status sts[]) {
    return rtw_waitall(RT_CALLER, n, reqs, sts);
}

int MPI_Testall(int n, MPI_Request reqs[], int *flag, MPI_Status sts[]) {
    return rtw_testall(RT_CALLER, n, reqs, flag, sts);
}

int MPI_Waitany(int n, MPI_Request reqs[], int *index, MPI_Status *st) {
    return rtw_waitany(RT_CALLER, n, reqs, index, st);
}

int MPI_Testany(int n, MPI_Request reqs[], int *index, int *flag, MPI_Status *st) {
    return rtw_testany(RT_CALLER, n, reqs, index, flag, st);
}

int MPI_Waitsome(int n, MPI_Request reqs[], int *outcount, int indices[], MPI_Status sts[]) {
    return rtw_waitsome(RT_CALLER, n, reqs, outcount, indices, sts);
}

int MPI_Testsome(int n, MPI_Request reqs[], int *outcount, int indices[], MPI_Status sts[]) {
    return rtw_testsome(RT_CALLER, n, reqs, outcount, indices, sts);
}
