/* edits.c: rank 1's nonblocking sends, each edited by the stub (RT_STUB_EDIT=1: its
 * value plus 1000), reach rank 0 edited: one whose request is given to MPI_Request_free
 * before it completes, one completed by MPI_Wait, after the buffer was overwritten (MPI
 * sends the wrappers' copy, which must outlive the call). Under valgrind
 * --leak-check=full no copy is left at exit (the freed request's is released when its
 * handle is reused, or after MPI_Finalize). 2 ranks. */
#include <mpi.h>
#include <stdio.h>

int main(int argc, char **argv) {
    int rank;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    if (rank == 1) {
        int a = 1, b = 2;
        MPI_Request ra, rb;
        MPI_Isend(&a, 1, MPI_INT, 0, 1, MPI_COMM_WORLD, &ra);
        MPI_Request_free(&ra);
        MPI_Isend(&b, 1, MPI_INT, 0, 2, MPI_COMM_WORLD, &rb);
        a = b = -1;
        MPI_Barrier(MPI_COMM_WORLD);
        MPI_Wait(&rb, MPI_STATUS_IGNORE);
    } else if (rank == 0) {
        int a = 0, b = 0;
        MPI_Barrier(MPI_COMM_WORLD);
        MPI_Recv(&a, 1, MPI_INT, 1, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        MPI_Recv(&b, 1, MPI_INT, 1, 2, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        printf("edits: received %d %d\n", a, b);
    }
    MPI_Finalize();
    return 0;
}
