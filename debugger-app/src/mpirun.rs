//! `racetrack mpirun`: an MPI job under the debugger. The installed launcher of the
//! chosen implementation starts the ranks with the interposition library preloaded
//! (`libracetrack_mpi.so`, the core, and `libracetrack_mpi_<impl>.so`, the wrappers
//! built against that implementation) and the agent's variables set; every rank dials
//! this debugger ([`crate::job`]) and waits before its first call after `MPI_Init` until
//! Continue.

use racetrack_protocol::launch as env;
use std::path::{Path, PathBuf};
use std::process::Command;

/// Why a job cannot be planned, or its record merged.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum MpirunError {
    /// `--impl` of no known implementation.
    #[error("--impl {name}: expected mpich or openmpi")]
    UnknownImpl {
        /// What was given.
        name: String,
    },
    /// `-n 0`.
    #[error("-n needs at least one rank")]
    NoRanks,
    /// The program is neither a file nor in `PATH`.
    #[error("no program `{program}` (not a file, nor in PATH)")]
    NoProgram {
        /// As given.
        program: String,
    },
    /// `--impl` names another implementation than the program is linked against.
    #[error(
        "`{program}` is linked against {}, not {}: use --impl {} (or rebuild it with mpicc.{})",
        linked.title(),
        asked.title(),
        linked.key(),
        asked.key()
    )]
    WrongImpl {
        /// As given.
        program: String,
        /// What `ldd` shows.
        linked: Impl,
        /// What `--impl` says.
        asked: Impl,
    },
    /// The MPI library's core was not built.
    #[error(
        "the MPI library's core {} is missing: build it with `cargo build -p racetrack-mpi`",
        path.display()
    )]
    NoCore {
        /// Where it was looked for.
        path: PathBuf,
    },
    /// The wrappers of `imp` were not built (its development package is missing).
    #[error(
        "the MPI wrappers for {} were not built ({} is missing): install {} and run `cargo build -p racetrack-mpi`",
        imp.title(),
        path.display(),
        imp.dev_package()
    )]
    NoWrappers {
        /// The implementation.
        imp: Impl,
        /// Where they were looked for.
        path: PathBuf,
    },
    /// A rank wrote no part file.
    #[error(
        "rank {rank} left no record ({}: {source}); did the job start, with the MPI library preloaded?",
        path.display()
    )]
    NoPart {
        /// The rank.
        rank: usize,
        /// Its part file.
        path: PathBuf,
        /// Why it cannot be read.
        source: std::io::Error,
    },
    /// A rank's part file is damaged.
    #[error("{}: {source}", path.display())]
    DamagedPart {
        /// The part file.
        path: PathBuf,
        /// Where and how.
        source: racetrack_protocol::replay_log::LogError,
    },
    /// The merged log cannot be written.
    #[error("cannot write {path}: {source}")]
    Write {
        /// The log.
        path: String,
        /// Why.
        source: std::io::Error,
    },
}

/// The two MPI implementations Debian ships. Their ABIs differ (handles, `MPI_Status`,
/// constants), so each gets its own build of the wrappers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Impl {
    Mpich,
    OpenMpi,
}

impl Impl {
    /// Every implementation, in the order a default is looked for.
    pub const ALL: [Impl; 2] = [Impl::Mpich, Impl::OpenMpi];

