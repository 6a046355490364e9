//! The `racetrack` command.

use racetrack::conn::Connection;
use racetrack::gui;
use racetrack::gui::script::Script;
use racetrack::gui::session::conn_waker;
use racetrack::gui::session::{Session, Waker};
use racetrack::job::JobListener;
use racetrack::launch::{launch, spawn_job, Launched};
use racetrack::mpirun::{Impl, Plan};
use std::time::Duration;

const USAGE: &str = "\
racetrack — an interactive debugger for parallel message-passing programs

usage:
  racetrack demo <heat|mergesort|farm|search> [--threads N] [--fixed] [--script FILE]
                                          the GUI on a built-in example, held at its start
  racetrack run [--script FILE] -- PROGRAM [ARGS]
                                          start PROGRAM with the agent (held at its first
                                          operation) and open the GUI
  racetrack run --ctl [--script FILE [--set NAME=VALUE]...] -- PROGRAM [ARGS]
                                          the same with the JSON-lines controller: commands
                                          from stdin, or a scenario file run unattended
                                          (ending with the program's outcome)
  racetrack mpirun [--ctl [--script FILE [--set NAME=VALUE]...]] [--impl mpich|openmpi]
                 -n N -- PROGRAM [ARGS]
                                          an MPI program's N ranks under the debugger (GUI,
                                          or the controller with --ctl), each held before
                                          its first call after MPI_Init
  racetrack mpirun --record LOG [--impl mpich|openmpi] -n N -- PROGRAM [ARGS]
                                          the job free, recording what a replay needs (the
                                          matches of wildcard receives, the outcomes of
                                          polls) in LOG; `racetrack replay LOG` replays it
  racetrack listen [--ctl [--script FILE]] [--addr HOST:PORT] -n N
                                          wait for the N ranks of a job started by hand
                                          (RACETRACK_CONNECT and LD_PRELOAD in its
                                          environment, as printed) and debug it; beyond
                                          loopback the ranks need RACETRACK_TOKEN too
                                          (as set here, or a random one, printed)
  racetrack attach <ws-url> [--script FILE]
                                          the GUI on a running program's agent
  racetrack ctl <ws-url>                  headless controller (see docs/PROTOCOL.md)
  racetrack record [-o LOG] -- PROGRAM [ARGS]
                                          run PROGRAM free, recording what a replay needs
                                          (which sender's message each thread took) in a
                                          replay log (default PROGRAM.rtrec)
  racetrack record --full [-o TRACE] -- PROGRAM [ARGS]
                                          run PROGRAM writing every event to a trace file
                                          (default PROGRAM.rtrace), no debugger attached
  racetrack replay LOG [--ctl [--script FILE] | --gui [--script FILE]] -- PROGRAM [ARGS]
                                          run PROGRAM again taking the logged choices, free
                                          (exit code 3 if it cannot follow the log), or
                                          under the controller or the GUI, where it can be
                                          stepped, held, and taken over; an MPI job's log
                                          runs its ranks again (as `mpirun` does)
  racetrack open TRACE [--script FILE]    a trace file (RACETRACK_TRACE=TRACE) in the GUI,
                                          without the program, with a time slider
  racetrack export --perfetto TRACE [-o OUT.json]
                                          a trace file (written with RACETRACK_TRACE=TRACE)
                                          as Chrome/Perfetto trace JSON (default OUT: TRACE
                                          with the extension .json)
  racetrack example <farm|mergesort|heat|search> [ARGS]
                                          run a built-in example program directly
  racetrack --version";

fn fail(msg: &str) -> ! {
    eprintln!("racetrack: {msg}");
    std::process::exit(2)
}

fn connect(url: &str) -> Connection {
    Connection::connect(url, Duration::from_secs(10)).unwrap_or_else(|e| fail(&e))
}

/// Split `NAME VALUE` out of `opts`.
fn take_value(opts: &mut Vec<String>, name: &str) -> Option<String> {
    let i = opts.iter().position(|o| o == name)?;
    let Some(v) = opts.get(i + 1).cloned() else {
        fail(&format!("{name} needs a value"))
    };
    opts.drain(i..=i + 1);
    Some(v)
}

/// `args` (the command first) as `[OPTIONS] -- PROGRAM [ARGS]`: the options, the program
/// and its arguments; without `--` and a program, `command` fails with the usage.
fn split_program<'a>(args: &'a [String], command: &str) -> (Vec<String>, &'a str, &'a [String]) {
    let dashdash = args
        .iter()
        .position(|a| a == "--")
        .unwrap_or_else(|| fail(&format!("{command} needs `-- PROGRAM`\n{USAGE}")));
    let Some(program) = args.get(dashdash + 1) else {
        fail(&format!("{command} needs a PROGRAM after `--`"))
    };
    (args[1..dashdash].to_vec(), program, &args[dashdash + 2..])
}

