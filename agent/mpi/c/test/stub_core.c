/* stub_core.c: a stand-in for the Rust core (libracetrack_mpi.so) that prints one line
 * per rt_* call to stderr, so the wrappers can be checked with no debugger: run.sh
 * preloads it before libracetrack_mpi_<impl>.so and checks the lines.
 *
 * RT_STUB_FORCE_SOURCE=N: the first MPI_Recv from RT_ANY is forced to match source N
 * (and RT_STUB_FORCE_TAG=T its tag, if it is RT_ANY), as the debugger would. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../racetrack_mpi.h"

static int rank = -1;
static int forced;

/* Where the lines go: stderr, or the file $RT_STUB_LOG.<rank> (Open MPI forwards ranks'
 * stderr in chunks that can split a line between ranks). */
static int out_fd = 2;

/* One line, written with one write(2): lines of ranks sharing stderr stay whole. */
__attribute__((format(printf, 1, 2))) static void emit(const char *fmt, ...) {
    char line[1024];
    int n = snprintf(line, sizeof line, "RT %d ", rank);
    va_list ap;
    va_start(ap, fmt);
    n += vsnprintf(line + n, sizeof line - (size_t)n, fmt, ap);
    va_end(ap);
    if (n > (int)sizeof line - 2) n = (int)sizeof line - 2;
    line[n++] = '\n';
    if (write(out_fd, line, (size_t)n) < 0) return;
}
static int64_t next_core = 1;

static const char *s(const char *p) { return p ? p : "-"; }

/* The object the call site is in (its file name's last part): the program, not an MPI
 * library, if the wrappers found the right site. */
static const char *site(const void *caller) {
    Dl_info info;
    if (!caller || !dladdr(caller, &info) || !info.dli_fname) return "?";
    const char *slash = strrchr(info.dli_fname, '/');
    return slash ? slash + 1 : info.dli_fname;
}

void rt_init(int32_t world_rank, int32_t world_size, const char *impl) {
    rank = world_rank;
    const char *log = getenv("RT_STUB_LOG");
    if (log) {
        char path[4096];
        snprintf(path, sizeof path, "%s.%d", log, rank);
        int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_APPEND, 0644);
        if (fd >= 0) out_fd = fd;
    }
    emit("init size=%d impl=%s", world_size, impl);
}

int rt_active(void) { return 1; }

void rt_start(rt_call *c) {
    c->core = (uint64_t)next_core++;
    emit("start %s peer=%d peer_world=%d tag=%d count=%d root=%d datatype=%s "
            "comm=%s bytes=%lld kind=%c size=%d send=%d site=%s",
         c->name, c->peer, c->peer_world, c->tag, c->count, c->root, s(c->datatype),
            s(c->comm), (long long)c->bytes, c->elem_kind ? c->elem_kind : '-', c->elem_size,
            c->send_buf != NULL, site(c->caller));
    /* RT_STUB_EDIT=1: an MPI_Isend of one 4-byte integer sends it plus 1000. */
    static int32_t edited;
    const char *ed = getenv("RT_STUB_EDIT");
    if (ed && strcmp(c->name, "MPI_Isend") == 0 && c->elem_kind == 'i' && c->elem_size == 4 &&
        c->count == 1) {
        memcpy(&edited, c->send_buf, sizeof edited);
        edited += 1000;
        c->edited_buf = &edited;
        emit("edited %s to %d", c->name, (int)edited);
    }
    const char *fs = getenv("RT_STUB_FORCE_SOURCE");
    if (fs && !forced && strcmp(c->name, "MPI_Recv") == 0 && c->peer == RT_ANY) {
        forced = 1;
        c->forced_source = atoi(fs);
        const char *ft = getenv("RT_STUB_FORCE_TAG");
        if (ft && c->tag == RT_ANY) c->forced_tag = atoi(ft);
        emit("forced %s source=%d tag=%d", c->name, c->forced_source, c->forced_tag);
    }
}

void rt_stop(rt_call *c, int32_t rc) {
    if (c->new_comm || c->new_rank != RT_NONE)
        emit("stop %s rc=%d new_comm=%s new_rank=%d new_leader=%d", c->name, rc,
             s(c->new_comm), c->new_rank, c->new_leader);
    else
        emit("stop %s rc=%d", c->name, rc);
}

void rt_matched(rt_call *c, int32_t source, int32_t tag, int64_t bytes) {
    emit("matched %s source=%d tag=%d bytes=%lld", c->name, source, tag, (long long)bytes);
}

void rt_request(rt_call *c, int64_t request) {
    emit("request %s id=%lld", c->name, (long long)request);
}

void rt_completed(rt_call *c, int64_t request, int32_t source, int32_t tag, int64_t bytes,
                  int32_t cancelled) {
    emit("completed %s id=%lld source=%d tag=%d bytes=%lld cancelled=%d", c->name,
         (long long)request, source, tag, (long long)bytes, cancelled);
}

void rt_indices(rt_call *c, const int32_t *indices, int32_t n) {
    emit("indices %s n=%d first=%d", c->name, n, n > 0 ? indices[0] : -1);
}

/* Clocks are reported with the object their caller is in: the program's own readings are
 * the ones a replay log keeps. */
double rt_clock(double t, const void *caller, int32_t libc) {
    emit("clock %s from %s", libc ? "time" : "MPI_Wtime", site(caller));
    return t;
}

void rt_pcontrol(int32_t level, const char *label) {
    emit("pcontrol level=%d label=%s", level, s(label));
}

void rt_finalize(void) { emit("finalize"); }

int32_t rt_has_core(void) { return 0; }

void rt_sampler(rt_sample_fn sample, int32_t tid, int32_t sig) {
    (void)sample;
    emit("sampler tid=%d sig=%d", tid, sig);
}