    /// `mpich` / `openmpi`, as `--impl` and the wrappers' file name say.
    pub fn key(self) -> &'static str {
        match self {
            Impl::Mpich => "mpich",
            Impl::OpenMpi => "openmpi",
        }
    }

    /// `MPICH` / `Open MPI`.
    pub fn title(self) -> &'static str {
        match self {
            Impl::Mpich => "MPICH",
            Impl::OpenMpi => "Open MPI",
        }
    }

    /// `--impl NAME`.
    pub fn parse(name: &str) -> Result<Impl, MpirunError> {
        match name {
            "mpich" => Ok(Impl::Mpich),
            "openmpi" | "open-mpi" | "ompi" => Ok(Impl::OpenMpi),
            _ => Err(MpirunError::UnknownImpl {
                name: name.to_owned(),
            }),
        }
    }

    /// The Debian package its wrappers are built against.
    fn dev_package(self) -> &'static str {
        match self {
            Impl::Mpich => "libmpich-dev",
            Impl::OpenMpi => "libopenmpi-dev",
        }
    }

    /// The launcher: `mpiexec.mpich` / `mpiexec.openmpi` (or `RACETRACK_MPIEXEC_MPICH` /
    /// `RACETRACK_MPIEXEC_OPENMPI`).
    pub fn launcher(self) -> String {
        let var = format!("RACETRACK_MPIEXEC_{}", self.key().to_uppercase());
        std::env::var(var)
            .ok()
            .filter(|v| !v.is_empty())
            .unwrap_or_else(|| format!("mpiexec.{}", self.key()))
    }

    /// The implementation a program's `ldd` listing shows it linked against.
    fn in_ldd(ldd: &str) -> Option<Impl> {
        ldd.lines().find_map(|l| {
            let lib = l.split_whitespace().next()?;
            if lib.starts_with("libmpich") {
                Some(Impl::Mpich)
            } else if lib.starts_with("libmpi.so") || l.contains("openmpi") {
                Some(Impl::OpenMpi)
            } else {
                None
            }
        })
    }
}

/// Where the interposition libraries are: `RACETRACK_MPI_LIB_DIR`, else beside this
/// executable (cargo builds them into the same directory).
pub fn lib_dir() -> PathBuf {
    if let Some(d) = std::env::var_os("RACETRACK_MPI_LIB_DIR").filter(|d| !d.is_empty()) {
        return PathBuf::from(d);
    }
    std::env::current_exe()
        .ok()
        .and_then(|e| e.parent().map(Path::to_path_buf))
        .unwrap_or_else(|| PathBuf::from("."))
}

/// The core library in `dir`, or in `dir/deps` where cargo leaves it when only `cargo
/// test` built it (it copies a library beside the binaries only when asked to build
/// that package); the newer of the two when both exist.
pub fn core_lib(dir: &Path) -> PathBuf {
    let name = "libracetrack_mpi.so";
    let modified = |p: &PathBuf| std::fs::metadata(p).and_then(|m| m.modified()).ok();
    [dir.join(name), dir.join("deps").join(name)]
        .into_iter()
        .filter(|p| p.exists())
        .max_by_key(modified)
        .unwrap_or_else(|| dir.join(name))
}

/// What merging a recorded job's parts gave.
#[derive(Debug)]
pub struct Merged {
    pub bytes: u64,
    pub choices: usize,
    /// `MPI_Wtime` readings.
    pub clocks: usize,
    /// Calls made, over the ranks that reached `MPI_Finalize`.
    pub calls: u64,
    /// Ranks that did not reach `MPI_Finalize` (the log covers a prefix of theirs).
    pub unfinished: Vec<usize>,
}

/// Merge the part files the `ranks` ranks of a job recording `log` wrote
/// (`LOG.rank<R>`) into `log`, with `header` (else rank 0's), and remove them.
/// `prefix`: the parts are a scenario saved mid-session.
pub fn merge_parts(
    log: &str,
    ranks: usize,
    header: Option<&racetrack_protocol::replay_log::LogHeader>,
    prefix: bool,
) -> Result<Merged, MpirunError> {
    use racetrack_protocol::replay_log as rl;
    let paths: Vec<PathBuf> = (0..ranks).map(|r| rl::rank_part_path(log, r)).collect();
    let mut parts = Vec::with_capacity(ranks);
    for (rank, path) in paths.iter().enumerate() {
        parts.push(std::fs::read(path).map_err(|source| MpirunError::NoPart {
            rank,
            path: path.clone(),
            source,
        })?);
    }
    let (out, merged) =
        merge_bytes(&parts, header, prefix).map_err(|(rank, source)| MpirunError::DamagedPart {
            path: paths[rank].clone(),
            source,
        })?;
    std::fs::write(log, &out).map_err(|source| MpirunError::Write {
        path: log.to_owned(),
        source,
    })?;
    for path in paths {
        let _ = std::fs::remove_file(path);
    }
    Ok(merged)
}