/// Split `--script FILE` out of `opts` (GUI scripts).
fn take_script(opts: &mut Vec<String>) -> Option<Script> {
    let i = opts.iter().position(|o| o == "--script")?;
    let Some(path) = opts.get(i + 1).cloned() else {
        fail("--script needs a file")
    };
    opts.drain(i..=i + 1);
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| fail(&format!("cannot read {path}: {e}")));
    Some(Script::parse(&text).unwrap_or_else(|e| fail(&format!("{path}: {e}"))))
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let code = match args.first().map(String::as_str) {
        Some("ctl") => {
            let Some(url) = args.get(1) else {
                fail(&format!("ctl needs a ws:// URL\n{USAGE}"))
            };
            racetrack::ctl::run(connect(url), None)
        }
        Some("run") => run(&args),
        Some("mpirun") => mpirun(&args),
        Some("listen") => listen(&args[1..]),
        Some("attach") => attach(&args[1..]),
        Some("demo") => demo(&args[1..]),
        Some("export") => export(&args[1..]),
        Some("open") => open(&args[1..]),
        Some("record") => record(&args),
        Some("replay") => replay(&args),
        Some("example") => {
            let Some(name) = args.get(1) else {
                fail("example needs a name: farm, mergesort, heat, search")
            };
            racetrack_examples::run_cli(name, args[2..].to_vec())
        }
        Some("--version" | "-V") => {
            println!(
                "racetrack {} (protocol {})",
                env!("CARGO_PKG_VERSION"),
                racetrack_protocol::PROTOCOL_VERSION
            );
            0
        }
        Some("--help" | "-h") | None => {
            println!("{USAGE}");
            0
        }
        Some(other) => fail(&format!("unknown command `{other}`\n{USAGE}")),
    };
    std::process::exit(code);
}

/// `racetrack record [--full] [-o FILE] -- PROGRAM ARGS`: a free run that writes a replay
/// log (`RACETRACK_RECORD`), or with `--full` every event to a trace file
/// (`RACETRACK_TRACE`); the exit code is the program's.
fn record(args: &[String]) -> i32 {
    let (mut opts, program, prog_args) = split_program(args, "record");
    let out = take_value(&mut opts, "-o");
    let full = opts
        .iter()
        .position(|o| o == "--full")
        .map(|i| opts.remove(i))
        .is_some();
    if let Some(bad) = opts.first() {
        fail(&format!("unknown option `{bad}` for record\n{USAGE}"));
    }
    let name = std::path::Path::new(program)
        .file_name()
        .map_or_else(|| "program".to_owned(), |n| n.to_string_lossy().into_owned());
    let (var, ext) = if full {
        (racetrack_protocol::launch::ENV_TRACE, "rtrace")
    } else {
        (racetrack_protocol::launch::ENV_RECORD, "rtrec")
    };
    let file = out.unwrap_or_else(|| format!("{name}.{ext}"));
    // Written afresh: what is there after the run is this run's, or nothing.
    let _ = std::fs::remove_file(&file);
    let status = run_free(program, prog_args, (var, &file));
    let size = std::fs::metadata(&file).map(|m| m.len());
    match (size, full) {
        (Ok(n), true) => eprintln!("racetrack: trace {file} ({n} bytes)"),
        (Ok(n), false) => match racetrack_protocol::replay_log::ReplayLog::read(std::path::Path::new(&file)) {
            Ok(log) => eprintln!(
                "racetrack: replay log {file} ({n} bytes: {} steps in {} runs{})",
                log.steps(),
                log.runs(),
                if log.end.is_some() { "" } else { "; the run did not finish, the log covers a prefix" }
            ),
            Err(e) => eprintln!("racetrack: the replay log cannot be read back: {e}"),
        },
        (Err(_), _) => eprintln!(
            "racetrack: nothing written to {file} (is {program} a program on Racetrack's runtime? an MPI job records with `racetrack mpirun --record`)"
        ),
    }
    status.code().unwrap_or(1)
}

