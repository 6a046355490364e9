//! `racetrack-bench`: what the Racetrack debugger costs (`BENCHMARKS.md`). Every process
//! it starts is this binary again, in one of the roles below, so that one build measures
//! one version of everything: the example programs and the controller are the same
//! library code as `racetrack example` and `racetrack ctl`.

mod bench;
mod record;
mod run;
mod sink;

use racetrack::conn::Connection;
use std::time::Duration;

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let code = match args.first().map(String::as_str) {
        Some("example") => match args.get(1) {
            Some(name) => racetrack_examples::run_cli(name, args[2..].to_vec()),
            None => usage("example needs a name: farm, mergesort, heat, search"),
        },
        Some("ctl") => match args.get(1) {
            Some(url) => match Connection::connect(url, Duration::from_secs(10)) {
                Ok(conn) => racetrack::ctl::run(conn, None),
                Err(e) => usage(&e.to_string()),
            },
            None => usage("ctl needs a ws:// URL"),
        },
        Some("model-sink") => sink::model_sink(&args[1..]),
        _ => bench::main(&args),
    };
    std::process::exit(code);
}

fn usage(message: &str) -> i32 {
    eprintln!("racetrack-bench: {message}");
    2
}
