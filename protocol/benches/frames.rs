#![allow(missing_docs)] // criterion_group! generates undocumented functions
//! Criterion micro-benchmarks of what a debugger does with every streamed event: reading
//! 1,024 farm-like events (send, recv, start, stop over four workers) from a binary packed
//! frame, and from the `batch` frame of full events a text client gets instead, and
//! printing them as `racetrack ctl` does; and of what the agent does: writing that binary
//! frame.
//!
//! `cargo bench -p racetrack-protocol --bench frames`

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use racetrack_protocol::{
    BinaryWriter, CollectionDesc, Decoded, Decoder, Event, Kind, MsgPath, OperationDesc, PackedEv, Record,
    RecordText,
};
use std::hint::black_box;

const TASKS: u64 = 256;

fn structure() -> Event {
    let procs: Vec<String> = (0..4).map(|i| format!("proc[{i}]")).collect();
    let op = |name: &str, kind: &str, coll: &str, threads: &[String]| OperationDesc {
        name: name.into(),
        kind: kind.into(),
        collection: coll.into(),
        threads: threads.to_vec(),
    };
    let main = vec!["main[0]".to_owned()];
    Event::Structure {
        operations: vec![
            op("Split", "split", "main", &main),
            op("Work", "leaf", "proc", &procs),
            op("Sum", "merge", "main", &main),
        ],
        collections: vec![
            CollectionDesc {
                name: "main".into(),
                threads: main.clone(),
            },
            CollectionDesc {
                name: "proc".into(),
                threads: procs,
            },
        ],
        edges: vec![],
    }
}

/// One event's fields: kind, id, thread, operation, message id, a, b, text.
type Fields = (Kind, u64, i64, i64, [u64; 2], i64, i64, &'static str);

/// 1,024 farm-like events: each task's send, recv, start and stop.
fn events() -> Vec<Fields> {
    let mut out = Vec::new();
    let mut id = 1_000_000;
    for t in 0..TASKS {
        let msg = [7, 100_000 + t];
        let worker = 1 + (t % 4) as i64;
        for (kind, thread, op, a, b, txt) in [
            (Kind::Send, 0, 0, 1, worker, "u64"),
            (Kind::Recv, worker, 1, 3, 0, ""),
            (Kind::Start, worker, 1, 0, 0, ""),
            (Kind::Stop, worker, 1, 0, 0, ""),
        ] {
            out.push((kind, id, thread, op, msg, a, b, txt));
            id += 1;
        }
    }
    out
}

/// `evs` as the agent writes them.
fn write_binary(evs: &[Fields]) -> Vec<u8> {
    let mut w = BinaryWriter::with_capacity(16 * 1024);
    for &(kind, event_id, thread, op, ref msg, a, b, txt) in evs {
        w.push(&Record {
            kind,
            event_id,
            thread,
            op,
            msg: MsgPath::from_slice(msg),
            a,
            b,
            traced: false,
            text: if kind == Kind::Send {
                RecordText::Type(racetrack_protocol::SmolStr::new_static(txt))
            } else {
                RecordText::None
            },
            ..Record::default()
        });
    }
    w.finish()
}

/// The same 1,024 events as a binary frame and as a text client's `batch` frame.
fn frames(evs: &[Fields]) -> (Vec<u8>, String) {
    let names = racetrack_protocol::Names::of(&structure()).expect("names");
    let events = evs
        .iter()
        .map(|&(kind, id, thread, op, msg, a, b, txt)| {
            let msg_text = format!("{}.{}", msg[0], msg[1]);
            PackedEv::from((
                kind,
                id,
                thread,
                op,
                msg_text.as_str().into(),
                a,
                b,
                false,
                txt.into(),
            ))
        })
        .map(|p| names.expand(p).expect("named"))
        .collect();
    (write_binary(evs), Event::Batch { events }.to_json())
}

fn bench(c: &mut Criterion) {
    let evs = events();
    let (binary, text) = frames(&evs);
    let mut decoder = Decoder::default();
    decoder.observe(&structure());
    let events = match decoder.decode_binary(&binary).expect("decodes") {
        Decoded::Packed(names, ps) => (names, ps),
        Decoded::Events(_) => unreachable!("a packed frame"),
    };
    let mut g = c.benchmark_group("frame of 1,024 events");
    g.throughput(Throughput::Elements(4 * TASKS));
    g.bench_function("read binary", |b| {
        b.iter(|| black_box(decoder.decode_binary(black_box(&binary)).expect("decodes")))
    });
    g.bench_function("read JSON text", |b| {
        b.iter(|| black_box(decoder.decode_frame(black_box(&text)).expect("decodes")))
    });
    g.bench_function("write binary (the agent)", |b| {
        b.iter(|| black_box(write_binary(black_box(&evs))))
    });
    let mut out = Vec::with_capacity(256 * 1024);
    g.bench_function("print as ctl does", |b| {
        b.iter(|| {
            out.clear();
            for p in &events.1 {
                p.append_json(&events.0, &mut out);
                out.push(b'\n');
            }
            black_box(out.len())
        })
    });
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
