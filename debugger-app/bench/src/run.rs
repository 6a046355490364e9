//! One run of a workload under one configuration: the program, its debugger, and what
//! each says at the end (the agent's own count, the debugger's tally).

use racetrack::launch::rss_kib;
use racetrack_protocol::launch as env;
use std::io::{BufRead, BufReader, Read, Write};
use std::process::{Child, Command as Proc, Stdio};
use std::time::Duration;

pub(crate) struct Workload {
    pub(crate) name: &'static str,
    pub(crate) program: &'static str,
    pub(crate) args: &'static [&'static str],
}

pub(crate) const WORKLOADS: &[Workload] = &[
    Workload {
        name: "farm, 1 µs leaves",
        program: "farm",
        args: &["--threads", "4", "--tasks", "20000", "--work-us", "1"],
    },
    Workload {
        name: "farm, 10 µs leaves",
        program: "farm",
        args: &["--threads", "4", "--tasks", "10000", "--work-us", "10"],
    },
    Workload {
        name: "farm, 100 µs leaves",
        program: "farm",
        args: &["--threads", "4", "--tasks", "3000", "--work-us", "100"],
    },
    Workload {
        name: "mergesort",
        program: "mergesort",
        args: &["--threads", "4", "--size", "1000000", "--chunks", "256"],
    },
    Workload {
        name: "heat",
        program: "heat",
        args: &[
            "--threads",
            "4",
            "--iters",
            "100",
            "--cells",
            "65536",
            "--local-us",
            "0",
        ],
    },
];

pub(crate) const CONFIGS: [&str; 5] = [
    "no agent",
    "listening",
    "ctl attached",
    "ack every event",
    "GUI model attached",
];

/// One measured run.
pub(crate) struct Run {
    /// The program's run time, less the start hold.
    pub(crate) elapsed_ms: f64,
    /// How long the `RACETRACK_WAIT` start hold held it (0 without a debugger): the
    /// debugger starting, attaching and saying continue, inside the program's timed
    /// region but no cost of its events.
    pub(crate) held_ms: f64,
    pub(crate) events: Option<u64>,
    pub(crate) lossless: Option<bool>,
    pub(crate) peak_rss_kib: u64,
    /// Times the program waited for room in the agent's buffer (backpressure).
    pub(crate) waits: Option<u64>,
}

/// What the agent says of itself at exit (its `RACETRACK_DEBUG` summary).
#[derive(Debug, Default, Clone, Copy)]
pub(crate) struct AgentSummary {
    /// The number it would have given its next event, to check that the debugger received
    /// the last one.
    pub(crate) next_id: Option<u64>,
    /// How long the start hold lasted, in microseconds.
    pub(crate) start_hold_us: Option<u64>,
    /// Times a program thread waited for room in the agent's buffer (backpressure).
    pub(crate) waits: Option<u64>,
}

/// The agent's URL from the program's stderr; the rest of stderr is read on a thread that
/// returns the agent's summary at exit.
pub(crate) fn read_url(child: &mut Child) -> Result<(String, std::thread::JoinHandle<AgentSummary>), String> {
    let stderr = child.stderr.take().ok_or("no stderr")?;
    let mut rest = BufReader::new(stderr);
    let mut line = Vec::new();
    let url = loop {
        line.clear();
        match rest.read_until(b'\n', &mut line) {
            Ok(k) if k > 0 => {
                let l = String::from_utf8_lossy(&line);
                if let Some(u) = env::listening_url(&l) {
                    break u.to_owned();
                }
            }
            _ => return Err("the program ended before listening".into()),
        }
    };
    let numbered = std::thread::spawn(move || {
        // Read to the end whatever the program writes (bytes, not necessarily UTF-8), so
        // that it never blocks on a full pipe.
        let mut summary = AgentSummary::default();
        let mut line = Vec::new();
        while rest.read_until(b'\n', &mut line).is_ok_and(|k| k > 0) {
            if let Some(n) = number_after(&line, b", next id ") {
                summary = AgentSummary {
                    next_id: Some(n),
                    start_hold_us: number_after(&line, b", start hold "),
                    waits: number_before(&line, b" waits for room"),
                };
            }
            line.clear();
        }
        summary
    });
    Ok((url, numbered))
}

/// The numbered events a debugger received.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Tally {
    /// How many events were counted (a number seen twice counts twice).
    pub(crate) n: u64,
    /// Lowest and highest number.
    pub(crate) min: u64,
    pub(crate) max: u64,
    /// Sums of the numbers and of their squares: with `n`, `min` and `max` they tell a
    /// range received once each from one with a duplicate standing in for a gap.
    pub(crate) sum: u128,
    pub(crate) sum_sq: u128,
    /// The first number after the attach snapshot (its `next_event_id`).
    pub(crate) from: Option<u64>,
}

impl Default for Tally {
    fn default() -> Self {
        Self {
            n: 0,
            min: u64::MAX,
            max: 0,
            sum: 0,
            sum_sq: 0,
            from: None,
        }
    }
}

