#!/usr/bin/env bash
# Builds the MPI example programs with one MPI implementation's compiler wrappers.
#
#   examples/mpi/build.sh [mpich|openmpi] [OUTDIR]
#
# Default: mpich, into examples/mpi/build/<impl>. Binaries: ring, mergesort, heat, sendrecv_any,
# master_worker, dies, receives, deadlock, coverage, threads, ring_f (Fortran). With RUST=1, also ring-rs (the `mpi` crate; needs
# libclang-dev) from examples/mpi/rust, built against the same implementation.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
impl="${1:-mpich}"
out="${2:-$here/build/$impl}"

case "$impl" in
    mpich) cc=mpicc.mpich fc=mpif90.mpich ;;
    openmpi) cc=mpicc.openmpi fc=mpifort.openmpi ;;
    *)
        echo "error: unknown MPI implementation '$impl'" >&2
        echo "usage: build.sh [mpich|openmpi] [OUTDIR]" >&2
        exit 2
        ;;
esac
for tool in "$cc" "$fc"; do
    if ! command -v "$tool" >/dev/null; then
        echo "error: $tool not found (install the $impl development package)" >&2
        exit 1
    fi
done

mkdir -p "$out"
cflags=(-std=c11 -O2 -g -Wall -Wextra)
fflags=(-O2 -g -Wall -Wextra)
for prog in ring mergesort heat master_worker dies receives deadlock sendrecv_any coverage; do
    "$cc" "${cflags[@]}" -o "$out/$prog" "$here/$prog.c"
done
"$cc" "${cflags[@]}" -pthread -o "$out/threads" "$here/threads.c"
# -J: gfortran writes module files there, not into the source tree.
"$fc" "${fflags[@]}" -J "$out" -o "$out/ring_f" "$here/ring.f90"

if [ "${RUST:-0}" = 1 ]; then
    # One target dir per implementation: mpi-sys's bindings come from the mpi.h that
    # $MPICC finds, and its build script does not rerun when MPICC changes.
    target="${CARGO_TARGET_DIR:-$out/rust-target}/mpi-$impl"
    MPICC="$cc" CARGO_TARGET_DIR="$target" \
        cargo build --quiet --manifest-path "$here/rust/Cargo.toml"
    cp "$target/debug/ring-rs" "$out/ring-rs"
fi
echo "built the MPI examples for $impl in $out"
