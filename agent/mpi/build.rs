//! Builds the C half of the MPI interposition library, once per MPI implementation found
//! on this machine: `c/*.c` compiled with that implementation's `mpicc` into
//! `libracetrack_mpi_<impl>.so`, next to the Rust core (`libracetrack_mpi.so`).
//!
//! MPI is optional: an implementation that is not installed is skipped with a warning
//! saying how to get it, so a machine without MPI still builds the workspace. A wrapper
//! that fails to compile is an error, with the compiler's output.

use std::env;
use std::ffi::OsString;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

/// One MPI implementation the wrappers can be built for.
struct Implementation {
    /// The library's name part: `libracetrack_mpi_<slug>.so`.
    slug: &'static str,
    /// Its name in messages.
    name: &'static str,
    /// Debian's name for its compiler wrapper.
    mpicc: &'static str,
    /// The variable that overrides `mpicc` (empty: skip this implementation).
    env_var: &'static str,
    /// The Debian package that provides it.
    package: &'static str,
}

const IMPLEMENTATIONS: [Implementation; 2] = [
    Implementation {
        slug: "mpich",
        name: "MPICH",
        mpicc: "mpicc.mpich",
        env_var: "RACETRACK_MPICC_MPICH",
        package: "libmpich-dev",
    },
    Implementation {
        slug: "openmpi",
        name: "Open MPI",
        mpicc: "mpicc.openmpi",
        env_var: "RACETRACK_MPICC_OPENMPI",
        package: "libopenmpi-dev",
    },
];

const FLAGS: [&str; 8] = [
    "-shared",
    "-fPIC",
    "-O2",
    "-g",
    "-Wall",
    "-Wextra",
    "-Werror=implicit-function-declaration",
    "-std=gnu11",
];

fn main() {
    println!("cargo:rerun-if-changed=c");
    for imp in &IMPLEMENTATIONS {
        println!("cargo:rerun-if-env-changed={}", imp.env_var);
    }
    let manifest = PathBuf::from(env::var_os("CARGO_MANIFEST_DIR").expect("set by cargo"));
    let out_dir = PathBuf::from(env::var_os("OUT_DIR").expect("set by cargo"));
    let sources = c_sources(&manifest.join("c"));
    for imp in &IMPLEMENTATIONS {
        let mpicc = match env::var_os(imp.env_var) {
            Some(v) if v.is_empty() => {
                println!(
                    "cargo:warning=racetrack-mpi: {} skipped ({} is empty)",
                    imp.name, imp.env_var
                );
                continue;
            }
            Some(v) => v,
            None => OsString::from(imp.mpicc),
        };
        let Some(version) = probe_version(&mpicc, &out_dir, imp) else {
            println!(
                "cargo:warning=racetrack-mpi: {} not found ({} did not run): its MPI wrappers \
                 are not built; to debug {} programs, `apt-get install {}` (or set {})",
                imp.name,
                mpicc.to_string_lossy(),
                imp.name,
                imp.package,
                imp.env_var
            );
            continue;
        };
        let lib = out_dir.join(format!("libracetrack_mpi_{}.so", imp.slug));
        compile(&mpicc, &sources, &lib, imp);
        copy_beside_outputs(&lib, &out_dir);
        println!(
            "cargo:warning=racetrack-mpi: built the MPI wrappers for {version} ({})",
            mpicc.to_string_lossy()
        );
    }
}

/// The wrappers' C files, sorted so the command line does not depend on directory order.
fn c_sources(dir: &Path) -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = fs::read_dir(dir)
        .expect("agent/mpi/c is part of the crate")
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "c"))
        .collect();
    files.sort();
    files
}

/// The implementation's name and version as its own `mpi.h` says ("MPICH 4.0.2"), by
/// compiling and running a tiny probe with `mpicc`; None if `mpicc` is not there or
/// cannot build against its header.
fn probe_version(mpicc: &OsString, out_dir: &Path, imp: &Implementation) -> Option<String> {
    let src = out_dir.join(format!("probe_{}.c", imp.slug));
    let exe = out_dir.join(format!("probe_{}", imp.slug));
    fs::write(&src, PROBE).ok()?;
    let built = Command::new(mpicc).arg(&src).arg("-o").arg(&exe).output().ok()?;
    if !built.status.success() {
        return None;
    }
    // The probe does not call MPI_Init: it runs without a launcher.
    let ran = Command::new(&exe).output().ok()?;
    let version = String::from_utf8_lossy(&ran.stdout).trim().to_owned();
    (ran.status.success() && !version.is_empty()).then_some(version)
}

const PROBE: &str = r#"#include <mpi.h>
#include <stdio.h>
int main(void) {
#if defined(OPEN_MPI)
    printf("Open MPI %d.%d.%d\n", OMPI_MAJOR_VERSION, OMPI_MINOR_VERSION, OMPI_RELEASE_VERSION);
#elif defined(MPICH_VERSION)
    printf("MPICH %s\n", MPICH_VERSION);
#else
    printf("MPI %d.%d\n", MPI_VERSION, MPI_SUBVERSION);
#endif
    return 0;
}
"#;

/// Compile the wrappers into `lib`; a failure stops the build with the compiler's output.
fn compile(mpicc: &OsString, sources: &[PathBuf], lib: &Path, imp: &Implementation) {
    let out = Command::new(mpicc)
        .args(FLAGS)
        .args(sources)
        .arg("-o")
        .arg(lib)
        .output()
        .unwrap_or_else(|e| fail(&format!("running {}: {e}", mpicc.to_string_lossy())));
    if !out.status.success() {
        fail(&format!(
            "compiling the MPI wrappers for {} with {} failed:\n{}{}",
            imp.name,
            mpicc.to_string_lossy(),
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        ));
    }
    // Warnings are not errors, but they must be seen.
    for line in String::from_utf8_lossy(&out.stderr).lines() {
        println!("cargo:warning={line}");
    }
}

/// Copy `lib` into the profile's output directory (`target/<profile>/`), where the Rust
/// core `libracetrack_mpi.so` and the `racetrack` binary are, so the launcher finds the
/// pair side by side. Cargo gives a build script no name for that directory; OUT_DIR is
/// `<target>/<profile>/build/<crate>-<hash>/out`, so it is OUT_DIR's third ancestor.
fn copy_beside_outputs(lib: &Path, out_dir: &Path) {
    let Some(profile_dir) = out_dir.ancestors().nth(3) else {
        println!(
            "cargo:warning=racetrack-mpi: unexpected OUT_DIR {}",
            out_dir.display()
        );
        return;
    };
    let name = lib.file_name().expect("a file name");
    let dest = profile_dir.join(name);
    // Via a temporary and a rename: a rank may be running the old library right now.
    let tmp = profile_dir.join(format!(".{}.tmp", name.to_string_lossy()));
    if let Err(e) = fs::copy(lib, &tmp).and_then(|_| fs::rename(&tmp, &dest)) {
        fail(&format!("copying {} to {}: {e}", lib.display(), dest.display()));
    }
}

/// Stop the build with `why` (cargo shows a build script's stderr when it fails).
fn fail(why: &str) -> ! {
    eprintln!("racetrack-mpi: {why}");
    std::process::exit(1);
}
