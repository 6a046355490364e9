//! `nested`: every task is refined by a schedule call of its own, made from inside its
//! step (a nested schedule), then summed.
//!
//! Flow graph: `Split` (main) → `Work` (leaf, proc, round-robin; each step schedules
//! `Refine`) → `Sum` (merge, main). `Refine` is a leaf on `helper`, a collection of its
//! own. `--on-workers` runs it on `proc` instead: a `Work` step waits for a `Refine` that
//! is queued behind a `Work` step on a thread that runs one step at a time, and the
//! program hangs. Under the debugger, that deadlock is told (`{"event":"deadlock",…}`).

use crate::{f_refine, Lcg, Report};
use racetrack_agent::{ops, BuildError, FlowGraph, Route, Runtime, RuntimeHandle, ScheduleError};
use std::sync::Arc;
use std::time::Instant;

/// The command line's `--help` text.
pub const USAGE: &str = "usage: nested [--threads N] [--tasks T] [--on-workers]";

/// What to run.
#[derive(Debug, Clone)]
pub struct Config {
    /// Worker threads in `proc`.
    pub threads: usize,
    /// Tasks per schedule call.
    pub tasks: u64,
    /// Run `Refine` on the workers themselves (the deadlock).
    pub on_workers: bool,
}

impl Default for Config {
    fn default() -> Self {
        Self {
            threads: 2,
            tasks: 8,
            on_workers: false,
        }
    }
}

fn values(tasks: u64) -> impl Iterator<Item = u64> {
    let mut rng = Lcg::new(7);
    (0..tasks).map(move |_| rng.next_u64() % 1_000_000)
}

/// Build the graphs on `rt`: the refinement, and the farm whose steps schedule it.
pub fn build(rt: &Runtime, cfg: &Config) -> Result<FlowGraph<u64, u64>, BuildError> {
    let main = rt.collection::<()>("main", 1);
    let procs = rt.collection::<()>("proc", cfg.threads);
    let refine_on = if cfg.on_workers {
        procs.clone()
    } else {
        rt.collection::<()>("helper", 1)
    };
    let refine: Arc<FlowGraph<u64, u64>> = Arc::new(rt.graph(ops::leaf(
        "Refine",
        &refine_on,
        Route::round_robin(),
        |x: u64, _ctx| f_refine(x),
    ))?);
    let handle: RuntimeHandle = rt.handle();
    rt.graph(
        ops::split("Split", &main, Route::constant(0), |tasks: u64, _ctx, out| {
            values(tasks).for_each(|v| out.post(v));
        }) >> ops::leaf("Work", &procs, Route::round_robin(), move |x: u64, _ctx| {
            // The step waits here for its own schedule call.
            handle.schedule(&refine, x).unwrap_or(0) + 1
        }) >> ops::merge(
            "Sum",
            &main,
            Route::constant(0),
            |acc: &mut u64, x: u64, _ctx| *acc = acc.wrapping_add(x),
            |acc, _ctx| acc,
        ),
    )
}

/// Run one schedule call and report its result against the reference.
pub fn run(rt: &Runtime, cfg: &Config) -> Result<Report<u64>, ScheduleError> {
    let graph = build(rt, cfg).map_err(crate::setup_error)?;
    let t0 = Instant::now();
    let result = rt.schedule(&graph, cfg.tasks)?;
    let reference = values(cfg.tasks)
        .map(|v| f_refine(v) + 1)
        .fold(0u64, u64::wrapping_add);
    let mut extra = serde_json::Map::new();
    extra.insert("tasks".into(), cfg.tasks.into());
    extra.insert("on_workers".into(), cfg.on_workers.into());
    Ok(Report {
        program: "nested",
        matches_reference: result == reference,
        result,
        reference,
        threads: cfg.threads,
        elapsed_ms: t0.elapsed().as_secs_f64() * 1e3,
        extra,
    })
}