impl Tally {
    pub(crate) fn add(&mut self, id: u64) {
        self.n += 1;
        self.min = self.min.min(id);
        self.max = self.max.max(id);
        self.sum += u128::from(id);
        self.sum_sq += u128::from(id) * u128::from(id);
    }

    /// Whether the numbers are `min..=max`, each once.
    pub(crate) fn contiguous(&self) -> bool {
        if self.n == 0 || self.max - self.min + 1 != self.n {
            return false;
        }
        // Sums of 0..=k and of their squares.
        let s1 = |k: u128| k * (k + 1) / 2;
        let s2 = |k: u128| k * (k + 1) * (2 * k + 1) / 6;
        let (lo, hi) = (u128::from(self.min), u128::from(self.max));
        let below = |f: &dyn Fn(u128) -> u128| if lo == 0 { 0 } else { f(lo - 1) };
        self.sum == s1(hi) - below(&s1) && self.sum_sq == s2(hi) - below(&s2)
    }

    /// Nothing lost: every number from the snapshot's next one to the agent's last
    /// (`agent_next`: the number its next event would have had), each once.
    pub(crate) fn lossless(&self, agent_next: Option<u64>) -> bool {
        self.contiguous() && self.ends_match(agent_next)
    }

    /// The first number is the snapshot's next one and the last the agent's last (each
    /// when known).
    pub(crate) fn ends_match(&self, agent_next: Option<u64>) -> bool {
        self.from.is_none_or(|f| f == self.min) && agent_next.is_none_or(|next| next == self.max + 1)
    }
}