/// `racetrack replay LOG [--ctl [--script F] | --gui [--script F]] -- PROGRAM ARGS`: the
/// program again with `RACETRACK_REPLAY=LOG`, free (its output and exit code pass
/// through), or under the controller or the GUI as `run` starts it.
fn replay(args: &[String]) -> i32 {
    let (mut opts, program, prog_args) = split_program(args, "replay");
    if opts.is_empty() {
        fail(&format!(
            "replay needs a replay LOG (from `racetrack record`)\n{USAGE}"
        ));
    }
    let log = opts.remove(0);
    // A damaged log is refused here, before the program starts.
    let read = racetrack_protocol::replay_log::ReplayLog::read(std::path::Path::new(&log))
        .unwrap_or_else(|e| fail(&e));
    if read.header.mpi.is_some() {
        return mpi_replay(&log, &read.header, opts, program, prog_args);
    }
    let var = racetrack_protocol::launch::ENV_REPLAY;
    let gui = opts
        .iter()
        .position(|o| o == "--gui")
        .map(|i| opts.remove(i))
        .is_some();
    if gui || opts.iter().any(|o| o == "--ctl") {
        // The program inherits it from here.
        std::env::set_var(var, &log);
        std::env::remove_var(racetrack_protocol::launch::ENV_RECORD);
        std::env::remove_var(racetrack_protocol::launch::ENV_TRACE);
        if opts.iter().any(|o| o == "--ctl") {
            if gui {
                fail("replay takes --ctl or --gui, not both");
            }
            return run_ctl(&mut opts, program, prog_args);
        }
        let script = take_script(&mut opts);
        if let Some(bad) = opts.first() {
            fail(&format!("unknown option `{bad}` for replay\n{USAGE}"));
        }
        let waker = Waker::default();
        let session = Session::launch(program, prog_args, waker.clone()).unwrap_or_else(|e| fail(&e));
        return gui::run(
            session,
            waker,
            script,
            &format!("Racetrack — replay of {program}"),
        );
    }
    if let Some(bad) = opts.first() {
        fail(&format!("unknown option `{bad}` for replay\n{USAGE}"));
    }
    run_free(program, prog_args, (var, &log)).code().unwrap_or(1)
}

/// Run `program args` with no debugger, with `var=value` (the trace, record or replay
/// file) and none of the other variables that choose what the agent does; its output
/// passes through.
fn run_free(program: &str, args: &[String], (var, value): (&str, &str)) -> std::process::ExitStatus {
    use racetrack_protocol::launch as env;
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
        .unwrap_or_else(|e| fail(&format!("cannot start {program}: {e}")))
}

