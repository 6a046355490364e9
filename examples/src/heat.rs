//! `heat`: 1-D heat diffusion with neighbourhood exchange — the reference race
//! (`docs/GUIDE.md`, "Concepts").
//!
//! The domain is split over `proc[0..n]`, one slice each, kept in the thread state. One
//! schedule call per iteration:
//!
//! `Split` (main) → `BorderReq` (split on proc[i]: one request to each neighbour, or to
//! itself at the domain's edge) → `SendBorder` (leaf on the neighbour: answers with its
//! current border cell) → `Collect` (merge on proc[i]) → `Update` (leaf on proc[i]: new
//! values into the state) → `Merge` (main: gathers the slices).
//!
//! Nothing orders a neighbour's `SendBorder` before or after that neighbour's own
//! `Update`. In the racy default, `SendBorder` reads the current cells, so a request served
//! after the neighbour's `Update` gets an already-updated border and the result differs
//! from the sequential reference. `--fixed` keeps the border as it was before the latest
//! update (double buffering) and answers with it when the request is for an iteration
//! already updated: correct in every order.
//!
//! A separate graph (`Scatter` → `Load` → `Loaded`) loads the initial slices first.

use crate::{jitter, Report};
use racetrack_agent::{ops, BuildError, Collection, Ctx, FlowGraph, Outputs, Route, Runtime, ScheduleError};
use serde::{Deserialize, Serialize};
use std::time::Instant;

/// The command line's `--help` text.
pub const USAGE: &str =
    "usage: heat [--threads N] [--iters K] [--cells C] [--fixed] [--local-us US] [--jitter-us US]";

/// Diffusion coefficient.
pub const ALPHA: f64 = 0.25;
/// Fixed temperature outside the domain.
pub const BOUNDARY: f64 = 0.0;

/// What to run.
#[derive(Debug, Clone)]
pub struct Config {
    /// Worker threads in `proc` (each owns one slice).
    pub threads: usize,
    /// Iterations (one schedule call each).
    pub iters: u64,
    /// Cells in the domain (at least one per thread).
    pub cells: usize,
    /// Double-buffered borders (the fixed variant).
    pub fixed: bool,
    /// Random sleep (0..US) in each operation.
    pub jitter_us: u64,
    /// Local computation of each slice before it requests its borders (a sleep, µs).
    pub local_us: u64,
}

impl Default for Config {
    fn default() -> Self {
        Self {
            threads: 4,
            iters: 10,
            cells: 64,
            fixed: false,
            jitter_us: 0,
            local_us: 300,
        }
    }
}

/// Which neighbour a request goes to, seen from the requester.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum Side {
    /// The requester's left neighbour (answers with its last cell).
    Left,
    /// The requester's right neighbour (answers with its first cell).
    Right,
}

/// Main's iteration message to `proc[index]`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Step {
    /// Iteration number.
    pub iter: u64,
    /// Slice index (= thread index).
    pub index: usize,
    /// Jitter per operation.
    pub jitter_us: u64,
    /// Local computation before the border exchange.
    pub local_us: u64,
}

/// A border request from `from` to `to`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct BorderRequest {
    /// The iteration whose border is asked for.
    pub iter: u64,
    /// Requesting slice.
    pub from: usize,
    /// Slice asked (the requester itself at the domain's edge).
    pub to: usize,
    /// Which side of the requester.
    pub side: Side,
    /// The request is for the fixed boundary outside the domain.
    pub boundary: bool,
    pub jitter_us: u64,
}

/// A border answer, routed back to the requester `to`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Border {
    /// The iteration the border belongs to.
    pub iter: u64,
    /// The requester.
    pub to: usize,
    /// Which side of the requester.
    pub side: Side,
    /// The border cell's value.
    pub value: f64,
}

/// Both borders of a slice, collected.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct Borders {
    /// The iteration the border belongs to.
    pub iter: u64,
    /// The slice whose borders these are.
    pub index: usize,
    /// Left border value.
    pub left: f64,
    /// Right border value.
    pub right: f64,
}

/// A slice's cells, for loading and gathering.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Slice {
    /// Slice index.
    pub index: usize,
    pub cells: Vec<f64>,
}

/// Thread state of `proc[i]`: its slice.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct HeatState {
    /// Current cells of the slice.
    pub cells: Vec<f64>,
    /// Fixed variant: the iteration most recently applied by `Update`.
    pub updated_iter: Option<u64>,
    /// Fixed variant: the border cells as they were before that update.
    pub prev_first: f64,
    /// Fixed variant: see `prev_first`.
    pub prev_last: f64,
    /// Whether this thread runs the fixed variant.
    pub fixed: bool,
}

