/* ring: a token travels around the ranks `--rounds N` times with MPI_Send/MPI_Recv.
 *
 * `--poll` receives with MPI_Irecv and a loop of MPI_Test until it completes, as programs
 * that overlap waiting with work do; the report then lists each rank's MPI_Test calls
 * (`tests`), gathered to rank 0 with one MPI_Gather.
 *
 * `--min-ms M`: after the N rounds, more rounds until M ms have passed since the start by
 * rank 0's MPI_Wtime (it broadcasts its decision before each round): how many rounds
 * that makes (`rounds` in the report) is the clock's, as in benchmarks that size their
 * loops by the time they take.
 *
 * `--idle-ms N`: after the rounds, every rank probes five times for a message nobody sends
 * (MPI_Iprobe, tag 99), then computes (sleeps) N ms before the final MPI_Allreduce.
 *
 * Rank 0 starts each round; every rank adds (rank + 1) * (round + 1) to the token and
 * passes it on to rank + 1, the last rank back to rank 0. Each rank also sums what it
 * added, and one MPI_Allreduce at the end adds those sums up: both the token and the
 * all-reduced sum must equal the sequential reference on rank 0.
 *
 * With one rank the ring is rank 0 alone: it adds to the token without messages (a send
 * to itself would rely on the implementation buffering it). */
#define _POSIX_C_SOURCE 200809L /* nanosleep */
#include "common.h"
#include <time.h>

static const char *const USAGE =
    "usage: ring [--rounds N] [--min-ms M] [--poll] [--idle-ms N]";

/* The MPI_Test calls this rank made (`--poll`). */
static long long tests;

/* Receives the token from `prev`: a blocking receive, or (`poll`) a polled one. */
static void receive(long long *token, int prev, int poll)
{
    if (!poll) {
        MPI_Recv(token, 1, MPI_LONG_LONG, prev, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        return;
    }
    MPI_Request req;
    int done = 0;
    MPI_Irecv(token, 1, MPI_LONG_LONG, prev, 0, MPI_COMM_WORLD, &req);
    while (!done) {
        MPI_Test(&req, &done, MPI_STATUS_IGNORE);
        tests++;
    }
}

static long long contribution(int rank, long round)
{
    return (long long)(rank + 1) * (long long)(round + 1);
}

/* The token after `rounds` trips around `ranks` ranks, computed sequentially. */
static long long reference_token(int ranks, long rounds)
{
    long long token = 0;
    for (long round = 0; round < rounds; round++)
        for (int r = 0; r < ranks; r++)
            token += contribution(r, round);
    return token;
}

/* Whether to make round `round`: `rounds` of them, and (`min_ms` >= 0) more until
 * `min_ms` ms have passed since `t0` by rank 0's clock. */
static int another_round(long round, long rounds, long min_ms, double t0)
{
    if (min_ms < 0)
        return round < rounds;
    int go = round < rounds || (MPI_Wtime() - t0) * 1e3 < (double)min_ms;
    MPI_Bcast(&go, 1, MPI_INT, 0, MPI_COMM_WORLD);
    return go;
}

/* Runs the rounds; returns the token as rank 0 holds it at the end (other ranks: 0) and
 * sets `*added` to what this rank added and `*done` to the rounds made. */
static long long pass_token(int rank, int size, long rounds, long min_ms, double t0, int poll,
                            long long *added, long *done)
{
    long long token = 0;
    int next = (rank + 1) % size, prev = (rank + size - 1) % size;
    *added = 0;
    long round = 0;
    for (; another_round(round, rounds, min_ms, t0); round++) {
        if (size == 1) {
            token += contribution(rank, round);
            *added += contribution(rank, round);
            continue;
        }
        if (rank != 0)
            receive(&token, prev, poll);
        token += contribution(rank, round);
        *added += contribution(rank, round);
        MPI_Send(&token, 1, MPI_LONG_LONG, next, 0, MPI_COMM_WORLD);
        if (rank == 0)
            receive(&token, prev, poll);
    }
    *done = round;
    return rank == 0 ? token : 0;
}

int main(int argc, char **argv)
{
    int rank, size;
    long rounds = 3, idle_ms = -1, min_ms = -1;
    int poll = 0;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--poll") == 0)
            poll = 1;
        else if (ex_long_opt(argc, argv, &i, "--idle-ms", &idle_ms) == 1)
            continue;
        else if (ex_long_opt(argc, argv, &i, "--min-ms", &min_ms) == 1)
            continue;
        else if (ex_long_opt(argc, argv, &i, "--rounds", &rounds) != 1)
            ex_usage_exit(rank, "bad argument (expected --rounds N, --min-ms M, --poll or --idle-ms N)",
                          USAGE);
    }

    double t0 = MPI_Wtime();
    long long added = 0, total = 0;
    long done = 0;
    long long token = pass_token(rank, size, rounds, min_ms, t0, poll, &added, &done);
    rounds = done;
    if (idle_ms >= 0) {
        int found = 0, any = 0;
        for (int k = 0; k < 5; k++) {
            MPI_Iprobe(MPI_ANY_SOURCE, 99, MPI_COMM_WORLD, &found, MPI_STATUS_IGNORE);
            any |= found;
        }
        if (any)
            ex_usage_exit(rank, "a message with tag 99 arrived: nobody sends one", USAGE);
        struct timespec ts = {idle_ms / 1000, (idle_ms % 1000) * 1000000L};
        nanosleep(&ts, NULL);
    }
    MPI_Allreduce(&added, &total, 1, MPI_LONG_LONG, MPI_SUM, MPI_COMM_WORLD);
    double elapsed = MPI_Wtime() - t0;
    long long *all_tests = rank == 0 ? calloc((size_t)size, sizeof *all_tests) : NULL;
    if (poll)
        MPI_Gather(&tests, 1, MPI_LONG_LONG, all_tests, 1, MPI_LONG_LONG, 0, MPI_COMM_WORLD);

    int code = 0;
    if (rank == 0) {
        long long reference = reference_token(size, rounds);
        int matches = token == reference && total == reference;
        char result[32], expected[32];
        snprintf(result, sizeof result, "%lld", token);
        snprintf(expected, sizeof expected, "%lld", reference);
        ex_report_begin("ring", result, expected, matches, size, elapsed);
        printf(",\"rounds\":%ld,\"allreduce\":%lld,\"language\":\"c\"", rounds, total);
        if (poll) {
            printf(",\"tests\":[");
            for (int r = 0; r < size; r++)
                printf("%s%lld", r ? "," : "", all_tests[r]);
            printf("]");
        }
        ex_report_end();
        code = matches ? 0 : EXIT_MISMATCH;
    }
    free(all_tests);
    MPI_Bcast(&code, 1, MPI_INT, 0, MPI_COMM_WORLD);
    MPI_Finalize();
    return code;
}
