//! Frame time of the full debugger UI, headless (egui layout + tessellation, no GPU), over
//! synthetic unfolded graphs while events keep arriving; and the model's ingest rate.
//!
//! `cargo run --release -p racetrack --example gui_frame_time [-- NODES...]`
//! (default 1000 2000 5000 10000 nodes). Prints one line per size; nothing is asserted.

use racetrack::gui::app::App;
use racetrack::model::Model;
use racetrack::synthetic;
use racetrack_protocol::Event;
use std::time::Instant;

const OPS: usize = 20;
const FRAMES: usize = 120;
const EVENTS_PER_FRAME: usize = 2000;

fn structure(threads: usize) -> Event {
    synthetic::structure(OPS, threads)
}

/// The four events of message number `n` (deterministic over `threads` threads).
fn events(n: u64, threads: usize, id: &mut u64) -> [Event; 4] {
    let evs = synthetic::message(n, OPS, threads, *id + 1);
    *id += 4;
    evs
}

fn median(v: &mut [f64]) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

/// The model's ingest rate alone, over 250,000 messages on 100 threads.
fn ingest_rate() {
    let mut m = Model::new().with_unfolded();
    m.ingest(&structure(100));
    let mut id = 0;
    let evs: Vec<Event> = (0..250_000u64).flat_map(|n| events(n, 100, &mut id)).collect();
    let t0 = Instant::now();
    for e in &evs {
        m.ingest(e);
    }
    let dt = t0.elapsed().as_secs_f64();
    println!(
        "model ingest: {} events in {:.3} s = {:.0} events/s",
        evs.len(),
        dt,
        evs.len() as f64 / dt
    );
}

/// A model whose every (op, thread) node of `threads` threads has run once; the next
/// message number and event id.
fn unfolded(threads: usize) -> (Model, u64, u64) {
    let mut model = Model::new().with_unfolded();
    model.ingest(&Event::Hello {
        program: "synthetic".into(),
        pid: 1,
        protocol: racetrack_protocol::PROTOCOL_VERSION,
    });
    model.ingest(&structure(threads));
    let (mut id, mut n) = (0, 0u64);
    while model.nodes().len() < OPS * threads {
        for e in events(n, threads, &mut id) {
            model.ingest(&e);
        }
        n += 1;
    }
    (model, n, id)
}

/// Frame times over a graph of about `nodes` nodes while events keep arriving.
fn frame_times(nodes: usize) {
    let threads = nodes.div_ceil(OPS);
    let (model, mut n, mut id) = unfolded(threads);
    let mut app = App::offline(model);
    if let Some(key) = app.model.node_key("Op3", "proc[1]") {
        let node = app.model.unfolded().and_then(|u| u.find(key));
        node.into_iter().for_each(|id| app.select_node(id));
    }
    let ctx = egui::Context::default();
    let input = || egui::RawInput {
        screen_rect: Some(egui::Rect::from_min_size(
            egui::Pos2::ZERO,
            egui::vec2(1280.0, 800.0),
        )),
        ..Default::default()
    };
    let mut times = Vec::with_capacity(FRAMES);
    let mut ingest_total = 0.0;
    for frame in 0..FRAMES {
        // Events keep arriving: a batch per frame, decoded beforehand (as the app's
        // connection thread does), ingested as the app does.
        let mut batch = Vec::with_capacity(EVENTS_PER_FRAME);
        for _ in 0..EVENTS_PER_FRAME / 4 {
            batch.extend(events(n, threads, &mut id));
            n += 1;
        }
        let t = Instant::now();
        for e in &batch {
            app.model.ingest(e);
        }
        let ti = t.elapsed().as_secs_f64();
        let mut out = ctx.run_ui(input(), |ui| app.frame_ui(ui));
        // No GPU to upload the font atlas to (debug builds assert deltas are handled).
        out.textures_delta.clear();
        let prims = ctx.tessellate(out.shapes, out.pixels_per_point);
        std::hint::black_box(prims);
        if frame >= 5 {
            times.push(t.elapsed().as_secs_f64() * 1e3);
            ingest_total += ti;
        }
    }
    let worst = times.iter().copied().fold(0.0, f64::max);
    let med = median(&mut times);
    println!(
        "{nodes:>6} nodes ({} drawn): frame median {med:.1} ms, worst {worst:.1} ms, with {EVENTS_PER_FRAME} events/frame ({:.0} events/s at the median frame rate; ingest {:.1} ms/frame)",
        app.model.nodes().len(),
        EVENTS_PER_FRAME as f64 / (med / 1e3),
        ingest_total * 1e3 / (FRAMES - 5) as f64
    );
}

fn main() {
    let sizes: Vec<usize> = std::env::args().skip(1).filter_map(|a| a.parse().ok()).collect();
    let sizes = if sizes.is_empty() {
        vec![1000, 2000, 5000, 10000]
    } else {
        sizes
    };
    ingest_rate();
    for nodes in sizes {
        frame_times(nodes);
    }
}
