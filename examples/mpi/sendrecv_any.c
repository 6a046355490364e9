/* sendrecv_any: a message race through MPI_Sendrecv with MPI_ANY_SOURCE.
 *
 * Ranks 1 and 2 each send rank 0 their rank (tag 0). Rank 0, in one MPI_Sendrecv, sends
 * rank 1 the value 100 (tag 1) and receives from MPI_ANY_SOURCE (tag 0); then it takes the
 * other message with MPI_Recv from MPI_ANY_SOURCE. Rank 1 receives rank 0's value. Either
 * sender's message may come first: rank 0 reports which one its MPI_Sendrecv took
 * ("first"), and a debugger can force it. The result is first * 10 + second (12 or 21);
 * both are correct (reference: the sum of the senders, checked as first + second == 3).
 * Needs at least 3 ranks; others only take part in MPI_Init and MPI_Finalize. */
#include "common.h"

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    int rank, size;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    if (size < 3) {
        if (rank == 0)
            fprintf(stderr, "sendrecv_any: needs at least 3 ranks\n");
        MPI_Finalize();
        return EXIT_USAGE;
    }
    double t0 = MPI_Wtime();
    if (rank == 0) {
        int out = 100, first = -1, second = -1;
        MPI_Status st;
        MPI_Sendrecv(&out, 1, MPI_INT, 1, 1, &first, 1, MPI_INT, MPI_ANY_SOURCE, 0,
                     MPI_COMM_WORLD, &st);
        MPI_Recv(&second, 1, MPI_INT, MPI_ANY_SOURCE, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        int ok = first + second == 3 && first == st.MPI_SOURCE;
        printf("{\"program\":\"sendrecv_any\",\"result\":%d,\"reference\":%d,"
               "\"matches_reference\":%s,\"ranks\":%d,\"elapsed_ms\":%.3f,\"first\":%d}\n",
               first * 10 + second, first == 1 ? 12 : 21, ok ? "true" : "false", size,
               (MPI_Wtime() - t0) * 1e3, first);
        fflush(stdout);
        MPI_Finalize();
        return ok ? 0 : EXIT_MISMATCH;
    }
    if (rank <= 2)
        MPI_Send(&rank, 1, MPI_INT, 0, 0, MPI_COMM_WORLD);
    if (rank == 1) {
        int v;
        MPI_Recv(&v, 1, MPI_INT, 0, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    }
    MPI_Finalize();
    return 0;
}
