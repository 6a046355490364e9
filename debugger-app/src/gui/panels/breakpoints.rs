//! The left panel: operation breakpoints (one row per operation and thread where it may
//! run, with trace and its own Continue) and thread pauses.

use crate::gui::app::App;
use egui::{Color32, RichText};
use racetrack_protocol::{Command, Event};

impl App {
    pub(crate) fn held_start_of(&self, op: &str, thread: &str) -> Option<u64> {
        self.model.control.held.iter().find_map(|(id, h)| match &h.event {
            Event::Start(s) if s.op == op && s.thread == thread => Some(id.event_id),
            _ => None,
        })
    }

    /// One breakpoint slot: break box, trace box, Continue (enabled when hit).
    pub(crate) fn slot_ui(&mut self, ui: &mut egui::Ui, op: &str, t: &str) {
        ui.add_space(12.0);
        let set = self
            .model
            .node_key(op, t)
            .and_then(|key| self.model.control.breakpoints.get(&key))
            .copied();
        let mut on = set.is_some();
        if ui.checkbox(&mut on, format!("{op} @ {t}")).changed() {
            let trace = set.unwrap_or(false);
            self.act(
                "break",
                Command::Break {
                    op: op.to_owned(),
                    thread: Some(t.to_owned()),
                    on,
                    trace,
                    when: None,
                    hit: None,
                },
            );
        }
        let mut trace = set.unwrap_or(false);
        if ui.checkbox(&mut trace, "trace").changed() {
            self.act(
                "break",
                Command::Break {
                    op: op.to_owned(),
                    thread: Some(t.to_owned()),
                    on: true,
                    trace,
                    when: None,
                    hit: None,
                },
            );
        }
        let hit = self.held_start_of(op, t);
        if ui
            .add_enabled(hit.is_some(), egui::Button::new("Continue"))
            .clicked()
        {
            self.act(
                "continue",
                Command::Continue {
                    thread: None,
                    event_id: hit,
                    trace: None,
                },
            );
        }
    }

    pub(crate) fn breakpoints_ui(&mut self, ui: &mut egui::Ui) {
        ui.strong("Operation breakpoints");
        ui.label(
            RichText::new("break: hold its starts · trace: follow its outputs")
                .small()
                .weak(),
        );
        // One row per operation header and per (operation, thread) slot; only the rows in
        // view are built, so thousands of slots cost what a screenful does.
        let ops = &self.model.first().operations;
        let mut rows: Vec<(usize, Option<usize>)> = Vec::new();
        for (o, op) in ops.iter().enumerate() {
            rows.push((o, None));
            if !self.ui.collapsed.contains(&op.name) {
                rows.extend((0..op.threads.len()).map(|t| (o, Some(t))));
            }
        }
        let row_h = ui.spacing().interact_size.y + ui.spacing().item_spacing.y;
        let ops = ops.clone();
        egui::ScrollArea::vertical()
            .id_salt("bp-scroll")
            .max_height(ui.available_height() * 0.7)
            .show_rows(ui, row_h, rows.len(), |ui, range| {
                for &(o, slot) in &rows[range] {
                    let op = &ops[o];
                    match slot {
                        None => {
                            let open = !self.ui.collapsed.contains(&op.name);
                            let text = format!("{} {} ({})", if open { "-" } else { "+" }, op.name, op.kind);
                            if ui.selectable_label(false, RichText::new(text).strong()).clicked() {
                                if open {
                                    self.ui.collapsed.insert(op.name.clone());
                                } else {
                                    self.ui.collapsed.remove(&op.name);
                                }
                            }
                        }
                        Some(ti) => {
                            let t = &op.threads[ti];
                            ui.horizontal(|ui| self.slot_ui(ui, &op.name, t));
                        }
                    }
                }
            });
        ui.separator();
        self.conditions_ui(ui);
        ui.separator();
        ui.strong("Threads");
        let colls = self.model.first().collections.clone();
        egui::ScrollArea::vertical()
            .id_salt("threads-scroll")
            .show(ui, |ui| {
                for c in &colls {
                    ui.horizontal_wrapped(|ui| {
                        for t in &c.threads {
                            let key = self.model.thread_key(t);
                            let mut paused = key.is_some_and(|k| self.model.control.paused.contains(&k));
                            if ui.toggle_value(&mut paused, format!("pause {t}")).changed() {
                                self.act(
                                    "pause",
                                    Command::Pause {
                                        thread: t.clone(),
                                        on: paused,
                                    },
                                );
                            }
                        }
                    });
                }
            });
        if let Some((what @ ("break" | "pause" | "continue"), e)) = &self.ui.action_error {
            ui.colored_label(Color32::from_rgb(220, 60, 60), format!("{what}: {e}"));
        }
    }
}
