//! Example Racetrack programs, as library functions so that tests can run them in-process
//! (with a recording hook) and as binaries (`farm`, `mergesort`, `heat`, `search`,
//! `nested`, `gather`).
//!
//! Every program computes a sequential reference and reports
//! `{"program", "result", "reference", "matches_reference", ...}` as its last stdout line.

pub mod args;
pub mod farm;
pub mod gather;
pub mod heat;
pub mod mergesort;
pub mod nested;
pub mod search;

use serde::Serialize;
use std::time::{Duration, Instant};

/// The final JSON line of an example.
#[derive(Debug, Serialize)]
pub struct Report<R: Serialize> {
    /// Which example printed the report (`heat`, `search`, ...).
    pub program: &'static str,
    /// What the parallel program computed.
    pub result: R,
    /// What the sequential reference computed.
    pub reference: R,
    /// Whether they agree.
    pub matches_reference: bool,
    /// Worker thread count.
    pub threads: usize,
    /// Wall time of the parallel part.
    pub elapsed_ms: f64,
    /// Program-specific figures.
    #[serde(flatten)]
    pub extra: serde_json::Map<String, serde_json::Value>,
}

impl<R: Serialize> Report<R> {
    /// The report as one JSON line.
    pub fn to_json_line(&self) -> String {
        serde_json::to_string(self).unwrap_or_else(|e| format!("{{\"error\":\"{e}\"}}"))
    }
}

/// A problem before the first schedule call (a graph that does not build, bad options),
/// reported like a failed schedule call.
pub fn setup_error(message: impl ToString) -> racetrack_agent::ScheduleError {
    racetrack_agent::ScheduleError::Operation {
        op: "(setup)".into(),
        thread: "main".into(),
        msg: "-".into(),
        message: message.to_string(),
    }
}

/// `nested`'s refinement of a task's value.
pub fn f_refine(x: u64) -> u64 {
    x.wrapping_mul(40_503) % 65_521
}

/// Spin (not sleep) for `us` microseconds: per-operation busy work.
pub fn busy_work(us: u64) {
    if us == 0 {
        return;
    }
    let end = Instant::now() + Duration::from_micros(us);
    while Instant::now() < end {
        std::hint::spin_loop();
    }
}

/// Sleep a random time in `0..max_us` microseconds (timing noise for determinism tests).
pub fn jitter(max_us: u64) {
    if max_us == 0 {
        return;
    }
    use std::hash::{BuildHasher, Hasher};
    // RandomState is seeded randomly per instance: real run-to-run randomness, no deps.
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u64(max_us);
    std::thread::sleep(Duration::from_micros(h.finish() % max_us));
}

/// A small deterministic pseudo-random sequence (inputs must be the same in every run).
pub struct Lcg(u64);

impl Lcg {
    /// A generator seeded with `seed`.
    pub fn new(seed: u64) -> Self {
        Self(seed ^ 0x9E37_79B9_7F4A_7C15)
    }
    /// The next value.
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self
            .0
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1_442_695_040_888_963_407);
        self.0 >> 11
    }
}

/// The common `main` of the example programs: make the runtime (with the agent when
/// `RACETRACK_LISTEN` is set), run, print the report as the last stdout line. Returns the
/// exit code: 0, or 1 after printing a schedule error to stderr.
pub fn main_with<R: Serialize>(
    run: impl FnOnce(&racetrack_agent::Runtime) -> Result<Report<R>, racetrack_agent::ScheduleError>,
) -> i32 {
    let rt = racetrack_agent::runtime().build();
    match run(&rt) {
        Ok(report) => {
            println!("{}", report.to_json_line());
            0
        }
        Err(e) => {
            eprintln!("error: {e}");
            1
        }
    }
}

/// The example programs by name.
pub const PROGRAMS: [&str; 6] = ["farm", "mergesort", "heat", "search", "nested", "gather"];

/// Run example `name` with command-line `args` (as its binary would); returns the exit
/// code (2 for bad arguments or an unknown name).
pub fn run_cli(name: &str, args: Vec<String>) -> i32 {
    match name {
        "farm" => cli(args, &[], farm::USAGE, farm_config, farm::run),
        "mergesort" => cli(args, &[], mergesort::USAGE, mergesort_config, mergesort::run),
        "heat" => cli(args, &["fixed"], heat::USAGE, heat_config, heat::run),
        "search" => cli(args, &["fixed"], search::USAGE, search_config, search::run),
        "nested" => cli(args, &["on-workers"], nested::USAGE, nested_config, nested::run),
        "gather" => cli(args, &["first"], gather::USAGE, gather_config, gather::run),
        other => {
            eprintln!(
                "error: unknown example `{other}`\nexamples: farm, mergesort, heat, search, nested, gather"
            );
            2
        }
    }
}

