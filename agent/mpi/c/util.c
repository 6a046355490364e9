/* util.c: what every wrapper shares: readable names for datatypes and communicators
 * (numbered in the order they appear),
 * normalised ranks and tags, world ranks of communicator ranks (cached), the reports of
 * matches and completions, and the copies that keep a nonblocking send's edited content
 * alive until its request completes. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "wrap.h"

#define RT_STR2(x) #x
#define RT_STR(x) RT_STR2(x)

const char *rtw_impl(void) {
#if defined(OPEN_MPI)
    return "Open MPI " RT_STR(OMPI_MAJOR_VERSION) "." RT_STR(OMPI_MINOR_VERSION) "." RT_STR(
        OMPI_RELEASE_VERSION);
#elif defined(MPICH_VERSION)
    return "MPICH " MPICH_VERSION;
#else
    return "unknown MPI";
#endif
}

/* A predefined datatype: its name and how its elements read ('i', 'u', 'f', 'c', 'b';
 * 0 when they are not one number or character: pairs, complex numbers). */
struct type_name {
    MPI_Datatype type;
    const char *name;
    char kind;
};

#define T(t, k) {t, #t, k}
/* MPI_DATATYPE_NULL first: an implementation defines the Fortran types it lacks (e.g.
 * MPICH's MPI_INTEGER16) as MPI_DATATYPE_NULL, and the first match wins. */
static const struct type_name TYPES[] = {
    T(MPI_DATATYPE_NULL, 0),
    T(MPI_INT, 'i'), T(MPI_DOUBLE, 'f'), T(MPI_CHAR, 'c'), T(MPI_BYTE, 'b'),
    T(MPI_FLOAT, 'f'), T(MPI_LONG, 'i'), T(MPI_UNSIGNED, 'u'), T(MPI_SHORT, 'i'),
    T(MPI_UNSIGNED_SHORT, 'u'), T(MPI_UNSIGNED_LONG, 'u'), T(MPI_LONG_LONG_INT, 'i'),
    T(MPI_UNSIGNED_LONG_LONG, 'u'), T(MPI_SIGNED_CHAR, 'i'), T(MPI_UNSIGNED_CHAR, 'u'),
    T(MPI_WCHAR, 'u'), T(MPI_LONG_DOUBLE, 0), T(MPI_PACKED, 'b'), T(MPI_C_BOOL, 'u'),
    T(MPI_INT8_T, 'i'), T(MPI_INT16_T, 'i'), T(MPI_INT32_T, 'i'), T(MPI_INT64_T, 'i'),
    T(MPI_UINT8_T, 'u'), T(MPI_UINT16_T, 'u'), T(MPI_UINT32_T, 'u'), T(MPI_UINT64_T, 'u'),
    T(MPI_AINT, 'i'), T(MPI_OFFSET, 'i'), T(MPI_COUNT, 'i'),
    T(MPI_C_FLOAT_COMPLEX, 0), T(MPI_C_DOUBLE_COMPLEX, 0),
    T(MPI_FLOAT_INT, 0), T(MPI_DOUBLE_INT, 0), T(MPI_LONG_INT, 0), T(MPI_2INT, 0),
    T(MPI_SHORT_INT, 0), T(MPI_LONG_DOUBLE_INT, 0),
    T(MPI_INTEGER, 'i'), T(MPI_REAL, 'f'), T(MPI_DOUBLE_PRECISION, 'f'),
    T(MPI_CHARACTER, 'c'), T(MPI_LOGICAL, 'i'), T(MPI_COMPLEX, 0),
    T(MPI_DOUBLE_COMPLEX, 0), T(MPI_2INTEGER, 0), T(MPI_2REAL, 0),
    T(MPI_2DOUBLE_PRECISION, 0), T(MPI_INTEGER1, 'i'), T(MPI_INTEGER2, 'i'),
    T(MPI_INTEGER4, 'i'), T(MPI_INTEGER8, 'i'), T(MPI_REAL4, 'f'), T(MPI_REAL8, 'f'),
};
#undef T

static const struct type_name *find_type(MPI_Datatype type) {
    for (size_t i = 0; i < sizeof TYPES / sizeof TYPES[0]; i++)
        if (TYPES[i].type == type) return &TYPES[i];
    return NULL;
}

