//! The `racetrack` command.

use racetrack::conn::Connection;
use racetrack::gui;
use racetrack::gui::script::Script;
use racetrack::gui::session::{Session, Waker};
use racetrack::launch::launch;
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
  racetrack attach <ws-url> [--script FILE]
                                          the GUI on a running program's agent
  racetrack ctl <ws-url>                  headless controller (see docs/PROTOCOL.md)
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
        Some("attach") => attach(&args[1..]),
        Some("demo") => demo(&args[1..]),
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

/// `racetrack run [--ctl [--script FILE [--set NAME=VALUE]...] | --script FILE] -- PROGRAM ARGS`.
fn run(args: &[String]) -> i32 {
    let dashdash = args
        .iter()
        .position(|a| a == "--")
        .unwrap_or_else(|| fail(&format!("run needs `-- PROGRAM`\n{USAGE}")));
    let mut opts: Vec<String> = args[1..dashdash].to_vec();
    let Some(program) = args.get(dashdash + 1) else {
        fail("run needs a PROGRAM after `--`")
    };
    let prog_args = &args[dashdash + 2..];
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

/// `racetrack run --ctl`: the controller on a program it starts; scenario mode with
/// `--script FILE` and its `--set NAME=VALUE` variables.
fn run_ctl(opts: &mut Vec<String>, program: &str, prog_args: &[String]) -> i32 {
    let script_path = take_value(opts, "--script");
    let mut vars = Vec::new();
    while let Some(kv) = take_value(opts, "--set") {
        let (k, v) = kv
            .split_once('=')
            .unwrap_or_else(|| fail(&format!("--set {kv}: expected NAME=VALUE")));
        vars.push((k.to_owned(), v.to_owned()));
    }
    if let Some(bad) = opts.iter().find(|o| o.as_str() != "--ctl") {
        fail(&format!("unknown option `{bad}` for run\n{USAGE}"));
    }
    let input = match script_path {
        Some(path) => {
            let text =
                std::fs::read_to_string(&path).unwrap_or_else(|e| fail(&format!("cannot read {path}: {e}")));
            let text =
                racetrack::ctl::substitute(&text, &vars).unwrap_or_else(|e| fail(&format!("{path}: {e}")));
            racetrack::ctl::Input::Script(text)
        }
        None => racetrack::ctl::Input::Stdin,
    };
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
