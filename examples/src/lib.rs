//! Example Racetrack programs, as library functions so that tests can run them in-process
//! (with a recording hook) and as binaries (`farm`, `mergesort`, `heat`).
//!
//! Every program computes a sequential reference and reports
//! `{"program", "result", "reference", "matches_reference", ...}` as its last stdout line.

pub mod args;
pub mod farm;
pub mod heat;
pub mod mergesort;

use serde::Serialize;
use std::time::{Duration, Instant};

/// The final JSON line of an example.
#[derive(Debug, Serialize)]
pub struct Report<R: Serialize> {
    /// Program name.
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

/// The common `main` of the example binaries: make the runtime, run, print the report as
/// the last stdout line; on a schedule error print it to stderr and exit with 1.
pub fn main_with<R: Serialize>(
    run: impl FnOnce(&racetrack_agent::Runtime) -> Result<Report<R>, racetrack_agent::ScheduleError>,
) {
    let rt = racetrack_agent::Runtime::builder().build();
    match run(&rt) {
        Ok(report) => println!("{}", report.to_json_line()),
        Err(e) => {
            eprintln!("error: {e}");
            drop(rt);
            std::process::exit(1);
        }
    }
}
