//! The `racetrack` command.

use racetrack::conn::Connection;
use racetrack::launch::launch;
use std::time::Duration;

const USAGE: &str = "\
racetrack — an interactive debugger for parallel message-passing programs

usage:
  racetrack ctl <ws-url>                  headless controller: JSON-lines commands on stdin,
                                          events on stdout (see docs/PROTOCOL.md)
  racetrack run --ctl -- PROGRAM [ARGS]   start PROGRAM with the agent (held at its first
                                          operation) and control it from stdin
  racetrack --version";

fn fail(msg: &str) -> ! {
    eprintln!("racetrack: {msg}");
    std::process::exit(2)
}

fn connect(url: &str) -> Connection {
    Connection::connect(url, Duration::from_secs(10)).unwrap_or_else(|e| fail(&e))
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    match args.first().map(String::as_str) {
        Some("ctl") => {
            let Some(url) = args.get(1) else {
                fail(&format!("ctl needs a ws:// URL\n{USAGE}"))
            };
            std::process::exit(racetrack::ctl::run(connect(url), None));
        }
        Some("run") => {
            let dashdash = args
                .iter()
                .position(|a| a == "--")
                .unwrap_or_else(|| fail(&format!("run needs `-- PROGRAM`\n{USAGE}")));
            let opts = &args[1..dashdash];
            let Some(program) = args.get(dashdash + 1) else {
                fail("run needs a PROGRAM after `--`")
            };
            let prog_args = &args[dashdash + 2..];
            if let Some(bad) = opts.iter().find(|o| o.as_str() != "--ctl") {
                fail(&format!("unknown option `{bad}` for run\n{USAGE}"));
            }
            if !opts.iter().any(|o| o == "--ctl") {
                fail("the GUI is not built yet: use `racetrack run --ctl -- PROGRAM`");
            }
            let launched = launch(program, prog_args, Duration::from_secs(15)).unwrap_or_else(|e| fail(&e));
            let conn = connect(&launched.url);
            std::process::exit(racetrack::ctl::run(conn, Some(launched)));
        }
        Some("--version" | "-V") => println!(
            "racetrack {} (protocol {})",
            env!("CARGO_PKG_VERSION"),
            racetrack_protocol::PROTOCOL_VERSION
        ),
        Some("--help" | "-h") | None => println!("{USAGE}"),
        Some(other) => fail(&format!("unknown command `{other}`\n{USAGE}")),
    }
}
