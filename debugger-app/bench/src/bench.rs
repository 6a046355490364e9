//! What the debugger costs, measured side by side in one invocation.
//!
//! Every workload runs (as `racetrack-bench example …`, a real process) under five
//! configurations, several repetitions each; the table gives medians and the ratio of run
//! time to configuration 0:
//!
//! 0. no agent (`RACETRACK_LISTEN` unset);
//! 1. agent listening, no debugger;
//! 2. the controller attached (`racetrack-bench ctl`, the code of `racetrack ctl`), free run (events streamed, printed by the controller);
//! 3. the controller attached in "ack every event" mode (every send/start/stop waits for
//!    the controller's acknowledgment: the thesis' design);
//! 4. the GUI's model attached (`racetrack-bench model-sink`: the GUI's connection and ingest path,
//!    without drawing).
//!
//! Configurations 2–4 run with `RACETRACK_WAIT=1`, so nothing streams before the debugger
//! is there: the program's first step waits until the debugger has started, attached and
//! said continue. That wait is inside the program's own timing; the agent measures it and
//! reports it at exit, and the table gives run times without it (and the wait apart).
//!
//! It also checks that streaming is lossless (the event numbers received are contiguous
//! and as many as the agent numbered, by its own count at exit), shows
//! the agent's memory with a debugger that lags behind, and compares the runtime with a
//! hand-written farm on std channels. Nothing here asserts: it prints what it measured.

use racetrack::conn::{ConnEvent, Connection};
use racetrack::launch::rss_kib;
use racetrack::model::Model;
use racetrack_protocol::launch as env;
use racetrack_protocol::{Command, Event};
use std::io::{BufRead, BufReader, Read, Write};
use std::process::{Child, Command as Proc, Stdio};
use std::time::{Duration, Instant};

struct Workload {
    name: &'static str,
    program: &'static str,
    args: &'static [&'static str],
}

