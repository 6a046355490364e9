/* receives: every way a message can be received, on one ordered channel per sender.
 *
 * Every rank but 0 sends rank 0 --messages M integers with tag 5, its Nth carrying
 * rank * 1000 + N. Rank 0 takes them through every receive form in turn: MPI_Recv from
 * one source and from MPI_ANY_SOURCE / MPI_ANY_TAG, MPI_Probe then MPI_Recv, and
 * MPI_Irecv completed by MPI_Wait, MPI_Test, MPI_Waitall, MPI_Waitany, MPI_Waitsome,
 * MPI_Testall, MPI_Testany and MPI_Testsome. Then rank 0 and rank 1 swap one integer
 * with MPI_Sendrecv (tag 7) and MPI_Sendrecv_replace (tag 8), and rank 1 sends one more
 * on a duplicate of MPI_COMM_WORLD. With --persistent P, rank 1 then sends rank 0 P more
 * integers with tag 9 through a persistent request (MPI_Send_init, MPI_Startall,
 * MPI_Wait), which rank 0 takes with MPI_Recv (they are not in the result list; the
 * debugger's library reports MPI_Startall's call but not its messages).
 *
 * MPI's non-overtaking rule says each sender's messages arrive in the order sent, so
 * rank 0 checks that every sender's numbers come 0, 1, 2, ... The result is the list of
 * values rank 0 received, in the order its receives completed (a call completing several,
 * in the order it reports them): a debugger that links each receive to the send it
 * matched can check its links against it. */
#include "common.h"

#define TAG 5

static int nsend;         /* senders: ranks 1 .. size-1 */
static long *left;        /* per sender: messages not received yet */
static long *next_seq;    /* per sender: the number its next message must carry */
static int ok = 1;
static long got[4096];
static int ngot;

static void took(int value)
{
    int s = value / 1000, n = value % 1000;
    if (s < 1 || s > nsend || n != next_seq[s])
        ok = 0;
    else {
        next_seq[s]++;
        left[s]--;
    }
    if (ngot < 4096)
        got[ngot++] = value;
}

/* The sender with the most messages left (a specific-source receive never waits for a
 * sender that is done). */
static int busiest(void)
{
    int best = 1;
    for (int s = 2; s <= nsend; s++)
        if (left[s] > left[best])
            best = s;
    return best;
}