void wc_begin(wcall *w, const char *name, void *caller) {
    memset(w, 0, sizeof *w);
    w->c.name = name;
    w->c.caller = rt_program_site(caller);
    w->c.peer = w->c.peer_world = w->c.tag = w->c.count = w->c.root = RT_NONE;
    w->c.bytes = -1;
    w->c.forced_source = w->c.forced_tag = w->c.source = w->c.starts = RT_NONE;
    w->c.new_rank = w->c.new_leader = w->c.found = RT_NONE;
    w->c.forced_found = w->c.forced_count = w->c.awaits_count = RT_NONE;
}

/* ---- communicator names: "comm N", N counting the communicators this rank's reports
 * named, in the order they first did (a Comm_split/dup/create's `created` first). The
 * handles themselves are no names: MPICH's are large negative ints, Open MPI's indexes
 * are reused after a free. A freed communicator's number is forgotten with it. ---- */

struct comm_num {
    MPI_Comm comm;
    int n;
};
static struct comm_num *comm_nums;
static size_t comm_nums_len, comm_nums_cap;
static int comm_next = 1;
/* Comm_free may run on any thread, reports on the MPI_Init thread. */
static pthread_mutex_t comm_nums_lock = PTHREAD_MUTEX_INITIALIZER;

/* `comm`'s number, given one if it has none yet; 0 when out of memory. */
static int comm_number(MPI_Comm comm) {
    int n = 0;
    pthread_mutex_lock(&comm_nums_lock);
    for (size_t i = 0; i < comm_nums_len && !n; i++)
        if (comm_nums[i].comm == comm) n = comm_nums[i].n;
    if (!n && comm_nums_len == comm_nums_cap) {
        size_t cap = comm_nums_cap ? 2 * comm_nums_cap : 16;
        struct comm_num *grown = realloc(comm_nums, cap * sizeof *grown);
        if (grown) {
            comm_nums = grown;
            comm_nums_cap = cap;
        }
    }
    if (!n && comm_nums_len < comm_nums_cap) {
        n = comm_next++;
        comm_nums[comm_nums_len++] = (struct comm_num){comm, n};
    }
    pthread_mutex_unlock(&comm_nums_lock);
    return n;
}

static void forget_comm_number(MPI_Comm comm) {
    pthread_mutex_lock(&comm_nums_lock);
    for (size_t i = 0; i < comm_nums_len; i++)
        if (comm_nums[i].comm == comm) {
            comm_nums[i] = comm_nums[--comm_nums_len];
            break;
        }
    pthread_mutex_unlock(&comm_nums_lock);
}

static const char *comm_name(MPI_Comm comm, char *buf, size_t len) {
    if (comm == MPI_COMM_WORLD) return "MPI_COMM_WORLD";
    if (comm == MPI_COMM_SELF) return "MPI_COMM_SELF";
    if (comm == MPI_COMM_NULL) return "MPI_COMM_NULL";
    int n = comm_number(comm);
    if (!n) return "comm ?";
    snprintf(buf, len, "comm %d", n);
    return buf;
}

void wc_comm(wcall *w, MPI_Comm comm) {
    w->c.comm = comm_name(comm, w->comm_buf, sizeof w->comm_buf);
}

void wc_data(wcall *w, MPI_Datatype type, int count) {
    const struct type_name *t = find_type(type);
    int size = 0;
    w->c.count = count;
    if (t) {
        w->c.datatype = t->name;
    } else {
        snprintf(w->type_buf, sizeof w->type_buf, "datatype %d", (int)MPI_Type_c2f(type));
        w->c.datatype = w->type_buf;
    }
    if (type == MPI_DATATYPE_NULL || PMPI_Type_size(type, &size) != MPI_SUCCESS) return;
    w->c.bytes = (int64_t)count * size;
    if (t && t->kind && (size == 1 || size == 2 || size == 4 || size == 8)) {
        w->c.elem_kind = t->kind;
        w->c.elem_size = size;
    }
}

