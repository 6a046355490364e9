//! How a debugged program and a debugger find each other: the environment variables the
//! agent reads, and the line it prints once it listens. Both sides use these names.

/// `HOST:PORT` to listen on (port 0 picks one): the agent starts only when this is set.
pub const ENV_LISTEN: &str = "RACETRACK_LISTEN";
/// `ws://HOST:PORT` of a debugger to dial instead of listening (what `racetrack mpirun`
/// gives every rank of a job): takes precedence over `RACETRACK_LISTEN`.
pub const ENV_CONNECT: &str = "RACETRACK_CONNECT";
/// A file to write every event to instead of serving a debugger (a trace file, see
/// `docs/PROTOCOL.md`): takes precedence over `RACETRACK_CONNECT` and `RACETRACK_LISTEN`;
/// `RACETRACK_WAIT` is then ignored.
pub const ENV_TRACE: &str = "RACETRACK_TRACE";
/// A replay log to write (`racetrack record`): a free run of a program on the runtime
/// records the choices a replay needs ([`crate::replay_log`]).
pub const ENV_RECORD: &str = "RACETRACK_RECORD";
/// A replay log to follow (`racetrack replay`): the run takes the recorded choices. With
/// `RACETRACK_LISTEN` or `RACETRACK_TRACE` too, the replay is debugged or traced.
pub const ENV_REPLAY: &str = "RACETRACK_REPLAY";
/// Milliseconds a replay waits, with the whole program stalled, for a message its log
/// says comes next, before it reports that it diverged (default 5000).
pub const ENV_REPLAY_STALL_MS: &str = "RACETRACK_REPLAY_STALL_MS";
/// A file to write digests to (`racetrack explore`): a hash of every message's content
/// and of each thread's state after every step, so that the explorer can tell equal
/// states apart from the run's trace. Lines of text, see the agent's `replay::digest`.
pub const ENV_DIGEST: &str = "RACETRACK_DIGEST";
/// Non-empty and not `0`: hold the program's first operation until the debugger says
/// continue.
pub const ENV_WAIT: &str = "RACETRACK_WAIT";
/// A token a debugger must present (required to listen beyond loopback).
pub const ENV_TOKEN: &str = "RACETRACK_TOKEN";
/// Browser origins allowed to connect (comma-separated; none by default).
pub const ENV_ALLOW_ORIGIN: &str = "RACETRACK_ALLOW_ORIGIN";
/// `Host` headers allowed besides loopback ones (comma-separated).
pub const ENV_ALLOW_HOST: &str = "RACETRACK_ALLOW_HOST";
/// The program's name in `hello` (default: the executable's).
pub const ENV_PROGRAM: &str = "RACETRACK_PROGRAM";
/// Set: the agent and the GUI print their counters at exit (the bench reads them).
pub const ENV_DEBUG: &str = "RACETRACK_DEBUG";

/// What the agent prints to stderr, before its URL, once it listens.
pub const LISTENING: &str = "racetrack: listening on ";

/// The line the agent prints once it listens on `url` (`ws://HOST:PORT`).
pub fn listening_line(url: &str) -> String {
    format!("{LISTENING}{url}")
}

/// The URL in a `racetrack: listening on ws://…` line, if `line` is one.
pub fn listening_url(line: &str) -> Option<&str> {
    line.trim_end().strip_prefix(LISTENING)
}

#[cfg(test)]
mod tests {
    use super::{listening_line, listening_url};

    #[test]
    fn the_listening_line_round_trips() {
        let line = listening_line("ws://127.0.0.1:4000");
        assert_eq!(line, "racetrack: listening on ws://127.0.0.1:4000");
        assert_eq!(listening_url(&format!("{line}\n")), Some("ws://127.0.0.1:4000"));
        assert_eq!(listening_url("racetrack: something else"), None);
    }
}
