#![allow(missing_docs)] // criterion_group! generates undocumented functions
//! Criterion micro-benchmarks of the hook fast path: one schedule call of a small farm
//! (64 tasks, trivial leaves; 8 events per task) with no agent, with the agent listening
//! but no debugger (the fast path: one atomic load per event), and with a debugger attached
//! that reads and discards (every event recorded and streamed).
//!
//! `cargo bench -p racetrack-agent --bench hook`

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use racetrack_agent::{ops, FlowGraph, Route, Runtime};
use std::sync::Arc;

fn farm(rt: &Runtime) -> FlowGraph<u64, u64> {
    let main = rt.collection::<()>("main", 1);
    let procs = rt.collection::<()>("proc", 2);
    rt.graph(
        ops::split("Split", &main, Route::constant(0), |n: u64, _c, out| {
            (0..n).for_each(|i| out.post(i))
        }) >> ops::leaf("Work", &procs, Route::round_robin(), |x: u64, _c| {
            x.wrapping_mul(31)
        }) >> ops::merge(
            "Sum",
            &main,
            Route::constant(0),
            |a: &mut u64, x: u64, _c| *a += x,
            |a, _c| a,
        ),
    )
    .expect("graph")
}

/// A debugger that only reads: connects, continues nothing (no holds), discards frames.
fn attach_reader(url: String) {
    std::thread::spawn(move || {
        let Ok((mut ws, _)) = tokio_tungstenite::tungstenite::connect(url.as_str()) else {
            return;
        };
        while ws.read().is_ok() {}
    });
}

fn bench(c: &mut Criterion) {
    const TASKS: u64 = 64;
    let mut g = c.benchmark_group("schedule_farm_64_tasks");
    g.throughput(Throughput::Elements(TASKS * 8));

    let rt = Runtime::builder().build();
    let graph = farm(&rt);
    g.bench_function("no agent", |b| {
        b.iter(|| rt.schedule(&graph, TASKS).expect("runs"))
    });
    drop(graph);
    drop(rt);

    let agent = racetrack_agent::agent::start("127.0.0.1:0", false, None).expect("agent");
    let rt = Runtime::builder().hook(agent.clone()).build();
    let graph = farm(&rt);
    g.bench_function("listening, no debugger", |b| {
        b.iter(|| rt.schedule(&graph, TASKS).expect("runs"))
    });

    attach_reader(agent.local_url());
    // Let the reader attach before measuring.
    while !agent.is_attached() {
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
    g.bench_function("debugger attached (record + stream)", |b| {
        b.iter(|| rt.schedule(&graph, TASKS).expect("runs"))
    });
    g.finish();
    drop(graph);
    drop(rt);
    let _: Arc<_> = agent;
}

criterion_group!(benches, bench);
criterion_main!(benches);
