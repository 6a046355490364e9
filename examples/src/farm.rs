//! `farm`: split a numeric workload into tasks, run them on `proc[0..n]` (round-robin),
//! sum the results on `main`.
//!
//! Flow graph: `Split` (main) → `Work` (leaf, proc, round-robin) → `Sum` (merge, main).

use crate::{busy_work, jitter, Lcg, Report};
use racetrack_agent::{ops, BuildError, FlowGraph, Route, Runtime, ScheduleError};
use serde::{Deserialize, Serialize};
use std::time::Instant;

/// The command line's `--help` text.
pub const USAGE: &str =
    "usage: farm [--threads N] [--tasks T] [--work-us US] [--iters K] [--jitter-us US] [--panic-at TASK] [--abort-at TASK] [--exit-at TASK]";

/// What to run.
#[derive(Debug, Clone)]
pub struct Config {
    /// Worker threads in `proc`.
    pub threads: usize,
    /// Tasks per schedule call.
    pub tasks: u64,
    /// Busy work per task, in microseconds.
    pub work_us: u64,
    /// Schedule calls.
    pub iters: u64,
    /// Random sleep (0..US) in each operation, to shake the timing.
    pub jitter_us: u64,
    /// Make the task with this index panic.
    pub panic_at: Option<u64>,
    /// Make the task with this index end the process: `abort()` (a fatal signal).
    pub abort_at: Option<u64>,
    /// Make the task with this index end the process: `exit(3)`.
    pub exit_at: Option<u64>,
}

impl Default for Config {
    fn default() -> Self {
        Self {
            threads: 4,
            tasks: 1000,
            work_us: 0,
            iters: 1,
            jitter_us: 0,
            panic_at: None,
            abort_at: None,
            exit_at: None,
        }
    }
}

/// The schedule's input.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Job {
    /// How many tasks.
    pub tasks: u64,
    /// Seed of the task values.
    pub seed: u64,
    /// Busy work per task.
    pub work_us: u64,
    /// Jitter per operation.
    pub jitter_us: u64,
    /// Make the task with this index panic (to show how failures are reported).
    #[serde(default)]
    pub panic_at: Option<u64>,
    /// Make the task with this index abort the process.
    #[serde(default)]
    pub abort_at: Option<u64>,
    /// Make the task with this index exit the process.
    #[serde(default)]
    pub exit_at: Option<u64>,
}

/// One task.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Task {
    pub index: u64,
    /// Its input value.
    pub value: u64,
    /// Busy work.
    pub work_us: u64,
    pub jitter_us: u64,
    /// Panic instead of computing.
    #[serde(default)]
    pub panic: bool,
    /// End the process instead of computing: `abort()`, or `exit(3)` (the ways a program
    /// dies that a debugger must survive; see `racetrack run`'s tests).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub die: Option<Death>,
}

/// How a task ends the process.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Death {
    Abort,
    Exit,
}

/// Per-worker state: how many tasks this thread ran.
#[derive(Debug, Default, Serialize, Deserialize)]
pub struct WorkerState {
    /// Tasks run by this thread.
    pub tasks_run: u64,
}

/// The per-task function.
pub fn f(x: u64) -> u64 {
    x.wrapping_mul(2_654_435_761) % 1_000_003
}

fn values(job: &Job) -> impl Iterator<Item = u64> {
    let mut rng = Lcg::new(job.seed);
    (0..job.tasks).map(move |_| rng.next_u64() % 1_000_000)
}

/// Build the farm's graph on `rt`.
pub fn build(rt: &Runtime, threads: usize) -> Result<FlowGraph<Job, u64>, BuildError> {
    let main = rt.collection::<()>("main", 1);
    let procs = rt.collection::<WorkerState>("proc", threads);
    rt.graph(
        ops::split("Split", &main, Route::constant(0), |job: Job, _ctx, out| {
            jitter(job.jitter_us);
            for (index, value) in values(&job).enumerate() {
                out.post(Task {
                    index: index as u64,
                    value,
                    work_us: job.work_us,
                    jitter_us: job.jitter_us,
                    panic: job.panic_at == Some(index as u64),
                    die: if job.abort_at == Some(index as u64) {
                        Some(Death::Abort)
                    } else if job.exit_at == Some(index as u64) {
                        Some(Death::Exit)
                    } else {
                        None
                    },
                });
            }
        }) >> ops::leaf("Work", &procs, Route::round_robin(), |t: Task, ctx| {
            jitter(t.jitter_us);
            assert!(!t.panic, "task {} failed on purpose (--panic-at)", t.index);
            match t.die {
                Some(Death::Abort) => {
                    eprintln!("task {} aborts the process on purpose (--abort-at)", t.index);
                    std::process::abort()
                }
                Some(Death::Exit) => {
                    eprintln!("task {} exits the process on purpose (--exit-at)", t.index);
                    std::process::exit(3)
                }
                None => {}
            }
            busy_work(t.work_us);
            ctx.state.tasks_run += 1;
            f(t.value)
        }) >> ops::merge(
            "Sum",
            &main,
            Route::constant(0),
            |acc: &mut u64, x: u64, _ctx| *acc = acc.wrapping_add(x),
            |acc, _ctx| acc,
        ),
    )
}

/// Run `cfg.iters` schedule calls and report the last result against the reference.
pub fn run(rt: &Runtime, cfg: &Config) -> Result<Report<u64>, ScheduleError> {
    let graph = build(rt, cfg.threads).map_err(crate::setup_error)?;
    let job = Job {
        tasks: cfg.tasks,
        seed: 42,
        work_us: cfg.work_us,
        jitter_us: cfg.jitter_us,
        panic_at: cfg.panic_at,
        abort_at: cfg.abort_at,
        exit_at: cfg.exit_at,
    };
    let t0 = Instant::now();
    let mut result = 0;
    for _ in 0..cfg.iters.max(1) {
        result = rt.schedule(&graph, job.clone())?;
    }
    let secs = t0.elapsed().as_secs_f64();
    let reference = values(&job).map(f).fold(0u64, u64::wrapping_add);
    let tasks = (cfg.tasks * cfg.iters.max(1)) as f64;
    let mut extra = serde_json::Map::new();
    extra.insert("tasks".into(), cfg.tasks.into());
    extra.insert("iters".into(), cfg.iters.max(1).into());
    extra.insert("work_us".into(), cfg.work_us.into());
    // Messages per task: the task and its result; per call: the input and the sum.
    extra.insert(
        "messages_per_s".into(),
        ((2.0 * tasks + 2.0 * cfg.iters.max(1) as f64) / secs)
            .round()
            .into(),
    );
    extra.insert("tasks_per_s".into(), (tasks / secs).round().into());
    Ok(Report {
        program: "farm",
        matches_reference: result == reference,
        result,
        reference,
        threads: cfg.threads,
        elapsed_ms: secs * 1e3,
        extra,
    })
}