/// The initial domain: an uneven temperature everywhere (so that every update changes the
/// slice borders, and a border read at the wrong time shows in the result).
pub fn initial(cells: usize) -> Vec<f64> {
    (0..cells)
        .map(|i| ((i * 7) % 13) as f64 * 10.0 + if i % 16 == 5 { 100.0 } else { 0.0 })
        .collect()
}

/// One diffusion step of the whole domain, sequentially (the reference).
pub fn step_sequential(c: &[f64]) -> Vec<f64> {
    (0..c.len())
        .map(|i| {
            let l = if i == 0 { BOUNDARY } else { c[i - 1] };
            let r = if i + 1 == c.len() { BOUNDARY } else { c[i + 1] };
            update_cell(c[i], l, r)
        })
        .collect()
}

fn update_cell(c: f64, l: f64, r: f64) -> f64 {
    c + ALPHA * (l + r - 2.0 * c)
}

fn bounds(index: usize, n: usize, cells: usize) -> (usize, usize) {
    (index * cells / n, (index + 1) * cells / n)
}

/// One iteration's graph: (iteration, jitter µs, local µs) in, the whole domain out.
type Iteration = FlowGraph<(u64, u64, u64), Vec<f64>>;

/// The two graphs of the program.
pub struct Graphs {
    /// Loads the initial slices into the thread states.
    pub load: FlowGraph<Vec<f64>, usize>,
    /// One iteration; returns the whole domain.
    pub iterate: Iteration,
}

/// Build both graphs on `rt` with `threads` slices.
pub fn build(rt: &Runtime, threads: usize, fixed: bool) -> Result<Graphs, BuildError> {
    let main = rt.collection::<()>("main", 1);
    let procs = rt.collection::<HeatState>("proc", threads);
    let load = rt.graph(
        ops::split(
            "Scatter",
            &main,
            Route::constant(0),
            move |domain: Vec<f64>, _ctx, out| {
                for index in 0..threads {
                    let (lo, hi) = bounds(index, threads, domain.len());
                    out.post(Slice {
                        index,
                        cells: domain[lo..hi].to_vec(),
                    });
                }
            },
        ) >> ops::leaf(
            "Load",
            &procs,
            Route::by(|s: &Slice, n| s.index % n),
            move |s: Slice, ctx| {
                *ctx.state = HeatState {
                    cells: s.cells,
                    fixed,
                    ..HeatState::default()
                };
                s.index
            },
        ) >> ops::merge(
            "Loaded",
            &main,
            Route::constant(0),
            |n: &mut usize, _i: usize, _ctx| *n += 1,
            |n, _ctx| n,
        ),
    )?;
    let iterate = iterate_graph(rt, &main, &procs, threads)?;
    Ok(Graphs { load, iterate })
}

/// One iteration: split the step over the slices, exchange borders, update, merge.
fn iterate_graph(
    rt: &Runtime,
    main: &Collection<()>,
    procs: &Collection<HeatState>,
    threads: usize,
) -> Result<Iteration, BuildError> {
    rt.graph(
        ops::split(
            "Split",
            main,
            Route::constant(0),
            move |(iter, jitter_us, local_us): (u64, u64, u64), _ctx, out| {
                for index in 0..threads {
                    out.post(Step {
                        iter,
                        index,
                        jitter_us,
                        local_us,
                    });
                }
            },
        ) >> ops::split(
            "BorderReq",
            procs,
            Route::by(|s: &Step, n| s.index % n),
            border_requests,
        ) >> ops::leaf(
            "SendBorder",
            procs,
            Route::by(|r: &BorderRequest, n| r.to % n),
            send_border,
        ) >> ops::merge(
            "Collect",
            procs,
            Route::by(|b: &Border, n| b.to % n),
            |acc: &mut Borders, b: Border, ctx| {
                acc.iter = b.iter;
                acc.index = ctx.thread_index();
                match b.side {
                    Side::Left => acc.left = b.value,
                    Side::Right => acc.right = b.value,
                }
            },
            |acc, _ctx| acc,
        ) >> ops::leaf("Update", procs, Route::by(|b: &Borders, n| b.index % n), update)
            >> ops::merge(
                "Merge",
                main,
                Route::constant(0),
                |acc: &mut Vec<Slice>, s: Slice, _ctx| acc.push(s),
                |mut acc, _ctx| {
                    acc.sort_by_key(|s| s.index);
                    acc.into_iter().flat_map(|s| s.cells).collect()
                },
            ),
    )
}

