//! `search`: the second race — "first answer wins". Find the first element of a sequence
//! that satisfies a predicate: chunks are scanned in parallel and a merge picks the answer.
//!
//! Flow graph: `Split` (main) → `Scan` (leaf, proc, by chunk) → `Pick` (merge, main).
//!
//! Chunks grow (chunk `c` holds `c + 1` base lengths, like the stages of an exponential
//! search) and each scan counts its matches, so a chunk's answer costs in proportion to its
//! place: answers normally arrive in chunk order. The racy `Pick` keeps the first answer with
//! a match that *arrives* — right as long as that order holds, which the normal timing almost
//! always gives. `--fixed` keeps the answer of the lowest chunk, whatever the order.

use crate::{jitter, Report};
use racetrack_agent::{ops, BuildError, FlowGraph, Route, Runtime, ScheduleError};
use serde::{Deserialize, Serialize};
use std::time::Instant;

/// The command line's `--help` text.
pub const USAGE: &str =
    "usage: search [--threads N] [--size S] [--chunks C] [--fixed] [--stagger-us US] [--jitter-us US]";

/// One in `MODULUS` elements matches.
pub const MODULUS: u64 = 997;

/// What to run.
#[derive(Debug, Clone)]
pub struct Config {
    /// Worker threads.
    pub threads: usize,
    /// Sequence length.
    pub size: u64,
    /// Chunks (0: four per thread).
    pub chunks: u64,
    /// Order-independent pick.
    pub fixed: bool,
    /// Random sleep (0..US) per operation.
    pub jitter_us: u64,
    /// Chunk `c` becomes available `c` times this after the search starts (it is read
    /// from storage in order): the natural arrival order of the answers.
    pub stagger_us: u64,
}

impl Default for Config {
    fn default() -> Self {
        Self {
            threads: 4,
            size: 400_000,
            chunks: 0,
            fixed: false,
            jitter_us: 0,
            stagger_us: 500,
        }
    }
}

/// A range to scan.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Range {
    /// Chunk number (routes it: `proc[chunk % n]`).
    pub chunk: u64,
    /// First index.
    pub lo: u64,
    /// One past the last index.
    pub hi: u64,
    pub jitter_us: u64,
    /// When the chunk becomes available, after the start (µs).
    pub ready_us: u64,
}

/// A chunk's answer.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Found {
    /// Chunk number.
    pub chunk: u64,
    /// Index of its first match, if any.
    pub index: Option<u64>,
    /// How many matches it holds.
    pub count: u64,
}

/// Bounds of chunk `c` of `chunks` over `size` elements: chunk `c` is `c + 1` units long.
pub fn bounds(c: u64, chunks: u64, size: u64) -> (u64, u64) {
    let units = chunks * (chunks + 1) / 2;
    let start = |c: u64| (c * (c + 1) / 2) * size / units;
    (start(c), if c + 1 == chunks { size } else { start(c + 1) })
}

/// The element at `i` (a hash: random access, same in every run).
pub fn value(i: u64) -> u64 {
    let mut z = i.wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// The predicate.
pub fn matches(i: u64) -> bool {
    value(i) % MODULUS == 0
}

/// The search's input: size, chunks, jitter, stagger.
pub type Job = (u64, u64, u64, u64);

/// Build the graph.
pub fn build(rt: &Runtime, threads: usize, fixed: bool) -> Result<FlowGraph<Job, Option<u64>>, BuildError> {
    let main = rt.collection::<()>("main", 1);
    let procs = rt.collection::<u64>("proc", threads);
    rt.graph(
        ops::split(
            "Split",
            &main,
            Route::constant(0),
            |(size, chunks, jitter_us, stagger_us): (u64, u64, u64, u64), _ctx, out| {
                let chunks = chunks.max(1);
                for chunk in 0..chunks {
                    let (lo, hi) = bounds(chunk, chunks, size);
                    out.post(Range {
                        chunk,
                        lo,
                        hi,
                        jitter_us,
                        ready_us: chunk * stagger_us,
                    });
                }
            },
        ) >> ops::leaf(
            "Scan",
            &procs,
            Route::by(|r: &Range, n| (r.chunk % n as u64) as usize),
            |r: Range, ctx| {
                jitter(r.jitter_us);
                std::thread::sleep(std::time::Duration::from_micros(r.ready_us));
                *ctx.state += r.hi - r.lo;
                let mut found = Found {
                    chunk: r.chunk,
                    index: None,
                    count: 0,
                };
                for i in (r.lo..r.hi).filter(|&i| matches(i)) {
                    found.index.get_or_insert(i);
                    found.count += 1;
                }
                found
            },
        ) >> ops::merge(
            "Pick",
            &main,
            Route::constant(0),
            move |best: &mut Option<Found>, f: Found, _ctx| {
                if f.index.is_none() {
                    return;
                }
                let better = match best {
                    None => true,
                    // Fixed: the lowest chunk wins. Racy: the first to arrive wins.
                    Some(b) => fixed && f.chunk < b.chunk,
                };
                if better {
                    *best = Some(f);
                }
            },
            |best, _ctx| best.and_then(|b| b.index),
        ),
    )
}

/// Search and compare with a sequential scan.
pub fn run(rt: &Runtime, cfg: &Config) -> Result<Report<Option<u64>>, ScheduleError> {
    let g = build(rt, cfg.threads, cfg.fixed).map_err(crate::setup_error)?;
    let chunks = if cfg.chunks == 0 {
        cfg.threads as u64 * 4
    } else {
        cfg.chunks
    };
    let t0 = Instant::now();
    let result = rt.schedule(&g, (cfg.size, chunks, cfg.jitter_us, cfg.stagger_us))?;
    let secs = t0.elapsed().as_secs_f64();
    let reference = (0..cfg.size).find(|&i| matches(i));
    let mut extra = serde_json::Map::new();
    extra.insert("variant".into(), if cfg.fixed { "fixed" } else { "racy" }.into());
    extra.insert("size".into(), cfg.size.into());
    extra.insert("chunks".into(), chunks.into());
    Ok(Report {
        program: "search",
        matches_reference: result == reference,
        result,
        reference,
        threads: cfg.threads,
        elapsed_ms: secs * 1e3,
        extra,
    })
}
