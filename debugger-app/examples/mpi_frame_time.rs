//! Frame time of the full debugger UI on an MPI job's message-passing graph, headless
//! (egui layout and tessellation, no GPU): a synthetic job of 8 ranks passing messages
//! round a ring, with an `MPI_Allreduce` every 50 calls, grown to each size given (in
//! calls), then drawn while 2,000 more events arrive per frame, in the default view (the
//! latest calls, labelled) and with the whole job in view.
//!
//! `cargo run --release -p racetrack --example mpi_frame_time [-- CALLS...]` (default
//! 10000 100000 300000). Prints one line per size and view; nothing is asserted.
//!
//! `... -- --events FILE`: the same over a real job's events instead, as `racetrack mpirun
//! --ctl` printed them (one JSON object a line; other lines are skipped), all ingested
//! first, then drawn with no more arriving.

use racetrack::gui::app::App;
use racetrack::model::Model;
use racetrack_protocol::{CallInfo, Collective, Event, Link, Peer, RecvEv, SendEv, Step, StepEv};
use std::time::Instant;

const RANKS: usize = 8;
const FRAMES: usize = 120;
const EVENTS_PER_FRAME: usize = 2000;

/// The synthetic job's event stream, call by call.
struct Job {
    /// Per rank: calls made, next event number.
    calls: [u64; RANKS],
    next: [u64; RANKS],
    /// Per rank: the send event its successor's next receive takes.
    sent: [Option<u64>; RANKS],
    collectives: u64,
}

fn step(rank: usize, id: u64, op: &str, call: &CallInfo, start: bool) -> Event {
    let ev = StepEv {
        event_id: id,
        thread: format!("rank[{rank}]").into(),
        op: op.into(),
        msg: "m".into(),
        instance: "m".into(),
        step: Step::Run,
        traced: false,
        held: false,
        reason: None,
        call: Some(Box::new(call.clone())),
    };
    if start {
        Event::Start(ev)
    } else {
        Event::Stop(ev)
    }
}

impl Job {
    fn new() -> Self {
        Job {
            calls: [0; RANKS],
            next: std::array::from_fn(|r| r as u64 * 1_000_000_000_000),
            sent: [None; RANKS],
            collectives: 0,
        }
    }

    fn id(&mut self, r: usize) -> u64 {
        self.next[r] += 1;
        self.next[r]
    }

    /// Every rank's next `MPI_Allreduce`.
    fn allreduce(&mut self, out: &mut Vec<Event>) {
        let call = CallInfo {
            comm: Some("MPI_COMM_WORLD".into()),
            count: Some(1),
            site: Some("ring.c:40 (main)".into()),
            collective: Some(Collective {
                comm: "MPI_COMM_WORLD".into(),
                leader: 0,
                n: self.collectives,
            }),
            ..CallInfo::default()
        };
        for r in 0..RANKS {
            let (a, b) = (self.id(r), self.id(r));
            out.push(step(r, a, "MPI_Allreduce", &call, true));
            out.push(step(r, b, "MPI_Allreduce", &call, false));
        }
        self.collectives += 1;
    }

    /// One round: every rank makes its next call (an allreduce every 50th, else a send
    /// to its successor or a receive from its predecessor, alternately).
    fn round(&mut self, out: &mut Vec<Event>) {
        let world = || Some("MPI_COMM_WORLD".into());
        let site = |line: u32| Some(format!("ring.c:{line} (main)").into());
        let n = self.calls[0];
        if n % 50 == 49 {
            self.allreduce(out);
        } else if n % 2 == 0 {
            for r in 0..RANKS {
                let to = (r + 1) % RANKS;
                let call = CallInfo {
                    comm: world(),
                    peer: Some(Peer::Rank(to as i32)),
                    bytes: Some(64),
                    site: site(30),
                    ..CallInfo::default()
                };
                let (a, s, b) = (self.id(r), self.id(r), self.id(r));
                out.push(step(r, a, "MPI_Send", &call, true));
                out.push(Event::Send(SendEv {
                    event_id: s,
                    thread: Some(format!("rank[{r}]").into()),
                    op: Some("MPI_Send".into()),
                    msg: "m".into(),
                    to_op: None,
                    to_thread: Some(format!("rank[{to}]").into()),
                    type_name: "MPI_INT".into(),
                    traced: false,
                    held: false,
                    reason: None,
                    content: None,
                    call: Some(Box::new(call.clone())),
                }));
                out.push(step(r, b, "MPI_Send", &call, false));
                self.sent[to] = Some(s);
            }
        } else {
            for r in 0..RANKS {
                let from = (r + RANKS - 1) % RANKS;
                let call = CallInfo {
                    comm: world(),
                    peer: Some(Peer::Rank(from as i32)),
                    bytes: Some(64),
                    site: site(31),
                    ..CallInfo::default()
                };
                let (a, v, b) = (self.id(r), self.id(r), self.id(r));
                out.push(step(r, a, "MPI_Recv", &call, true));
                out.push(Event::Recv(RecvEv {
                    event_id: v,
                    thread: format!("rank[{r}]").into(),
                    op: "MPI_Recv".into(),
                    msg: "m".into(),
                    position: 0,
                    traced: false,
                    from: self.sent[r].take().map(|e| Link {
                        thread: format!("rank[{from}]").into(),
                        event_id: e,
                    }),
                    call: Some(Box::new(call.clone())),
                }));
                out.push(step(r, b, "MPI_Recv", &call, false));
            }
        }
        for c in &mut self.calls {
            *c += 1;
        }
    }
}