/// The ranks' parts of a job's log (rank R's at index R) as one log, with `header` (else
/// rank 0's), and what it holds; or the first part that is damaged, and why. `prefix`:
/// the parts are a scenario saved mid-session.
pub fn merge_bytes(
    parts: &[Vec<u8>],
    header: Option<&racetrack_protocol::replay_log::LogHeader>,
    prefix: bool,
) -> Result<(Vec<u8>, Merged), (usize, racetrack_protocol::replay_log::LogError)> {
    use racetrack_protocol::replay_log::{self as rl, LogEnd, LogThread, ReplayLog};
    let mut out = Vec::new();
    let mut merged = Merged {
        bytes: 0,
        choices: 0,
        clocks: 0,
        calls: 0,
        unfinished: Vec::new(),
    };
    let mut threads = Vec::with_capacity(parts.len());
    for (rank, bytes) in parts.iter().enumerate() {
        let got = ReplayLog::parse(bytes).map_err(|e| (rank, e))?;
        if rank == 0 {
            out = rl::header_bytes(header.unwrap_or(&got.header));
        }
        let mine = got.ranks.get(rank).cloned().unwrap_or_default();
        if !mine.choices.is_empty() {
            rl::put_calls_record(&mut out, rank, 0, &mine.choices);
        }
        if !mine.clocks.is_empty() {
            rl::put_clocks_record(&mut out, rank, 0, &mine.clocks);
        }
        merged.clocks += mine.clocks.len();
        merged.choices += mine.choices.len();
        match mine.calls {
            Some(calls) => {
                out.extend(rl::rank_end_record(rank, calls));
                merged.calls += calls;
            }
            None => merged.unfinished.push(rank),
        }
        threads.push(LogThread {
            name: format!("rank[{rank}]"),
            steps: mine.calls.unwrap_or(0),
        });
    }
    if merged.unfinished.is_empty() {
        out.extend(rl::end_record(&LogEnd {
            threads,
            ops: Vec::new(),
            prefix,
        }));
    }
    merged.bytes = out.len() as u64;
    Ok((out, merged))
}

/// The two libraries to preload for `imp`, or why they are missing.
pub fn libs(imp: Impl, dir: &Path) -> Result<[PathBuf; 2], MpirunError> {
    let core = core_lib(dir);
    let wrappers = dir.join(format!("libracetrack_mpi_{}.so", imp.key()));
    if !core.exists() {
        return Err(MpirunError::NoCore { path: core });
    }
    if !wrappers.exists() {
        return Err(MpirunError::NoWrappers { imp, path: wrappers });
    }
    Ok([core, wrappers])
}

/// A job to launch.
#[derive(Debug)]
pub struct Plan {
    pub imp: Impl,
    pub ranks: usize,
    pub program: PathBuf,
    pub args: Vec<String>,
    pub libs: [PathBuf; 2],
    /// More variables for the ranks (`RACETRACK_REPLAY`, `RACETRACK_RECORD`).
    pub env: Vec<(String, String)>,
}

/// `program` as a path: as given if it names a directory, else looked up in `PATH`.
fn find_program(program: &str) -> Result<PathBuf, MpirunError> {
    let found = if program.contains('/') {
        Some(PathBuf::from(program)).filter(|p| p.is_file())
    } else {
        std::env::var_os("PATH").and_then(|path| {
            std::env::split_paths(&path)
                .map(|d| d.join(program))
                .find(|p| p.is_file())
        })
    };
    found.ok_or_else(|| MpirunError::NoProgram {
        program: program.to_owned(),
    })
}

/// Check what can be checked before launching: the program exists, the implementation
/// (given, or the one the program is linked against, or the first whose wrappers were
/// built) matches the program, and its libraries were built.
pub fn plan(imp: Option<Impl>, ranks: usize, program: &str, args: &[String]) -> Result<Plan, MpirunError> {
    if ranks == 0 {
        return Err(MpirunError::NoRanks);
    }
    let path = find_program(program)?;
    let linked = std::process::Command::new("ldd")
        .arg(&path)
        .output()
        .ok()
        .and_then(|o| Impl::in_ldd(&String::from_utf8_lossy(&o.stdout)));
    let dir = lib_dir();
    let imp = match (imp, linked) {
        (Some(asked), Some(linked)) if asked != linked => {
            return Err(MpirunError::WrongImpl {
                program: program.to_owned(),
                linked,
                asked,
            })
        }
        (Some(i), _) | (None, Some(i)) => i,
        (None, None) => Impl::ALL
            .into_iter()
            .find(|i| libs(*i, &dir).is_ok())
            .unwrap_or(Impl::Mpich),
    };
    let libs = libs(imp, &dir)?;
    Ok(Plan {
        imp,
        ranks,
        program: path,
        args: args.to_vec(),
        libs,
        env: Vec::new(),
    })
}

