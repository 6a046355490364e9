/* mergesort: the thesis' tree merge sort with its wildcard-receive race (Listing 5.9).
 *
 * Rank 0 scatters the input (MPI_Scatterv), every rank sorts its slice, then the sorted
 * slices are merged up a binary tree in log2(P) levels. At level L (step S = 2^L) rank r
 * with r % 2S == S sends its sorted run to its parent r - S with MPI_Isend; then all ranks
 * pass an MPI_Barrier; then each parent (r % 2S == 0) receives its child's run with
 *     MPI_Recv(buf, <size of the child r + S's run>, MPI_INT, MPI_ANY_SOURCE, 0, ...)
 * and merges it. A sender keeps its Isend pending until the end, so at level L a parent
 * may already have another child's send pending: the child one level up.
 *
 * The race (4 ranks): rank 1's send (level 0, N/4 values) and rank 2's send (level 1, N/2
 * values, posted as soon as rank 2 has merged rank 3's run) are both pending to rank 0
 * when rank 0 posts its level-0 wildcard receive, sized N/4 for rank 1. MPI lets that
 * receive match either. Matching rank 1's send sorts correctly; matching rank 2's send
 * truncates the message (MPI_ERR_TRUNCATE), and rank 0's level-1 receive then gets rank
 * 1's N/4 values where it expects rank 2's N/2. In a normal run the level-0 send arrived
 * before the barrier and the implementations match it first, so the sort is correct; a
 * debugger that forces the wildcard onto rank 2 makes it fail. With 8 ranks the same holds
 * between ranks 1, 2 and 4 at rank 0 (and between 5 and 6 at rank 4).
 *
 * The program does not crash on a wrong match: MPI_ERRORS_RETURN is set on
 * MPI_COMM_WORLD, every receive's error class, source and count are checked, and the
 * report says `"matches_reference":false` with an `"error"` field.
 *
 * MERGESORT_FORCE_WRONG=1 (4 ranks or more) makes rank 0's level-0 receive name rank 2 as
 * its source instead of MPI_ANY_SOURCE: the failing match, without a debugger.
 *
 * --irecv posts each receive with MPI_Irecv and completes it with MPI_Wait: the same race
 * through the nonblocking path, where a truncation is reported by the completion. */
#include "common.h"

static const char *const USAGE =
    "usage: mergesort [--size N] [--irecv]   (ranks: a power of two; "
    "MERGESORT_FORCE_WRONG=1 needs 4 or more)";

enum { TAG = 0 };

/* What went wrong at one receive, as ints so that rank 0 can gather it. */
enum { E_FLAG, E_LEVEL, E_WANT_SRC, E_WANT_COUNT, E_GOT_SRC, E_GOT_COUNT, E_CLASS, E_LEN };

typedef struct {
    int rank, size, n;
    int force_wrong;
    int irecv; /* receive with MPI_Irecv + MPI_Wait */
    int *run;     /* this rank's sorted run (grows as children are merged in) */
    int run_len;
    int err[E_LEN];
} sorter;

static int cmp_int(const void *a, const void *b)
{
    int x = *(const int *)a, y = *(const int *)b;
    return (x > y) - (x < y);
}

/* First index of rank r's slice. */
static int lo(int r, int size, int n)
{
    return (int)((long long)r * n / size);
}

static int *input(int n)
{
    int *v = malloc(sizeof(int) * (size_t)(n > 0 ? n : 1));
    ex_lcg g = ex_lcg_new(7);
    for (int i = 0; i < n; i++)
        v[i] = (int)(ex_lcg_next(&g) % 2000000) - 1000000;
    return v;
}

/* Position-weighted checksum (order-sensitive), wrapping like the runtime examples'. */
static long long checksum(const int *v, int n)
{
    unsigned long long sum = 0;
    for (int i = 0; i < n; i++)
        sum += (unsigned long long)(long long)v[i] * (unsigned long long)(i + 1);
    return (long long)sum;
}