int32_t rt_norm_rank(int rank) {
    if (rank == MPI_ANY_SOURCE) return RT_ANY;
    if (rank == MPI_PROC_NULL) return RT_PROC_NULL;
    if (rank == MPI_ROOT) return RT_ROOT;
    return rank;
}

int32_t rt_norm_tag(int tag) { return tag == MPI_ANY_TAG ? RT_ANY : tag; }

void wc_root(wcall *w, int root) { w->c.root = rt_norm_rank(root); }

int rt_forced_source(const wcall *w, int source) {
    int32_t f = w->c.forced_source;
    if (source != MPI_ANY_SOURCE || f == RT_NONE || f == RT_ANY) return source;
    return f == RT_PROC_NULL ? MPI_PROC_NULL : f;
}

int rt_forced_tag(const wcall *w, int tag) {
    int32_t f = w->c.forced_tag;
    if (tag != MPI_ANY_TAG || f == RT_NONE || f == RT_ANY) return tag;
    return f;
}

/* ---- world ranks: a small cache of each communicator's rank → world rank table ---- */

struct comm_map {
    MPI_Fint id;
    int size;  /* 0: free slot */
    int *world;
};

#define RT_COMM_CACHE 16
static struct comm_map cache[RT_COMM_CACHE];
static unsigned cache_next;
/* Comm_free may run on any thread, lookups on the MPI_Init thread. */
static pthread_mutex_t cache_lock = PTHREAD_MUTEX_INITIALIZER;

/* The world ranks of `comm`'s ranks (its remote group's, for an intercommunicator, where
 * point-to-point ranks name the remote side). */
static int fill_map(struct comm_map *m, MPI_Comm comm) {
    MPI_Group group, world;
    int inter = 0, n = 0;
    PMPI_Comm_test_inter(comm, &inter);
    if ((inter ? PMPI_Comm_remote_group(comm, &group) : PMPI_Comm_group(comm, &group)) !=
        MPI_SUCCESS)
        return 0;
    PMPI_Comm_group(MPI_COMM_WORLD, &world);
    PMPI_Group_size(group, &n);
    int *ranks = malloc(2 * (size_t)n * sizeof(int));
    if (ranks) {
        for (int i = 0; i < n; i++) ranks[i] = i;
        PMPI_Group_translate_ranks(group, n, ranks, world, ranks + n);
        memmove(ranks, ranks + n, (size_t)n * sizeof(int));
    }
    PMPI_Group_free(&group);
    PMPI_Group_free(&world);
    if (!ranks) return 0;
    free(m->world);
    m->id = MPI_Comm_c2f(comm);
    m->size = n;
    m->world = ranks;
    return 1;
}

static int32_t world_rank(MPI_Comm comm, int rank) {
    if (rank < 0) return RT_NONE;
    if (comm == MPI_COMM_WORLD) return rank;
    MPI_Fint id = MPI_Comm_c2f(comm);
    int32_t out = RT_NONE;
    pthread_mutex_lock(&cache_lock);
    struct comm_map *m = NULL;
    for (int i = 0; i < RT_COMM_CACHE && !m; i++)
        if (cache[i].size && cache[i].id == id) m = &cache[i];
    if (!m) {
        m = &cache[cache_next++ % RT_COMM_CACHE];
        if (!fill_map(m, comm)) m = NULL;
    }
    if (m && rank < m->size && m->world[rank] != MPI_UNDEFINED) out = m->world[rank];
    pthread_mutex_unlock(&cache_lock);
    return out;
}

void rt_forget_comm(MPI_Comm comm) {
    forget_comm_number(comm);
    MPI_Fint id = MPI_Comm_c2f(comm);
    pthread_mutex_lock(&cache_lock);
    for (int i = 0; i < RT_COMM_CACHE; i++)
        if (cache[i].size && cache[i].id == id) cache[i].size = 0;
    pthread_mutex_unlock(&cache_lock);
}

void wc_peer(wcall *w, MPI_Comm comm, int rank) {
    w->c.peer = rt_norm_rank(rank);
    w->c.peer_world = world_rank(comm, rank);
}

