/* dies: a wildcard race whose loser dies. Every rank but 0 sends its rank to rank 0;
 * rank 0 takes the first of them with MPI_ANY_SOURCE and then dies at once, the way
 * --how says:
 *   mpi_abort   MPI_Abort(MPI_COMM_WORLD, 3)
 *   abort       abort()  (SIGABRT, as a failed assert does)
 *   exit        exit(3) without MPI_Finalize
 *   segv        a fatal signal: SIGSEGV, from a store through a null pointer
 *   term        kill(getpid(), SIGTERM)
 * It is how a debugger shows the moment that matters most: the receive that decided the
 * failure must reach it, whatever killed the rank. Rank 0 prints the source it took on
 * stderr first (stdout is a pipe the rank may not flush before dying). */
#define _POSIX_C_SOURCE 200809L
#include <mpi.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    int rank, size;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    const char *how = "abort";
    for (int i = 1; i + 1 < argc; i++)
        if (strcmp(argv[i], "--how") == 0)
            how = argv[i + 1];
    if (rank != 0) {
        MPI_Send(&rank, 1, MPI_INT, 0, 7, MPI_COMM_WORLD);
        /* Wait to be killed with the job (rank 0 never gets here). */
        MPI_Barrier(MPI_COMM_WORLD);
        MPI_Finalize();
        return 0;
    }
    int from = -1;
    MPI_Status st;
    MPI_Recv(&from, 1, MPI_INT, MPI_ANY_SOURCE, 7, MPI_COMM_WORLD, &st);
    fprintf(stderr, "dies: rank 0 took rank %d's message; dying by %s\n", from, how);
    if (strcmp(how, "mpi_abort") == 0)
        MPI_Abort(MPI_COMM_WORLD, 3);
    else if (strcmp(how, "exit") == 0)
        exit(3);
    else if (strcmp(how, "segv") == 0) {
        volatile int *nowhere = NULL;
        *nowhere = 1;
    }
    else if (strcmp(how, "term") == 0)
        kill(getpid(), SIGTERM);
    else
        abort();
    return 4; /* not reached */
}