static void merge_into(sorter *s, const int *b, int blen)
{
    int *out = malloc(sizeof(int) * (size_t)(s->run_len + blen + 1));
    int i = 0, j = 0, k = 0;
    while (i < s->run_len && j < blen)
        out[k++] = s->run[i] <= b[j] ? s->run[i++] : b[j++];
    while (i < s->run_len)
        out[k++] = s->run[i++];
    while (j < blen)
        out[k++] = b[j++];
    free(s->run);
    s->run = out;
    s->run_len = k;
}

/* The scatter and the local sort; rank 0 keeps the whole input in `*all`. */
static void scatter_and_sort(sorter *s, int **all)
{
    int *counts = malloc(sizeof(int) * (size_t)s->size);
    int *displs = malloc(sizeof(int) * (size_t)s->size);
    for (int r = 0; r < s->size; r++) {
        displs[r] = lo(r, s->size, s->n);
        counts[r] = lo(r + 1, s->size, s->n) - displs[r];
    }
    *all = s->rank == 0 ? input(s->n) : NULL;
    s->run_len = counts[s->rank];
    s->run = malloc(sizeof(int) * (size_t)(s->run_len + 1));
    MPI_Scatterv(*all, counts, displs, MPI_INT, s->run, s->run_len, MPI_INT, 0,
                 MPI_COMM_WORLD);
    qsort(s->run, (size_t)s->run_len, sizeof(int), cmp_int);
    free(counts);
    free(displs);
}

/* The parent's receive at `level` from `child`, whose run covers ranks child..child+step. */
static void receive_child(sorter *s, int level, int child, int step)
{
    int want = lo(child + step, s->size, s->n) - lo(child, s->size, s->n);
    /* Room for the largest message any rank sends, though the receive's count is `want`:
     * Open MPI 4.1's shared-memory single-copy path (CMA) writes a truncated rendezvous
     * message in full, past the count, before it reports the truncation. */
    int *buf = malloc(sizeof(int) * (size_t)(s->n + 1));
    int source = MPI_ANY_SOURCE;
    if (s->force_wrong && s->rank == 0 && level == 0)
        source = 2; /* the child one level up: its send is the other candidate */
    MPI_Status st;
    int rc;
    if (s->irecv) {
        MPI_Request req;
        rc = MPI_Irecv(buf, want, MPI_INT, source, TAG, MPI_COMM_WORLD, &req);
        if (rc == MPI_SUCCESS)
            rc = MPI_Wait(&req, &st);
    } else {
        rc = MPI_Recv(buf, want, MPI_INT, source, TAG, MPI_COMM_WORLD, &st);
    }
    int got = -1, cls = MPI_SUCCESS;
    if (rc != MPI_SUCCESS)
        MPI_Error_class(rc, &cls);
    MPI_Get_count(&st, MPI_INT, &got);
    if (rc != MPI_SUCCESS || st.MPI_SOURCE != child || got != want) {
        if (!s->err[E_FLAG]) {
            int e[E_LEN] = {1, level, child, want, st.MPI_SOURCE, got, cls};
            memcpy(s->err, e, sizeof e);
        }
    } else {
        merge_into(s, buf, got);
    }
    free(buf);
}

/* The tree: Isend to the parent at this rank's level, barrier, wildcard receive. */
static void merge_tree(sorter *s)
{
    MPI_Request send = MPI_REQUEST_NULL;
    int sent = 0;
    for (int level = 0, step = 1; step < s->size; level++, step *= 2) {
        if (!sent && s->rank % (2 * step) == step) {
            MPI_Isend(s->run, s->run_len, MPI_INT, s->rank - step, TAG, MPI_COMM_WORLD,
                      &send);
            sent = 1;
        }
        MPI_Barrier(MPI_COMM_WORLD);
        if (!sent && s->rank % (2 * step) == 0)
            receive_child(s, level, s->rank + step, step);
    }
    MPI_Wait(&send, MPI_STATUS_IGNORE);
}

