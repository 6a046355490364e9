/* deadlock: MPI programs that hang, and one that only looks as if it might. --kind says
 * which:
 *   recv_recv   ranks 0 and 1 each receive from the other before sending: a cycle (the
 *               other ranks wait in MPI_Barrier for them)
 *   collective  rank 0 never enters the barrier the others wait in: it receives from
 *               rank 1, which is in the barrier
 *   lost        rank 0 receives with MPI_ANY_SOURCE twice, but only one message is
 *               sent; the other ranks finish
 *   forced      no deadlock on its own: rank 0 receives twice with MPI_ANY_SOURCE, ranks 1
 *               and 2 send once each (rank 1 then computes for 2 s, so it may still look
 *               able to send again); a debugger that forces both receives onto rank 1
 *               makes the second wait for good
 *   ibarrier    rank 0 waits (MPI_Wait) for an MPI_Ibarrier the others never enter: they
 *               receive from rank 0, which sends after its wait
 *   slow        no deadlock: rank 1 computes for 1.5 s while rank 0 waits for its
 *               message and the others wait in MPI_Barrier; then it prints a result
 *   waitall     rank 0 posts two MPI_Irecv from MPI_ANY_SOURCE and waits for both
 *               (MPI_Waitall) before it sends to rank 1; rank 1 sends one message, then
 *               receives from rank 0 (the MPI Bugs Initiative's
 *               p2p-any-src-waitall-deadlock2): one message completes one receive only
 *   waitall_ok  no deadlock: the same, but rank 2 sends a message too
 *   posted      ranks 0 and 1 each post an MPI_Irecv from MPI_ANY_SOURCE, send to the
 *               other, then receive from it (MPI_Recv) before waiting for the Irecv (MBI's
 *               p2p-any-src-wait-deadlock4): the posted receive took the one message
 *   posted_race no deadlock on its own: rank 0 posts an MPI_Irecv from MPI_ANY_SOURCE,
 *               then receives from rank 1, sends to it, receives from anyone and waits;
 *               rank 2 sends at once, rank 1 after 0.3 s, then receives from rank 0 and
 *               sends again (MBI's p2p-any-src-wait-deadlock2). The Irecv takes rank 2's
 *               message; matched to rank 1's instead, both ranks wait for good
 *   unreported  rank 0 receives from rank 1; the other ranks call
 *               MPI_Reduce_scatter_block (rank 2 and up after computing for 1.5 s),
 *               which rank 0 never enters: a call the debugger's library does not
 *               report, so the deadlock cannot be named, but each rank is told to be in
 *               it (up to 64 ranks)
 *   late        no deadlock: rank 0 receives from any source, which rank 1 sends after
 *               computing for 4 s, then every rank enters MPI_Barrier; a debugger that
 *               attaches within those 4 s finds rank 0's receive begun before it
 * Each rank blocks where the kind says; a debugger's deadlock detection names who waits
 * for whom, and the job hangs until it is killed (except `slow`). Rank 0 prints a JSON
 * result line at the end of `slow`. */
#define _POSIX_C_SOURCE 200809L
#include <mpi.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

