#![allow(missing_docs)] // criterion_group! generates undocumented functions
//! Criterion micro-benchmark of the debugger model's ingest (what the GUI and `ctl` do with
//! every event): a send / recv / start / stop cycle over 100 threads × 20 operations, into
//! the GUI's model (the unfolded graph), `ctl`'s (happens-before clocks) and the bare one.
//!
//! `cargo bench -p racetrack --bench ingest`

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use racetrack::model::Model;
use racetrack::synthetic;
use racetrack_protocol::Event;

fn events(n: u64) -> Vec<Event> {
    let mut v = vec![synthetic::structure(20, 100)];
    for i in 0..n {
        v.extend(synthetic::message(i, 20, 100, 4 * i));
    }
    v
}

fn bench(c: &mut Criterion) {
    let evs = events(25_000);
    let mut g = c.benchmark_group("model_ingest");
    g.throughput(Throughput::Elements(evs.len() as u64));
    g.sample_size(20);
    type NewModel = fn() -> Model;
    let models: [(&str, NewModel); 3] = [
        ("100k events", || Model::new().with_unfolded()),
        ("100k events, ctl (clocks)", || Model::new().with_clocks()),
        ("100k events, bare", Model::new),
    ];
    for (name, model) in models {
        g.bench_function(name, |b| {
            b.iter(|| {
                let mut m = model();
                for e in &evs {
                    m.ingest(e);
                }
                m.control.event_count
            })
        });
    }
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
