#!/bin/sh
# run.sh IMPL: check the MPI wrappers without the Rust core. Builds the stub core and the
# test programs, runs them under IMPL (mpich | openmpi) with the stub and
# libracetrack_mpi_IMPL.so preloaded, and checks that each call was reported once with
# the right fields. The library is $RACETRACK_MPI_LIB if set (e.g. cargo's
# target/debug/libracetrack_mpi_mpich.so), else built here from ../*.c.
set -eu
IMPL=${1:?usage: run.sh mpich|openmpi}
HERE=$(cd "$(dirname "$0")" && pwd)
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
case $IMPL in
mpich) CC=mpicc.mpich FC=mpif90.mpich ;;
openmpi) CC=mpicc.openmpi FC=mpifort.openmpi ;;
*) echo "run.sh: unknown implementation $IMPL" >&2; exit 2 ;;
esac

LIB=${RACETRACK_MPI_LIB:-$WORK/libracetrack_mpi_$IMPL.so}
if [ -z "${RACETRACK_MPI_LIB:-}" ]; then
    $CC -shared -fPIC -O2 -g -Wall -Wextra -Werror=implicit-function-declaration \
        "$HERE"/../*.c -o "$LIB"
fi
gcc -shared -fPIC -O2 -Wall -Wextra "$HERE/stub_core.c" -o "$WORK/stub.so" -ldl
for p in calls forced edits; do
    # MPICH's header marks MPI_STATUSES_IGNORE's array as too small for -Wstringop-overflow.
    $CC -g -O1 -Wall -Wno-stringop-overflow "$HERE/$p.c" -o "$WORK/$p"
done
$FC -g -O1 "$HERE/calls.f90" -o "$WORK/calls_f" -J "$WORK"

# run N PROG [VAR=VALUE...]: PROG's stdout to $WORK/PROG.out, the reports to PROG.err
# (the ranks' own files, concatenated: forwarded stderr can split lines).
run() {
    n=$1 prog=$2
    shift 2
    pre="LD_PRELOAD=$WORK/stub.so:$LIB"
    set -- "RT_STUB_LOG=$WORK/$prog.rt" "$@"
    if [ "$IMPL" = mpich ]; then
        timeout 120 mpiexec.mpich -n "$n" env "$pre" "$@" "$WORK/$prog" \
            >"$WORK/$prog.out" 2>"$WORK/$prog.err"
    else
        xs=""
        for v in "$pre" "$@"; do xs="$xs -x $v"; done
        # shellcheck disable=SC2086
        timeout 120 mpiexec.openmpi --allow-run-as-root --oversubscribe -n "$n" $xs \
            "$WORK/$prog" >"$WORK/$prog.out" 2>"$WORK/$prog.err"
    fi
    cat "$WORK/$prog.rt".* >>"$WORK/$prog.err"
}

fails=0
# expect FILE COUNT PATTERN: exactly COUNT lines of FILE match the (extended) PATTERN.
expect() {
    got=$(grep -cE -- "$3" "$WORK/$1" || true)
    if [ "$got" != "$2" ]; then
        echo "FAIL $IMPL $1: $got lines match '$3', expected $2" >&2
        fails=$((fails + 1))
    fi
}

# ---- C: calls.c on 4 ranks ----
run 4 calls
expect calls.out 1 '^calls: ok$'
for r in 0 1 2 3; do
    for call in Init Sendrecv Bcast Allreduce Exscan Gather Comm_split Comm_free Finalize; do
        expect calls.err 1 "^RT $r start MPI_$call "
        expect calls.err 1 "^RT $r stop MPI_$call "
    done
    expect calls.err 3 "^RT $r start MPI_Barrier "
    expect calls.err 1 "^RT $r finalize$"
    expect calls.err 1 "^RT $r clock MPI_Wtime from calls$"
    expect calls.err 1 "^RT $r clock time from calls$"
    expect calls.err 3 "^RT $r pcontrol "
    expect calls.err 1 "^RT $r start MPI_Sendrecv peer=$(((r + 1) % 4)) peer_world=$(((r + 1) % 4)) tag=7 count=1 .*datatype=MPI_DOUBLE comm=MPI_COMM_WORLD bytes=8 kind=f size=8 send=1"
    expect calls.err 1 "^RT $r matched MPI_Sendrecv source=$(((r + 3) % 4)) tag=7 bytes=8$"
    expect calls.err 1 "^RT $r start MPI_Allreduce .*count=1 .*datatype=MPI_LONG comm=MPI_COMM_WORLD bytes=8 kind=i size=8"
    expect calls.err 1 "^RT $r start MPI_Exscan .*count=1 .*datatype=MPI_LONG comm=MPI_COMM_WORLD bytes=8 kind=i size=8"
    expect calls.err 1 "^RT $r start MPI_Gather .*root=0 datatype=MPI_CHAR .*kind=c size=1"
done
expect calls.err 1 '^RT 0 pcontrol level=2 label=start$'
expect calls.err 3 '^RT 0 start MPI_Irecv peer=-1 peer_world=-2147483648 tag=-1 count=1 .*datatype=MPI_INT'
expect calls.err 3 '^RT 0 request MPI_Irecv '
expect calls.err 1 '^RT 0 start MPI_Waitall '
for s in 1 2 3; do
    expect calls.err 1 "^RT 0 completed MPI_Waitall id=-?[0-9]+ source=$s tag=10$s bytes=4 cancelled=0$"
    expect calls.err 1 "^RT $s start MPI_Send peer=0 peer_world=0 tag=10$s count=1 .*datatype=MPI_INT comm=MPI_COMM_WORLD bytes=4 kind=i size=4 send=1"
done
# Split by parity, key -rank: world rank 2 leads the evens, 3 the odds.
# The new communicator is each rank's first: `comm 1`, in its creation and its uses.
expect calls.err 2 '^RT [02] stop MPI_Comm_split rc=0 new_comm=comm 1 new_rank=[01] new_leader=2$'
expect calls.err 2 '^RT [13] stop MPI_Comm_split rc=0 new_comm=comm 1 new_rank=[01] new_leader=3$'
expect calls.err 1 '^RT 0 start MPI_Recv peer=0 peer_world=2 tag=5 .*comm=comm 1 '
expect calls.err 1 '^RT 1 start MPI_Recv peer=0 peer_world=3 tag=5 .*comm=comm 1 '
expect calls.err 4 '^RT [0-3] start MPI_Comm_free .*comm=comm 1 '
expect calls.err 1 '^RT 0 matched MPI_Iprobe source=1 tag=9 bytes=6$'
expect calls.err 1 '^RT 0 start MPI_Recv peer=1 peer_world=1 tag=9 count=3 .*datatype=MPI_SHORT .*bytes=6 kind=i size=2'
expect calls.err 0 ' start .* site=([^c]|c[^a])'

# ---- a forced match: the first wildcard receive takes rank 2's message ----
run 3 forced RT_STUB_FORCE_SOURCE=2
expect forced.out 1 '^forced: receive 0 matched source 2 tag 2 value 200$'
expect forced.out 1 '^forced: receive 1 matched source 1 tag 1 value 100$'
expect forced.err 1 '^RT 0 forced MPI_Recv source=2 '
expect forced.err 1 '^RT 0 matched MPI_Recv source=2 tag=2 bytes=4$'
expect forced.err 1 '^RT 0 matched MPI_Recv source=1 tag=1 bytes=4$'
expect forced.err 2 '^RT [12] completed MPI_Wait '

# ---- edited nonblocking sends: one freed with MPI_Request_free, one waited for ----
run 2 edits RT_STUB_EDIT=1
expect edits.out 1 '^edits: received 1001 1002$'
expect edits.err 2 '^RT 1 edited MPI_Isend to 100[12]$'

# ---- Fortran: each call once, with the program's call site ----
run 4 calls_f
expect calls_f.out 1 '^calls.f90: ok$'
for r in 0 1 2 3; do
    for call in Init Sendrecv Bcast Allreduce Finalize; do
        expect calls_f.err 1 "^RT $r start MPI_$call "
        expect calls_f.err 1 "^RT $r stop MPI_$call "
    done
    for call in Ibarrier Ibcast Iallreduce Ireduce Iscan Igather Send_init Recv_init Startall; do
        expect calls_f.err 1 "^RT $r start MPI_$call "
        expect calls_f.err 1 "^RT $r stop MPI_$call "
    done
    expect calls_f.err 1 "^RT $r request MPI_Ibarrier "
    expect calls_f.err 1 "^RT $r start MPI_Ibcast .*root=0 datatype=MPI_INTEGER "
    expect calls_f.err 1 "^RT $r start MPI_Igather .*count=1 root=0 datatype=MPI_INTEGER "
    expect calls_f.err 1 "^RT $r start MPI_Send_init peer=$(((r + 1) % 4)) .*tag=12 "
    expect calls_f.err 2 "^RT $r start MPI_Start peer=$(((r + 1) % 4)) .*tag=12 |^RT $r start MPI_Start peer=$(((r + 3) % 4)) .*tag=12 "
    expect calls_f.err 2 "^RT $r start MPI_Request_free "
    for call in Mprobe Mrecv Imrecv; do
        expect calls_f.err 1 "^RT $r start MPI_$call peer=$(((r + 3) % 4)) .*comm=MPI_COMM_WORLD "
    done
    for call in Win_create Win_lock Win_unlock Win_free Put Get; do
        expect calls_f.err 1 "^RT $r start MPI_$call "
        expect calls_f.err 1 "^RT $r stop MPI_$call "
    done
    expect calls_f.err 2 "^RT $r start MPI_Win_fence .*comm=win 1 "
    expect calls_f.err 1 "^RT $r start MPI_Win_create .*comm=MPI_COMM_WORLD bytes=16 "
    expect calls_f.err 1 "^RT $r start MPI_Put peer=$(((r + 1) % 4)) peer_world=$(((r + 1) % 4)) .*count=1 .*datatype=MPI_INTEGER comm=win 1 "
    expect calls_f.err 1 "^RT $r matched MPI_Mrecv source=$(((r + 3) % 4)) tag=13 bytes=4$"
    expect calls_f.err 1 "^RT $r matched MPI_Improbe source=$(((r + 3) % 4)) tag=14 bytes=4$"
    expect calls_f.err 1 "^RT $r completed MPI_Waitall .* source=$(((r + 3) % 4)) tag=14 bytes=4 "
    expect calls_f.err 3 "^RT $r start MPI_Barrier "
    expect calls_f.err 1 "^RT $r start MPI_Sendrecv .*datatype=MPI_DOUBLE_PRECISION .*bytes=8 kind=f size=8"
    expect calls_f.err 1 "^RT $r matched MPI_Sendrecv source=$(((r + 3) % 4)) tag=7 bytes=8$"
    expect calls_f.err 1 "^RT $r start MPI_Allreduce .*count=1 .*datatype=MPI_INTEGER .*kind=i size=4"
done
expect calls_f.err 3 '^RT 0 start MPI_Irecv peer=-1 .*tag=-1 .*datatype=MPI_INTEGER'
expect calls_f.err 6 '^RT 0 start MPI_Waitall '
expect calls_f.err 3 '^RT 0 completed MPI_Waitall .* source=[123] tag=10[123] bytes=4 '
expect calls_f.err 3 '^RT [123] start MPI_Send peer=0 peer_world=0 .*datatype=MPI_INTEGER'
expect calls_f.err 0 ' start .* site=([^c]|c[^a])'

if [ "$fails" -ne 0 ]; then
    echo "run.sh $IMPL: $fails checks failed; reports kept in $WORK.keep" >&2
    cp -r "$WORK" "$WORK.keep"
    exit 1
fi
echo "run.sh $IMPL: all checks passed"