static void compute(double seconds)
{
    struct timespec t0, t;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    volatile double x = 0;
    do {
        for (int i = 0; i < 100000; i++)
            x += i * 0.5;
        clock_gettime(CLOCK_MONOTONIC, &t);
    } while ((t.tv_sec - t0.tv_sec) + (t.tv_nsec - t0.tv_nsec) / 1e9 < seconds);
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    int rank, size, v = 0;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    const char *kind = "recv_recv";
    for (int i = 1; i + 1 < argc; i++)
        if (strcmp(argv[i], "--kind") == 0)
            kind = argv[i + 1];
    if (strcmp(kind, "recv_recv") == 0) {
        if (rank < 2) {
            int peer = 1 - rank;
            MPI_Recv(&v, 1, MPI_INT, peer, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
            MPI_Send(&rank, 1, MPI_INT, peer, 0, MPI_COMM_WORLD);
        }
        MPI_Barrier(MPI_COMM_WORLD);
    } else if (strcmp(kind, "collective") == 0) {
        if (rank == 0)
            MPI_Recv(&v, 1, MPI_INT, 1, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        MPI_Barrier(MPI_COMM_WORLD);
        if (rank == 1)
            MPI_Send(&rank, 1, MPI_INT, 0, 0, MPI_COMM_WORLD);
    } else if (strcmp(kind, "lost") == 0) {
        if (rank == 0) {
            for (int i = 0; i < 2; i++)
                MPI_Recv(&v, 1, MPI_INT, MPI_ANY_SOURCE, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        } else if (rank == 1) {
            MPI_Send(&rank, 1, MPI_INT, 0, 0, MPI_COMM_WORLD);
        }
    } else if (strcmp(kind, "forced") == 0) {
        if (rank == 0) {
            for (int i = 0; i < 2; i++)
                MPI_Recv(&v, 1, MPI_INT, MPI_ANY_SOURCE, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        } else if (rank <= 2) {
            MPI_Send(&rank, 1, MPI_INT, 0, 0, MPI_COMM_WORLD);
            if (rank == 1)
                compute(2.0);
        }
        MPI_Barrier(MPI_COMM_WORLD);
    } else if (strcmp(kind, "ibarrier") == 0) {
        if (rank == 0) {
            MPI_Request r;
            MPI_Ibarrier(MPI_COMM_WORLD, &r);
            MPI_Wait(&r, MPI_STATUS_IGNORE);
            for (int i = 1; i < size; i++)
                MPI_Send(&rank, 1, MPI_INT, i, 0, MPI_COMM_WORLD);
        } else {
            MPI_Recv(&v, 1, MPI_INT, 0, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        }
    } else if (strcmp(kind, "waitall") == 0 || strcmp(kind, "waitall_ok") == 0) {
        int w[2] = {0, 0};
        if (rank == 0) {
            MPI_Request r[2];
            for (int i = 0; i < 2; i++)
                MPI_Irecv(&w[i], 1, MPI_INT, MPI_ANY_SOURCE, 0, MPI_COMM_WORLD, &r[i]);
            MPI_Waitall(2, r, MPI_STATUSES_IGNORE);
            MPI_Send(&rank, 1, MPI_INT, 1, 1, MPI_COMM_WORLD);
        } else if (rank == 1) {
            MPI_Send(&rank, 1, MPI_INT, 0, 0, MPI_COMM_WORLD);
            MPI_Recv(&v, 1, MPI_INT, 0, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        } else if (rank == 2 && strcmp(kind, "waitall_ok") == 0) {
            MPI_Send(&rank, 1, MPI_INT, 0, 0, MPI_COMM_WORLD);
        }
        if (rank == 0)
            printf("{\"program\":\"deadlock\",\"kind\":\"%s\",\"result\":%d,\"reference\":3,"
                   "\"matches_reference\":%s}\n",
                   kind, w[0] + w[1], w[0] + w[1] == 3 ? "true" : "false");
    } else if (strcmp(kind, "posted") == 0) {
        if (rank < 2) {
            int peer = 1 - rank, w = 0;
            MPI_Request r;
            MPI_Irecv(&w, 1, MPI_INT, MPI_ANY_SOURCE, 0, MPI_COMM_WORLD, &r);
            MPI_Send(&rank, 1, MPI_INT, peer, 0, MPI_COMM_WORLD);
            MPI_Recv(&v, 1, MPI_INT, peer, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
            MPI_Send(&rank, 1, MPI_INT, peer, 0, MPI_COMM_WORLD);
            MPI_Wait(&r, MPI_STATUS_IGNORE);
        }
    } else if (strcmp(kind, "posted_race") == 0) {
        if (rank == 0) {
            int w = -1, sum = 0;
            MPI_Request r;
            MPI_Irecv(&w, 1, MPI_INT, MPI_ANY_SOURCE, 0, MPI_COMM_WORLD, &r);
            MPI_Recv(&v, 1, MPI_INT, 1, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
            sum += v;
            MPI_Send(&rank, 1, MPI_INT, 1, 0, MPI_COMM_WORLD);
            MPI_Recv(&v, 1, MPI_INT, MPI_ANY_SOURCE, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
            MPI_Wait(&r, MPI_STATUS_IGNORE);
            sum += v + w;
            printf("{\"program\":\"deadlock\",\"kind\":\"posted_race\",\"result\":%d,\"reference\":4,"
                   "\"matches_reference\":%s}\n",
                   sum, sum == 4 ? "true" : "false");
        } else if (rank == 1) {
            compute(0.3);
            MPI_Send(&rank, 1, MPI_INT, 0, 0, MPI_COMM_WORLD);
            MPI_Recv(&v, 1, MPI_INT, 0, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
            MPI_Send(&rank, 1, MPI_INT, 0, 0, MPI_COMM_WORLD);
        } else if (rank == 2) {
            MPI_Send(&rank, 1, MPI_INT, 0, 0, MPI_COMM_WORLD);
        }
    } else if (strcmp(kind, "slow") == 0) {
        if (rank == 1) {
            compute(1.5);
            MPI_Send(&rank, 1, MPI_INT, 0, 0, MPI_COMM_WORLD);
        } else if (rank == 0) {
            MPI_Recv(&v, 1, MPI_INT, 1, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        }
        MPI_Barrier(MPI_COMM_WORLD);
        if (rank == 0)
            printf("{\"program\":\"deadlock\",\"kind\":\"slow\",\"result\":%d,\"reference\":1,"
                   "\"matches_reference\":%s}\n",
                   v, v == 1 ? "true" : "false");
    } else if (strcmp(kind, "late") == 0) {
        if (rank == 1) {
            compute(4.0);
            v = 42;
            MPI_Send(&v, 1, MPI_INT, 0, 0, MPI_COMM_WORLD);
        } else if (rank == 0) {
            MPI_Recv(&v, 1, MPI_INT, MPI_ANY_SOURCE, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        }
        MPI_Barrier(MPI_COMM_WORLD);
        if (rank == 0)
            printf("{\"program\":\"deadlock\",\"kind\":\"late\",\"result\":%d,\"reference\":42,"
                   "\"matches_reference\":%s}\n",
                   v, v == 42 ? "true" : "false");
    } else if (strcmp(kind, "unreported") == 0) {
        if (rank == 0) {
            MPI_Recv(&v, 1, MPI_INT, 1, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        } else {
            if (rank >= 2)
                compute(1.5);
            int in[64] = {0}, out[1];
            MPI_Reduce_scatter_block(in, out, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
        }
    } else {
        if (rank == 0)
            fprintf(stderr, "deadlock: unknown --kind %s (recv_recv, collective, lost, forced, ibarrier, slow, waitall, waitall_ok, posted, posted_race, unreported, late)\n", kind);
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    MPI_Finalize();
    return 0;
}
