//! `racetrack-bench model-sink`: the GUI's connection and model ingest without drawing.

use crate::run::Tally;
use racetrack::conn::{ConnEvent, Connection};
use racetrack::model::Model;
use racetrack_protocol::{Command, Event};
use std::time::{Duration, Instant};

/// `racetrack-bench model-sink URL [--rate N]`: the GUI's connection and model ingest without
/// drawing (benchmark configuration 4); `--rate` takes at most N events a second (a
/// debugger that lags behind; 0, the default: no limit). Continues the start hold, ingests
/// everything, prints `{"events":N,"contiguous":bool,"first":ID,"last":ID,"from":ID}` when
/// the program ends.
pub(crate) fn model_sink(args: &[String]) -> i32 {
    let Some(url) = args.first() else {
        eprintln!("model-sink needs a URL");
        return 2;
    };
    let rate: u64 = match args.get(1..) {
        None | Some([]) => 0,
        Some([flag, n]) if flag == "--rate" => match n.parse() {
            Ok(n) => n,
            Err(_) => {
                eprintln!("model-sink: --rate needs a number of events per second, not `{n}`");
                return 2;
            }
        },
        Some(other) => {
            eprintln!("model-sink: unexpected arguments {other:?} (usage: model-sink URL [--rate N])");
            return 2;
        }
    };
    let conn = match Connection::connect(url, Duration::from_secs(10)) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("{e}");
            return 2;
        }
    };
    let (tx, rx) = conn.split();
    let mut model = Model::default();
    let mut tally = Tally::default();
    let mut continued = false;
    // The pace: events taken since `since`, at most `rate` a second.
    let (mut since, mut taken) = (None::<Instant>, 0u64);
    while let Ok(first) = rx.recv() {
        let mut batch = vec![first];
        batch.extend(rx.try_iter().take(63));
        let mut closed = false;
        for ce in batch {
            if rate > 0 {
                let t0 = *since.get_or_insert_with(Instant::now);
                let due = t0 + Duration::from_secs_f64(taken as f64 / rate as f64);
                let now = Instant::now();
                if let Some(wait) = due.checked_duration_since(now) {
                    std::thread::sleep(wait);
                } else if now - due > Duration::from_millis(10) {
                    // Behind the pace (nothing arrived for a while): start counting again,
                    // so that no credit piles up for a burst faster than `rate`.
                    (since, taken) = (Some(now), 0);
                }
                taken += match &ce {
                    ConnEvent::Packed(_, ps) => ps.len() as u64,
                    ConnEvent::Event(_) => 1,
                    ConnEvent::Closed(_) => 0,
                };
            }
            match ce {
                ConnEvent::Event(ev) => {
                    if let Some(id) = ev.event_id() {
                        tally.add(id);
                    }
                    model.ingest(&ev);
                    if !continued && !model.held.is_empty() {
                        tx.send(Command::Continue {
                            thread: None,
                            event_id: None,
                            trace: None,
                        });
                        continued = true;
                    }
                    if let Event::Snapshot { next_event_id, .. } = &ev {
                        tally.from = tally.from.or(Some(*next_event_id));
                    }
                    if let Event::Snapshot { held, .. } = &ev {
                        if !held.is_empty() && !continued {
                            tx.send(Command::Continue {
                                thread: None,
                                event_id: None,
                                trace: None,
                            });
                            continued = true;
                        }
                    }
                }
                ConnEvent::Packed(names, ps) => {
                    for p in &ps {
                        tally.add(p.1);
                        model.ingest_packed(&names, p);
                    }
                }
                ConnEvent::Closed(_) => closed = true,
            }
        }
        if closed {
            break;
        }
    }
    println!(
        "{{\"events\":{},\"contiguous\":{},\"first\":{},\"last\":{},\"from\":{}}}",
        tally.n,
        tally.lossless(None),
        tally.min,
        tally.max,
        tally.from.map_or("null".to_owned(), |f| f.to_string())
    );
    0
}
