//! The subcommands for MPI jobs: `mpirun` (under the debugger, or `--record`), `listen`,
//! and `replay` of an MPI job's log.

use super::{absolute, OrMsg};
use crate::cli::{Front, MpiImpl, Program};
use anyhow::{anyhow, bail, Context};
use racetrack::conn::Connection;
use racetrack::gui;
use racetrack::gui::session::{conn_waker, Session, Waker};
use racetrack::job::JobListener;
use racetrack::launch::{spawn_job, Launched};
use racetrack::mpirun::{Impl, Plan};
use racetrack_protocol::replay_log::LogHeader;
use std::path::Path;
use std::time::Duration;

/// `racetrack explore --mpi …`.
pub fn explore(
    imp: Option<MpiImpl>,
    ranks: u32,
    program: &Program,
    opts: &racetrack::explore::Options,
) -> anyhow::Result<i32> {
    let plan = plan(imp, ranks, program)?;
    eprintln!(
        "racetrack: exploring {} ranks of {} under {}",
        ranks,
        plan.program.display(),
        plan.imp.title()
    );
    super::explore::report(opts, &program.command, |say| {
        racetrack::explore::explore_mpi(&plan, opts, say)
    })
}

fn plan(imp: Option<MpiImpl>, ranks: u32, program: &Program) -> anyhow::Result<Plan> {
    let imp = imp.map(|i| match i {
        MpiImpl::Mpich => Impl::Mpich,
        MpiImpl::Openmpi => Impl::OpenMpi,
    });
    racetrack::mpirun::plan(imp, ranks as usize, program.name(), program.args()).or_msg()
}

/// `racetrack mpirun [--ctl] [--script F [--set N=V]...] [--impl I] -n N -- PROGRAM ARGS`.
pub fn mpirun(imp: Option<MpiImpl>, ranks: u32, front: Front, program: &Program) -> anyhow::Result<i32> {
    let plan = plan(imp, ranks, program)?;
    eprintln!(
        "racetrack: {} ranks of {} under {} ({})",
        ranks,
        plan.program.display(),
        plan.imp.title(),
        plan.imp.launcher()
    );
    let title = format!("Racetrack — {} × {ranks}", plan.program.display());
    debug_job(&plan, front, &title)
}

/// The job of `plan` under the controller or the GUI, as `front` says.
fn debug_job(plan: &Plan, front: Front, title: &str) -> anyhow::Result<i32> {
    if front.ctl {
        let input = front.ctl_input()?;
        let (conn, launched) = start_job(plan, Box::new(|| {}))?;
        return Ok(racetrack::ctl::run_with(conn, Some(launched), input));
    }
    let script = front.gui_script()?;
    let waker = Waker::default();
    let (conn, launched) = start_job(plan, conn_waker(&waker))?;
    let session = Session::job(conn, launched, waker.clone()).or_msg()?;
    Ok(gui::run(session, waker, script, title))
}

/// `racetrack mpirun --record LOG …`: the job free, each rank recording its part; then
/// the parts merged into `LOG`. The exit code is the launcher's.
pub fn record(imp: Option<MpiImpl>, ranks: u32, program: &Program, log: &Path) -> anyhow::Result<i32> {
    use racetrack_protocol::replay_log::{rank_part_path, MpiJob};
    let mut plan = plan(imp, ranks, program)?;
    let path = absolute(log);
    let shown = log.display();
    // The ranks write beside it: a place they cannot write is refused before they start.
    std::fs::write(&path, b"").with_context(|| format!("cannot write the replay log {shown}"))?;
    let _ = std::fs::remove_file(&path);
    for r in 0..plan.ranks {
        let _ = std::fs::remove_file(rank_part_path(&path, r));
    }
    plan.env
        .push((racetrack_protocol::launch::ENV_RECORD.into(), path.clone()));
    let status = plan
        .free_command()
        .status()
        .with_context(|| format!("cannot start {}", plan.imp.launcher()))?;
    let header = LogHeader {
        program: program.name().to_owned(),
        args: plan.args.clone(),
        mpi: Some(MpiJob {
            ranks: plan.ranks,
            implementation: plan.imp.key().to_owned(),
        }),
    };
    match racetrack::mpirun::merge_parts(&path, plan.ranks, Some(&header), false) {
        Ok(m) => {
            let unfinished = if m.unfinished.is_empty() {
                String::new()
            } else {
                format!(
                    "; ranks {:?} did not reach MPI_Finalize, the log covers a prefix of their run",
                    m.unfinished
                )
            };
            eprintln!(
                "racetrack: replay log {shown} ({} bytes: {} choices in {} calls of {} ranks, {} clock readings{unfinished})",
                m.bytes, m.choices, m.calls, plan.ranks, m.clocks
            );
        }
        Err(e) => eprintln!("racetrack: no replay log written: {e}"),
    }
    Ok(status.code().unwrap_or(1))
}

