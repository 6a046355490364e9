/* calls.c: one of each kind of covered call, checking its own results, for run.sh to
 * count what the wrappers reported. Needs at least 2 ranks. */
#include <mpi.h>
#include <time.h>
#include <stdio.h>
#include <stdlib.h>

#define CHECK(c)                                                                          \
    do {                                                                                  \
        if (!(c)) {                                                                       \
            fprintf(stderr, "calls.c:%d: check failed: %s\n", __LINE__, #c);              \
            MPI_Abort(MPI_COMM_WORLD, 1);                                                 \
        }                                                                                 \
    } while (0)

int main(int argc, char **argv) {
    int rank, size;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    MPI_Pcontrol(2, "start");
    /* The program's clocks, which a replay log keeps. */
    CHECK(MPI_Wtime() >= 0 && time(NULL) > 0); /* Open MPI counts from MPI_Init */

    /* Wildcard Irecvs on rank 0 completed by a Waitall that ignores statuses. */
    if (rank == 0) {
        int in[16];
        MPI_Request reqs[16];
        for (int i = 1; i < size; i++)
            MPI_Irecv(&in[i], 1, MPI_INT, MPI_ANY_SOURCE, MPI_ANY_TAG, MPI_COMM_WORLD,
                      &reqs[i - 1]);
        MPI_Waitall(size - 1, reqs, MPI_STATUSES_IGNORE);
        int sum = 0;
        for (int i = 1; i < size; i++) sum += in[i];
        CHECK(sum == size * (size - 1) / 2 * 10);
    } else {
        int v = rank * 10;
        MPI_Send(&v, 1, MPI_INT, 0, 100 + rank, MPI_COMM_WORLD);
    }
    /* No later message may reach the wildcard receives. */
    MPI_Barrier(MPI_COMM_WORLD);

    /* A ring with Sendrecv of doubles. */
    double out = rank, got = -1;
    MPI_Sendrecv(&out, 1, MPI_DOUBLE, (rank + 1) % size, 7, &got, 1, MPI_DOUBLE,
                 (rank + size - 1) % size, 7, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    CHECK(got == (rank + size - 1) % size);

    /* Collectives. */
    int b = rank == 0 ? 42 : 0;
    MPI_Bcast(&b, 1, MPI_INT, 0, MPI_COMM_WORLD);
    CHECK(b == 42);
    long r = rank, total = 0;
    MPI_Allreduce(&r, &total, 1, MPI_LONG, MPI_SUM, MPI_COMM_WORLD);
    CHECK(total == (long)size * (size - 1) / 2);
    long below = -1;
    MPI_Exscan(&r, &below, 1, MPI_LONG, MPI_SUM, MPI_COMM_WORLD);
    if (rank > 0) CHECK(below == (long)rank * (rank - 1) / 2);
    char all[16];
    char mine = (char)('a' + rank);
    MPI_Gather(&mine, 1, MPI_CHAR, all, 1, MPI_CHAR, 0, MPI_COMM_WORLD);
    if (rank == 0)
        for (int i = 0; i < size; i++) CHECK(all[i] == 'a' + i);

    /* Split into odd and even ranks, reversed; a Barrier on the new one, then free it. */
    MPI_Comm half;
    MPI_Comm_split(MPI_COMM_WORLD, rank % 2, -rank, &half);
    int hrank;
    MPI_Comm_rank(half, &hrank);
    MPI_Barrier(half);
    /* A send on the new communicator, to check world-rank translation. */
    int hsize;
    MPI_Comm_size(half, &hsize);
    if (hsize > 1) {
        int x = rank;
        if (hrank == 0) MPI_Send(&x, 1, MPI_INT, 1, 5, half);
        if (hrank == 1) {
            MPI_Recv(&x, 1, MPI_INT, 0, 5, half, MPI_STATUS_IGNORE);
            CHECK(x % 2 == rank % 2 && x > rank);
        }
    }
    MPI_Comm_free(&half);

    /* Iprobe until a message is there, then receive it. */
    if (rank == 1) {
        short v[3] = {1, 2, 3};
        MPI_Send(v, 3, MPI_SHORT, 0, 9, MPI_COMM_WORLD);
    } else if (rank == 0) {
        int flag = 0;
        MPI_Status st;
        while (!flag) MPI_Iprobe(MPI_ANY_SOURCE, MPI_ANY_TAG, MPI_COMM_WORLD, &flag, &st);
        CHECK(st.MPI_SOURCE == 1 && st.MPI_TAG == 9);
        short v[3];
        MPI_Recv(v, 3, MPI_SHORT, 1, 9, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        CHECK(v[2] == 3);
    }

    MPI_Pcontrol(0);
    MPI_Barrier(MPI_COMM_WORLD);
    MPI_Pcontrol(1);
    if (rank == 0) printf("calls: ok\n");
    MPI_Finalize();
    return 0;
}
