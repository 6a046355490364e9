//! The subcommands for programs on Racetrack's runtime: `demo`, `run`, `attach`, `record`,
//! `replay` of a runtime log, `open`, `export`.

use super::{connect, OrMsg};
use crate::cli::{Example, ExampleOpts, Front, GuiScript, Program};
use anyhow::{anyhow, Context};
use racetrack::gui;
use racetrack::gui::session::{Session, Waker};
use racetrack::launch::launch;
use racetrack_protocol::launch as env;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// `racetrack demo NAME [OPTIONS]`: this binary again, as `racetrack example NAME`, with
/// the agent, under the GUI.
pub fn demo(name: Example, opts: &ExampleOpts, script: GuiScript) -> anyhow::Result<i32> {
    let script = script.load()?;
    racetrack_examples::check_cli(name.name(), opts.to_args())
        .map_err(|e| anyhow!("{}: {e}", name.name()))?;
    let exe = std::env::current_exe().context("cannot find myself")?;
    // The agent names the program after this (instead of `racetrack`).
    std::env::set_var(env::ENV_PROGRAM, name.name());
    let mut prog_args = vec!["example".to_owned(), name.name().to_owned()];
    prog_args.extend(opts.to_args());
    let waker = Waker::default();
    let session = Session::launch(&exe.display().to_string(), &prog_args, waker.clone()).or_msg()?;
    Ok(gui::run(
        session,
        waker,
        script,
        &format!("Racetrack — {} demo", name.name()),
    ))
}

/// `racetrack run [--ctl] [--script FILE [--set NAME=VALUE]...] -- PROGRAM ARGS`.
pub fn run(front: Front, program: &Program) -> anyhow::Result<i32> {
    if front.ctl {
        return run_ctl(&front, program);
    }
    let script = front.gui_script()?;
    let waker = Waker::default();
    let session = Session::launch(program.name(), program.args(), waker.clone()).or_msg()?;
    Ok(gui::run(
        session,
        waker,
        script,
        &format!("Racetrack — {}", program.name()),
    ))
}

/// The controller on a program it starts; scenario mode with `--script`.
fn run_ctl(front: &Front, program: &Program) -> anyhow::Result<i32> {
    let input = front.ctl_input()?;
    let launched = launch(program.name(), program.args(), Duration::from_secs(15)).or_msg()?;
    let conn = connect(&launched.url)?;
    Ok(racetrack::ctl::run_with(conn, Some(launched), input))
}

/// `racetrack attach URL [--script FILE]`.
pub fn attach(url: &str, script: GuiScript) -> anyhow::Result<i32> {
    let script = script.load()?;
    let waker = Waker::default();
    let session = Session::attach(url, waker.clone()).or_msg()?;
    Ok(gui::run(session, waker, script, &format!("Racetrack — {url}")))
}

/// `racetrack record [--full] [-o FILE] -- PROGRAM ARGS`: a free run that writes a replay
/// log (`RACETRACK_RECORD`), or with `--full` every event to a trace file
/// (`RACETRACK_TRACE`); the exit code is the program's.
pub fn record(full: bool, output: Option<PathBuf>, program: &Program) -> anyhow::Result<i32> {
    let prog = program.name();
    let name = Path::new(prog)
        .file_name()
        .map_or_else(|| "program".to_owned(), |n| n.to_string_lossy().into_owned());
    let (var, ext) = if full {
        (env::ENV_TRACE, "rtrace")
    } else {
        (env::ENV_RECORD, "rtrec")
    };
    let file = output.unwrap_or_else(|| format!("{name}.{ext}").into());
    let shown = file.display();
    // Written afresh: what is there after the run is this run's, or nothing.
    let _ = std::fs::remove_file(&file);
    let status = run_free(prog, program.args(), (var, &file))?;
    let size = std::fs::metadata(&file).map(|m| m.len());
    match (size, full) {
        (Ok(n), true) => eprintln!("racetrack: trace {shown} ({n} bytes)"),
        (Ok(n), false) => match racetrack_protocol::replay_log::ReplayLog::read(&file) {
            Ok(log) => eprintln!(
                "racetrack: replay log {shown} ({n} bytes: {} steps in {} runs{})",
                log.steps(),
                log.runs(),
                if log.end.is_some() { "" } else { "; the run did not finish, the log covers a prefix" }
            ),
            Err(e) => eprintln!("racetrack: the replay log cannot be read back: {e}"),
        },
        (Err(_), _) => eprintln!(
            "racetrack: nothing written to {shown} (is {prog} a program on Racetrack's runtime? an MPI job records with `racetrack mpirun --record`)"
        ),
    }
    Ok(status.code().unwrap_or(1))
}

