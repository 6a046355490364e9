/* coverage: a correct program that makes, on every rank, each MPI call of the families the
 * older examples leave out: nonblocking collectives, persistent requests,
 * MPI_Request_free, matched probes and one-sided communication (fences, locks,
 * post/start/complete/wait). Each part checks what it received; rank 0 prints how many
 * checks passed over the job, and "first": the source of the first message its wildcard
 * MPI_Mprobe (tag 32) matched (ranks 1 and 2 send one each).
 *
 *   coverage            (at least 3 ranks; the tests run 4)
 */
#include "common.h"

static int passed, checks;

static void check(int ok)
{
    checks++;
    passed += ok != 0;
}

static void nonblocking_collectives(int rank, int size)
{
    MPI_Comm w = MPI_COMM_WORLD;
    MPI_Request r;
    int v = 0, sum = 0, all = 0, scan = 0, ex = 0, one = rank + 1;
    int *gath = calloc((size_t)size, sizeof(int)), *send = calloc((size_t)size, sizeof(int));
    int *recv = calloc((size_t)size, sizeof(int)), *counts = calloc((size_t)size, sizeof(int));
    int *displs = calloc((size_t)size, sizeof(int));
    for (int i = 0; i < size; i++) {
        counts[i] = 1;
        displs[i] = i;
        send[i] = rank * 100 + i;
    }
    MPI_Ibarrier(w, &r);
    MPI_Wait(&r, MPI_STATUS_IGNORE);
    if (rank == 0)
        v = 42;
    MPI_Ibcast(&v, 1, MPI_INT, 0, w, &r);
    MPI_Wait(&r, MPI_STATUS_IGNORE);
    check(v == 42);
    MPI_Ireduce(&one, &sum, 1, MPI_INT, MPI_SUM, 0, w, &r);
    MPI_Wait(&r, MPI_STATUS_IGNORE);
    check(rank != 0 || sum == size * (size + 1) / 2);
    MPI_Iallreduce(&one, &all, 1, MPI_INT, MPI_SUM, w, &r);
    MPI_Wait(&r, MPI_STATUS_IGNORE);
    check(all == size * (size + 1) / 2);
    MPI_Igather(&rank, 1, MPI_INT, gath, 1, MPI_INT, 0, w, &r);
    MPI_Wait(&r, MPI_STATUS_IGNORE);
    check(rank != 0 || gath[size - 1] == size - 1);
    MPI_Igatherv(&one, 1, MPI_INT, gath, counts, displs, MPI_INT, 0, w, &r);
    MPI_Wait(&r, MPI_STATUS_IGNORE);
    check(rank != 0 || gath[size - 1] == size);
    MPI_Iscatter(send, 1, MPI_INT, &v, 1, MPI_INT, 0, w, &r);
    MPI_Wait(&r, MPI_STATUS_IGNORE);
    check(v == rank);
    MPI_Iscatterv(send, counts, displs, MPI_INT, &v, 1, MPI_INT, 0, w, &r);
    MPI_Wait(&r, MPI_STATUS_IGNORE);
    check(v == rank);
    MPI_Iallgather(&rank, 1, MPI_INT, recv, 1, MPI_INT, w, &r);
    MPI_Wait(&r, MPI_STATUS_IGNORE);
    check(recv[size - 1] == size - 1);
    MPI_Iallgatherv(&one, 1, MPI_INT, recv, counts, displs, MPI_INT, w, &r);
    MPI_Wait(&r, MPI_STATUS_IGNORE);
    check(recv[size - 1] == size);
    MPI_Ialltoall(send, 1, MPI_INT, recv, 1, MPI_INT, w, &r);
    MPI_Wait(&r, MPI_STATUS_IGNORE);
    check(recv[size - 1] == (size - 1) * 100 + rank);
    MPI_Ialltoallv(send, counts, displs, MPI_INT, recv, counts, displs, MPI_INT, w, &r);
    MPI_Wait(&r, MPI_STATUS_IGNORE);
    check(recv[0] == rank);
    MPI_Ireduce_scatter(send, &v, counts, MPI_INT, MPI_SUM, w, &r);
    MPI_Wait(&r, MPI_STATUS_IGNORE);
    check(v == 100 * size * (size - 1) / 2 + size * rank);
    MPI_Iscan(&one, &scan, 1, MPI_INT, MPI_SUM, w, &r);
    MPI_Wait(&r, MPI_STATUS_IGNORE);
    check(scan == (rank + 1) * (rank + 2) / 2);
    MPI_Iexscan(&one, &ex, 1, MPI_INT, MPI_SUM, w, &r);
    MPI_Wait(&r, MPI_STATUS_IGNORE);
    check(rank == 0 || ex == rank * (rank + 1) / 2);
    free(gath);
    free(send);
    free(recv);
    free(counts);
    free(displs);
}

