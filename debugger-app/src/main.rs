//! The `racetrack` command: the debugger (GUI and headless controller).

fn main() {
    eprintln!(
        "racetrack {} (protocol {}): the debugger is not built yet; run an example, e.g.\n  cargo run --release -p racetrack-examples --bin heat",
        env!("CARGO_PKG_VERSION"),
        racetrack_protocol::PROTOCOL_VERSION
    );
    std::process::exit(2);
}
