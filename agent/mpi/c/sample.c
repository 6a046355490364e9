/* sample.c: where the rank's MPI_Init thread is, when it has reported nothing for a
 * while. A rank blocked in an MPI call the wrappers do not cover (MPI-IO, the neighbour
 * collectives, ...) would otherwise look as if it computed. The core's watcher thread
 * (core/unreported.rs) calls rt_sample_now, which signals the MPI_Init thread; its
 * handler unwinds its own stack into a static array and wakes the watcher, which reads
 * the frames: the outermost one inside an MPI entry point (a dynamic symbol named
 * MPI_*, PMPI_*, mpi_*_ ...) names the call, and the frame above it is the site.
 *
 * Unwinding happens in the handler, the only place the interrupted registers are at
 * hand. libgcc's unwinder finds a frame's unwind table through glibc's _dl_find_object
 * (glibc 2.35 and later; without it there is no sampling), which takes no lock; it
 * allocates nothing. The signal is one of the real-time ones nobody has a handler for,
 * nor blocks, at MPI_Init, SA_RESTART, sent only while it still runs our handler; the
 * watcher sends it only to a thread it just saw on a CPU or yielding it, with the signal
 * neither blocked nor pending (a thread blocked in a system call could see it end
 * early). RACETRACK_SAMPLE=0 turns sampling off. */
#define _GNU_SOURCE
#include <ctype.h>
#include <dlfcn.h>
#include <errno.h>
#include <link.h>
#include <pthread.h>
#include <semaphore.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>
#include <unwind.h>

#include "wrap.h"

#define RT_FRAMES 256
/* How long the watcher waits for the handler to start: a thread that has the signal
 * blocked is not sampled. */
#define RT_SAMPLE_NS 200000000L
/* How long it waits for a handler that started to finish; past it, sampling ends. */
#define RT_UNWIND_NS 1000000000L

enum { IDLE, ASKED, TAKING, TAKEN };

static pthread_t main_thread;
static int sample_signal; /* 0: sampling is off */
static sem_t sample_done;
static pthread_mutex_t sample_lock = PTHREAD_MUTEX_INITIALIZER;
static int sample_state = IDLE;
static uintptr_t frames[RT_FRAMES];
static int nframes;
/* The interrupted function's frame (its address is not a return address); -1: unknown. */
static int first_frame;

static _Unwind_Reason_Code collect(struct _Unwind_Context *ctx, void *arg) {
    (void)arg;
    int before = 0;
    uintptr_t ip = _Unwind_GetIPInfo(ctx, &before);
    if (nframes == RT_FRAMES) return _URC_END_OF_STACK;
    if (before && first_frame < 0) first_frame = nframes;
    frames[nframes++] = ip;
    return _URC_NO_REASON;
}

static void on_signal(int sig, siginfo_t *info, void *uc) {
    (void)sig;
    (void)info;
    (void)uc;
    int saved = errno;
    int asked = ASKED;
    if (pthread_equal(pthread_self(), main_thread) &&
        __atomic_compare_exchange_n(&sample_state, &asked, TAKING, 0, __ATOMIC_ACQUIRE,
                                    __ATOMIC_RELAXED)) {
        nframes = 0;
        first_frame = -1;
        _Unwind_Backtrace(collect, NULL);
        __atomic_store_n(&sample_state, TAKEN, __ATOMIC_RELEASE);
        sem_post(&sample_done);
    }
    errno = saved;
}

/* Wait on sample_done for `ns` at most; 0 on time out. */
static int wait_done(long ns) {
    struct timespec until;
    clock_gettime(CLOCK_MONOTONIC, &until);
    until.tv_nsec += ns;
    while (until.tv_nsec >= 1000000000L) {
        until.tv_sec++;
        until.tv_nsec -= 1000000000L;
    }
    while (sem_clockwait(&sample_done, CLOCK_MONOTONIC, &until) != 0)
        if (errno != EINTR) return 0;
    return 1;
}

/* Whether the handler took the sample within RT_SAMPLE_NS (else the request is
 * withdrawn: a signal delivered later does nothing). A handler that started and does
 * not finish within RT_UNWIND_NS ends sampling for good. */