const WORKLOADS: &[Workload] = &[
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

const CONFIGS: [&str; 5] = [
    "no agent",
    "listening",
    "ctl attached",
    "ack every event",
    "GUI model attached",
];

/// One measured run.
struct Run {
    /// The program's run time, less the start hold.
    elapsed_ms: f64,
    /// How long the `RACETRACK_WAIT` start hold held it (0 without a debugger): the
    /// debugger starting, attaching and saying continue, inside the program's timed
    /// region but no cost of its events.
    held_ms: f64,
    events: Option<u64>,
    lossless: Option<bool>,
    peak_rss_kib: u64,
    /// Times the program waited for room in the agent's buffer (backpressure).
    waits: Option<u64>,
}

/// What the agent says of itself at exit (its `RACETRACK_DEBUG` summary).
#[derive(Debug, Default, Clone, Copy)]
struct AgentSummary {
    /// The number it would have given its next event, to check that the debugger received
    /// the last one.
    next_id: Option<u64>,
    /// How long the start hold lasted, in microseconds.
    start_hold_us: Option<u64>,
    /// Times a program thread waited for room in the agent's buffer (backpressure).
    waits: Option<u64>,
}

/// The agent's URL from the program's stderr; the rest of stderr is read on a thread that
/// returns the agent's summary at exit.
fn read_url(child: &mut Child) -> Result<(String, std::thread::JoinHandle<AgentSummary>), String> {
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
struct Tally {
    /// How many.
    n: u64,
    /// Lowest and highest number.
    min: u64,
    max: u64,
    /// Sums of the numbers and of their squares: with `n`, `min` and `max` they tell a
    /// range received once each from one with a duplicate standing in for a gap.
    sum: u128,
    sum_sq: u128,
    /// The first number after the attach snapshot (its `next_event_id`).
    from: Option<u64>,
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
    fn add(&mut self, id: u64) {
        self.n += 1;
        self.min = self.min.min(id);
        self.max = self.max.max(id);
        self.sum += u128::from(id);
        self.sum_sq += u128::from(id) * u128::from(id);
    }

    /// Whether the numbers are `min..=max`, each once.
    fn contiguous(&self) -> bool {
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
    fn lossless(&self, agent_next: Option<u64>) -> bool {
        self.contiguous() && self.ends_match(agent_next)
    }

    /// The first number is the snapshot's next one and the last the agent's last (each
    /// when known).
    fn ends_match(&self, agent_next: Option<u64>) -> bool {
        self.from.is_none_or(|f| f == self.min) && agent_next.is_none_or(|next| next == self.max + 1)
    }
}

/// The `next_event_id` of a printed `snapshot` line.
fn snapshot_next(line: &[u8]) -> Option<u64> {
    line.strip_prefix(br#"{"event":"snapshot""#)?;
    number_after(line, b"\"next_event_id\":")
}

/// The decimal number right after `key` in `line`.
fn number_after(line: &[u8], key: &[u8]) -> Option<u64> {
    let at = line.windows(key.len()).position(|w| w == key)? + key.len();
    leading_number(&line[at..])
}

/// The decimal number just before `key` in `line`.
fn number_before(line: &[u8], key: &[u8]) -> Option<u64> {
    let at = line.windows(key.len()).position(|w| w == key)?;
    let start = line[..at]
        .iter()
        .rposition(|c| !c.is_ascii_digit())
        .map_or(0, |i| i + 1);
    leading_number(&line[start..at])
}

/// The decimal number `s` starts with.
fn leading_number(s: &[u8]) -> Option<u64> {
    let mut id = 0u64;
    let mut any = false;
    for &d in s.iter().take_while(|c| c.is_ascii_digit()) {
        id = id.checked_mul(10)?.checked_add(u64::from(d - b'0'))?;
        any = true;
    }
    any.then_some(id)
}

/// The `event_id` of a printed `send`/`recv`/`start`/`stop` line.
fn numbered_event_id(line: &[u8]) -> Option<u64> {
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
fn run_once(exe: &str, w: &Workload, config: usize, rate: u64) -> Result<Run, String> {
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
    let mut prog = cmd.spawn().map_err(|e| e.to_string())?;
    let mut controller: Option<Child> = None;
    let mut produced = None;
    let mut counter: Option<std::thread::JoinHandle<Tally>> = None;
    if config >= 1 {
        let (url, numbered) = read_url(&mut prog)?;
        produced = Some(numbered);
        if config == 2 || config == 3 {
            let mut c = Proc::new(exe)
                .args(["ctl", &url])
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
            counter = Some(std::thread::spawn(move || {
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
            }));
            controller = Some(c);
        } else if config == 4 {
            let c = Proc::new(exe)
                .args(["model-sink", &url, "--rate", &rate.to_string()])
                .stdout(Stdio::piped())
                .stderr(Stdio::null())
                .spawn()
                .map_err(|e| e.to_string())?;
            controller = Some(c);
        }
    }
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
    let mut tally = None;
    let mut v_contiguous = false;
    if let Some(t) = counter {
        tally = Some(t.join().map_err(|_| "counter thread")?);
    }
    if let Some(mut c) = controller {
        if config == 4 {
            let mut s = String::new();
            c.stdout
                .take()
                .ok_or("no stdout")?
                .read_to_string(&mut s)
                .map_err(|e| e.to_string())?;
            let v: serde_json::Value = serde_json::from_str(s.trim()).unwrap_or_default();
            v_contiguous = v["contiguous"].as_bool().unwrap_or(false);
            tally = Some(Tally {
                n: v["events"].as_u64().unwrap_or(0),
                min: v["first"].as_u64().unwrap_or(u64::MAX),
                max: v["last"].as_u64().unwrap_or(0),
                from: v["from"].as_u64(),
                ..Tally::default()
            });
        }
        let _ = c.wait();
    }
    let summary = produced.and_then(|t| t.join().ok()).unwrap_or_default();
    let agent_next = summary.next_id;
    if config >= 2 && summary.start_hold_us.is_none() {
        eprintln!(
            "{} / configuration {config}: the agent printed no start hold (its summary is missing); the run time includes it",
            w.name
        );
    }
    let held_ms = summary.start_hold_us.map_or(0.0, |us| us as f64 / 1e3);
    let events = tally.map(|t| t.n);
    // The sink checked its numbers itself; both need the agent's count (printed at exit
    // under RACETRACK_DEBUG: without it, nothing says the end arrived).
    let lossless = tally.map(|t| {
        let own = if config == 4 { v_contiguous } else { t.contiguous() };
        own && agent_next.is_some() && t.ends_match(agent_next)
    });
    Ok(Run {
        elapsed_ms: elapsed_ms - held_ms,
        held_ms,
        events,
        lossless,
        peak_rss_kib: peak,
        waits: summary.waits,
    })
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

/// A farm on std channels doing the work of `farm --tasks n --work-us 0`: tasks per second.
fn baseline_farm(threads: usize, tasks: u64) -> f64 {
    use std::sync::mpsc;
    let t0 = Instant::now();
    let (res_tx, res_rx) = mpsc::channel::<u64>();
    let mut workers = Vec::new();
    let mut senders = Vec::new();
    for _ in 0..threads {
        let (tx, rx) = mpsc::channel::<u64>();
        let res_tx = res_tx.clone();
        senders.push(tx);
        workers.push(std::thread::spawn(move || {
            for v in rx {
                let _ = res_tx.send(racetrack_examples::farm::f(v));
            }
        }));
    }
    drop(res_tx);
    let mut rng = racetrack_examples::Lcg::new(42);
    for i in 0..tasks {
        let _ = senders[(i % threads as u64) as usize].send(rng.next_u64() % 1_000_000);
    }
    drop(senders);
    let sum = res_rx.iter().take(tasks as usize).fold(0u64, u64::wrapping_add);
    std::hint::black_box(sum);
    for w in workers {
        let _ = w.join();
    }
    tasks as f64 / t0.elapsed().as_secs_f64()
}

/// What `racetrack-bench` runs.
#[derive(Debug, PartialEq)]
struct Options {
    /// Repetitions of every measurement (medians are reported).
    reps: usize,
    /// `--only TEXT`: just the workloads whose name contains TEXT (and no other section);
    /// `--only lagging`, `--only baseline`: just that section.
    only: Option<String>,
}

const BENCH_USAGE: &str = "usage: racetrack-bench [--reps N] [--only TEXT|lagging|baseline]
  --reps N     repetitions of every measurement, medians reported (default 3)
  --only TEXT  just the workloads whose name contains TEXT (farm, 1 µs leaves; farm, 10 µs
               leaves; farm, 100 µs leaves; mergesort; heat); `lagging`: just the lagging
               debugger; `baseline`: just the runtime baseline";

/// Parse `racetrack-bench`'s arguments: `Ok(None)` for `--help`; an error names what is
/// wrong (nothing runs then: a typo must not cost a half-hour run of the wrong thing).
fn parse_options(args: &[String]) -> Result<Option<Options>, String> {
    let mut opts = Options { reps: 3, only: None };
    let mut it = args.iter();
    while let Some(a) = it.next() {
        match a.as_str() {
            "--help" | "-h" => return Ok(None),
            "--reps" => {
                let v = it.next().ok_or("--reps needs a number")?;
                opts.reps = match v.parse() {
                    Ok(n) if n >= 1 => n,
                    _ => return Err(format!("--reps needs a number of at least 1, not `{v}`")),
                };
            }
            "--only" => {
                let v = it
                    .next()
                    .filter(|v| !v.is_empty())
                    .ok_or("--only needs a workload name, `lagging` or `baseline`")?;
                if v != "baseline" && v != "lagging" && !WORKLOADS.iter().any(|w| w.name.contains(v.as_str()))
                {
                    let names: Vec<&str> = WORKLOADS.iter().map(|w| w.name).collect();
                    return Err(format!(
                        "--only `{v}` names no workload (they are: {}; or `lagging`, or `baseline`)",
                        names.join("; ")
                    ));
                }
                opts.only = Some(v.clone());
            }
            other => return Err(format!("unknown option `{other}`")),
        }
    }
    Ok(Some(opts))
}

/// `racetrack-bench [--reps N] [--only TEXT|lagging|baseline]`.
pub(crate) fn main(args: &[String]) -> i32 {
    let opts = match parse_options(args) {
        Ok(Some(o)) => o,
        Ok(None) => {
            println!("{BENCH_USAGE}");
            return 0;
        }
        Err(e) => {
            eprintln!("racetrack-bench: {e}\n{BENCH_USAGE}");
            return 2;
        }
    };
    let reps = opts.reps;
    let exe = match std::env::current_exe() {
        Ok(p) => p.display().to_string(),
        Err(e) => {
            eprintln!("racetrack-bench: {e}");
            return 2;
        }
    };
    if opts.only.as_deref() == Some("lagging") {
        println!("# racetrack-bench: the lagging debugger");
        lagging(&exe);
        return 0;
    }
    println!("# racetrack-bench: {reps} repetitions, medians; ratio = run time / no agent");
    match opts.only.as_deref() {
        Some("baseline") => {}
        Some(text) => {
            workloads(&exe, reps, Some(text));
            return 0;
        }
        None => {
            workloads(&exe, reps, None);
            lagging(&exe);
        }
    }
    runtime_baseline(&exe, reps);
    0
}

/// The table of every workload (whose name contains `only`) under every configuration.
fn workloads(exe: &str, reps: usize, only: Option<&str>) {
    println!("(run time: the program's own timing, less the start hold, reported apart)");
    println!(
        "| workload | configuration | median ms | ratio | start hold ms | events received/s | lossless | peak RSS MiB |"
    );
    println!("|---|---|---:|---:|---:|---:|---|---:|");
    for w in WORKLOADS
        .iter()
        .filter(|w| only.is_none_or(|o| w.name.contains(o)))
    {
        // Repetitions interleave the configurations (0, 1, 2, 3, 4, 0, 1, ...): this
        // machine's speed drifts over seconds, and a block of runs per configuration turned
        // that drift into ratio differences (1.50x and 1.76x for the same build).
        let mut all: Vec<Vec<Run>> = CONFIGS.iter().map(|_| Vec::new()).collect();
        for _ in 0..reps {
            for (c, cname) in CONFIGS.iter().enumerate() {
                match run_once(exe, w, c, 0) {
                    Ok(r) => all[c].push(r),
                    Err(e) => eprintln!("{} / {cname}: {e}", w.name),
                }
            }
        }
        let mut base = None;
        for ((c, cname), runs) in CONFIGS.iter().enumerate().zip(all) {
            if runs.is_empty() {
                continue;
            }
            let ms = median(runs.iter().map(|r| r.elapsed_ms).collect());
            let base_ms = *base.get_or_insert(ms);
            let rate = runs
                .iter()
                .filter_map(|r| r.events.map(|e| e as f64 / (r.elapsed_ms / 1e3)))
                .collect::<Vec<_>>();
            let rate = if rate.is_empty() {
                "-".to_owned()
            } else {
                format!("{:.0}", median(rate))
            };
            let lossless = match runs.iter().filter_map(|r| r.lossless).collect::<Vec<_>>() {
                v if v.is_empty() => "-".to_owned(),
                v => format!("{}/{}", v.iter().filter(|x| **x).count(), v.len()),
            };
            let rss = runs.iter().map(|r| r.peak_rss_kib).max().unwrap_or(0) as f64 / 1024.0;
            let held = if c >= 2 {
                format!("{:.1}", median(runs.iter().map(|r| r.held_ms).collect()))
            } else {
                "-".to_owned()
            };
            println!(
                "| {} | {c}. {cname} | {ms:.1} | {:.2} | {held} | {rate} | {lossless} | {rss:.1} |",
                w.name,
                ms / base_ms
            );
        }
    }
}

/// A debugger that lags behind: the agent's memory stays bounded, the program slows down.
fn lagging(exe: &str) {
    println!();
    println!(
        "## a lagging debugger (GUI model sink taking at most so many events a second; farm, 250,000 tasks: 2,000,004 events; one run each)"
    );
    println!("| debugger | run ms | peak RSS MiB | waits for room | events | lossless |");
    println!("|---|---:|---:|---:|---:|---|");
    // Far more events than the buffers on the way hold (the agent's 65,536, the socket's,
    // the sink's 256 frames: 800,004 events fit in them in a run here), so a slow sink
    // must slow the program.
    let w = &Workload {
        name: "farm, 1 µs leaves, 250,000 tasks",
        program: "farm",
        args: &["--threads", "4", "--tasks", "250000", "--work-us", "1"],
    };
    // First the program alone: its own memory (its queues hold every task at once).
    for (config, rate) in [(0, 0), (4, 0), (4, LAGGING_RATE)] {
        match run_once(exe, w, config, rate) {
            Ok(r) => println!(
                "| {} | {:.1} | {:.1} | {} | {} | {} |",
                match (config, rate) {
                    (0, _) => "none (no agent)".to_owned(),
                    (_, 0) => "sink, unlimited".to_owned(),
                    _ => format!("sink, at most {rate} events/s"),
                },
                r.elapsed_ms,
                r.peak_rss_kib as f64 / 1024.0,
                r.waits.map_or("-".to_owned(), |n| n.to_string()),
                r.events.map_or("-".to_owned(), |n| n.to_string()),
                r.lossless.map_or("-", |b| if b { "yes" } else { "NO" })
            ),
            Err(e) => eprintln!("lagging sink at {rate} events/s: {e}"),
        }
    }
}

/// The lagging sink's pace: a tenth of what the debugger takes here when nothing holds it
/// back (2–3 M events/s).
const LAGGING_RATE: u64 = 200_000;

/// The runtime against a hand-written farm on std channels.
fn runtime_baseline(exe: &str, reps: usize) {
    println!();
    println!("## runtime baseline: farm with trivial leaves (4 workers, 200,000 tasks)");
    let mut ours = Vec::new();
    let mut theirs = Vec::new();
    let base_w = Workload {
        name: "farm, trivial leaves",
        program: "farm",
        args: &["--threads", "4", "--tasks", "200000"],
    };
    for _ in 0..reps {
        if let Ok(r) = run_once(exe, &base_w, 0, 0) {
            ours.push(200_000.0 / (r.elapsed_ms / 1e3));
        }
        theirs.push(baseline_farm(4, 200_000));
    }
    if !ours.is_empty() {
        let (o, t) = (median(ours), median(theirs));
        println!("| runtime (config 0) | std channels | ratio |");
        println!("|---:|---:|---:|");
        println!("| {o:.0} tasks/s | {t:.0} tasks/s | {:.2} |", o / t);
    }
}

/// `racetrack-bench model-sink URL [--rate N]`: the GUI's connection and model ingest without
/// drawing (benchmark configuration 4); `--rate` takes at most N events a second (a
/// debugger that lags behind; 0, the default: no limit). Continues the start hold, ingests
/// everything, prints `{"events":N,"contiguous":bool,"first":ID,"last":ID,"from":ID}` when
/// the program ends.
pub(crate) fn model_sink(args: &[String]) -> i32 {
    let Some(url) = args.first() else {
        eprintln!("model-sink needs a URL");
        return 2;
    };
    let rate: u64 = match args.get(1..) {
        None | Some([]) => 0,
        Some([flag, n]) if flag == "--rate" => match n.parse() {
            Ok(n) => n,
            Err(_) => {
                eprintln!("model-sink: --rate needs a number of events per second, not `{n}`");
                return 2;
            }
        },
        Some(other) => {
            eprintln!("model-sink: unexpected arguments {other:?} (usage: model-sink URL [--rate N])");
            return 2;
        }
    };
    let conn = match Connection::connect(url, Duration::from_secs(10)) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("{e}");
            return 2;
        }
    };
    let (tx, rx) = conn.split();
    let mut model = Model::default();
    let mut tally = Tally::default();
    let mut continued = false;
    // The pace: events taken since `since`, at most `rate` a second.
    let (mut since, mut taken) = (None::<Instant>, 0u64);
    while let Ok(first) = rx.recv() {
        let mut batch = vec![first];
        batch.extend(rx.try_iter().take(63));
        let mut closed = false;
        for ce in batch {
            if rate > 0 {
                let t0 = *since.get_or_insert_with(Instant::now);
                let due = t0 + Duration::from_secs_f64(taken as f64 / rate as f64);
                let now = Instant::now();
                if let Some(wait) = due.checked_duration_since(now) {
                    std::thread::sleep(wait);
                } else if now - due > Duration::from_millis(10) {
                    // Behind the pace (nothing arrived for a while): start counting again,
                    // so that no credit piles up for a burst faster than `rate`.
                    (since, taken) = (Some(now), 0);
                }
                taken += match &ce {
                    ConnEvent::Packed(_, ps) => ps.len() as u64,
                    ConnEvent::Event(_) => 1,
                    ConnEvent::Closed(_) => 0,
                };
            }
            match ce {
                ConnEvent::Event(ev) => {
                    if let Some(id) = ev.event_id() {
                        tally.add(id);
                    }
                    model.ingest(&ev);
                    if !continued && !model.held.is_empty() {
                        tx.send(Command::Continue {
                            thread: None,
                            event_id: None,
                            trace: None,
                        });
                        continued = true;
                    }
                    if let Event::Snapshot { next_event_id, .. } = &ev {
                        tally.from = tally.from.or(Some(*next_event_id));
                    }
                    if let Event::Snapshot { held, .. } = &ev {
                        if !held.is_empty() && !continued {
                            tx.send(Command::Continue {
                                thread: None,
                                event_id: None,
                                trace: None,
                            });
                            continued = true;
                        }
                    }
                }
                ConnEvent::Packed(names, ps) => {
                    for p in &ps {
                        tally.add(p.1);
                        model.ingest_packed(&names, p);
                    }
                }
                ConnEvent::Closed(_) => closed = true,
            }
        }
        if closed {
            break;
        }
    }
    println!(
        "{{\"events\":{},\"contiguous\":{},\"first\":{},\"last\":{},\"from\":{}}}",
        tally.n,
        tally.lossless(None),
        tally.min,
        tally.max,
        tally.from.map_or("null".to_owned(), |f| f.to_string())
    );
    0
}

#[cfg(test)]
mod tests {
    use super::{
        number_after, number_before, numbered_event_id, parse_options, snapshot_next, Options, Tally,
    };

    #[test]
    fn the_agents_summary_is_read_field_by_field() {
        let line = b"racetrack: finished=true with 0 events buffered, 995 frames and 800006 events sent, next id 800005, 46 waits for room, start hold 15471 us\n";
        assert_eq!(number_after(line, b", next id "), Some(800_005));
        assert_eq!(number_before(line, b" waits for room"), Some(46));
        assert_eq!(number_after(line, b", start hold "), Some(15_471));
        assert_eq!(number_before(b"0 waits for room", b" waits for room"), Some(0));
        assert_eq!(number_before(b"no count", b" waits for room"), None);
        assert_eq!(number_before(b"x waits for room", b" waits for room"), None);
    }

    fn args(v: &[&str]) -> Vec<String> {
        v.iter().map(|s| (*s).to_owned()).collect()
    }

    #[test]
    fn bench_options_are_checked_before_anything_runs() {
        assert_eq!(
            parse_options(&args(&[])),
            Ok(Some(Options { reps: 3, only: None }))
        );
        assert_eq!(
            parse_options(&args(&["--only", "1 µs", "--reps", "5"])),
            Ok(Some(Options {
                reps: 5,
                only: Some("1 µs".into())
            }))
        );
        assert_eq!(
            parse_options(&args(&["--only", "baseline"])).map(|o| o.and_then(|o| o.only)),
            Ok(Some("baseline".into()))
        );
        assert_eq!(parse_options(&args(&["--help"])), Ok(None));
        let err = |v: &[&str]| parse_options(&args(v)).expect_err("an error");
        assert_eq!(err(&["--rep", "5"]), "unknown option `--rep`");
        assert!(err(&["--reps", "0"]).contains("at least 1, not `0`"));
        assert!(err(&["--reps", "x"]).contains("not `x`"));
        assert!(err(&["--reps"]).contains("needs a number"));
        assert!(err(&["--only"]).contains("needs a workload"));
        assert!(err(&["--only", ""]).contains("needs a workload"));
        assert_eq!(
            parse_options(&args(&["--only", "lagging"])).map(|o| o.and_then(|o| o.only)),
            Ok(Some("lagging".into()))
        );
        let e = err(&["--only", "fram"]);
        assert!(e.contains("names no workload") && e.contains("mergesort"), "{e}");
    }

    #[test]
    fn lossless_means_every_number_from_the_snapshot_to_the_agents_last() {
        let mut t = Tally::default();
        assert!(!t.lossless(None), "nothing received");
        t.from = Some(3);
        for id in 3..=9 {
            t.add(id);
        }
        assert!(t.lossless(Some(10)));
        assert!(!t.lossless(Some(12)), "the last two never arrived");
        let mut head = t;
        head.from = Some(1);
        assert!(!head.lossless(Some(10)), "the first two never arrived");
        let mut gap = Tally::default();
        for id in [1, 2, 4] {
            gap.add(id);
        }
        assert!(!gap.lossless(None));
        let mut dup = Tally::default();
        for id in [5, 5, 7] {
            dup.add(id);
        }
        assert!(!dup.contiguous(), "a duplicate standing in for a gap");
        let mut two = Tally::default();
        for id in [1, 1, 4, 4] {
            two.add(id);
        }
        assert!(!two.contiguous(), "two duplicates standing in for two gaps");
        let mut from0 = Tally::default();
        for id in [2, 0, 1] {
            from0.add(id);
        }
        assert!(from0.contiguous());
        assert_eq!(
            snapshot_next(br#"{"event":"snapshot","next_event_id":17,"threads":[]}"#),
            Some(17)
        );
    }

    #[test]
    fn the_counter_reads_numbered_events_only() {
        let line = br#"{"event":"recv","event_id":1234,"thread":"proc[0]","op":"Work","msg":"0.1","position":0,"traced":false}"#;
        assert_eq!(numbered_event_id(line), Some(1234));
        assert_eq!(numbered_event_id(br#"{"event":"stop","event_id":7}"#), Some(7));
        assert_eq!(numbered_event_id(br#"{"event":"held","event_id":7}"#), None);
        assert_eq!(numbered_event_id(br#"{"event":"send","msg":"0"}"#), None);
        assert_eq!(numbered_event_id(br#"{"event":"send","event_id":x}"#), None);
        assert_eq!(
            numbered_event_id(br#"{"event":"start","thread":"t","event_id":42}"#),
            Some(42)
        );
    }
}
