//! `gather`: one merge with N inputs, the program of the thesis' table 4.10.
//!
//! `Split` (main) sends one number to each of `proc[0..N]`; `Value` (leaf) answers with
//! its square plus one; `Gather` (merge, main) absorbs the N answers in arrival order.
//! By default it adds them up: the merge commutes (every order leaves the same sum after
//! the same inputs, and its accumulator is serializable: `ops::merge_serde`, so the
//! explorer sees that). `--first` keeps the first answer to arrive instead: the race of
//! `search` in its barest form, one outcome per input.

use crate::{jitter, Report};
use racetrack_agent::{ops, BuildError, FlowGraph, Route, Runtime, ScheduleError};
use serde::{Deserialize, Serialize};
use std::time::Instant;

/// The command line's `--help` text.
pub const USAGE: &str = "usage: gather [--inputs N] [--first] [--jitter-us US]";

/// What to run.
#[derive(Debug, Clone)]
pub struct Config {
    /// Inputs of the merge, one thread each.
    pub inputs: usize,
    /// Keep the first answer to arrive (racy) instead of the sum.
    pub first: bool,
    /// Random sleep (0..US) in each `Value`.
    pub jitter_us: u64,
}

impl Default for Config {
    fn default() -> Self {
        Self {
            inputs: 4,
            first: false,
            jitter_us: 0,
        }
    }
}

/// The merge's accumulator.
#[derive(Debug, Default, Serialize, Deserialize)]
pub struct Acc {
    /// The sum so far (the default variant), or the first answer (`--first`).
    pub value: u64,
    /// Whether an answer came.
    pub any: bool,
}

/// What `Value` answers for input `i`.
pub fn value(i: u64) -> u64 {
    i * i + 1
}

/// Build the graph.
pub fn build(rt: &Runtime, inputs: usize, first: bool) -> Result<FlowGraph<(u64, u64), u64>, BuildError> {
    let main = rt.collection::<()>("main", 1);
    let procs = rt.collection::<()>("proc", inputs.max(1));
    rt.graph(
        ops::split(
            "Split",
            &main,
            Route::constant(0),
            |(n, jitter_us): (u64, u64), _ctx, out| {
                for i in 0..n {
                    out.post((i, jitter_us));
                }
            },
        ) >> ops::leaf(
            "Value",
            &procs,
            Route::by(|&(i, _): &(u64, u64), n| i as usize % n),
            |(i, jitter_us): (u64, u64), _ctx| {
                jitter(jitter_us);
                value(i)
            },
        ) >> ops::merge_serde(
            "Gather",
            &main,
            Route::constant(0),
            move |acc: &mut Acc, v: u64, _ctx| {
                if !first {
                    acc.value += v;
                } else if !acc.any {
                    acc.value = v;
                }
                acc.any = true;
            },
            |acc, _ctx| acc.value,
        ),
    )
}

/// Gather and compare with the sequential answer (the sum, or input 0's value).
pub fn run(rt: &Runtime, cfg: &Config) -> Result<Report<u64>, ScheduleError> {
    let g = build(rt, cfg.inputs, cfg.first).map_err(crate::setup_error)?;
    let n = cfg.inputs.max(1) as u64;
    let t0 = Instant::now();
    let result = rt.schedule(&g, (n, cfg.jitter_us))?;
    let secs = t0.elapsed().as_secs_f64();
    let reference = if cfg.first {
        value(0)
    } else {
        (0..n).map(value).sum()
    };
    let mut extra = serde_json::Map::new();
    extra.insert("variant".into(), if cfg.first { "first" } else { "sum" }.into());
    extra.insert("inputs".into(), n.into());
    Ok(Report {
        program: "gather",
        matches_reference: result == reference,
        result,
        reference,
        threads: cfg.inputs,
        elapsed_ms: secs * 1e3,
        extra,
    })
}