static int wait_taken(void) {
    if (wait_done(RT_SAMPLE_NS)) return 1;
    int asked = ASKED;
    if (__atomic_compare_exchange_n(&sample_state, &asked, IDLE, 0, __ATOMIC_ACQ_REL,
                                    __ATOMIC_ACQUIRE))
        return 0;
    /* The handler has it: it posts in a moment. */
    if (wait_done(RT_UNWIND_NS)) return 1;
    sample_signal = 0;
    return 0;
}

/* Open MPI's mpif.h bindings: mpi_send_ is an alias of ompi_send_f, and dladdr may name
 * either. */
static int is_ompi_fortran(const char *s) {
    size_t n = strlen(s);
    return !strncmp(s, "ompi_", 5) &&
           ((n > 7 && !strcmp(s + n - 2, "_f")) || (n > 9 && !strcmp(s + n - 4, "_f08")));
}

static int is_entry(const char *s) {
    return !strncmp(s, "MPI_", 4) || !strncmp(s, "PMPI_", 5) || !strncmp(s, "MPIX_", 5) ||
           !strncmp(s, "PMPIX_", 6) || !strncmp(s, "mpi_", 4) || !strncmp(s, "pmpi_", 5) ||
           is_ompi_fortran(s);
}

/* `sym` as the C binding spells it: PMPI_Send and the Fortran mpi_send_, pmpi_send__,
 * MPI_SEND and mpi_send_f08 all give MPI_Send. */
static void c_name(const char *sym, char *out, size_t cap) {
    char buf[128];
    if (is_ompi_fortran(sym)) {
        /* ompi_send_f -> mpi_send */
        size_t n = strlen(sym);
        n -= sym[n - 1] == 'f' && sym[n - 2] == '_' ? 2 : 4;
        snprintf(buf, sizeof buf, "mpi_%.*s", (int)(n - 5), sym + 5);
        sym = buf;
    }
    if (sym[0] == 'p' || sym[0] == 'P') sym++;
    size_t n = strlen(sym);
    while (n > 4 && sym[n - 1] == '_') n--;
    int lower = 1, upper = 1;
    for (size_t i = 4; i < n; i++) {
        if (isupper((unsigned char)sym[i])) lower = 0;
        if (islower((unsigned char)sym[i])) upper = 0;
    }
    if (lower && n > 8 && !strncmp(sym + n - 4, "_f08", 4)) n -= 4;
    size_t prefix = (size_t)(strchr(sym, '_') - sym) + 1; /* MPI_ or MPIX_ */
    size_t k = 0;
    for (size_t i = 0; i < n && k + 1 < cap; i++) {
        char ch = sym[i];
        if (i < prefix)
            ch = (char)toupper((unsigned char)ch);
        else if (lower || upper)
            ch = (char)(i == prefix ? toupper((unsigned char)ch) : tolower((unsigned char)ch));
        out[k++] = ch;
    }
    out[k] = 0;
}

/* Read the frames taken: 1 (with `name` and `*site`) when the thread is in an MPI call
 * that does not go through a wrapper here, 2 (with them too) when it does (a covered
 * call, which the core reported unless it began before a debugger attached), 0 when the
 * thread is not in MPI. The outermost MPI entry point names the call. The wrappers here
 * call their shared implementation as a tail call, so their own frame is gone: a frame
 * anywhere in this library stands for a wrapper. A call goes through one when such a
 * frame is outside every entry point but those of the Fortran bindings that call the C
 * ones (MPICH's mpi_recv_ calls our MPI_Recv); an entry point of MPI's own outside it is
 * an unwrapped call that made a wrapped one (MPI-IO calling MPI_Allreduce). */
