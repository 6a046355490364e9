//! A message's or a thread state's content as a tree, editable while held; a held MPI
//! call's parameters.

use super::json_tree_ui;
use crate::gui::app::App;
use crate::model::ThreadKey;
use egui::{Color32, RichText};
use racetrack_protocol::{Command, Event, SendEv};
use serde_json::Value;

/// An MPI call's parameters, when the held event is one's (runtime events carry none): one
/// row per field, the call site by file name (its full path on hover).
fn held_call_ui(ui: &mut egui::Ui, ev: &Event) {
    let (what, op, call) = match ev {
        Event::Start(s) => ("start", s.op.as_str(), &s.call),
        Event::Stop(s) => ("stop", s.op.as_str(), &s.call),
        Event::Send(s) => ("send", s.op.as_deref().unwrap_or(""), &s.call),
        _ => return,
    };
    let Some(call) = call else { return };
    ui.strong(format!("Held {what} of {op}"));
    let Ok(Value::Object(fields)) = serde_json::to_value(call) else {
        return;
    };
    egui::Grid::new("held-call").num_columns(2).show(ui, |ui| {
        for (k, v) in &fields {
            ui.label(RichText::new(k).weak());
            let text = match v {
                Value::String(s) => s.clone(),
                other => other.to_string(),
            };
            if k == "site" {
                // `/long/path/file.c:12 (fn)` → `file.c:12 (fn)`.
                let short = text.rsplit('/').next().unwrap_or(&text).to_owned();
                ui.label(RichText::new(short).monospace()).on_hover_text(text);
            } else {
                ui.label(RichText::new(text).monospace());
            }
            ui.end_row();
        }
    });
}

impl App {
    pub(crate) fn inspector_ui(&mut self, ui: &mut egui::Ui, t: ThreadKey) {
        let held = self
            .model
            .control
            .held_of(t)
            .map(|(id, h)| (id.event_id, h.event.clone()));
        if let Some((_, ev)) = &held {
            held_call_ui(ui, ev);
        }
        match &held {
            Some((id, Event::Send(s))) => self.held_send_ui(ui, *id, s),
            _ => self.ui.edit = None,
        }
        if matches!(&held, Some((_, Event::Start(_) | Event::Stop(_)))) {
            self.state_ui(ui, t);
        }
        self.selected_message_ui(ui, t);
    }

    /// A held send of this thread: its content, editable before it leaves.
    fn held_send_ui(&mut self, ui: &mut egui::Ui, id: u64, s: &SendEv) {
        ui.strong(format!(
            "Held send {} -> {}",
            s.msg,
            s.to_op.as_deref().unwrap_or("(result)")
        ));
        let text = match &self.ui.edit {
            Some((eid, t)) if *eid == id => t.clone(),
            _ => serde_json::to_string_pretty(s.content.as_ref().unwrap_or(&Value::Null)).unwrap_or_default(),
        };
        let mut text_mut = text;
        ui.add(
            egui::TextEdit::multiline(&mut text_mut)
                .code_editor()
                .desired_rows(6)
                .id_salt("edit-text"),
        );
        self.ui.edit = Some((id, text_mut.clone()));
        if ui.button("Apply edit").clicked() {
            match serde_json::from_str::<Value>(&text_mut) {
                Ok(content) => self.act(
                    "edit",
                    Command::Edit {
                        event_id: Some(id),
                        thread: None,
                        content,
                    },
                ),
                Err(e) => self.ui.action_error = Some(("edit", format!("not JSON: {e}"))),
            }
        }
        if let Some(("edit", e)) = &self.ui.action_error {
            ui.colored_label(Color32::from_rgb(220, 60, 60), format!("edit: {e}"));
        }
        ui.separator();
    }

    /// The state of a thread suspended at a step boundary: load it, edit it, apply it.
    fn state_ui(&mut self, ui: &mut egui::Ui, t: ThreadKey) {
        let thread = &self.model.thread_name(t).to_owned();
        ui.horizontal(|ui| {
            ui.strong(format!("State of {thread}"));
            if ui.button("Load state").clicked() {
                self.ui.state_edit = None;
                self.act(
                    "state",
                    Command::State {
                        thread: Some(thread.to_owned()),
                        event_id: None,
                    },
                );
            }
        });
        if let Some(v) = self.model.control.states.get(&t) {
            let text = match &self.ui.state_edit {
                Some((t, s)) if t == thread => s.clone(),
                _ => serde_json::to_string_pretty(v).unwrap_or_default(),
            };
            let mut t = text;
            ui.add(
                egui::TextEdit::multiline(&mut t)
                    .code_editor()
                    .desired_rows(6)
                    .id_salt("state-text"),
            );
            self.ui.state_edit = Some((thread.to_owned(), t.clone()));
            if ui.button("Apply state").clicked() {
                match serde_json::from_str::<Value>(&t) {
                    Ok(content) => self.act(
                        "set_state",
                        Command::SetState {
                            thread: Some(thread.to_owned()),
                            event_id: None,
                            content,
                        },
                    ),
                    Err(e) => self.ui.action_error = Some(("set_state", format!("not JSON: {e}"))),
                }
            }
        }
        if let Some((w @ ("state" | "set_state"), e)) = &self.ui.action_error {
            ui.colored_label(Color32::from_rgb(220, 60, 60), format!("{w}: {e}"));
        }
        ui.separator();
    }

    /// The selected message's content as a tree (fetched on demand for pending ones).
    fn selected_message_ui(&mut self, ui: &mut egui::Ui, t: ThreadKey) {
        let Some((id, op, content)) = self.ui.selected_msg.clone() else {
            ui.label(RichText::new("select a message to see its content").weak());
            return;
        };
        ui.strong(format!("Message {id} -> {op}"));
        let content = content.or_else(|| {
            self.model
                .control
                .queue(t)
                .and_then(|q| q.iter().find(|m| m.id == id && m.op == op))
                .and_then(|m| m.content.clone())
        });
        match content {
            Some(v) => json_tree_ui(ui, &id, &v),
            None => {
                if ui.button("Fetch content").clicked() {
                    self.act(
                        "queue",
                        Command::Queue {
                            thread: self.model.thread_name(t).to_owned(),
                            content: true,
                        },
                    );
                }
                ui.label(
                    RichText::new("content is fetched for pending messages; held sends carry it")
                        .small()
                        .weak(),
                );
            }
        }
    }
}
