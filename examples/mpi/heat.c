/* heat: 1-D heat diffusion, the domain split over the ranks, halos exchanged with
 * MPI_Sendrecv every step (the MPI counterpart of the runtime example `heat`).
 *
 * Rank r owns cells [r*C/P, (r+1)*C/P). Each step it sends its first cell to the left
 * neighbour while receiving its right halo, then its last cell to the right neighbour
 * while receiving its left halo (MPI_PROC_NULL at the domain's edges, where the halo is
 * the fixed boundary temperature). The slices are gathered on rank 0 (MPI_Gatherv) and
 * compared with a sequential run on rank 0: bit for bit, since every cell is computed by
 * the same expression from the same operands in both. */
#include "common.h"

static const char *const USAGE = "usage: heat [--cells C] [--iters K]   (C >= ranks)";

/* Diffusion coefficient and the fixed temperature outside the domain, as in heat.rs. */
static const double ALPHA = 0.25;
static const double BOUNDARY = 0.0;

static double initial_cell(long i)
{
    return (double)((i * 7) % 13) * 10.0 + (i % 16 == 5 ? 100.0 : 0.0);
}

static double update_cell(double c, double l, double r)
{
    return c + ALPHA * (l + r - 2.0 * c);
}

/* One step of `n` cells between halos `left` and `right`: `cur` into `next`. */
static void step(const double *cur, double *next, long n, double left, double right)
{
    for (long k = 0; k < n; k++) {
        double l = k == 0 ? left : cur[k - 1];
        double r = k + 1 == n ? right : cur[k + 1];
        next[k] = update_cell(cur[k], l, r);
    }
}

/* The whole domain after `iters` steps, sequentially (the reference). */
static double *sequential(long cells, long iters)
{
    double *cur = calloc((size_t)cells + 1, sizeof(double));
    double *next = calloc((size_t)cells + 1, sizeof(double));
    for (long i = 0; i < cells; i++)
        cur[i] = initial_cell(i);
    for (long it = 0; it < iters; it++) {
        step(cur, next, cells, BOUNDARY, BOUNDARY);
        double *t = cur;
        cur = next;
        next = t;
    }
    free(next);
    return cur;
}

static long lo(int r, int size, long cells)
{
    return (long)((long long)r * cells / size);
}

/* This rank's slice after `iters` steps with halo exchanges. */
static double *parallel(int rank, int size, long cells, long iters, long *len)
{
    long first = lo(rank, size, cells);
    long n = lo(rank + 1, size, cells) - first;
    int left = rank > 0 ? rank - 1 : MPI_PROC_NULL;
    int right = rank + 1 < size ? rank + 1 : MPI_PROC_NULL;
    double *cur = malloc(sizeof(double) * (size_t)n);
    double *next = malloc(sizeof(double) * (size_t)n);
    for (long k = 0; k < n; k++)
        cur[k] = initial_cell(first + k);
    for (long it = 0; it < iters; it++) {
        /* MPI_PROC_NULL leaves the receive buffer as it is: the boundary stays. */
        double lhalo = BOUNDARY, rhalo = BOUNDARY;
        MPI_Sendrecv(&cur[0], 1, MPI_DOUBLE, left, 0, &rhalo, 1, MPI_DOUBLE, right, 0,
                     MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        MPI_Sendrecv(&cur[n - 1], 1, MPI_DOUBLE, right, 1, &lhalo, 1, MPI_DOUBLE, left, 1,
                     MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        step(cur, next, n, lhalo, rhalo);
        double *t = cur;
        cur = next;
        next = t;
    }
    free(next);
    *len = n;
    return cur;
}

/* Sum of the cells in index order (the same order on both sides). */
static double checksum(const double *v, long n)
{
    double sum = 0.0;
    for (long i = 0; i < n; i++)
        sum += v[i];
    return sum;
}

/* Rank 0: compare the gathered domain with the sequential one and print the report. */
static int report(const double *domain, long cells, long iters, int size, double elapsed)
{
    double *ref = sequential(cells, iters);
    int matches = memcmp(domain, ref, sizeof(double) * (size_t)cells) == 0;
    long differing = 0;
    for (long i = 0; i < cells; i++)
        differing += memcmp(&domain[i], &ref[i], sizeof(double)) != 0;
    char result[40], reference[40];
    snprintf(result, sizeof result, "%.17g", checksum(domain, cells));
    snprintf(reference, sizeof reference, "%.17g", checksum(ref, cells));
    ex_report_begin("heat", result, reference, matches, size, elapsed);
    printf(",\"cells\":%ld,\"iters\":%ld,\"differing_cells\":%ld", cells, iters, differing);
    ex_report_end();
    free(ref);
    return matches ? 0 : EXIT_MISMATCH;
}

int main(int argc, char **argv)
{
    int rank, size;
    long cells = 256, iters = 20;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    for (int i = 1; i < argc; i++) {
        int ok = ex_long_opt(argc, argv, &i, "--cells", &cells);
        if (ok == 0)
            ok = ex_long_opt(argc, argv, &i, "--iters", &iters);
        if (ok != 1)
            ex_usage_exit(rank, "bad argument (expected --cells C or --iters K)", USAGE);
    }
    if (cells < size || cells > 100000000)
        ex_usage_exit(rank, "--cells must be at least the number of ranks", USAGE);

    double t0 = MPI_Wtime();
    long n = 0;
    double *slice = parallel(rank, size, cells, iters, &n);
    int *counts = NULL, *displs = NULL;
    double *domain = NULL;
    if (rank == 0) {
        counts = malloc(sizeof(int) * (size_t)size);
        displs = malloc(sizeof(int) * (size_t)size);
        for (int r = 0; r < size; r++) {
            displs[r] = (int)lo(r, size, cells);
            counts[r] = (int)(lo(r + 1, size, cells) - displs[r]);
        }
        domain = malloc(sizeof(double) * (size_t)cells);
    }
    MPI_Gatherv(slice, (int)n, MPI_DOUBLE, domain, counts, displs, MPI_DOUBLE, 0,
                MPI_COMM_WORLD);
    double elapsed = MPI_Wtime() - t0;

    int code = rank == 0 ? report(domain, cells, iters, size, elapsed) : 0;
    MPI_Bcast(&code, 1, MPI_INT, 0, MPI_COMM_WORLD);
    free(slice);
    free(counts);
    free(displs);
    free(domain);
    MPI_Finalize();
    return code;
}
