/* forced.c: rank 0 receives twice from MPI_ANY_SOURCE, after a barrier that makes sure
 * both other ranks' messages have been sent, and prints which source each receive
 * matched. With the stub forcing source 2 (RT_STUB_FORCE_SOURCE=2), the first receive
 * must match rank 2 and the second rank 1: the other message stays queued. 3 ranks. */
#include <mpi.h>
#include <stdio.h>

int main(int argc, char **argv) {
    int rank;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    if (rank == 0) {
        MPI_Barrier(MPI_COMM_WORLD);
        for (int i = 0; i < 2; i++) {
            int v;
            MPI_Status st;
            MPI_Recv(&v, 1, MPI_INT, MPI_ANY_SOURCE, MPI_ANY_TAG, MPI_COMM_WORLD, &st);
            printf("forced: receive %d matched source %d tag %d value %d\n", i, st.MPI_SOURCE,
                   st.MPI_TAG, v);
            if (v != st.MPI_SOURCE * 100) MPI_Abort(MPI_COMM_WORLD, 1);
        }
    } else {
        int v = rank * 100;
        MPI_Request req;
        /* Nonblocking, so the barrier does not wait for rank 0 to receive. */
        MPI_Isend(&v, 1, MPI_INT, 0, rank, MPI_COMM_WORLD, &req);
        MPI_Barrier(MPI_COMM_WORLD);
        MPI_Wait(&req, MPI_STATUS_IGNORE);
    }
    MPI_Finalize();
    return 0;
}