void wc_new_comm(wcall *w, MPI_Comm comm) {
    if (comm == MPI_COMM_NULL) return;
    int rank = 0;
    MPI_Group group, world;
    int zero = 0, leader = MPI_UNDEFINED;
    PMPI_Comm_rank(comm, &rank);
    /* The leader is rank 0 of this side: the local group, even for an intercommunicator. */
    PMPI_Comm_group(comm, &group);
    PMPI_Comm_group(MPI_COMM_WORLD, &world);
    PMPI_Group_translate_ranks(group, 1, &zero, world, &leader);
    PMPI_Group_free(&group);
    PMPI_Group_free(&world);
    w->c.new_rank = rank;
    w->c.new_leader = leader == MPI_UNDEFINED ? RT_NONE : leader;
    w->c.new_comm = comm_name(comm, w->new_comm_buf, sizeof w->new_comm_buf);
}

/* ---- matches and completions ---- */

static int64_t status_bytes(const MPI_Status *st) {
    int n = MPI_UNDEFINED;
    if (PMPI_Get_count(st, MPI_BYTE, &n) != MPI_SUCCESS || n == MPI_UNDEFINED) return -1;
    return n;
}

void wc_matched(wcall *w, const MPI_Status *st) {
    if (st->MPI_SOURCE == MPI_PROC_NULL) return;
    rt_matched(&w->c, rt_norm_rank(st->MPI_SOURCE), rt_norm_tag(st->MPI_TAG),
               status_bytes(st));
}

void wc_received(wcall *w, int rc, const MPI_Status *st) {
    int cls = MPI_SUCCESS;
    if (rc != MPI_SUCCESS) PMPI_Error_class(rc, &cls);
    if (cls == MPI_SUCCESS || cls == MPI_ERR_TRUNCATE) wc_matched(w, st);
}

void wc_completed(wcall *w, int64_t id, const MPI_Status *st) {
    int cancelled = 0;
    PMPI_Test_cancelled(st, &cancelled);
    rt_completed(&w->c, id, rt_norm_rank(st->MPI_SOURCE), rt_norm_tag(st->MPI_TAG),
                 status_bytes(st), cancelled);
    rt_release_edit(id);
}

/* ---- edited content of nonblocking sends ---- */

struct edit {
    struct edit *next;
    int64_t request;
    void *copy;
};
static struct edit *edits;
static pthread_mutex_t edit_lock = PTHREAD_MUTEX_INITIALIZER;

const void *rt_keep_edit(const wcall *w) {
    /* Only basic types are edited: contiguous, `bytes` long. */
    if (!w->c.edited_buf || !w->c.elem_kind || w->c.bytes <= 0) return NULL;
    void *copy = malloc((size_t)w->c.bytes);
    if (copy) memcpy(copy, w->c.edited_buf, (size_t)w->c.bytes);
    return copy;
}

void rt_own_edit(const void *copy, int64_t request) {
    struct edit *e = malloc(sizeof *e);
    if (!e) return;
    e->request = request;
    e->copy = (void *)copy;
    pthread_mutex_lock(&edit_lock);
    e->next = edits;
    __atomic_store_n(&edits, e, __ATOMIC_RELEASE);
    pthread_mutex_unlock(&edit_lock);
}

void wc_request(wcall *w, int64_t id) {
    rt_release_edit(id);
    rt_request(&w->c, id);
}

void rt_release_all_edits(void) {
    pthread_mutex_lock(&edit_lock);
    struct edit *e = edits;
    __atomic_store_n(&edits, NULL, __ATOMIC_RELEASE);
    pthread_mutex_unlock(&edit_lock);
    while (e) {
        struct edit *next = e->next;
        free(e->copy);
        free(e);
        e = next;
    }
}

void rt_release_edit(int64_t request) {
    /* Unlocked peek: nearly always empty, and only this rank's own calls add to it. */
    if (!__atomic_load_n(&edits, __ATOMIC_ACQUIRE)) return;
    pthread_mutex_lock(&edit_lock);
    for (struct edit **p = &edits; *p; p = &(*p)->next) {
        if ((*p)->request != request) continue;
        struct edit *e = *p;
        __atomic_store_n(p, e->next, __ATOMIC_RELEASE);
        free(e->copy);
        free(e);
        break;
    }
    pthread_mutex_unlock(&edit_lock);
}
