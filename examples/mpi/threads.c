/* threads: `--threads T` rings at once in every rank, one per thread, under
 * MPI_THREAD_MULTIPLE: the MPI calls of a rank's threads run concurrently.
 *
 * Thread t of every rank passes its own token around the ranks `--rounds N` times, as ring
 * does, with tag t (so the rings never take each other's messages): each rank adds
 * (rank + 1) * (round + 1) * (t + 1). After the threads joined, one MPI_Allreduce adds up
 * what each rank added. Rank 0 checks every ring's token and the sum against the
 * sequential reference. Exit 1 also when the library does not provide
 * MPI_THREAD_MULTIPLE (the line says which level it got). */
#include "common.h"
#include <pthread.h>

static const char *const USAGE = "usage: threads [--threads T] [--rounds N]";

#define MAX_THREADS 16

struct ring {
    int rank, size, tag;
    long rounds;
    long long token; /* rank 0: the token after the last round */
    long long added; /* what this rank added on this ring */
};

static long long contribution(int rank, long round, int tag)
{
    return (long long)(rank + 1) * (long long)(round + 1) * (long long)(tag + 1);
}

static void *run_ring(void *arg)
{
    struct ring *r = arg;
    int next = (r->rank + 1) % r->size, prev = (r->rank + r->size - 1) % r->size;
    long long token = 0;
    for (long round = 0; round < r->rounds; round++) {
        long long c = contribution(r->rank, round, r->tag);
        r->added += c;
        if (r->size == 1) {
            token += c;
            continue;
        }
        if (r->rank != 0)
            MPI_Recv(&token, 1, MPI_LONG_LONG, prev, r->tag, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        token += c;
        MPI_Send(&token, 1, MPI_LONG_LONG, next, r->tag, MPI_COMM_WORLD);
        if (r->rank == 0)
            MPI_Recv(&token, 1, MPI_LONG_LONG, prev, r->tag, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    }
    r->token = token;
    return NULL;
}

/* Every ring's token after `rounds` trips, computed sequentially, summed over the rings. */
static long long reference(int ranks, long rounds, int threads)
{
    long long sum = 0;
    for (int t = 0; t < threads; t++)
        for (long round = 0; round < rounds; round++)
            for (int r = 0; r < ranks; r++)
                sum += contribution(r, round, t);
    return sum;
}

int main(int argc, char **argv)
{
    int rank, size, provided;
    long threads = 2, rounds = 3;
    MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    for (int i = 1; i < argc; i++) {
        if (ex_long_opt(argc, argv, &i, "--threads", &threads) != 1 &&
            ex_long_opt(argc, argv, &i, "--rounds", &rounds) != 1)
            ex_usage_exit(rank, "bad argument (expected --threads T or --rounds N)", USAGE);
    }
    if (threads < 1 || threads > MAX_THREADS)
        ex_usage_exit(rank, "--threads must be 1 to 16", USAGE);

    double t0 = MPI_Wtime();
    struct ring rings[MAX_THREADS];
    pthread_t ids[MAX_THREADS];
    int multiple = provided == MPI_THREAD_MULTIPLE;
    long started = multiple ? threads : 0;
    for (long t = 0; t < started; t++) {
        rings[t] = (struct ring){.rank = rank, .size = size, .tag = (int)t, .rounds = rounds};
        if (pthread_create(&ids[t], NULL, run_ring, &rings[t]) != 0) {
            fprintf(stderr, "threads: pthread_create failed\n");
            MPI_Abort(MPI_COMM_WORLD, 1);
        }
    }
    long long tokens = 0, added = 0, total = 0;
    for (long t = 0; t < started; t++) {
        pthread_join(ids[t], NULL);
        tokens += rings[t].token;
        added += rings[t].added;
    }
    MPI_Allreduce(&added, &total, 1, MPI_LONG_LONG, MPI_SUM, MPI_COMM_WORLD);
    double elapsed = MPI_Wtime() - t0;

    int code = 0;
    if (rank == 0) {
        long long expected = reference(size, rounds, (int)threads);
        int matches = multiple && tokens == expected && total == expected;
        char result[32], ref[32];
        snprintf(result, sizeof result, "%lld", tokens);
        snprintf(ref, sizeof ref, "%lld", expected);
        ex_report_begin("threads", result, ref, matches, size, elapsed);
        printf(",\"threads\":%ld,\"rounds\":%ld,\"allreduce\":%lld,\"thread_multiple\":%s",
               threads, rounds, total, multiple ? "true" : "false");
        ex_report_end();
        code = matches ? 0 : EXIT_MISMATCH;
    }
    MPI_Bcast(&code, 1, MPI_INT, 0, MPI_COMM_WORLD);
    MPI_Finalize();
    return code;
}
