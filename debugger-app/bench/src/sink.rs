//! `racetrack-bench model-sink`: the GUI's connection and model ingest without drawing.

use crate::run::Tally;
use racetrack::conn::{CommandSender, ConnEvent, Connection};
use racetrack::model::Model;
use racetrack_protocol::{Command, Event};
use std::time::{Duration, Instant};

/// `racetrack-bench model-sink URL [--rate N]`: the GUI's connection and model ingest without
/// drawing (benchmark configuration 4); `--rate` takes at most N events a second (a
/// debugger that lags behind; 0, the default: no limit). Continues the start hold, ingests
/// everything, prints `{"events":N,"contiguous":bool,"first":ID,"last":ID,"from":ID}` when
/// the program ends.
pub(crate) fn model_sink(args: &[String]) -> i32 {
    let (url, rate) = match sink_args(args) {
        Ok(a) => a,
        Err(e) => {
            eprintln!("model-sink: {e}");
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
    let mut sink = Sink {
        model: Model::new().with_unfolded(),
        tally: Tally::default(),
        continued: false,
        tx,
    };
    let mut pace = Pace {
        rate,
        since: None,
        taken: 0,
    };
    'frames: while let Ok(first) = rx.recv() {
        let mut batch = vec![first];
        batch.extend(rx.try_iter().take(63));
        for ce in batch {
            pace.take(&ce);
            if !sink.take(ce) {
                break 'frames;
            }
        }
    }
    let tally = &sink.tally;
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

/// The GUI's model as the sink feeds it, the events counted, and the start hold's
/// Continue (sent once).
struct Sink {
    model: Model,
    tally: Tally,
    continued: bool,
    tx: CommandSender,
}

impl Sink {
    /// Ingest what arrived; false once the connection closed.
    fn take(&mut self, ce: ConnEvent) -> bool {
        match ce {
            ConnEvent::Events(evs) => {
                return evs.into_iter().all(|ev| self.take(ConnEvent::Event(ev)));
            }
            ConnEvent::Event(ev) => {
                if let Some(id) = ev.event_id() {
                    self.tally.add(id);
                }
                self.model.ingest(&ev);
                if let Event::Snapshot { next_event_id, .. } = &ev {
                    self.tally.from = self.tally.from.or(Some(*next_event_id));
                }
                let held_in_snapshot = matches!(&ev, Event::Snapshot { held, .. } if !held.is_empty());
                if !self.model.control.held.is_empty() || held_in_snapshot {
                    self.continue_once();
                }
            }
            ConnEvent::Packed(names, ps) => {
                for p in &ps {
                    self.tally.add(p.event_id);
                    self.model.ingest_packed(&names, p);
                }
            }
            ConnEvent::Closed(_) => return false,
        }
        true
    }

    /// Release the start hold, the first time something is held.
    fn continue_once(&mut self) {
        if !self.continued {
            self.tx.send(Command::Continue {
                thread: None,
                event_id: None,
                trace: None,
            });
            self.continued = true;
        }
    }
}

/// `URL [--rate N]`.
fn sink_args(args: &[String]) -> Result<(&str, u64), String> {
    let url = args.first().ok_or("needs a URL")?;
    let rate = match args.get(1..) {
        None | Some([]) => 0,
        Some([flag, n]) if flag == "--rate" => n
            .parse()
            .map_err(|_| format!("--rate needs a number of events per second, not `{n}`"))?,
        Some(other) => {
            return Err(format!(
                "unexpected arguments {other:?} (usage: model-sink URL [--rate N])"
            ))
        }
    };
    Ok((url, rate))
}

/// A lagging debugger's pace: events taken since `since`, at most `rate` a second (0: no
/// limit).
struct Pace {
    rate: u64,
    since: Option<Instant>,
    taken: u64,
}

impl Pace {
    /// Wait until `ce`'s events are due, then count them.
    fn take(&mut self, ce: &ConnEvent) {
        if self.rate == 0 {
            return;
        }
        let t0 = *self.since.get_or_insert_with(Instant::now);
        let due = t0 + Duration::from_secs_f64(self.taken as f64 / self.rate as f64);
        let now = Instant::now();
        if let Some(wait) = due.checked_duration_since(now) {
            std::thread::sleep(wait);
        } else if now - due > Duration::from_millis(10) {
            // Behind the pace (nothing arrived for a while): start counting again, so that
            // no credit piles up for a burst faster than `rate`.
            (self.since, self.taken) = (Some(now), 0);
        }
        self.taken += match ce {
            ConnEvent::Packed(_, ps) => ps.len() as u64,
            ConnEvent::Event(_) => 1,
            ConnEvent::Events(evs) => evs.len() as u64,
            ConnEvent::Closed(_) => 0,
        };
    }
}