/// `racetrack replay LOG …` of a runtime program's log: the program again with
/// `RACETRACK_REPLAY=LOG`, free (its output and exit code pass through), or under the
/// controller or the GUI as `run` starts it.
pub fn replay(log: &Path, gui: bool, front: Front, program: &Program) -> anyhow::Result<i32> {
    if !gui && !front.ctl {
        return Ok(run_free(program.name(), program.args(), (env::ENV_REPLAY, log))?
            .code()
            .unwrap_or(1));
    }
    // The program inherits it from here.
    std::env::set_var(env::ENV_REPLAY, log);
    std::env::remove_var(env::ENV_RECORD);
    std::env::remove_var(env::ENV_TRACE);
    if front.ctl {
        return run_ctl(&front, program);
    }
    let script = front.gui_script()?;
    let waker = Waker::default();
    let session = Session::launch(program.name(), program.args(), waker.clone()).or_msg()?;
    let title = format!("Racetrack — replay of {}", program.name());
    Ok(gui::run(session, waker, script, &title))
}

/// Run `program args` with no debugger, with `var=value` (the trace, record or replay
/// file) and none of the other variables that choose what the agent does; its output
/// passes through.
fn run_free(
    program: &str,
    args: &[String],
    (var, value): (&str, &Path),
) -> anyhow::Result<std::process::ExitStatus> {
    let mut cmd = std::process::Command::new(program);
    cmd.args(args);
    for other in [
        env::ENV_TRACE,
        env::ENV_RECORD,
        env::ENV_REPLAY,
        env::ENV_LISTEN,
        env::ENV_CONNECT,
        env::ENV_WAIT,
    ] {
        cmd.env_remove(other);
    }
    cmd.env(var, value)
        .status()
        .with_context(|| format!("cannot start {program}"))
}

/// `racetrack open TRACE [--script FILE]`: the post-mortem view.
pub fn open(path: &Path, script: GuiScript) -> anyhow::Result<i32> {
    let script = script.load()?;
    let mut reader = racetrack_protocol::trace::TraceReader::open(path).or_msg()?;
    let events = reader
        .by_ref()
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| anyhow!("{}: {e}", path.display()))?;
    if let Some(w) = reader.warning() {
        eprintln!("racetrack: warning: {w}");
    }
    eprintln!("racetrack: {} events from {}", events.len(), path.display());
    let source = path.display().to_string();
    let title = format!("Racetrack — trace {source}");
    Ok(gui::run_app(&title, move |_| {
        gui::app::App::post_mortem(source, events).with_script(script)
    }))
}

/// `racetrack export --perfetto TRACE [-o OUT]`.
pub fn export(trace: &Path, out: Option<PathBuf>) -> anyhow::Result<i32> {
    let out = out.unwrap_or_else(|| trace.with_extension("json"));
    let s = racetrack::export::perfetto(trace, &out).or_msg()?;
    if let Some(w) = &s.warning {
        eprintln!("racetrack: warning: {w}");
    }
    eprintln!(
        "racetrack: {} events → {}: {} slices, {} flows, {} tracks",
        s.events,
        out.display(),
        s.slices,
        s.flows,
        s.tracks
    );
    Ok(0)
}
