//! The bottom panel's tabs for the selected node: thread queue (reorderable while held),
//! op queue, processed and sent.

use crate::gui::app::{App, Tab};
use crate::model::Node;
use egui::{Color32, RichText};
use racetrack_protocol::{Command, Event, QueueEntry};
use std::collections::HashMap;

impl App {
    /// The selected thread's pending messages, with the message of a held start first.
    pub(crate) fn thread_queue(&self, thread: &str) -> Vec<QueueEntry> {
        let mut rows = Vec::new();
        if let Some((_, Event::Start(s))) = self.model.held_of(thread) {
            if s.step != racetrack_protocol::Step::Final {
                rows.push(QueueEntry {
                    id: s.msg.as_str().into(),
                    type_name: "(about to start)".into(),
                    from: None,
                    to: format!("{}@{}", s.op, s.thread),
                    op: s.op.as_str().into(),
                    traced: s.traced,
                    content: None,
                });
            }
        }
        rows.extend(self.model.queues.get(thread).into_iter().flatten().cloned());
        rows
    }

    pub(crate) fn details_ui(&mut self, ui: &mut egui::Ui) {
        let Some((op, thread)) = self.ui.selected.clone() else {
            ui.label("Select a node of the graph to see its queues and messages.");
            return;
        };
        ui.horizontal(|ui| {
            ui.strong(format!("{op} @ {thread}"));
            ui.separator();
            for (tab, name) in [
                (Tab::ThreadQueue, "Thread Queue"),
                (Tab::OpQueue, "Op Queue"),
                (Tab::Processed, "Processed"),
                (Tab::Sent, "Sent"),
            ] {
                if ui.selectable_label(self.ui.tab == Some(tab), name).clicked() {
                    self.ui.tab = Some(tab);
                }
            }
        });
        ui.separator();
        ui.columns(2, |cols| {
            egui::ScrollArea::both()
                .id_salt("tab-scroll")
                .show(&mut cols[0], |ui| match self.ui.tab.unwrap_or(Tab::ThreadQueue) {
                    Tab::ThreadQueue => self.thread_queue_ui(ui, &thread),
                    Tab::OpQueue => {
                        let rows: Vec<QueueEntry> = self
                            .thread_queue(&thread)
                            .into_iter()
                            .filter(|m| m.op == op)
                            .collect();
                        self.rows_ui(ui, &rows);
                    }
                    Tab::Processed => {
                        let ids = self.recent_history(&op, &thread, |n| &n.processed);
                        for id in &ids {
                            if ui
                                .selectable_label(
                                    self.is_selected_msg(id, &op),
                                    format!("{id}  -> {op}@{thread}"),
                                )
                                .clicked()
                            {
                                self.ui.selected_msg = Some((id.clone(), op.clone(), None));
                            }
                        }
                    }
                    Tab::Sent => {
                        let sent = self.recent_history(&op, &thread, |n| &n.sent);
                        for m in &sent {
                            let text = format!("{}  {}  -> {}@{}", m.id, m.type_name, m.to.0, m.to.1);
                            if ui
                                .selectable_label(self.is_selected_msg(&m.id, &m.to.0), text)
                                .clicked()
                            {
                                self.ui.selected_msg =
                                    Some((m.id.clone(), m.to.0.clone(), m.content.clone()));
                            }
                        }
                    }
                });
            egui::ScrollArea::both()
                .id_salt("inspector-scroll")
                .show(&mut cols[1], |ui| self.inspector_ui(ui, &thread));
        });
    }

    pub(crate) fn is_selected_msg(&self, id: &str, op: &str) -> bool {
        self.ui
            .selected_msg
            .as_ref()
            .is_some_and(|(i, o, _)| i == id && o == op)
    }

    pub(crate) fn rows_ui(&mut self, ui: &mut egui::Ui, rows: &[QueueEntry]) {
        for m in rows {
            self.message_row_ui(ui, m);
        }
    }

    /// One pending message (type, source, destination); clicking it selects it.
    pub(crate) fn message_row_ui(&mut self, ui: &mut egui::Ui, m: &QueueEntry) {
        let from = m.from.as_deref().unwrap_or("(input)");
        let text = format!("{}  {}  {from} -> {}", m.id, m.type_name, m.to);
        if ui
            .selectable_label(self.is_selected_msg(&m.id, &m.op), text)
            .clicked()
        {
            self.ui.selected_msg = Some((m.id.to_string(), m.op.to_string(), m.content.clone()));
        }
    }