/* Rank 0: the first rank's error (gathered) as a sentence without JSON specials. */
static void describe_error(const int *errs, int size, char *out, size_t cap)
{
    out[0] = '\0';
    for (int r = 0; r < size; r++) {
        const int *e = errs + r * E_LEN;
        if (!e[E_FLAG])
            continue;
        char what[MPI_MAX_ERROR_STRING] = "no MPI error";
        int len = 0;
        if (e[E_CLASS] != MPI_SUCCESS)
            MPI_Error_string(e[E_CLASS], what, &len);
        for (char *c = what; *c; c++)
            if (*c == '"' || *c == '\\' || (unsigned char)*c < 0x20)
                *c = '\'';
        snprintf(out, cap,
                 "rank %d, level %d: the receive sized for rank %d (%d ints) matched rank "
                 "%d's message, count %d%s: %s",
                 r, e[E_LEVEL], e[E_WANT_SRC], e[E_WANT_COUNT], e[E_GOT_SRC], e[E_GOT_COUNT],
                 e[E_CLASS] == MPI_ERR_TRUNCATE ? " (MPI_ERR_TRUNCATE)" : "", what);
        return;
    }
}

/* Rank 0: compare with the sequential sort and print the report; returns the exit code. */
static int report(const sorter *s, int *all, const int *errs, double elapsed)
{
    char error[512 + MPI_MAX_ERROR_STRING];
    describe_error(errs, s->size, error, sizeof error);
    qsort(all, (size_t)s->n, sizeof(int), cmp_int);
    int sorted = 1;
    for (int i = 1; i < s->run_len; i++)
        sorted &= s->run[i - 1] <= s->run[i];
    int matches = error[0] == '\0' && s->run_len == s->n &&
                  memcmp(s->run, all, sizeof(int) * (size_t)s->n) == 0;
    char result[32], reference[32];
    snprintf(result, sizeof result, "%lld", checksum(s->run, s->run_len));
    snprintf(reference, sizeof reference, "%lld", checksum(all, s->n));
    ex_report_begin("mergesort", result, reference, matches, s->size, elapsed);
    printf(",\"size\":%d,\"sorted\":%s,\"length\":%d", s->n, sorted ? "true" : "false",
           s->run_len);
    if (s->force_wrong)
        printf(",\"force_wrong\":true");
    if (error[0])
        printf(",\"error\":\"%s\"", error);
    ex_report_end();
    return matches ? 0 : EXIT_MISMATCH;
}

static void parse_args(sorter *s, int argc, char **argv)
{
    long n = 100000;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--irecv") == 0)
            s->irecv = 1;
        else if (ex_long_opt(argc, argv, &i, "--size", &n) != 1)
            ex_usage_exit(s->rank, "bad argument (expected --size N or --irecv)", USAGE);
    }
    if (n > 100000000)
        ex_usage_exit(s->rank, "--size is at most 100000000", USAGE);
    s->n = (int)n;
    if ((s->size & (s->size - 1)) != 0)
        ex_usage_exit(s->rank, "the number of ranks must be a power of two", USAGE);
    const char *force = getenv("MERGESORT_FORCE_WRONG");
    s->force_wrong = force && force[0] && strcmp(force, "0") != 0;
    if (s->force_wrong && s->size < 4)
        ex_usage_exit(s->rank, "MERGESORT_FORCE_WRONG needs 4 or more ranks", USAGE);
}

int main(int argc, char **argv)
{
    sorter s = {0};
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &s.rank);
    MPI_Comm_size(MPI_COMM_WORLD, &s.size);
    /* A wrong match must be reported, not abort the job. */
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    parse_args(&s, argc, argv);

    double t0 = MPI_Wtime();
    int *all = NULL;
    scatter_and_sort(&s, &all);
    merge_tree(&s);
    double elapsed = MPI_Wtime() - t0;

    int *errs = s.rank == 0 ? malloc(sizeof(int) * E_LEN * (size_t)s.size) : NULL;
    MPI_Gather(s.err, E_LEN, MPI_INT, errs, E_LEN, MPI_INT, 0, MPI_COMM_WORLD);
    int code = s.rank == 0 ? report(&s, all, errs, elapsed) : 0;
    MPI_Bcast(&code, 1, MPI_INT, 0, MPI_COMM_WORLD);
    free(errs);
    free(all);
    free(s.run);
    MPI_Finalize();
    return code;
}