fn running_as_root() -> bool {
    std::fs::read_to_string("/proc/self/status").is_ok_and(|s| {
        s.lines()
            .find(|l| l.starts_with("Uid:"))
            .and_then(|l| l.split_whitespace().nth(1).map(|u| u == "0"))
            .unwrap_or(false)
    })
}

impl Plan {
    /// The launcher's command line, its ranks dialling `url`: variables are passed the
    /// implementation's way (Hydra's `-genv`, Open MPI's `-x`), to the ranks only (the
    /// launcher itself does not load the library). Open MPI also gets
    /// `--oversubscribe` (more ranks than cores) and, as root, `--allow-run-as-root`.
    pub fn command(&self, url: &str) -> Command {
        self.launch_command(&[(env::ENV_CONNECT, url), (env::ENV_WAIT, "1")])
    }

    /// The launcher's command line for a free run (no debugger): the ranks record or
    /// replay as [`Plan::env`] says.
    pub fn free_command(&self) -> Command {
        self.launch_command(&[])
    }

    fn launch_command(&self, session: &[(&str, &str)]) -> Command {
        let preload = format!("{}:{}", self.libs[0].display(), self.libs[1].display());
        let name = self
            .program
            .file_name()
            .map_or_else(|| "program".into(), |n| n.to_string_lossy().into_owned());
        let mut vars = vec![
            ("LD_PRELOAD".to_owned(), preload),
            (env::ENV_PROGRAM.to_owned(), name),
        ];
        vars.extend(session.iter().map(|(k, v)| ((*k).to_owned(), (*v).to_owned())));
        vars.extend(self.env.iter().cloned());
        let mut cmd = Command::new(self.imp.launcher());
        // The ranks inherit the launcher's environment: none of the agent's variables
        // but those given here.
        for var in [
            env::ENV_CONNECT,
            env::ENV_LISTEN,
            env::ENV_WAIT,
            env::ENV_TRACE,
            env::ENV_RECORD,
            env::ENV_REPLAY,
        ] {
            cmd.env_remove(var);
        }
        match self.imp {
            Impl::Mpich => {
                cmd.arg("-n").arg(self.ranks.to_string());
                for (k, v) in &vars {
                    cmd.arg("-genv").arg(k).arg(v);
                }
            }
            Impl::OpenMpi => {
                if running_as_root() {
                    cmd.arg("--allow-run-as-root");
                }
                cmd.arg("--oversubscribe").arg("-n").arg(self.ranks.to_string());
                for (k, v) in &vars {
                    cmd.arg("-x").arg(format!("{k}={v}"));
                }
            }
        }
        cmd.arg(&self.program).args(&self.args);
        cmd
    }
}

#[cfg(test)]
mod tests {
    use super::{Impl, MpirunError};

    #[test]
    fn the_linked_implementation_is_read_from_ldd() {
        let mpich = "\tlinux-vdso.so.1 (0x00007ffd)\n\tlibmpich.so.12 => /lib/x86_64-linux-gnu/libmpich.so.12 (0x00007f)\n";
        let ompi = "\tlibmpi.so.40 => /lib/x86_64-linux-gnu/libmpi.so.40 (0x00007f)\n";
        assert_eq!(Impl::in_ldd(mpich), Some(Impl::Mpich));
        assert_eq!(Impl::in_ldd(ompi), Some(Impl::OpenMpi));
        assert_eq!(Impl::in_ldd("\tlibc.so.6 => /lib/libc.so.6\n"), None);
        assert!(Impl::parse("lam").is_err());
        let e = Impl::parse("lam").unwrap_err();
        assert!(
            matches!(&e, MpirunError::UnknownImpl { name } if name == "lam"),
            "{e}"
        );
        assert_eq!(e.to_string(), "--impl lam: expected mpich or openmpi");
    }
}