/// The `next_event_id` of a printed `snapshot` line.
pub(crate) fn snapshot_next(line: &[u8]) -> Option<u64> {
    line.strip_prefix(br#"{"event":"snapshot""#)?;
    number_after(line, b"\"next_event_id\":")
}

/// The decimal number right after `key` in `line`.
pub(crate) fn number_after(line: &[u8], key: &[u8]) -> Option<u64> {
    let at = line.windows(key.len()).position(|w| w == key)? + key.len();
    leading_number(&line[at..])
}

/// The decimal number just before `key` in `line`.
pub(crate) fn number_before(line: &[u8], key: &[u8]) -> Option<u64> {
    let at = line.windows(key.len()).position(|w| w == key)?;
    let start = line[..at]
        .iter()
        .rposition(|c| !c.is_ascii_digit())
        .map_or(0, |i| i + 1);
    leading_number(&line[start..at])
}

/// The decimal number `s` starts with.
pub(crate) fn leading_number(s: &[u8]) -> Option<u64> {
    let mut id = 0u64;
    let mut any = false;
    for &d in s.iter().take_while(|c| c.is_ascii_digit()) {
        id = id.checked_mul(10)?.checked_add(u64::from(d - b'0'))?;
        any = true;
    }
    any.then_some(id)
}

/// The `event_id` of a printed `send`/`recv`/`start`/`stop` line.
pub(crate) fn numbered_event_id(line: &[u8]) -> Option<u64> {
    let kind = line.strip_prefix(br#"{"event":""#)?;
    let rest = [&b"send\""[..], b"recv\"", b"start\"", b"stop\""]
        .iter()
        .find_map(|k| kind.strip_prefix(*k))?;
    // The controller prints `event_id` right after the kind; search only otherwise.
    match rest.strip_prefix(br#","event_id":"#) {
        Some(n) => leading_number(n),
        None => number_after(rest, b"\"event_id\":"),
    }
}

/// Run `w` once under configuration `config` (`rate`: a model sink that takes at most
/// that many events per second; 0: as fast as it can).
pub(crate) fn run_once(exe: &str, w: &Workload, config: usize, rate: u64) -> Result<Run, String> {
    let mut prog = start_program(exe, w, config)?;
    let mut debugger = None;
    let mut produced = None;
    if config >= 1 {
        let (url, numbered) = read_url(&mut prog)?;
        produced = Some(numbered);
        debugger = start_debugger(exe, &url, config, rate)?;
    }
    let (peak, elapsed_ms) = wait_for(&mut prog)?;
    let (tally, sink_contiguous) = match debugger {
        Some(Debugger::Ctl(mut c, counter)) => {
            let tally = counter.join().map_err(|_| "counter thread")?;
            let _ = c.wait();
            (Some(tally), false)
        }
        Some(Debugger::Sink(c)) => {
            let (tally, contiguous) = sink_report(c)?;
            (Some(tally), contiguous)
        }
        None => (None, false),
    };
    let summary = produced.and_then(|t| t.join().ok()).unwrap_or_default();
    if config >= 2 && summary.start_hold_us.is_none() {
        eprintln!(
            "{} / configuration {config}: the agent printed no start hold (its summary is missing); the run time includes it",
            w.name
        );
    }
    let held_ms = summary.start_hold_us.map_or(0.0, |us| us as f64 / 1e3);
    // The sink checked its numbers itself; both need the agent's count (printed at exit
    // under RACETRACK_DEBUG: without it, nothing says the end arrived).
    let agent_next = summary.next_id;
    let lossless = tally.map(|t| {
        let own = if config == 4 {
            sink_contiguous
        } else {
            t.contiguous()
        };
        own && agent_next.is_some() && t.ends_match(agent_next)
    });
    Ok(Run {
        elapsed_ms: elapsed_ms - held_ms,
        held_ms,
        events: tally.map(|t| t.n),
        lossless,
        peak_rss_kib: peak,
        waits: summary.waits,
    })
}

/// The program of `w` under configuration `config`'s environment.
fn start_program(exe: &str, w: &Workload, config: usize) -> Result<Child, String> {
    let mut cmd = Proc::new(exe);
    cmd.arg("example")
        .arg(w.program)
        .args(w.args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    if config >= 1 {
        cmd.env(env::ENV_LISTEN, "127.0.0.1:0");
    }
    if config >= 2 {
        // Hold at the start (nothing streams before the debugger is there), and have the
        // agent print its own event count at exit.
        cmd.env(env::ENV_WAIT, "1").env(env::ENV_DEBUG, "1");
    }
    cmd.spawn().map_err(|e| e.to_string())
}

/// The debugger process of a configuration.
enum Debugger {
    /// The controller (configurations 2 and 3), and the thread counting what it printed.
    Ctl(Child, std::thread::JoinHandle<Tally>),
    /// The model sink (configuration 4).
    Sink(Child),
}

/// Start configuration `config`'s debugger on `url` (none for 0 and 1).
fn start_debugger(exe: &str, url: &str, config: usize, rate: u64) -> Result<Option<Debugger>, String> {
    match config {
        2 | 3 => {
            let mut c = Proc::new(exe)
                .args(["ctl", url])
                .stdin(Stdio::piped())
                .stdout(Stdio::piped())
                .stderr(Stdio::null())
                .spawn()
                .map_err(|e| e.to_string())?;
            let mut stdin = c.stdin.take().ok_or("no stdin")?;
            if config == 3 {
                writeln!(stdin, r#"{{"cmd":"ack_all","on":true}}"#).map_err(|e| e.to_string())?;
            }
            writeln!(stdin, r#"{{"cmd":"wait","until":"held"}}"#).map_err(|e| e.to_string())?;
            writeln!(stdin, r#"{{"cmd":"continue"}}"#).map_err(|e| e.to_string())?;
            let stdout = c.stdout.take().ok_or("no stdout")?;
            // Count the numbered events the controller printed; check they are contiguous.
            let counter = std::thread::spawn(move || {
                let mut tally = Tally::default();
                // Cheap on purpose: this thread shares the machine with what it measures
                // (one reused buffer, no allocation per line).
                let mut reader = BufReader::with_capacity(1 << 16, stdout);
                let mut line = Vec::with_capacity(256);
                while reader.read_until(b'\n', &mut line).is_ok_and(|k| k > 0) {
                    if let Some(id) = numbered_event_id(&line) {
                        tally.add(id);
                    } else if tally.from.is_none() {
                        tally.from = snapshot_next(&line);
                    }
                    line.clear();
                }
                drop(stdin);
                tally
            });
            Ok(Some(Debugger::Ctl(c, counter)))
        }
        4 => {
            let c = Proc::new(exe)
                .args(["model-sink", url, "--rate", &rate.to_string()])
                .stdout(Stdio::piped())
                .stderr(Stdio::null())
                .spawn()
                .map_err(|e| e.to_string())?;
            Ok(Some(Debugger::Sink(c)))
        }
        _ => Ok(None),
    }
}

/// Wait for the program, sampling its memory: its peak RSS (KiB) and its own run time.
fn wait_for(prog: &mut Child) -> Result<(u64, f64), String> {
    let pid = prog.id();
    let mut peak = 0;
    while prog.try_wait().map_err(|e| e.to_string())?.is_none() {
        peak = peak.max(rss_kib(pid).unwrap_or(0));
        std::thread::sleep(Duration::from_millis(20));
    }
    let mut out = String::new();
    prog.stdout
        .take()
        .ok_or("no stdout")?
        .read_to_string(&mut out)
        .map_err(|e| e.to_string())?;
    let report: serde_json::Value =
        serde_json::from_str(out.lines().last().unwrap_or("{}")).map_err(|e| e.to_string())?;
    let elapsed_ms = report["elapsed_ms"]
        .as_f64()
        .ok_or("no elapsed_ms in the report")?;
    Ok((peak, elapsed_ms))
}

/// What the model sink reported at the end: its tally, and whether its numbers were
/// contiguous.
fn sink_report(mut c: Child) -> Result<(Tally, bool), String> {
    let mut s = String::new();
    c.stdout
        .take()
        .ok_or("no stdout")?
        .read_to_string(&mut s)
        .map_err(|e| e.to_string())?;
    let _ = c.wait();
    let v: serde_json::Value = serde_json::from_str(s.trim()).unwrap_or_default();
    let tally = Tally {
        n: v["events"].as_u64().unwrap_or(0),
        min: v["first"].as_u64().unwrap_or(u64::MAX),
        max: v["last"].as_u64().unwrap_or(0),
        from: v["from"].as_u64(),
        ..Tally::default()
    };
    Ok((tally, v["contiguous"].as_bool().unwrap_or(false)))
}
