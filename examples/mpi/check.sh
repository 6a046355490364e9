#!/usr/bin/env bash
# Runs every MPI example built by build.sh with 1, 2, 4 and 8 ranks (where the program
# takes that many) and checks that its last stdout line says "matches_reference":true;
# then checks that MERGESORT_FORCE_WRONG=1 makes merge sort report its truncation.
#
#   examples/mpi/check.sh [mpich|openmpi] [BINDIR]
#
# Prints one line per run and a closing "N passed, N failed" line; exit 1 on a failure.
set -uo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
impl="${1:-mpich}"
bin="${2:-$here/build/$impl}"
case "$impl" in
    mpich) launch=(mpiexec.mpich) ;;
    openmpi) launch=(mpiexec.openmpi --oversubscribe) ;;
    *) echo "usage: check.sh [mpich|openmpi] [BINDIR]" >&2; exit 2 ;;
esac
[ "$(id -u)" = 0 ] && [ "$impl" = openmpi ] && launch+=(--allow-run-as-root)

passed=0 failed=0
# run NAME RANKS WANT_EXIT PATTERN [ENV] -- ARGS: one job, its last line must match PATTERN.
run() {
    local prog="$1" n="$2" want="$3" pattern="$4" env="${5:-}"
    local cmd=("${launch[@]}" -n "$n")
    if [ -n "$env" ]; then
        if [ "$impl" = mpich ]; then cmd+=(env "$env"); else cmd+=(-x "$env"); fi
    fi
    local out rc
    out="$(timeout 120 "${cmd[@]}" "$bin/$prog" 2>/dev/null)"
    rc=$?
    local last="${out##*$'\n'}"
    if [ "$rc" = "$want" ] && [[ "$last" == *$pattern* ]]; then
        passed=$((passed + 1))
        echo "ok   $impl $prog -n $n ${env:+$env }$last"
    else
        failed=$((failed + 1))
        echo "FAIL $impl $prog -n $n ${env:+$env }exit $rc (want $want): $last"
    fi
}

progs=(ring mergesort heat master_worker receives threads ring_f)
[ -x "$bin/ring-rs" ] && progs+=(ring-rs)
for prog in "${progs[@]}"; do
    for n in 1 2 4 8; do
        if { [ "$prog" = master_worker ] || [ "$prog" = receives ]; } && [ "$n" = 1 ]; then
            run "$prog" 1 2 ""
        else
            run "$prog" "$n" 0 '"matches_reference":true'
        fi
    done
done
for n in 4 8; do
    run mergesort "$n" 1 'MPI_ERR_TRUNCATE' MERGESORT_FORCE_WRONG=1
done
run mergesort 3 2 "" # not a power of two
run mergesort 2 2 "" MERGESORT_FORCE_WRONG=1 # no second candidate sender
echo "$passed passed, $failed failed"
[ "$failed" = 0 ]
