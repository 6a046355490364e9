/* master_worker: rank 0 hands out tasks and collects results from whoever answers.
 *
 * Rank 0 sends each worker a first task (tag TAG_TASK), then loops on
 *     MPI_Recv(result, ..., MPI_ANY_SOURCE, MPI_ANY_TAG, ...)
 * and sends the next task to the rank that answered, or TAG_STOP when none is left. The
 * order in which results arrive, and so which worker does which task, varies from run to
 * run; the sum of f(task) over all tasks does not. `per_worker` in the report counts the
 * tasks each worker (ranks 1..P-1) did. Needs 2 ranks or more. */
#include "common.h"

static const char *const USAGE = "usage: master_worker [--tasks T]   (2 ranks or more)";

enum { TAG_TASK = 1, TAG_RESULT = 2, TAG_STOP = 3 };

/* The work of one task: Collatz steps from task + 1, so tasks take different times. */
static long long f(long long task)
{
    unsigned long long x = (unsigned long long)task + 1;
    long long steps = 0;
    while (x != 1) {
        x = x % 2 ? 3 * x + 1 : x / 2;
        steps++;
    }
    return steps;
}

static void worker(void)
{
    for (;;) {
        long long task;
        MPI_Status st;
        MPI_Recv(&task, 1, MPI_LONG_LONG, 0, MPI_ANY_TAG, MPI_COMM_WORLD, &st);
        if (st.MPI_TAG == TAG_STOP)
            return;
        long long answer[2] = {task, f(task)};
        MPI_Send(answer, 2, MPI_LONG_LONG, 0, TAG_RESULT, MPI_COMM_WORLD);
    }
}

/* Sends `*next` to `rank` when tasks are left (and advances it), else the stop tag. */
static void hand_out(int rank, long long *next, long long tasks)
{
    if (*next < tasks) {
        MPI_Send(next, 1, MPI_LONG_LONG, rank, TAG_TASK, MPI_COMM_WORLD);
        *next += 1;
    } else {
        MPI_Send(next, 1, MPI_LONG_LONG, rank, TAG_STOP, MPI_COMM_WORLD);
    }
}

/* Rank 0's loop. Returns the sum; `per_worker[r]` counts rank r's tasks, `done[t]` how
 * often task t came back, `*bad` the answers with an unexpected tag or task. */
static long long master(int size, long long tasks, long *per_worker, char *done, long *bad)
{
    long long next = 0, sum = 0, outstanding = 0;
    for (int r = 1; r < size; r++) {
        outstanding += next < tasks;
        hand_out(r, &next, tasks);
    }
    while (outstanding > 0) {
        long long answer[2];
        MPI_Status st;
        MPI_Recv(answer, 2, MPI_LONG_LONG, MPI_ANY_SOURCE, MPI_ANY_TAG, MPI_COMM_WORLD, &st);
        outstanding--;
        if (st.MPI_TAG != TAG_RESULT || answer[0] < 0 || answer[0] >= tasks) {
            *bad += 1;
        } else {
            done[answer[0]]++;
            sum += answer[1];
            per_worker[st.MPI_SOURCE]++;
        }
        outstanding += next < tasks;
        hand_out(st.MPI_SOURCE, &next, tasks);
    }
    return sum;
}

static int report(int size, long long tasks, long long sum, const long *per_worker,
                  const char *done, long bad, double elapsed)
{
    long long reference = 0;
    long missing = 0;
    for (long long t = 0; t < tasks; t++) {
        reference += f(t);
        missing += done[t] != 1;
    }
    int matches = sum == reference && missing == 0 && bad == 0;
    char result[32], expected[32];
    snprintf(result, sizeof result, "%lld", sum);
    snprintf(expected, sizeof expected, "%lld", reference);
    ex_report_begin("master_worker", result, expected, matches, size, elapsed);
    printf(",\"tasks\":%lld,\"per_worker\":[", tasks);
    for (int r = 1; r < size; r++)
        printf("%s%ld", r > 1 ? "," : "", per_worker[r]);
    printf("]");
    if (missing || bad)
        printf(",\"error\":\"%ld tasks not done exactly once, %ld bad answers\"", missing,
               bad);
    ex_report_end();
    return matches ? 0 : EXIT_MISMATCH;
}

int main(int argc, char **argv)
{
    int rank, size;
    long tasks = 200;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    for (int i = 1; i < argc; i++) {
        if (ex_long_opt(argc, argv, &i, "--tasks", &tasks) != 1)
            ex_usage_exit(rank, "bad argument (expected --tasks T)", USAGE);
    }
    if (size < 2)
        ex_usage_exit(rank, "master_worker needs 2 ranks or more", USAGE);
    if (tasks > 100000000)
        ex_usage_exit(rank, "--tasks is at most 100000000", USAGE);

    double t0 = MPI_Wtime();
    int code = 0;
    if (rank == 0) {
        long *per_worker = calloc((size_t)size, sizeof(long));
        char *done = calloc((size_t)tasks + 1, 1);
        long bad = 0;
        long long sum = master(size, tasks, per_worker, done, &bad);
        double elapsed = MPI_Wtime() - t0;
        code = report(size, tasks, sum, per_worker, done, bad, elapsed);
        free(per_worker);
        free(done);
    } else {
        worker();
    }
    MPI_Bcast(&code, 1, MPI_INT, 0, MPI_COMM_WORLD);
    MPI_Finalize();
    return code;
}