/* One receive form; `remaining` messages are still to come. Returns how many it took. */
static int receive(int form, long remaining)
{
    int v[2] = {-1, -1}, flag = 0, idx = -1, outcount = 0, indices[2];
    MPI_Request rq[2];
    MPI_Status st[2];
    int two = remaining >= 2;
    switch (form) {
    case 0:
        MPI_Recv(v, 1, MPI_INT, busiest(), TAG, MPI_COMM_WORLD, st);
        took(v[0]);
        return 1;
    case 1:
        MPI_Recv(v, 1, MPI_INT, MPI_ANY_SOURCE, MPI_ANY_TAG, MPI_COMM_WORLD, st);
        took(v[0]);
        return 1;
    case 2:
        MPI_Probe(MPI_ANY_SOURCE, TAG, MPI_COMM_WORLD, st);
        MPI_Recv(v, 1, MPI_INT, st[0].MPI_SOURCE, TAG, MPI_COMM_WORLD, st);
        took(v[0]);
        return 1;
    case 3:
        MPI_Irecv(v, 1, MPI_INT, busiest(), TAG, MPI_COMM_WORLD, rq);
        MPI_Wait(rq, st);
        took(v[0]);
        return 1;
    case 4:
        MPI_Irecv(v, 1, MPI_INT, MPI_ANY_SOURCE, TAG, MPI_COMM_WORLD, rq);
        while (!flag)
            MPI_Test(rq, &flag, st);
        took(v[0]);
        return 1;
    case 5:
    case 7:
        if (!two)
            return receive(3, remaining);
        MPI_Irecv(&v[0], 1, MPI_INT, MPI_ANY_SOURCE, TAG, MPI_COMM_WORLD, &rq[0]);
        MPI_Irecv(&v[1], 1, MPI_INT, MPI_ANY_SOURCE, TAG, MPI_COMM_WORLD, &rq[1]);
        if (form == 5)
            MPI_Waitall(2, rq, st);
        else
            while (!flag)
                MPI_Testall(2, rq, &flag, st);
        took(v[0]);
        took(v[1]);
        return 2;
    case 6:
        MPI_Irecv(v, 1, MPI_INT, MPI_ANY_SOURCE, TAG, MPI_COMM_WORLD, rq);
        MPI_Waitany(1, rq, &idx, st);
        took(v[0]);
        return 1;
    case 8:
    case 10:
        if (!two)
            return receive(4, remaining);
        MPI_Irecv(&v[0], 1, MPI_INT, MPI_ANY_SOURCE, TAG, MPI_COMM_WORLD, &rq[0]);
        MPI_Irecv(&v[1], 1, MPI_INT, MPI_ANY_SOURCE, TAG, MPI_COMM_WORLD, &rq[1]);
        for (int done = 0; done < 2; done += outcount) {
            if (form == 8)
                MPI_Waitsome(2, rq, &outcount, indices, st);
            else
                MPI_Testsome(2, rq, &outcount, indices, st);
            for (int i = 0; i < outcount; i++)
                took(v[indices[i]]);
        }
        return 2;
    default:
        MPI_Irecv(v, 1, MPI_INT, MPI_ANY_SOURCE, TAG, MPI_COMM_WORLD, rq);
        while (!flag)
            MPI_Testany(1, rq, &idx, &flag, st);
        took(v[0]);
        return 1;
    }
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    int rank, size;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    const char *usage =
        "usage: receives [--messages M] [--persistent P]   (ranks: 2 or more; M up to 999)";
    long m = 12, persistent = 0;
    for (int i = 1; i < argc; i++) {
        int r = ex_long_opt(argc, argv, &i, "--messages", &m);
        if (r == 0)
            r = ex_long_opt(argc, argv, &i, "--persistent", &persistent);
        if (r <= 0)
            ex_usage_exit(rank, "bad argument", usage);
    }
    if (size < 2 || m > 999 || m * (size - 1) > 4000)
        ex_usage_exit(rank, "need 2 or more ranks and at most 999 messages each", usage);
    double t0 = MPI_Wtime();
    nsend = size - 1;
    MPI_Comm dup;
    MPI_Comm_dup(MPI_COMM_WORLD, &dup);
    if (rank != 0) {
        for (long n = 0; n < m; n++) {
            int v = rank * 1000 + (int)n;
            MPI_Send(&v, 1, MPI_INT, 0, TAG, MPI_COMM_WORLD);
        }
    } else {
        left = calloc((size_t)size, sizeof *left);
        next_seq = calloc((size_t)size, sizeof *next_seq);
        for (int s = 1; s < size; s++)
            left[s] = m;
        long remaining = m * nsend;
        for (int form = 0; remaining > 0; form = (form + 1) % 12)
            remaining -= receive(form, remaining);
    }
    /* Rank 1's next messages (tags 7, 8) must not meet rank 0's MPI_ANY_TAG receive. */
    MPI_Barrier(MPI_COMM_WORLD);
    int mine = rank * 1000, theirs = -1;
    if (rank <= 1) {
        int peer = 1 - rank;
        MPI_Sendrecv(&mine, 1, MPI_INT, peer, 7, &theirs, 1, MPI_INT, peer, 7, MPI_COMM_WORLD,
                     MPI_STATUS_IGNORE);
        ok &= theirs == peer * 1000;
        int swap = mine;
        MPI_Sendrecv_replace(&swap, 1, MPI_INT, peer, 8, peer, 8, MPI_COMM_WORLD,
                             MPI_STATUS_IGNORE);
        ok &= swap == peer * 1000;
        if (rank == 0)
            got[ngot++] = theirs, got[ngot++] = swap;
    }
    if (rank == 1)
        MPI_Send(&mine, 1, MPI_INT, 0, TAG, dup);
    if (rank == 0) {
        int v = -1;
        MPI_Recv(&v, 1, MPI_INT, MPI_ANY_SOURCE, TAG, dup, MPI_STATUS_IGNORE);
        ok &= v == 1000;
        got[ngot++] = v;
    }
    if (rank == 1 && persistent > 0) {
        int v = 0;
        MPI_Request rq;
        MPI_Send_init(&v, 1, MPI_INT, 0, 9, MPI_COMM_WORLD, &rq);
        for (long n = 0; n < persistent; n++) {
            v = (int)n;
            MPI_Startall(1, &rq);
            MPI_Wait(&rq, MPI_STATUS_IGNORE);
        }
        MPI_Request_free(&rq);
    }
    if (rank == 0) {
        for (long n = 0; n < persistent; n++) {
            int v = -1;
            MPI_Recv(&v, 1, MPI_INT, 1, 9, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
            ok &= v == n;
        }
    }
    MPI_Comm_free(&dup);
    int all_ok = 0;
    MPI_Allreduce(&ok, &all_ok, 1, MPI_INT, MPI_LAND, MPI_COMM_WORLD);
    if (rank == 0) {
        char result[16];
        snprintf(result, sizeof result, "%d", ngot);
        char reference[16];
        snprintf(reference, sizeof reference, "%ld", m * nsend + 3);
        int matches = all_ok && ngot == m * nsend + 3;
        ex_report_begin("receives", result, reference, matches, size, MPI_Wtime() - t0);
        printf(",\"in_order\":%s,\"got\":[", all_ok ? "true" : "false");
        for (int i = 0; i < ngot; i++)
            printf("%s%ld", i ? "," : "", got[i]);
        printf("]");
        ex_report_end();
        MPI_Finalize();
        return matches ? 0 : EXIT_MISMATCH;
    }
    MPI_Finalize();
    return 0;
}