fn median(v: &mut [f64]) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

/// Frame times over a job of about `calls` calls, in the default view or (`whole`) with
/// every call in view.
fn frame_times(calls: usize, whole: bool) {
    let mut model = Model::new().with_unfolded().with_messages();
    model.ingest(&Event::Hello {
        program: "ring".into(),
        pid: 1,
        protocol: racetrack_protocol::PROTOCOL_VERSION,
    });
    let mut job = Job::new();
    let mut evs = Vec::new();
    while model.messages().map_or(0, |g| g.vertices().len()) < calls {
        evs.clear();
        job.round(&mut evs);
        evs.iter().for_each(|e| model.ingest(e));
    }
    let at_start = model.messages().map_or(0, |g| g.vertices().len());
    let mut app = App::offline(model);
    let ctx = egui::Context::default();
    let input = || egui::RawInput {
        screen_rect: Some(egui::Rect::from_min_size(
            egui::Pos2::ZERO,
            egui::vec2(1280.0, 800.0),
        )),
        ..Default::default()
    };
    let mut times = Vec::with_capacity(FRAMES);
    let mut batch = Vec::new();
    for frame in 0..FRAMES {
        if whole {
            app.mp.whole();
        }
        batch.clear();
        while batch.len() < EVENTS_PER_FRAME {
            job.round(&mut batch);
        }
        let t = Instant::now();
        for e in &batch {
            app.model.ingest(e);
        }
        let mut out = ctx.run_ui(input(), |ui| app.frame_ui(ui));
        out.textures_delta.clear();
        let prims = ctx.tessellate(out.shapes, out.pixels_per_point);
        std::hint::black_box(prims);
        if frame >= 5 {
            times.push(t.elapsed().as_secs_f64() * 1e3);
        }
    }
    let worst = times.iter().copied().fold(0.0, f64::max);
    let med = median(&mut times);
    let g = app.model.messages().map_or(0, |g| g.vertices().len());
    let (drawn, labelled) = app.mp.drawn();
    let view = if whole { "whole job" } else { "default view" };
    println!(
        "{at_start:>7} calls ({g} at the end), {view}: frame median {med:.1} ms, worst {worst:.1} ms; {drawn} boxes drawn, {labelled} labelled; {EVENTS_PER_FRAME} events/frame"
    );
}

/// Frame times over the events `racetrack mpirun --ctl` printed to `path`.
fn from_file(path: &str) {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{path}: {e}"));
    let mut model = Model::new().with_unfolded().with_messages();
    let t = Instant::now();
    let mut n = 0;
    for line in text.lines() {
        if let Ok(ev) = serde_json::from_str::<Event>(line) {
            model.ingest(&ev);
            n += 1;
        }
    }
    let ingest = t.elapsed().as_secs_f64();
    let calls = model.messages().map_or(0, |g| g.vertices().len());
    println!("{path}: {n} events ingested in {ingest:.2} s, {calls} calls");
    for whole in [false, true] {
        let mut app = App::offline(std::mem::take(&mut model));
        let ctx = egui::Context::default();
        let input = || egui::RawInput {
            screen_rect: Some(egui::Rect::from_min_size(
                egui::Pos2::ZERO,
                egui::vec2(1280.0, 800.0),
            )),
            ..Default::default()
        };
        let mut times = Vec::with_capacity(FRAMES);
        for frame in 0..FRAMES {
            if whole {
                app.mp.whole();
            }
            let t = Instant::now();
            let mut out = ctx.run_ui(input(), |ui| app.frame_ui(ui));
            out.textures_delta.clear();
            std::hint::black_box(ctx.tessellate(out.shapes, out.pixels_per_point));
            if frame >= 5 {
                times.push(t.elapsed().as_secs_f64() * 1e3);
            }
        }
        let worst = times.iter().copied().fold(0.0, f64::max);
        let med = median(&mut times);
        let (drawn, labelled) = app.mp.drawn();
        let view = if whole { "whole job" } else { "default view" };
        println!("  {view}: frame median {med:.1} ms, worst {worst:.1} ms; {drawn} boxes drawn, {labelled} labelled");
        model = app.model;
    }
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if let Some(i) = args.iter().position(|a| a == "--events") {
        return from_file(args.get(i + 1).map_or("", String::as_str));
    }
    let sizes: Vec<usize> = std::env::args().skip(1).filter_map(|a| a.parse().ok()).collect();
    let sizes = if sizes.is_empty() {
        vec![10_000, 100_000, 300_000]
    } else {
        sizes
    };
    for calls in sizes {
        frame_times(calls, false);
        frame_times(calls, true);
    }
}
