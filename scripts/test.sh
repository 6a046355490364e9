#!/usr/bin/env bash
# Every test of the workspace, on a fresh machine: first the system packages the tests
# need (both MPI implementations, gfortran, iproute2, Debian's hpcc), then the tests.
#
#   scripts/test.sh                  install what is missing, then run every test
#   scripts/test.sh --deps-only      install what is missing, run nothing
#   scripts/test.sh -- ARGS          ARGS go to the test binaries (e.g. --nocapture)
#
# Installing uses apt-get (Debian 12, Ubuntu 22.04 / 24.04), through sudo when not root.
# Elsewhere the script names the packages and stops: the MPI tests fail, loudly, without
# them, and are never skipped.
set -euo pipefail
cd "$(dirname "$0")/.."

# Debian / Ubuntu package names, and a command each must provide.
packages=(mpich libmpich-dev openmpi-bin libopenmpi-dev gfortran iproute2 hpcc)
commands=(mpiexec.mpich mpicc.mpich mpiexec.openmpi mpicc.openmpi gfortran ip hpcc)

say() { echo "scripts/test.sh: $*" >&2; }

missing_commands() {
  local c out=()
  for c in "${commands[@]}"; do
    command -v "$c" >/dev/null 2>&1 || [ -x "/usr/sbin/$c" ] || out+=("$c")
  done
  echo "${out[*]:-}"
}

install_deps() {
  local missing=() p
  if ! command -v apt-get >/dev/null 2>&1 || ! command -v dpkg >/dev/null 2>&1; then
    local absent
    absent=$(missing_commands)
    if [ -n "$absent" ]; then
      say "this system has no apt-get; the tests need: MPICH and Open MPI with their"
      say "development files and their suffixed commands (mpicc.mpich, mpiexec.mpich,"
      say "mpicc.openmpi, mpiexec.openmpi), gfortran, iproute2 (ip) and HPC Challenge (hpcc)."
      say "On Debian/Ubuntu these are the packages: ${packages[*]}"
      say "not found here: $absent"
      exit 1
    fi
    return 0
  fi
  for p in "${packages[@]}"; do
    # Installed, not merely known: a removed package keeps its configuration files, and
    # `dpkg -s` still succeeds for it.
    [ "$(dpkg-query -W -f='${Status}' "$p" 2>/dev/null)" = "install ok installed" ] || missing+=("$p")
  done
  [ ${#missing[@]} -eq 0 ] && return 0
  local sudo=()
  if [ "$(id -u)" != 0 ]; then
    if ! command -v sudo >/dev/null 2>&1; then
      say "the tests need these packages, and installing them needs root (no sudo here):"
      say "  apt-get install ${missing[*]}"
      exit 1
    fi
    sudo=(sudo)
  fi
  say "installing ${missing[*]}"
  "${sudo[@]}" apt-get update -qq
  if ! "${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null; then
    say "apt-get could not install: ${missing[*]}"
    say "(on Ubuntu, hpcc is in 'universe': sudo add-apt-repository universe)"
    exit 1
  fi
}

deps_only=0
test_args=()
while [ $# -gt 0 ]; do
  case "$1" in
    --deps-only) deps_only=1 ;;
    --) shift; test_args=("$@"); break ;;
    *) say "unknown option $1 (--deps-only, or -- ARGS for the test binaries)"; exit 2 ;;
  esac
  shift
done

install_deps
[ $deps_only -eq 1 ] && exit 0

if [ "$(id -u)" != 0 ] && [ -z "${RACETRACK_NO_NETNS:-}" ]; then
  # tests/remote.rs puts ranks on other hosts made of network namespaces: root only.
  say "not root: the network-namespace tests (debugger-app/tests/remote.rs) are left out"
  say "and say so in their output; run as root to include them"
  export RACETRACK_NO_NETNS=1
fi

# --no-fail-fast: every failing test binary is reported, not only the first.
cargo test --workspace --no-fail-fast -- "${test_args[@]}"
# The agent core without the runtime: driven through a fake debuggee (unit tests), and by
# a second front end outside the crate on its public API.
cargo test -p racetrack-agent --no-default-features --lib --test second_front_end --no-fail-fast \
  -- "${test_args[@]}"