static int32_t describe(char *name, int32_t cap, void **site) {
    Dl_info self;
    if (!dladdr((void *)describe, &self)) return 0;
    int from = first_frame >= 0 ? first_frame : (nframes > 2 ? 2 : nframes);
    int entry = -1, plain = -1, ours = -1;
    const char *entry_name = NULL;
    for (int i = from; i < nframes; i++) {
        /* A return address is just after its call: the byte before is inside it. */
        uintptr_t pc = frames[i] - (i == first_frame ? 0 : 1);
        Dl_info info;
        const ElfW(Sym) *sym = NULL;
        if (!dladdr1((void *)pc, &info, (void **)&sym, RTLD_DL_SYMENT)) continue;
        if (info.dli_fbase == self.dli_fbase) {
            ours = i;
            continue;
        }
        if (!info.dli_sname || !sym) continue;
        /* dladdr gives the nearest symbol before the address: a hidden function after
         * an entry point is not that entry point. */
        if (sym->st_size && pc - (uintptr_t)info.dli_saddr >= sym->st_size) continue;
        if (!is_entry(info.dli_sname)) continue;
        entry = i;
        entry_name = info.dli_sname;
        if (!rt_in_shim(frames[i])) plain = i;
    }
    if (entry < 0) return 0;
    int outer = ours > entry ? ours : entry;
    *site = NULL;
    for (int i = outer + 1; i < nframes && !*site; i++)
        if (!rt_in_shim(frames[i])) *site = (void *)frames[i];
    c_name(entry_name, name, (size_t)cap);
    return ours > plain ? 2 : 1;
}

/* Whether the signal still runs our handler: a program or library that took it over
 * later (or reset it to the default, which ends the process) is left alone. */
static int still_ours(void) {
    struct sigaction cur;
    return sigaction(sample_signal, NULL, &cur) == 0 && (cur.sa_flags & SA_SIGINFO) &&
           cur.sa_sigaction == on_signal;
}

/* The core's sampler (see racetrack_mpi.h). */
static int32_t sample_now(char *name, int32_t cap, void **site) {
    if (!sample_signal || cap < 8) return -1;
    pthread_mutex_lock(&sample_lock);
    int32_t rc = -1;
    __atomic_store_n(&sample_state, ASKED, __ATOMIC_RELEASE);
    if (sample_signal && still_ours() && pthread_kill(main_thread, sample_signal) == 0 &&
        wait_taken())
        rc = describe(name, cap, site);
    __atomic_store_n(&sample_state, IDLE, __ATOMIC_RELEASE);
    pthread_mutex_unlock(&sample_lock);
    return rc;
}

/* A real-time signal without a handler that this thread does not block (a program
 * that waits for one with sigwaitinfo or a signalfd blocks it), from the top
 * (libraries that take one usually take the lowest). */
static int free_signal(void) {
    sigset_t blocked;
    if (pthread_sigmask(SIG_BLOCK, NULL, &blocked) != 0) return 0;
    for (int s = SIGRTMAX - 1; s >= SIGRTMIN + 2; s--) {
        struct sigaction old;
        if (sigaction(s, NULL, &old) == 0 && !(old.sa_flags & SA_SIGINFO) &&
            old.sa_handler == SIG_DFL && !sigismember(&blocked, s))
            return s;
    }
    return 0;
}

void rt_sample_setup(void) {
    const char *env = getenv("RACETRACK_SAMPLE");
    if ((env && !strcmp(env, "0")) || !rt_has_core()) return;
    /* Without _dl_find_object (glibc 2.35) libgcc's unwinder takes locks: unwinding in
     * a handler could then deadlock the thread it interrupted. */
    if (!dlsym(RTLD_DEFAULT, "_dl_find_object")) return;
    int s = free_signal();
    if (!s || sem_init(&sample_done, 0, 0) != 0) return;
    main_thread = pthread_self();
    /* The first unwind may set things up (libgcc's caches): not in a handler. */
    nframes = 0;
    first_frame = -1;
    _Unwind_Backtrace(collect, NULL);
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_sigaction = on_signal;
    sa.sa_flags = SA_SIGINFO | SA_RESTART;
    sigfillset(&sa.sa_mask);
    if (sigaction(s, &sa, NULL) != 0) return;
    sample_signal = s;
    rt_sampler(sample_now, (int32_t)syscall(SYS_gettid), s);
}