/// `racetrack open TRACE [--script FILE]`: the post-mortem view.
fn open(args: &[String]) -> i32 {
    let mut opts = args.to_vec();
    let script = take_script(&mut opts);
    let [trace] = opts.as_slice() else {
        fail(&format!("open needs one TRACE file\n{USAGE}"))
    };
    let path = std::path::PathBuf::from(trace);
    let mut reader =
        racetrack_protocol::trace::TraceReader::open(&path).unwrap_or_else(|e| fail(&e.to_string()));
    let events = match reader.by_ref().collect::<Result<Vec<_>, _>>() {
        Ok(evs) => evs,
        Err(e) => fail(&format!("{}: {e}", path.display())),
    };
    if let Some(w) = reader.warning() {
        eprintln!("racetrack: warning: {w}");
    }
    eprintln!("racetrack: {} events from {}", events.len(), path.display());
    let source = path.display().to_string();
    let title = format!("Racetrack — trace {source}");
    gui::run_app(&title, move |_| {
        gui::app::App::post_mortem(source, events).with_script(script)
    })
}

/// `racetrack export --perfetto TRACE [-o OUT]`.
fn export(args: &[String]) -> i32 {
    let mut opts = args.to_vec();
    let out = take_value(&mut opts, "-o");
    let Some(i) = opts.iter().position(|a| a == "--perfetto") else {
        fail(&format!(
            "export needs --perfetto (the only format so far)\n{USAGE}"
        ))
    };
    opts.remove(i);
    let [trace] = opts.as_slice() else {
        fail(&format!("export needs one TRACE file\n{USAGE}"))
    };
    let trace = std::path::PathBuf::from(trace);
    let out = out.map_or_else(|| trace.with_extension("json"), std::path::PathBuf::from);
    match racetrack::export::perfetto(&trace, &out) {
        Ok(s) => {
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
            0
        }
        Err(e) => fail(&e.to_string()),
    }
}

/// `racetrack run [--ctl [--script FILE [--set NAME=VALUE]...] | --script FILE] -- PROGRAM ARGS`.
fn run(args: &[String]) -> i32 {
    let (mut opts, program, prog_args) = split_program(args, "run");
    if opts.iter().any(|o| o == "--ctl") {
        return run_ctl(&mut opts, program, prog_args);
    }
    let script = take_script(&mut opts);
    if let Some(bad) = opts.first() {
        fail(&format!("unknown option `{bad}` for run\n{USAGE}"));
    }
    let waker = Waker::default();
    let session = Session::launch(program, prog_args, waker.clone()).unwrap_or_else(|e| fail(&e));
    gui::run(session, waker, script, &format!("Racetrack — {program}"))
}

/// `racetrack mpirun [--ctl [--script F [--set N=V]...] | --script F] [--impl I] -n N -- PROGRAM ARGS`.
fn mpirun(args: &[String]) -> i32 {
    let (mut opts, program, prog_args) = split_program(args, "mpirun");
    let ranks = take_value(&mut opts, "-n")
        .or_else(|| take_value(&mut opts, "-np"))
        .unwrap_or_else(|| fail("mpirun needs -n N (the number of ranks)"));
    let ranks: usize = ranks
        .parse()
        .unwrap_or_else(|_| fail(&format!("-n {ranks}: expected a number of ranks")));
    let imp = take_value(&mut opts, "--impl").map(|i| Impl::parse(&i).unwrap_or_else(|e| fail(&e)));
    let record = take_value(&mut opts, "--record");
    let plan = mpi_plan(imp, ranks, program, prog_args);
    if let Some(log) = record {
        if let Some(bad) = opts.first() {
            fail(&format!(
                "`{bad}` with --record: a recorded job runs free (replay it under the debugger)\n{USAGE}"
            ));
        }
        return mpi_record(plan, program, &log);
    }
    eprintln!(
        "racetrack: {} ranks of {} under {} ({})",
        ranks,
        plan.program.display(),
        plan.imp.title(),
        plan.imp.launcher()
    );
    if opts.iter().any(|o| o == "--ctl") {
        let input = ctl_input(&mut opts, "mpirun");
        let (conn, launched) = start_job(&plan, Box::new(|| {}));
        return racetrack::ctl::run_with(conn, Some(launched), input);
    }
    let script = take_script(&mut opts);
    if let Some(bad) = opts.first() {
        fail(&format!("unknown option `{bad}` for mpirun\n{USAGE}"));
    }
    let waker = Waker::default();
    let (conn, launched) = start_job(&plan, conn_waker(&waker));
    let session = Session::job(conn, launched, waker.clone()).unwrap_or_else(|e| fail(&e));
    let title = format!("Racetrack — {} × {ranks}", plan.program.display());
    gui::run(session, waker, script, &title)
}