/// `BorderReq` on `proc[i]`: after the slice's local work, ask each neighbour for its
/// border (a slice at the domain's edge asks itself, and gets the boundary value).
fn border_requests(s: Step, ctx: &mut Ctx<'_, HeatState>, out: &mut Outputs<'_, BorderRequest>) {
    jitter(s.jitter_us);
    // The slice's local work before it needs its neighbours' borders.
    std::thread::sleep(std::time::Duration::from_micros(s.local_us));
    let (i, n) = (s.index, ctx.threads());
    let req = |to: usize, side, boundary| BorderRequest {
        iter: s.iter,
        from: i,
        to,
        side,
        boundary,
        jitter_us: s.jitter_us,
    };
    out.post(if i > 0 {
        req(i - 1, Side::Left, false)
    } else {
        req(i, Side::Left, true)
    });
    out.post(if i + 1 < n {
        req(i + 1, Side::Right, false)
    } else {
        req(i, Side::Right, true)
    });
}

/// `SendBorder`: answer a neighbour's request with this slice's border cell — the current
/// one (racy: it may already be this iteration's), or the previous one once updated
/// (`fixed`, double buffering).
fn send_border(r: BorderRequest, ctx: &mut Ctx<'_, HeatState>) -> Border {
    jitter(r.jitter_us);
    let st = &*ctx.state;
    let value = if r.boundary {
        BOUNDARY
    } else {
        // The requester's left neighbour answers with its last cell, and vice versa.
        let already_updated = st.fixed && st.updated_iter == Some(r.iter);
        match (r.side, already_updated) {
            (Side::Left, false) => st.cells.last().copied().unwrap_or(BOUNDARY),
            (Side::Left, true) => st.prev_last,
            (Side::Right, false) => st.cells.first().copied().unwrap_or(BOUNDARY),
            (Side::Right, true) => st.prev_first,
        }
    };
    Border {
        iter: r.iter,
        to: r.from,
        side: r.side,
        value,
    }
}

/// `Update`: the slice's new values from its cells and both borders, into the state.
fn update(b: Borders, ctx: &mut Ctx<'_, HeatState>) -> Slice {
    let st = &mut *ctx.state;
    let c = &st.cells;
    let len = c.len();
    let new: Vec<f64> = (0..len)
        .map(|k| {
            let l = if k == 0 { b.left } else { c[k - 1] };
            let r = if k + 1 == len { b.right } else { c[k + 1] };
            update_cell(c[k], l, r)
        })
        .collect();
    st.prev_first = c.first().copied().unwrap_or(BOUNDARY);
    st.prev_last = c.last().copied().unwrap_or(BOUNDARY);
    st.updated_iter = Some(b.iter);
    st.cells = new;
    Slice {
        index: b.index,
        cells: st.cells.clone(),
    }
}

/// What `heat` reports.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Summary {
    /// Iterations run.
    pub iters: u64,
    /// Sum of all cells.
    pub sum: f64,
    /// A few cells around the first slice boundary.
    pub sample: Vec<f64>,
}

fn summary(iters: u64, v: &[f64], threads: usize) -> Summary {
    let b = bounds(1.min(threads - 1), threads, v.len()).0;
    let lo = b.saturating_sub(2);
    Summary {
        iters,
        sum: v.iter().sum(),
        sample: v[lo..(b + 2).min(v.len())].to_vec(),
    }
}

/// Run the iterations and compare with the sequential reference.
pub fn run(rt: &Runtime, cfg: &Config) -> Result<Report<Summary>, ScheduleError> {
    let err = crate::setup_error;
    if cfg.cells < cfg.threads {
        return Err(err(format!(
            "--cells {} must be at least --threads {}",
            cfg.cells, cfg.threads
        )));
    }
    let g = build(rt, cfg.threads, cfg.fixed).map_err(|e| err(e.to_string()))?;
    let init = initial(cfg.cells);
    let t0 = Instant::now();
    rt.schedule(&g.load, init.clone())?;
    let mut domain = init.clone();
    for iter in 0..cfg.iters {
        domain = rt.schedule(&g.iterate, (iter, cfg.jitter_us, cfg.local_us))?;
    }
    let secs = t0.elapsed().as_secs_f64();
    let mut reference = init;
    for _ in 0..cfg.iters {
        reference = step_sequential(&reference);
    }
    let matches = domain.len() == reference.len()
        && domain
            .iter()
            .zip(&reference)
            .all(|(a, b)| (a - b).abs() <= 1e-12 * b.abs().max(1.0));
    let mut extra = serde_json::Map::new();
    extra.insert("variant".into(), if cfg.fixed { "fixed" } else { "racy" }.into());
    extra.insert("cells".into(), cfg.cells.into());
    let max_diff = domain
        .iter()
        .zip(&reference)
        .map(|(a, b)| (a - b).abs())
        .fold(0.0, f64::max);
    extra.insert("max_abs_diff".into(), max_diff.into());
    Ok(Report {
        program: "heat",
        result: summary(cfg.iters, &domain, cfg.threads),
        reference: summary(cfg.iters, &reference, cfg.threads),
        matches_reference: matches,
        threads: cfg.threads,
        elapsed_ms: secs * 1e3,
        extra,
    })
}
