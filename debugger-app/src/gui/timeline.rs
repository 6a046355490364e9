//! The post-mortem view (`racetrack open TRACE`): a trace file's events in the usual
//! window, without the program, and a time slider. Moving it rebuilds the model from the
//! trace's first event up to the chosen one (the model takes millions of events a
//! second), so every panel shows the program as it was then.

use super::app::App;
use super::canvas::Canvas;
use super::graph::GraphSync;
use crate::model::Model;
use racetrack_protocol::trace::TraceEvent;

/// A trace being viewed: its events and how many of them the model holds.
pub struct Timeline {
    /// Where the trace came from (shown in the bar).
    pub source: String,
    events: Vec<TraceEvent>,
    /// Events ingested: the model shows the program after `events[..at]`.
    at: usize,
}

impl Timeline {
    /// Events in the trace.
    pub fn len(&self) -> usize {
        self.events.len()
    }

    /// Whether the trace holds no event.
    pub fn is_empty(&self) -> bool {
        self.events.is_empty()
    }

    /// Events the view shows (the slider's position).
    pub fn at(&self) -> usize {
        self.at
    }

    /// The time of the last event shown, in nanoseconds since the trace began.
    pub fn time_ns(&self) -> u64 {
        self.at
            .checked_sub(1)
            .and_then(|i| self.events.get(i))
            .map_or(0, |e| e.time_ns)
    }

    /// The trace's last event's time.
    pub fn end_ns(&self) -> u64 {
        self.events.last().map_or(0, |e| e.time_ns)
    }

    /// How many events happened at or before `ns`.
    fn events_until(&self, ns: u64) -> usize {
        self.events.partition_point(|e| e.time_ns <= ns)
    }
}

impl App {
    /// A window on a trace's `events` (read from `source`), showing all of them.
    pub fn post_mortem(source: String, events: Vec<TraceEvent>) -> Self {
        let mut app = App::offline(Model::new().with_unfolded());
        let at = events.len();
        app.timeline = Some(Timeline {
            source,
            events,
            at: 0,
        });
        app.seek(at);
        app
    }

    /// Show the program after the trace's first `at` events (clamped to the trace).
    pub fn seek(&mut self, at: usize) {
        let Some(t) = &mut self.timeline else { return };
        let at = at.min(t.events.len());
        if at < t.at {
            // Back in time: from the start again.
            self.model = Model::new().with_unfolded();
            self.graph = GraphSync::default();
            self.canvas = Canvas::default();
            self.ui.fit = true;
            t.at = 0;
        }
        for e in &t.events[t.at..at] {
            self.model.ingest(&e.event);
        }
        t.at = at;
    }

    /// Show the program as it was `ms` milliseconds into the trace.
    pub fn seek_ms(&mut self, ms: f64) {
        if let Some(t) = &self.timeline {
            let k = t.events_until((ms * 1e6) as u64);
            self.seek(k);
        }
    }

    /// The bar above the graph: where in the trace the view is, and the slider.
    pub(crate) fn timeline_ui(&mut self, ui: &mut egui::Ui) {
        let Some(t) = &self.timeline else { return };
        let (at, len, end_ns) = (t.at(), t.len(), t.end_ns());
        let mut seek = None;
        ui.horizontal(|ui| {
            ui.label(format!("trace {}", t.source));
            ui.separator();
            if ui.button("Start").clicked() {
                seek = Some(0);
            }
            if ui.add_enabled(at > 0, egui::Button::new("◀ Event")).clicked() {
                seek = Some(at.saturating_sub(1));
            }
            if ui.add_enabled(at < len, egui::Button::new("Event ▶")).clicked() {
                seek = Some(at + 1);
            }
            if ui.button("End").clicked() {
                seek = Some(len);
            }
            ui.separator();
            // The slider moves in time; the view shows every event up to that time.
            let mut ms = t.time_ns() as f64 / 1e6;
            let slider = egui::Slider::new(&mut ms, 0.0..=end_ns as f64 / 1e6)
                .suffix(" ms")
                .text("time");
            if ui.add(slider).changed() {
                seek = Some(t.events_until((ms * 1e6) as u64));
            }
            ui.label(format!("event {at} of {len}"));
        });
        if let Some(k) = seek {
            self.seek(k);
        }
    }
}