/// `log` as an absolute path: the ranks may run in another directory.
fn absolute(log: &str) -> String {
    std::path::absolute(log).map_or_else(|_| log.to_owned(), |p| p.display().to_string())
}

/// `racetrack mpirun --record LOG …`: the job free, each rank recording its part; then
/// the parts merged into `LOG`. The exit code is the launcher's.
fn mpi_record(mut plan: Plan, program: &str, log: &str) -> i32 {
    use racetrack_protocol::replay_log::{rank_part_path, LogHeader, MpiJob};
    let path = absolute(log);
    // The ranks write beside it: a place they cannot write is refused before they start.
    if let Err(e) = std::fs::write(&path, b"") {
        fail(&format!("cannot write the replay log {log}: {e}"));
    }
    let _ = std::fs::remove_file(&path);
    for r in 0..plan.ranks {
        let _ = std::fs::remove_file(rank_part_path(&path, r));
    }
    plan.env
        .push((racetrack_protocol::launch::ENV_RECORD.into(), path.clone()));
    let status = plan
        .free_command()
        .status()
        .unwrap_or_else(|e| fail(&format!("cannot start {}: {e}", plan.imp.launcher())));
    let header = LogHeader {
        program: program.to_owned(),
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
                "racetrack: replay log {log} ({} bytes: {} choices in {} calls of {} ranks, {} clock readings{unfinished})",
                m.bytes, m.choices, m.calls, plan.ranks, m.clocks
            );
        }
        Err(e) => eprintln!("racetrack: no replay log written: {e}"),
    }
    status.code().unwrap_or(1)
}

/// `racetrack replay LOG …` of an MPI job's log: the recorded program on the recorded
/// number of ranks, free or under the controller or the GUI.
fn mpi_replay(
    log_path: &str,
    header: &racetrack_protocol::replay_log::LogHeader,
    mut opts: Vec<String>,
    program: &str,
    args: &[String],
) -> i32 {
    let ranks = header.mpi.as_ref().map_or(1, |m| m.ranks);
    let base = |p: &str| p.rsplit('/').next().unwrap_or(p).to_owned();
    if base(&header.program) != base(program) || header.args != args {
        fail(&format!(
            "{log_path} is the log of `{}` on {ranks} ranks; this is `{}`: a replay runs the recorded program with its arguments",
            std::iter::once(header.program.as_str()).chain(header.args.iter().map(String::as_str)).collect::<Vec<_>>().join(" "),
            std::iter::once(program).chain(args.iter().map(String::as_str)).collect::<Vec<_>>().join(" "),
        ));
    }
    let mut plan = mpi_plan(None, ranks, program, args);
    plan.env
        .push((racetrack_protocol::launch::ENV_REPLAY.into(), absolute(log_path)));
    eprintln!(
        "racetrack: replaying {log_path}: {ranks} ranks of {} under {}",
        plan.program.display(),
        plan.imp.title()
    );
    let gui = opts
        .iter()
        .position(|o| o == "--gui")
        .map(|i| opts.remove(i))
        .is_some();
    if opts.iter().any(|o| o == "--ctl") {
        if gui {
            fail("replay takes --ctl or --gui, not both");
        }
        let input = ctl_input(&mut opts, "replay");
        let (conn, launched) = start_job(&plan, Box::new(|| {}));
        return racetrack::ctl::run_with(conn, Some(launched), input);
    }
    if gui {
        let script = take_script(&mut opts);
        if let Some(bad) = opts.first() {
            fail(&format!("unknown option `{bad}` for replay\n{USAGE}"));
        }
        let waker = Waker::default();
        let (conn, launched) = start_job(&plan, conn_waker(&waker));
        let session = Session::job(conn, launched, waker.clone()).unwrap_or_else(|e| fail(&e));
        let title = format!("Racetrack — replay of {} × {ranks}", plan.program.display());
        return gui::run(session, waker, script, &title);
    }
    if let Some(bad) = opts.first() {
        fail(&format!("unknown option `{bad}` for replay\n{USAGE}"));
    }
    plan.free_command()
        .status()
        .unwrap_or_else(|e| fail(&format!("cannot start {}: {e}", plan.imp.launcher())))
        .code()
        .unwrap_or(1)
}