/// `racetrack replay LOG …` of an MPI job's log: the recorded program on the recorded
/// number of ranks, free or under the controller or the GUI.
pub fn replay(
    log: &Path,
    header: &LogHeader,
    gui: bool,
    front: Front,
    program: &Program,
) -> anyhow::Result<i32> {
    let ranks = header.mpi.as_ref().map_or(1, |m| m.ranks);
    let base = |p: &str| p.rsplit('/').next().unwrap_or(p).to_owned();
    let words = |first: &str, rest: &[String]| {
        std::iter::once(first)
            .chain(rest.iter().map(String::as_str))
            .collect::<Vec<_>>()
            .join(" ")
    };
    if base(&header.program) != base(program.name()) || header.args != program.args() {
        bail!(
            "{} is the log of `{}` on {ranks} ranks; this is `{}`: a replay runs the recorded program with its arguments",
            log.display(),
            words(&header.program, &header.args),
            words(program.name(), program.args()),
        );
    }
    let ranks = u32::try_from(ranks).map_err(|_| anyhow!("{}: {ranks} ranks", log.display()))?;
    let mut plan = plan(None, ranks, program)?;
    plan.env
        .push((racetrack_protocol::launch::ENV_REPLAY.into(), absolute(log)));
    eprintln!(
        "racetrack: replaying {}: {ranks} ranks of {} under {}",
        log.display(),
        plan.program.display(),
        plan.imp.title()
    );
    if gui || front.ctl {
        let title = format!("Racetrack — replay of {} × {ranks}", plan.program.display());
        return debug_job(&plan, front, &title);
    }
    Ok(plan
        .free_command()
        .status()
        .with_context(|| format!("cannot start {}", plan.imp.launcher()))?
        .code()
        .unwrap_or(1))
}

/// `racetrack listen [--ctl [--script F]] [--addr HOST:PORT] -n N`: a job started by
/// hand dials in.
pub fn listen(ranks: u32, addr: &str, front: Front) -> anyhow::Result<i32> {
    let (listener, token_line) = bind_job_listener(addr)?;
    let dir = racetrack::mpirun::lib_dir();
    eprintln!(
        "racetrack: waiting for {ranks} ranks at {url}\n  start the job with {var}={url} and LD_PRELOAD={core}:{dir}/libracetrack_mpi_<mpich|openmpi>.so in its ranks' environment{token_line}",
        url = listener.url(),
        var = racetrack_protocol::launch::ENV_CONNECT,
        core = racetrack::mpirun::core_lib(&dir).display(),
        dir = dir.display(),
    );
    let input = if front.ctl { Some(front.ctl_input()?) } else { None };
    let script = if front.ctl { None } else { front.gui_script()? };
    let waker = Waker::default();
    let conn_wake = if front.ctl {
        Box::new(|| {})
    } else {
        conn_waker(&waker)
    };
    let conn = listener
        .accept(ranks as usize, Duration::from_secs(3600), conn_wake, || None)
        .or_msg()?;
    Ok(match input {
        Some(input) => racetrack::ctl::run_with(conn, None, input),
        None => {
            let session = Session::from_connection(conn, "job".into());
            gui::run(session, waker, script, &format!("Racetrack — {ranks} ranks"))
        }
    })
}

/// The listener of `racetrack listen` on `addr`, and what its banner says of the token.
/// Beyond loopback every rank must present a token (SECURITY.md): `RACETRACK_TOKEN` if
/// set, else a fresh random one, printed for the user to give the ranks.
fn bind_job_listener(addr: &str) -> anyhow::Result<(JobListener, String)> {
    let var = racetrack_protocol::launch::ENV_TOKEN;
    let given = std::env::var(var).ok().filter(|t| !t.is_empty());
    let loopback = addr
        .parse::<std::net::SocketAddr>()
        .is_ok_and(|sa| sa.ip().is_loopback());
    let (token, line) = match given {
        Some(t) => (
            Some(t),
            format!("\n  and {var} as set here (ranks without it are refused)"),
        ),
        None if loopback => (None, String::new()),
        None => {
            let t = random_token().context("cannot make a token")?;
            let line = format!("\n  and {var}={t} (ranks without it are refused)");
            (Some(t), line)
        }
    };
    Ok((JobListener::bind(addr, token).or_msg()?, line))
}

/// 128 random bits, in hex.
fn random_token() -> std::io::Result<String> {
    use std::io::Read;
    let mut bytes = [0u8; 16];
    std::fs::File::open("/dev/urandom")?.read_exact(&mut bytes)?;
    Ok(bytes.iter().map(|b| format!("{b:02x}")).collect())
}

/// Launch the job and wait for every rank to dial in (the launcher's failure, with what
/// it said, ends the wait).
fn start_job(plan: &Plan, waker: racetrack::conn::Waker) -> anyhow::Result<(Connection, Launched)> {
    let listener = JobListener::bind("127.0.0.1:0", None).or_msg()?;
    let mut launched = spawn_job(plan.command(listener.url()), listener.url()).or_msg()?;
    let launcher = plan.imp.launcher();
    let ranks = plan.ranks;
    let conn = listener.accept(ranks, Duration::from_secs(60), waker, || {
        let status = launched.child.try_wait().ok().flatten()?;
        // Its last words first.
        std::thread::sleep(Duration::from_millis(200));
        let said: Vec<String> = launched.stderr_lines.try_iter().collect();
        Some(format!(
            "{launcher} exited ({status}) before all {ranks} ranks connected; it said:\n{}",
            said.join("\n")
        ))
    });
    match conn {
        Ok(conn) => Ok((conn, launched)),
        Err(e) => {
            let _ = launched.child.kill();
            Err(anyhow!("{e}"))
        }
    }
}