/* A ring of persistent sends in each mode, each to the right neighbour. */
static void persistent(int rank, int size)
{
    int right = (rank + 1) % size, left = (rank + size - 1) % size;
    int out = rank, in = -1;
    MPI_Request r[2];
    MPI_Status sts[2];
    MPI_Send_init(&out, 1, MPI_INT, right, 20, MPI_COMM_WORLD, &r[0]);
    MPI_Recv_init(&in, 1, MPI_INT, left, 20, MPI_COMM_WORLD, &r[1]);
    MPI_Start(&r[1]);
    MPI_Start(&r[0]);
    MPI_Waitall(2, r, sts);
    check(in == left);
    out = rank + 10;
    MPI_Startall(2, r);
    MPI_Waitall(2, r, sts);
    check(in == left + 10);
    MPI_Request_free(&r[0]);
    MPI_Request_free(&r[1]);

    MPI_Ssend_init(&out, 1, MPI_INT, right, 21, MPI_COMM_WORLD, &r[0]);
    MPI_Recv_init(&in, 1, MPI_INT, left, 21, MPI_COMM_WORLD, &r[1]);
    MPI_Startall(2, r);
    MPI_Waitall(2, r, sts);
    check(in == left + 10);
    MPI_Request_free(&r[0]);
    MPI_Request_free(&r[1]);

    int bsize = MPI_BSEND_OVERHEAD + (int)sizeof(int);
    void *buf = malloc((size_t)bsize);
    MPI_Buffer_attach(buf, bsize);
    out = rank + 20;
    MPI_Bsend_init(&out, 1, MPI_INT, right, 22, MPI_COMM_WORLD, &r[0]);
    MPI_Recv_init(&in, 1, MPI_INT, left, 22, MPI_COMM_WORLD, &r[1]);
    MPI_Start(&r[1]);
    MPI_Start(&r[0]);
    MPI_Waitall(2, r, sts);
    check(in == left + 20);
    MPI_Request_free(&r[0]);
    MPI_Request_free(&r[1]);
    MPI_Buffer_detach(&buf, &bsize);
    free(buf);

    /* Ready mode: every receive is posted before the barrier, every send after it. */
    out = rank + 30;
    MPI_Rsend_init(&out, 1, MPI_INT, right, 23, MPI_COMM_WORLD, &r[0]);
    MPI_Recv_init(&in, 1, MPI_INT, left, 23, MPI_COMM_WORLD, &r[1]);
    MPI_Start(&r[1]);
    MPI_Barrier(MPI_COMM_WORLD);
    MPI_Start(&r[0]);
    MPI_Waitall(2, r, sts);
    check(in == left + 30);
    MPI_Request_free(&r[0]);
    MPI_Request_free(&r[1]);

    /* A nonblocking send given up with MPI_Request_free: the receive says it arrived. */
    MPI_Request s;
    out = rank + 40;
    MPI_Isend(&out, 1, MPI_INT, right, 24, MPI_COMM_WORLD, &s);
    MPI_Request_free(&s);
    MPI_Recv(&in, 1, MPI_INT, left, 24, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    check(in == left + 40);
    MPI_Barrier(MPI_COMM_WORLD);
}

/* Matched probes: a blocking and a polling one around the ring, then rank 0's wildcard
 * probes of the messages of ranks 1 and 2. Returns the first of those sources. */
static int matched_probes(int rank, int size)
{
    int right = (rank + 1) % size, left = (rank + size - 1) % size;
    int out = rank + 50, in = -1, flag = 0, first = -1;
    MPI_Message m;
    MPI_Status st;
    MPI_Request r;
    MPI_Send(&out, 1, MPI_INT, right, 30, MPI_COMM_WORLD);
    MPI_Mprobe(left, 30, MPI_COMM_WORLD, &m, &st);
    MPI_Mrecv(&in, 1, MPI_INT, &m, MPI_STATUS_IGNORE);
    check(in == left + 50 && st.MPI_SOURCE == left);
    out = rank + 60;
    MPI_Isend(&out, 1, MPI_INT, right, 31, MPI_COMM_WORLD, &r);
    while (!flag)
        MPI_Improbe(left, 31, MPI_COMM_WORLD, &flag, &m, MPI_STATUS_IGNORE);
    MPI_Request rr;
    MPI_Imrecv(&in, 1, MPI_INT, &m, &rr);
    MPI_Wait(&rr, MPI_STATUS_IGNORE);
    MPI_Wait(&r, MPI_STATUS_IGNORE);
    check(in == left + 60);
    if (rank == 0) {
        for (int i = 0; i < 2; i++) {
            MPI_Mprobe(MPI_ANY_SOURCE, 32, MPI_COMM_WORLD, &m, &st);
            MPI_Mrecv(&in, 1, MPI_INT, &m, MPI_STATUS_IGNORE);
            check(in == st.MPI_SOURCE * 7);
            if (i == 0)
                first = st.MPI_SOURCE;
        }
    } else if (rank <= 2) {
        out = rank * 7;
        MPI_Send(&out, 1, MPI_INT, 0, 32, MPI_COMM_WORLD);
    }
    return first;
}

/* One-sided: every synchronisation mode, each rank writing to its right neighbour. */
static void one_sided(int rank, int size)
{
    int right = (rank + 1) % size, left = (rank + size - 1) % size;
    int cells[4] = {-1, -1, -1, 0}, got = -1, one = 1;
    MPI_Win win;
    MPI_Win_create(cells, sizeof cells, sizeof(int), MPI_INFO_NULL, MPI_COMM_WORLD, &win);
    MPI_Win_fence(0, win);
    MPI_Put(&rank, 1, MPI_INT, right, 0, 1, MPI_INT, win);
    MPI_Accumulate(&one, 1, MPI_INT, 0, 3, 1, MPI_INT, MPI_SUM, win);
    MPI_Win_fence(0, win);
    check(cells[0] == left && (rank != 0 || cells[3] == size));
    MPI_Get(&got, 1, MPI_INT, right, 0, 1, MPI_INT, win);
    MPI_Win_fence(0, win);
    check(got == rank);

    MPI_Win_lock(MPI_LOCK_EXCLUSIVE, right, 0, win);
    MPI_Put(&rank, 1, MPI_INT, right, 1, 1, MPI_INT, win);
    MPI_Win_unlock(right, win);
    MPI_Barrier(MPI_COMM_WORLD);
    MPI_Win_lock_all(0, win);
    MPI_Get(&got, 1, MPI_INT, right, 1, 1, MPI_INT, win);
    MPI_Win_flush(right, win);
    MPI_Win_flush_all(win);
    MPI_Win_unlock_all(win);
    check(got == rank);

    MPI_Group world, from, to;
    MPI_Comm_group(MPI_COMM_WORLD, &world);
    MPI_Group_incl(world, 1, &left, &from);
    MPI_Group_incl(world, 1, &right, &to);
    MPI_Win_post(from, 0, win);
    MPI_Win_start(to, 0, win);
    MPI_Put(&rank, 1, MPI_INT, right, 2, 1, MPI_INT, win);
    MPI_Win_complete(win);
    MPI_Win_wait(win);
    check(cells[2] == left);
    MPI_Group_free(&from);
    MPI_Group_free(&to);
    MPI_Group_free(&world);
    MPI_Win_free(&win);

    int *base = NULL;
    /* 64 cells: MPICH 4.0.2 misplaces puts into a one-int allocated window. */
    MPI_Win_allocate(64 * sizeof(int), sizeof(int), MPI_INFO_NULL, MPI_COMM_WORLD, &base, &win);
    *base = -1;
    MPI_Win_fence(0, win);
    MPI_Put(&rank, 1, MPI_INT, right, 0, 1, MPI_INT, win);
    MPI_Win_fence(0, win);
    check(*base == left);
    MPI_Win_free(&win);
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    int rank, size;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    if (size < 3)
        ex_usage_exit(rank, "coverage needs at least 3 ranks", "usage: coverage");
    double t0 = MPI_Wtime();
    nonblocking_collectives(rank, size);
    persistent(rank, size);
    int first = matched_probes(rank, size);
    one_sided(rank, size);
    int ok[2] = {passed, checks}, sum[2] = {0, 0};
    MPI_Reduce(ok, sum, 2, MPI_INT, MPI_SUM, 0, MPI_COMM_WORLD);
    if (rank == 0) {
        char result[32], reference[32];
        snprintf(result, sizeof result, "%d", sum[0]);
        snprintf(reference, sizeof reference, "%d", sum[1]);
        ex_report_begin("coverage", result, reference, sum[0] == sum[1], size,
                        MPI_Wtime() - t0);
        printf(",\"first\":%d", first);
        ex_report_end();
    }
    MPI_Finalize();
    return rank == 0 && sum[0] != sum[1] ? EXIT_MISMATCH : 0;
}