/// `racetrack listen [--ctl [--script F]] [--addr HOST:PORT] -n N`: a job started by
/// hand dials in.
fn listen(args: &[String]) -> i32 {
    let mut opts: Vec<String> = args.to_vec();
    let ranks =
        take_value(&mut opts, "-n").unwrap_or_else(|| fail("listen needs -n N (the number of ranks)"));
    let ranks: usize = ranks
        .parse()
        .unwrap_or_else(|_| fail(&format!("-n {ranks}: expected a number of ranks")));
    let addr = take_value(&mut opts, "--addr").unwrap_or_else(|| "127.0.0.1:0".into());
    let (listener, token_line) = bind_job_listener(&addr);
    let dir = racetrack::mpirun::lib_dir();
    eprintln!(
        "racetrack: waiting for {ranks} ranks at {url}\n  start the job with {var}={url} and LD_PRELOAD={core}:{dir}/libracetrack_mpi_<mpich|openmpi>.so in its ranks' environment{token_line}",
        url = listener.url(),
        var = racetrack_protocol::launch::ENV_CONNECT,
        core = racetrack::mpirun::core_lib(&dir).display(),
        dir = dir.display(),
    );
    let ctl = opts.iter().any(|o| o == "--ctl");
    let input = ctl.then(|| ctl_input(&mut opts, "listen"));
    let script = if ctl { None } else { take_script(&mut opts) };
    if let Some(bad) = opts.iter().find(|o| o.as_str() != "--ctl") {
        fail(&format!("unknown option `{bad}` for listen\n{USAGE}"));
    }
    let waker = Waker::default();
    let conn_wake = if ctl { Box::new(|| {}) } else { conn_waker(&waker) };
    let conn = listener
        .accept(ranks, Duration::from_secs(3600), conn_wake, || None)
        .unwrap_or_else(|e| fail(&e));
    match input {
        Some(input) => racetrack::ctl::run_with(conn, None, input),
        None => {
            let session = Session::from_connection(conn, "job".into());
            gui::run(session, waker, script, &format!("Racetrack — {ranks} ranks"))
        }
    }
}

/// The listener of `racetrack listen` on `addr`, and what its banner says of the token.
/// Beyond loopback every rank must present a token (SECURITY.md): `RACETRACK_TOKEN` if
/// set, else a fresh random one, printed for the user to give the ranks.
fn bind_job_listener(addr: &str) -> (JobListener, String) {
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
            let t = random_token().unwrap_or_else(|e| fail(&format!("cannot make a token: {e}")));
            let line = format!("\n  and {var}={t} (ranks without it are refused)");
            (Some(t), line)
        }
    };
    (JobListener::bind(addr, token).unwrap_or_else(|e| fail(&e)), line)
}

/// 128 random bits, in hex.
fn random_token() -> std::io::Result<String> {
    use std::io::Read;
    let mut bytes = [0u8; 16];
    std::fs::File::open("/dev/urandom")?.read_exact(&mut bytes)?;
    Ok(bytes.iter().map(|b| format!("{b:02x}")).collect())
}

fn mpi_plan(imp: Option<Impl>, ranks: usize, program: &str, args: &[String]) -> Plan {
    racetrack::mpirun::plan(imp, ranks, program, args).unwrap_or_else(|e| fail(&e))
}

