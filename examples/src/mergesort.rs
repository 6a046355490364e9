//! `mergesort`: split an array into chunks whose `target` field routes them to
//! `proc[target % n]`, sort each chunk there, merge the sorted chunks on `main`.
//!
//! Flow graph: `Split` (main) → `Sort` (leaf, proc, by `target`) → `Merge` (merge, main).

use crate::{jitter, Lcg, Report};
use racetrack_agent::{ops, BuildError, FlowGraph, Route, Runtime, ScheduleError};
use serde::{Deserialize, Serialize};
use std::time::Instant;

/// The command line's `--help` text.
pub const USAGE: &str = "usage: mergesort [--threads N] [--size S] [--chunks C] [--jitter-us US]";

/// What to run.
#[derive(Debug, Clone)]
pub struct Config {
    /// Worker threads in `proc`.
    pub threads: usize,
    /// Array length.
    pub size: usize,
    /// Number of chunks (0: four per thread).
    pub chunks: usize,
    /// Random sleep (0..US) in each operation.
    pub jitter_us: u64,
}

impl Default for Config {
    fn default() -> Self {
        Self {
            threads: 4,
            size: 100_000,
            chunks: 0,
            jitter_us: 0,
        }
    }
}

/// The schedule's input.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Input {
    /// The array to sort.
    pub data: Vec<i64>,
    /// Into how many chunks.
    pub chunks: usize,
    /// Jitter per operation.
    pub jitter_us: u64,
}

/// A chunk on its way to be sorted; `target` picks the thread.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Chunk {
    /// Routing field: sorted on `proc[target % n]`.
    pub target: usize,
    /// Position of the chunk in the array.
    pub index: usize,
    /// The chunk's values, unsorted.
    pub data: Vec<i64>,
    pub jitter_us: u64,
}

/// A sorted chunk.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Sorted {
    /// Position of the chunk in the array.
    pub index: usize,
    /// Sorted values.
    pub data: Vec<i64>,
}

/// Per-worker state.
#[derive(Debug, Default, Serialize, Deserialize)]
pub struct SorterState {
    /// Chunks sorted by this thread.
    pub chunks_sorted: u64,
    /// Values sorted by this thread.
    pub values_sorted: u64,
}

/// What the program reports about the sorted array.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Summary {
    /// How many values the summary covers.
    pub len: usize,
    /// Position-weighted checksum (order-sensitive).
    pub checksum: i64,
    /// Whether it is sorted.
    pub sorted: bool,
}

impl Summary {
    /// Summarize `v`.
    pub fn of(v: &[i64]) -> Self {
        let checksum = v
            .iter()
            .enumerate()
            .fold(0i64, |a, (i, x)| a.wrapping_add(x.wrapping_mul(i as i64 + 1)));
        Self {
            len: v.len(),
            checksum,
            sorted: v.windows(2).all(|w| w[0] <= w[1]),
        }
    }
}

/// The deterministic input array.
pub fn input(size: usize) -> Vec<i64> {
    let mut rng = Lcg::new(7);
    (0..size)
        .map(|_| (rng.next_u64() % 2_000_000) as i64 - 1_000_000)
        .collect()
}

fn merge_two(a: Vec<i64>, b: Vec<i64>) -> Vec<i64> {
    let mut out = Vec::with_capacity(a.len() + b.len());
    let (mut i, mut j) = (0, 0);
    while i < a.len() && j < b.len() {
        if a[i] <= b[j] {
            out.push(a[i]);
            i += 1;
        } else {
            out.push(b[j]);
            j += 1;
        }
    }
    out.extend_from_slice(&a[i..]);
    out.extend_from_slice(&b[j..]);
    out
}

/// Build the graph on `rt`.
pub fn build(rt: &Runtime, threads: usize) -> Result<FlowGraph<Input, Vec<i64>>, BuildError> {
    let main = rt.collection::<()>("main", 1);
    let procs = rt.collection::<SorterState>("proc", threads);
    rt.graph(
        ops::split("Split", &main, Route::constant(0), |inp: Input, _ctx, out| {
            jitter(inp.jitter_us);
            let chunks = inp.chunks.max(1);
            let len = inp.data.len();
            for index in 0..chunks {
                let (lo, hi) = (index * len / chunks, (index + 1) * len / chunks);
                out.post(Chunk {
                    target: index,
                    index,
                    data: inp.data[lo..hi].to_vec(),
                    jitter_us: inp.jitter_us,
                });
            }
        }) >> ops::leaf(
            "Sort",
            &procs,
            Route::by(|c: &Chunk, n| c.target % n),
            |mut c: Chunk, ctx| {
                jitter(c.jitter_us);
                c.data.sort_unstable();
                ctx.state.chunks_sorted += 1;
                ctx.state.values_sorted += c.data.len() as u64;
                Sorted {
                    index: c.index,
                    data: c.data,
                }
            },
        ) >> ops::merge(
            "Merge",
            &main,
            Route::constant(0),
            |acc: &mut Vec<Sorted>, s: Sorted, _ctx| acc.push(s),
            |mut acc, _ctx| {
                // Pairwise merge rounds, in chunk order so the work is deterministic.
                acc.sort_by_key(|s| s.index);
                let mut runs: Vec<Vec<i64>> = acc.into_iter().map(|s| s.data).collect();
                while runs.len() > 1 {
                    let mut next = Vec::with_capacity(runs.len().div_ceil(2));
                    let mut it = runs.into_iter();
                    while let Some(a) = it.next() {
                        next.push(match it.next() {
                            Some(b) => merge_two(a, b),
                            None => a,
                        });
                    }
                    runs = next;
                }
                runs.pop().unwrap_or_default()
            },
        ),
    )
}

/// Sort the deterministic input and report against a sequential sort.
pub fn run(rt: &Runtime, cfg: &Config) -> Result<Report<Summary>, ScheduleError> {
    let graph = build(rt, cfg.threads).map_err(crate::setup_error)?;
    let data = input(cfg.size);
    let chunks = if cfg.chunks == 0 {
        cfg.threads * 4
    } else {
        cfg.chunks
    };
    let t0 = Instant::now();
    let sorted = rt.schedule(
        &graph,
        Input {
            data: data.clone(),
            chunks,
            jitter_us: cfg.jitter_us,
        },
    )?;
    let secs = t0.elapsed().as_secs_f64();
    let mut reference = data;
    reference.sort_unstable();
    let (result, reference) = (Summary::of(&sorted), Summary::of(&reference));
    let mut extra = serde_json::Map::new();
    extra.insert("size".into(), cfg.size.into());
    extra.insert("chunks".into(), chunks.into());
    Ok(Report {
        program: "mergesort",
        matches_reference: result == reference && sorted.len() == cfg.size,
        result,
        reference,
        threads: cfg.threads,
        elapsed_ms: secs * 1e3,
        extra,
    })
}
