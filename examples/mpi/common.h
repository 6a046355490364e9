/* Shared helpers of the MPI example programs: argument parsing and the final JSON line.
 *
 * Every program prints, on rank 0 only, one JSON object as its last stdout line, with the
 * keys in this order (the same contract as the runtime examples' `Report`):
 *   {"program":..,"result":..,"reference":..,"matches_reference":..,"ranks":..,
 *    "elapsed_ms":.., <program-specific fields>}
 * Exit codes: 0 when the result matches the reference, 1 when it does not, 2 on bad
 * arguments. */
#ifndef RACETRACK_MPI_EXAMPLES_COMMON_H
#define RACETRACK_MPI_EXAMPLES_COMMON_H

#include <errno.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define EXIT_MISMATCH 1
#define EXIT_USAGE 2

/* One `--name N` option: `*value` is set when `argv[*i]` is `--name` and the next argument
 * is a non-negative integer. Returns 1 when it consumed the option, 0 when `argv[*i]` is
 * another option, -1 when the value is missing or not a number. */
static inline int ex_long_opt(int argc, char **argv, int *i, const char *name, long *value)
{
    if (strcmp(argv[*i], name) != 0)
        return 0;
    if (*i + 1 >= argc)
        return -1;
    char *end = NULL;
    errno = 0;
    long v = strtol(argv[*i + 1], &end, 10);
    if (errno != 0 || end == argv[*i + 1] || *end != '\0' || v < 0)
        return -1;
    *value = v;
    *i += 1;
    return 1;
}

/* Bad arguments: rank 0 says why and prints the usage; every rank leaves MPI and the
 * process exits with EXIT_USAGE (all ranks take the same decision, so none hangs). */
static inline void ex_usage_exit(int rank, const char *why, const char *usage)
{
    if (rank == 0)
        fprintf(stderr, "error: %s\n%s\n", why, usage);
    MPI_Finalize();
    exit(EXIT_USAGE);
}

/* The JSON line's common head, up to and including "elapsed_ms"; `result` and `reference`
 * are already JSON values. The caller appends its own fields, then `ex_report_end`. */
static inline void ex_report_begin(const char *program, const char *result,
                                   const char *reference, int matches, int ranks,
                                   double elapsed_s)
{
    printf("{\"program\":\"%s\",\"result\":%s,\"reference\":%s,\"matches_reference\":%s,"
           "\"ranks\":%d,\"elapsed_ms\":%.3f",
           program, result, reference, matches ? "true" : "false", ranks,
           elapsed_s * 1000.0);
}

/* Closes the JSON line and flushes it, so that it is the last thing on stdout. */
static inline void ex_report_end(void)
{
    printf("}\n");
    fflush(stdout);
}

/* A deterministic pseudo-random sequence (the runtime examples' Lcg), so that every run
 * and every rank sees the same input. */
typedef struct {
    unsigned long long state;
} ex_lcg;

static inline ex_lcg ex_lcg_new(unsigned long long seed)
{
    ex_lcg g = {seed ^ 0x9E3779B97F4A7C15ULL};
    return g;
}

static inline unsigned long long ex_lcg_next(ex_lcg *g)
{
    g->state = g->state * 6364136223846793005ULL + 1442695040888963407ULL;
    return g->state >> 11;
}

#endif
