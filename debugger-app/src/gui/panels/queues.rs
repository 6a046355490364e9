//! The bottom panel's tabs for the selected node: thread queue (reorderable while held),
//! op queue, processed and sent.

use crate::gui::app::{App, Tab};
use crate::model::{Held, Node, NodeId, ThreadKey};
use egui::{Color32, RichText};
use racetrack_protocol::{Command, Event, QueueEntry};
use std::collections::HashMap;

/// A held thread's pending messages as the reorder editor keys them: `id`, or `id@op`
/// when an id is pending twice. Linear in the queue's length: queues can hold thousands
/// of messages.
fn order_keys(rows: &[QueueEntry]) -> Vec<String> {
    let mut ids: HashMap<&str, usize> = HashMap::new();
    for r in rows {
        *ids.entry(r.id.as_str()).or_default() += 1;
    }
    rows.iter()
        .map(|m| {
            if ids.get(m.id.as_str()).is_some_and(|n| *n > 1) {
                format!("{}@{}", m.id, m.op)
            } else {
                m.id.to_string()
            }
        })
        .collect()
}

impl App {
    /// The selected thread's pending messages, with the message of a held start first.
    pub(crate) fn thread_queue(&self, t: ThreadKey) -> Vec<QueueEntry> {
        let mut rows = Vec::new();
        if let Some((
            _,
            Held {
                event: Event::Start(s),
                ..
            },
        )) = self.model.control.held_of(t)
        {
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
        rows.extend(self.model.control.queue(t).into_iter().flatten().cloned());
        rows
    }

    pub(crate) fn details_ui(&mut self, ui: &mut egui::Ui) {
        let Some((id, key)) = self
            .ui
            .selected
            .and_then(|id| Some((id, self.model.unfolded()?.node(id)?.key)))
        else {
            ui.label("Select a node of the graph to see its queues and messages.");
            return;
        };
        let (op, thread) = self.model.node_names(key);
        let (op, thread) = (op.to_owned(), thread.to_owned());
        let pid = self
            .model
            .process(key.proc)
            .and_then(|p| p.thread_pid(key.thread));
        ui.horizontal(|ui| {
            ui.strong(format!("{op} @ {thread}"));
            if let Some(pid) = pid {
                ui.weak(format!("pid {pid}"));
            }
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
        let t = key.thread_key();
        ui.columns(2, |cols| {
            egui::ScrollArea::both()
                .id_salt("tab-scroll")
                .show(&mut cols[0], |ui| match self.ui.tab.unwrap_or(Tab::ThreadQueue) {
                    Tab::ThreadQueue => self.thread_queue_ui(ui, t),
                    Tab::OpQueue => {
                        let rows: Vec<QueueEntry> =
                            self.thread_queue(t).into_iter().filter(|m| m.op == op).collect();
                        self.rows_ui(ui, &rows, &thread);
                    }
                    Tab::Processed => self.processed_ui(ui, id, &op, &thread),
                    Tab::Sent => self.sent_ui(ui, id),
                });
            egui::ScrollArea::both()
                .id_salt("inspector-scroll")
                .show(&mut cols[1], |ui| self.inspector_ui(ui, t));
        });
    }

    /// The messages node `id` (`op` on `thread`) processed, newest first.
    fn processed_ui(&mut self, ui: &mut egui::Ui, id: NodeId, op: &str, thread: &str) {
        for m in &self.recent_history(id, |n| &n.processed) {
            let text = format!("{m}  -> {op}@{thread}");
            if ui.selectable_label(self.is_selected_msg(m, op), text).clicked() {
                self.ui.selected_msg = Some((m.to_string(), op.to_owned(), None));
            }
        }
    }

    /// The messages node `id` sent, newest first.
    fn sent_ui(&mut self, ui: &mut egui::Ui, id: NodeId) {
        for m in &self.recent_history(id, |n| &n.sent) {
            let p = m.from.and_then(|f| self.model.process(f.proc));
            let to_op = p
                .zip(m.to_op)
                .map_or("(result)", |(p, o)| p.op_name(o))
                .to_owned();
            let to_thread = p.zip(m.to_thread).map_or("?", |(p, t)| p.thread_name(t));
            let text = format!("{}  {}  -> {to_op}@{to_thread}", m.id, m.type_name);
            if ui
                .selectable_label(self.is_selected_msg(&m.id, &to_op), text)
                .clicked()
            {
                self.ui.selected_msg = Some((m.id.to_string(), to_op, m.content.clone()));
            }
        }
    }

    pub(crate) fn is_selected_msg(&self, id: &str, op: &str) -> bool {
        self.ui
            .selected_msg
            .as_ref()
            .is_some_and(|(i, o, _)| i == id && o == op)
    }

    pub(crate) fn rows_ui(&mut self, ui: &mut egui::Ui, rows: &[QueueEntry], thread: &str) {
        for m in rows {
            self.message_row_ui(ui, m, thread);
        }
    }

    /// How a pending message of `thread` reads: id, type, source, destination.
    fn row_text(m: &QueueEntry, thread: &str) -> String {
        let from = m.from.as_deref().unwrap_or("(input)");
        if m.to.is_empty() {
            format!("{}  {}  {from} -> {}@{thread}", m.id, m.type_name, m.op)
        } else {
            format!("{}  {}  {from} -> {}", m.id, m.type_name, m.to)
        }
    }

    /// One pending message of `thread`; clicking it selects it.
    pub(crate) fn message_row_ui(&mut self, ui: &mut egui::Ui, m: &QueueEntry, thread: &str) {
        if ui
            .selectable_label(self.is_selected_msg(&m.id, &m.op), Self::row_text(m, thread))
            .clicked()
        {
            self.ui.selected_msg = Some((m.id.to_string(), m.op.to_string(), m.content.clone()));
        }
    }

    /// A running thread's queue: read only, drawn straight from the model (only the
    /// visible rows; queues of running programs can be tens of thousands long).
    pub(crate) fn running_queue_ui(&mut self, ui: &mut egui::Ui, t: ThreadKey) {
        ui.horizontal(|ui| {
            self.refresh_button(ui, t);
            ui.label(RichText::new("reorder needs the thread suspended").small().weak());
        });
        self.unlisted_ui(ui, t);
        let row_h = ui.spacing().interact_size.y + ui.spacing().item_spacing.y;
        let empty = std::collections::VecDeque::new();
        let q = self.model.control.queue(t).unwrap_or(&empty);
        let thread = self.model.thread_name(t);
        let mut clicked = None;
        egui::ScrollArea::vertical()
            .id_salt("queue-rows")
            .auto_shrink([false, true])
            .show_rows(ui, row_h, q.len(), |ui, range| {
                for m in q.range(range) {
                    if ui
                        .selectable_label(self.is_selected_msg(&m.id, &m.op), Self::row_text(m, thread))
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

    /// The newest 500 entries of node `id`'s history (processed or sent), newest first.
    pub(crate) fn recent_history<T: Clone>(&self, id: NodeId, of: impl Fn(&Node) -> &Vec<T>) -> Vec<T> {
        self.model
            .unfolded()
            .and_then(|u| u.node(id))
            .map(|n| of(n).iter().rev().take(500).cloned().collect())
            .unwrap_or_default()
    }

    /// Ask the agent for the thread's queue, with contents.
    pub(crate) fn refresh_button(&mut self, ui: &mut egui::Ui, t: ThreadKey) {
        if ui.button("Refresh").clicked() {
            self.act(
                "queue",
                Command::Queue {
                    thread: self.model.thread_name(t).to_owned(),
                    content: true,
                },
            );
        }
    }

    pub(crate) fn unlisted_ui(&self, ui: &mut egui::Ui, t: ThreadKey) {
        if let Some(n) = self.model.control.unlisted.get(&t).filter(|n| **n > 0) {
            ui.label(
                RichText::new(format!(
                    "… and {n} more pending messages after these, not listed (the agent lists the first ones of a long queue)"
                ))
                .small()
                .weak(),
            );
        }
    }

    /// A thread's queue: read only while it runs; while it is held, in an order the user
    /// edits (Up / Down) and applies.
    pub(crate) fn thread_queue_ui(&mut self, ui: &mut egui::Ui, t: ThreadKey) {
        if self.model.control.held_of(t).is_none() {
            return self.running_queue_ui(ui, t);
        }
        let rows = self.thread_queue(t);
        let current = order_keys(&rows);
        let by_key: HashMap<&str, usize> = current.iter().enumerate().map(|(i, k)| (k.as_str(), i)).collect();
        // Still editing this thread's order if it names exactly the pending messages.
        let editing = matches!(&self.ui.order, Some((o_t, o)) if *o_t == t
            && o.len() == current.len()
            && o.iter().all(|k| by_key.contains_key(k.as_str())));
        if !editing {
            self.ui.order = Some((t, current.clone()));
        }
        let order = self.ui.order.as_ref().map(|o| o.1.clone()).unwrap_or_default();
        self.reorder_bar_ui(ui, t, &order, order != current);
        self.unlisted_ui(ui, t);
        let thread = self.model.thread_name(t).to_owned();
        let mut swap: Option<(usize, usize)> = None;
        let row_h = ui.spacing().interact_size.y + ui.spacing().item_spacing.y;
        // Only the visible rows are laid out.
        egui::ScrollArea::vertical()
            .id_salt("queue-rows")
            .auto_shrink([false, true])
            .show_rows(ui, row_h, order.len(), |ui, range| {
                for i in range {
                    let row = order
                        .get(i)
                        .and_then(|k| by_key.get(k.as_str()))
                        .and_then(|&j| rows.get(j));
                    let Some(m) = row else { continue };
                    ui.horizontal(|ui| {
                        if ui.add_enabled(i > 0, egui::Button::new("Up")).clicked() {
                            swap = Some((i, i - 1));
                        }
                        if ui
                            .add_enabled(i + 1 < order.len(), egui::Button::new("Down"))
                            .clicked()
                        {
                            swap = Some((i, i + 1));
                        }
                        self.message_row_ui(ui, m, &thread);
                    });
                }
            });
        if let (Some((a, b)), Some((_, o))) = (swap, self.ui.order.as_mut()) {
            o.swap(a, b);
        }
    }

    /// Apply order (when the user `changed` it), Refresh, and the agent's refusal if any.
    fn reorder_bar_ui(&mut self, ui: &mut egui::Ui, t: ThreadKey, order: &[String], changed: bool) {
        ui.horizontal(|ui| {
            if ui
                .add_enabled(changed, egui::Button::new("Apply order"))
                .clicked()
            {
                self.act(
                    "reorder",
                    Command::Reorder {
                        thread: self.model.thread_name(t).to_owned(),
                        order: order.to_vec(),
                        rest: None,
                    },
                );
            }
            self.refresh_button(ui, t);
        });
        if let Some(("reorder", e)) = &self.ui.action_error {
            ui.colored_label(Color32::from_rgb(220, 60, 60), format!("reorder: {e}"));
        }
    }
}