    /// A running thread's queue: read only, drawn straight from the model (only the
    /// visible rows; queues of running programs can be tens of thousands long).
    pub(crate) fn running_queue_ui(&mut self, ui: &mut egui::Ui, thread: &str) {
        ui.horizontal(|ui| {
            self.refresh_button(ui, thread);
            ui.label(RichText::new("reorder needs the thread suspended").small().weak());
        });
        self.unlisted_ui(ui, thread);
        let row_h = ui.spacing().interact_size.y + ui.spacing().item_spacing.y;
        let empty = std::collections::VecDeque::new();
        let q = self.model.queues.get(thread).unwrap_or(&empty);
        let mut clicked = None;
        egui::ScrollArea::vertical()
            .id_salt("queue-rows")
            .auto_shrink([false, true])
            .show_rows(ui, row_h, q.len(), |ui, range| {
                for m in q.range(range) {
                    let from = m.from.as_deref().unwrap_or("(input)");
                    let text = format!("{}  {}  {from} -> {}", m.id, m.type_name, m.to);
                    if ui
                        .selectable_label(self.is_selected_msg(&m.id, &m.op), text)
                        .clicked()
                    {
                        clicked = Some((m.id.to_string(), m.op.to_string(), m.content.clone()));
                    }
                }
            });
        if clicked.is_some() {
            self.ui.selected_msg = clicked;
        }
    }

    /// The newest 500 entries of a node's history (processed or sent), newest first.
    pub(crate) fn recent_history<T: Clone>(
        &self,
        op: &str,
        thread: &str,
        of: impl Fn(&Node) -> &Vec<T>,
    ) -> Vec<T> {
        self.model
            .nodes
            .get(&(op.to_owned(), thread.to_owned()))
            .map(|n| of(n).iter().rev().take(500).cloned().collect())
            .unwrap_or_default()
    }

    /// Ask the agent for the thread's queue, with contents.
    pub(crate) fn refresh_button(&mut self, ui: &mut egui::Ui, thread: &str) {
        if ui.button("Refresh").clicked() {
            self.act(
                "queue",
                Command::Queue {
                    thread: thread.to_owned(),
                    content: true,
                },
            );
        }
    }

    pub(crate) fn unlisted_ui(&self, ui: &mut egui::Ui, thread: &str) {
        if let Some(n) = self.model.unlisted.get(thread).filter(|n| **n > 0) {
            ui.label(
                RichText::new(format!(
                    "… and {n} more pending messages after these, not listed (the agent lists the first ones of a long queue)"
                ))
                .small()
                .weak(),
            );
        }
    }

    pub(crate) fn thread_queue_ui(&mut self, ui: &mut egui::Ui, thread: &str) {
        let held = self.model.held_of(thread).is_some();
        if !held {
            return self.running_queue_ui(ui, thread);
        }
        let rows = self.thread_queue(thread);
        // Keys: `id`, or `id@op` when an id is pending twice. Everything here is linear in
        // the queue's length: queues can hold thousands of messages.
        let mut ids: HashMap<&str, usize> = HashMap::new();
        for r in &rows {
            *ids.entry(r.id.as_str()).or_default() += 1;
        }
        let key = |m: &QueueEntry| {
            if ids.get(m.id.as_str()).is_some_and(|n| *n > 1) {
                format!("{}@{}", m.id, m.op)
            } else {
                m.id.to_string()
            }
        };
        let current: Vec<String> = rows.iter().map(key).collect();
        let by_key: HashMap<&str, usize> = current.iter().enumerate().map(|(i, k)| (k.as_str(), i)).collect();
        // Still editing this thread's order if it names exactly the pending messages.
        let editing = matches!(&self.ui.order, Some((t, o)) if t == thread
            && o.len() == current.len()
            && o.iter().all(|k| by_key.contains_key(k.as_str())));
        if !editing {
            self.ui.order = Some((thread.to_owned(), current.clone()));
        }
        let order = self.ui.order.as_ref().map(|o| o.1.clone()).unwrap_or_default();
        let changed = order != current;
        ui.horizontal(|ui| {
            if ui
                .add_enabled(held && changed, egui::Button::new("Apply order"))
                .clicked()
            {
                self.act(
                    "reorder",
                    Command::Reorder {
                        thread: thread.to_owned(),
                        order: order.clone(),
                        rest: None,
                    },
                );
            }
            self.refresh_button(ui, thread);
        });
        if let Some(("reorder", e)) = &self.ui.action_error {
            ui.colored_label(Color32::from_rgb(220, 60, 60), format!("reorder: {e}"));
        }
        self.unlisted_ui(ui, thread);
        let mut swap: Option<(usize, usize)> = None;
        let row_h = ui.spacing().interact_size.y + ui.spacing().item_spacing.y;
        // Only the visible rows are laid out.
        egui::ScrollArea::vertical()
            .id_salt("queue-rows")
            .auto_shrink([false, true])
            .show_rows(ui, row_h, order.len(), |ui, range| {
                for i in range {
                    let Some(m) = order
                        .get(i)
                        .and_then(|k| by_key.get(k.as_str()))
                        .and_then(|&j| rows.get(j))
                    else {
                        continue;
                    };
                    ui.horizontal(|ui| {
                        if ui.add_enabled(held && i > 0, egui::Button::new("Up")).clicked() {
                            swap = Some((i, i - 1));
                        }
                        if ui
                            .add_enabled(held && i + 1 < order.len(), egui::Button::new("Down"))
                            .clicked()
                        {
                            swap = Some((i, i + 1));
                        }
                        self.message_row_ui(ui, m);
                    });
                }
            });
        if let (Some((a, b)), Some((_, o))) = (swap, self.ui.order.as_mut()) {
            o.swap(a, b);
        }
    }
}