/// Launch the job and wait for every rank to dial in (the launcher's failure, with what
/// it said, ends the wait).
fn start_job(plan: &Plan, waker: racetrack::conn::Waker) -> (Connection, Launched) {
    let listener = JobListener::bind("127.0.0.1:0", None).unwrap_or_else(|e| fail(&e));
    let mut launched = spawn_job(plan.command(listener.url()), listener.url()).unwrap_or_else(|e| fail(&e));
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
        Ok(conn) => (conn, launched),
        Err(e) => {
            let _ = launched.child.kill();
            fail(&e)
        }
    }
}

/// `--script FILE` and its `--set NAME=VALUE`s (a scenario), or stdin.
fn ctl_input(opts: &mut Vec<String>, command: &str) -> racetrack::ctl::Input {
    let script_path = take_value(opts, "--script");
    let mut vars = Vec::new();
    while let Some(kv) = take_value(opts, "--set") {
        let (k, v) = kv
            .split_once('=')
            .unwrap_or_else(|| fail(&format!("--set {kv}: expected NAME=VALUE")));
        vars.push((k.to_owned(), v.to_owned()));
    }
    if let Some(bad) = opts.iter().find(|o| o.as_str() != "--ctl") {
        fail(&format!("unknown option `{bad}` for {command}\n{USAGE}"));
    }
    match script_path {
        Some(path) => {
            let text =
                std::fs::read_to_string(&path).unwrap_or_else(|e| fail(&format!("cannot read {path}: {e}")));
            let text =
                racetrack::ctl::substitute(&text, &vars).unwrap_or_else(|e| fail(&format!("{path}: {e}")));
            racetrack::ctl::Input::Script(text)
        }
        None => racetrack::ctl::Input::Stdin,
    }
}

/// `racetrack run --ctl`: the controller on a program it starts; scenario mode with
/// `--script FILE` and its `--set NAME=VALUE` variables.
fn run_ctl(opts: &mut Vec<String>, program: &str, prog_args: &[String]) -> i32 {
    let input = ctl_input(opts, "run");
    let launched = launch(program, prog_args, Duration::from_secs(15)).unwrap_or_else(|e| fail(&e));
    let conn = connect(&launched.url);
    racetrack::ctl::run_with(conn, Some(launched), input)
}

/// `racetrack attach [--script FILE] URL`.
fn attach(args: &[String]) -> i32 {
    let mut opts: Vec<String> = args.to_vec();
    let script = take_script(&mut opts);
    let Some(url) = opts.first() else {
        fail(&format!("attach needs a ws:// URL\n{USAGE}"))
    };
    let waker = Waker::default();
    let session = Session::attach(url, waker.clone()).unwrap_or_else(|e| fail(&e));
    gui::run(session, waker, script, &format!("Racetrack — {url}"))
}

/// `racetrack demo NAME [ARGS] [--script FILE]`: this binary again, as `racetrack example
/// NAME`, with the agent, under the GUI.
fn demo(args: &[String]) -> i32 {
    let mut opts: Vec<String> = args.to_vec();
    let script = take_script(&mut opts);
    let Some(name) = opts.first().cloned() else {
        fail(&format!("demo needs an example name\n{USAGE}"))
    };
    if !racetrack_examples::PROGRAMS.contains(&name.as_str()) {
        fail(&format!("unknown demo `{name}` (farm, mergesort, heat, search)"));
    }
    let exe = std::env::current_exe().unwrap_or_else(|e| fail(&format!("cannot find myself: {e}")));
    // The agent names the program after this (instead of `racetrack`).
    std::env::set_var(racetrack_protocol::launch::ENV_PROGRAM, &name);
    let mut prog_args = vec!["example".to_owned(), name.clone()];
    prog_args.extend(opts[1..].iter().cloned());
    let waker = Waker::default();
    let session =
        Session::launch(&exe.display().to_string(), &prog_args, waker.clone()).unwrap_or_else(|e| fail(&e));
    gui::run(session, waker, script, &format!("Racetrack — {name} demo"))
}