/// Whether `args` are a valid command line for example `name`, without running it: the
/// error and the example's usage when they are not.
pub fn check_cli(name: &str, args: Vec<String>) -> Result<(), String> {
    fn check<C>(
        args: Vec<String>,
        flags: &[&str],
        usage: &str,
        config: fn(&args::Args) -> Result<C, String>,
    ) -> Result<(), String> {
        args::Args::parse(args, flags)
            .and_then(|a| config(&a))
            .map(|_| ())
            .map_err(|e| format!("{e}\n{usage}"))
    }
    match name {
        "farm" => check(args, &[], farm::USAGE, farm_config),
        "mergesort" => check(args, &[], mergesort::USAGE, mergesort_config),
        "heat" => check(args, &["fixed"], heat::USAGE, heat_config),
        "search" => check(args, &["fixed"], search::USAGE, search_config),
        "nested" => check(args, &["on-workers"], nested::USAGE, nested_config),
        "gather" => check(args, &["first"], gather::USAGE, gather_config),
        other => Err(format!(
            "unknown example `{other}` (farm, mergesort, heat, search, nested, gather)"
        )),
    }
}

type Run<C, R> = fn(&racetrack_agent::Runtime, &C) -> Result<Report<R>, racetrack_agent::ScheduleError>;

/// Parse an example's arguments (`flags`: the options without a value) into its
/// configuration, then run it as [`main_with`] does; a bad argument prints the usage.
fn cli<C, R: Serialize>(
    args: Vec<String>,
    flags: &[&str],
    usage: &str,
    config: fn(&args::Args) -> Result<C, String>,
    run: Run<C, R>,
) -> i32 {
    match args::Args::parse(args, flags).and_then(|a| config(&a)) {
        Ok(cfg) => main_with(|rt| run(rt, &cfg)),
        Err(e) => {
            eprintln!("error: {e}\n{usage}");
            2
        }
    }
}

fn farm_config(a: &args::Args) -> Result<farm::Config, String> {
    let d = farm::Config::default();
    a.check_known(&[
        "threads",
        "tasks",
        "work-us",
        "iters",
        "jitter-us",
        "panic-at",
        "abort-at",
        "exit-at",
    ])?;
    let task = |name| -> Result<Option<u64>, String> {
        Ok(match a.num(name, u64::MAX)? {
            u64::MAX => None,
            n => Some(n),
        })
    };
    Ok(farm::Config {
        threads: a.num("threads", d.threads)?.max(1),
        tasks: a.num("tasks", d.tasks)?,
        work_us: a.num("work-us", d.work_us)?,
        iters: a.num("iters", d.iters)?,
        jitter_us: a.num("jitter-us", d.jitter_us)?,
        panic_at: task("panic-at")?,
        abort_at: task("abort-at")?,
        exit_at: task("exit-at")?,
    })
}

fn mergesort_config(a: &args::Args) -> Result<mergesort::Config, String> {
    let d = mergesort::Config::default();
    a.check_known(&["threads", "size", "chunks", "jitter-us"])?;
    Ok(mergesort::Config {
        threads: a.num("threads", d.threads)?.max(1),
        size: a.num("size", d.size)?,
        chunks: a.num("chunks", d.chunks)?,
        jitter_us: a.num("jitter-us", d.jitter_us)?,
    })
}

fn heat_config(a: &args::Args) -> Result<heat::Config, String> {
    let d = heat::Config::default();
    a.check_known(&["threads", "iters", "cells", "jitter-us", "local-us"])?;
    Ok(heat::Config {
        threads: a.num("threads", d.threads)?.max(1),
        iters: a.num("iters", d.iters)?,
        cells: a.num("cells", d.cells)?,
        fixed: a.flag("fixed"),
        jitter_us: a.num("jitter-us", d.jitter_us)?,
        local_us: a.num("local-us", d.local_us)?,
    })
}

fn nested_config(a: &args::Args) -> Result<nested::Config, String> {
    let d = nested::Config::default();
    a.check_known(&["threads", "tasks"])?;
    Ok(nested::Config {
        threads: a.num("threads", d.threads)?.max(1),
        tasks: a.num("tasks", d.tasks)?,
        on_workers: a.flag("on-workers"),
    })
}

fn gather_config(a: &args::Args) -> Result<gather::Config, String> {
    let d = gather::Config::default();
    a.check_known(&["inputs", "jitter-us"])?;
    Ok(gather::Config {
        inputs: a.num("inputs", d.inputs)?.max(1),
        first: a.flag("first"),
        jitter_us: a.num("jitter-us", d.jitter_us)?,
    })
}

fn search_config(a: &args::Args) -> Result<search::Config, String> {
    let d = search::Config::default();
    a.check_known(&["threads", "size", "chunks", "jitter-us", "stagger-us"])?;
    Ok(search::Config {
        threads: a.num("threads", d.threads)?.max(1),
        size: a.num("size", d.size)?,
        chunks: a.num("chunks", d.chunks)?,
        fixed: a.flag("fixed"),
        jitter_us: a.num("jitter-us", d.jitter_us)?,
        stagger_us: a.num("stagger-us", d.stagger_us)?,
    })
}

/// `main` of an example binary: `--help` prints the usage, the rest goes to [`run_cli`].
pub fn bin_main(name: &str, usage: &str) -> ! {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.iter().any(|a| a == "--help" || a == "-h") {
        println!("{usage}");
        std::process::exit(0);
    }
    std::process::exit(run_cli(name, args))
}
