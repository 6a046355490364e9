//! Conditional breakpoints in the left panel: the ones set, each with its Remove, and a
//! form that adds one: operation, thread, the call's fields (MPI programs) and a hit count.

use crate::gui::app::App;
use crate::model::CondBreakpoint;
use egui::{Color32, RichText};
use racetrack_protocol::{Command, Peer, Tag, When};
use serde_json::Value;

/// The add form's fields, as typed (empty: not a condition).
#[derive(Debug, Default, Clone)]
pub struct CondForm {
    pub op: String,
    pub thread: String,
    pub peer: String,
    pub tag: String,
    pub datatype: String,
    pub comm: String,
    pub min_bytes: String,
    pub max_bytes: String,
    pub hit: String,
    /// Why the last Add was not sent.
    pub error: Option<String>,
}

impl CondForm {
    /// The `break` the form describes, or what is wrong with it.
    pub fn command(&self) -> Result<Command, String> {
        let text = |s: &str| Some(s.trim().to_owned()).filter(|s| !s.is_empty());
        let op = text(&self.op).unwrap_or_else(|| "*".into());
        let when = When {
            peer: text(&self.peer).map(|p| special("peer", &p)).transpose()?,
            tag: text(&self.tag).map(|t| special::<Tag>("tag", &t)).transpose()?,
            datatype: text(&self.datatype),
            comm: text(&self.comm),
            bytes: None,
            min_bytes: number("min bytes", &self.min_bytes)?,
            max_bytes: number("max bytes", &self.max_bytes)?,
        };
        when.check().map_err(|e| e.to_string())?;
        let hit = number::<u64>("hit", &self.hit)?;
        if hit == Some(0) {
            return Err("hit counts matching starts from 1".into());
        }
        Ok(Command::Break {
            op,
            thread: text(&self.thread),
            on: true,
            trace: false,
            when: Some(when).filter(|w| !w.is_empty()),
            hit: Some(hit.unwrap_or(1)),
        })
    }
}

/// A number, or one of MPI's names for a special value (`MPI_ANY_SOURCE`).
fn special<T: serde::de::DeserializeOwned>(what: &str, text: &str) -> Result<T, String> {
    let v = match text.parse::<i64>() {
        Ok(n) => Value::from(n),
        Err(_) => Value::from(text),
    };
    serde_json::from_value(v).map_err(|_| format!("{what}: `{text}` is neither a number nor its MPI name"))
}

fn number<T: std::str::FromStr>(what: &str, text: &str) -> Result<Option<T>, String> {
    let text = text.trim();
    if text.is_empty() {
        return Ok(None);
    }
    text.parse()
        .map(Some)
        .map_err(|_| format!("{what}: `{text}` is not a number"))
}

/// One line describing a conditional breakpoint.
pub fn describe(c: &CondBreakpoint) -> String {
    let mut s = format!("{} @ {}", c.op, c.thread.as_deref().unwrap_or("every thread"));
    let w = &c.when;
    let peer = w.peer.map(|p| match p {
        Peer::Rank(r) => r.to_string(),
        Peer::Special(_) => "MPI_ANY_SOURCE".into(),
    });
    let tag = w.tag.map(|t| match t {
        Tag::Tag(t) => t.to_string(),
        Tag::Any(_) => "MPI_ANY_TAG".into(),
    });
    let fields = [
        ("peer", peer),
        ("tag", tag),
        ("datatype", w.datatype.clone()),
        ("comm", w.comm.clone()),
        ("bytes", w.bytes.map(|b| b.to_string())),
        ("bytes ≥", w.min_bytes.map(|b| b.to_string())),
        ("bytes ≤", w.max_bytes.map(|b| b.to_string())),
    ];
    for (name, v) in fields {
        if let Some(v) = v {
            s.push_str(&format!(" · {name} {v}"));
        }
    }
    if c.hit > 1 {
        s.push_str(&format!(" · from hit {}", c.hit));
    }
    s
}

impl App {
    /// The conditional breakpoints set, and the form that adds one.
    pub(crate) fn conditions_ui(&mut self, ui: &mut egui::Ui) {
        ui.strong("Conditional breakpoints");
        for c in self.model.control.conditional.clone() {
            ui.horizontal(|ui| {
                if ui.small_button("Remove").clicked() {
                    self.act(
                        "break",
                        Command::Break {
                            op: c.op.clone(),
                            thread: c.thread.clone(),
                            on: false,
                            trace: false,
                            when: Some(c.when.clone()),
                            hit: Some(c.hit),
                        },
                    );
                }
                ui.label(describe(&c));
            });
        }
        egui::CollapsingHeader::new("Add a conditional breakpoint")
            .id_salt("cond-form")
            .show(ui, |ui| self.cond_form_ui(ui));
    }

    fn cond_form_ui(&mut self, ui: &mut egui::Ui) {
        let f = &mut self.ui.cond_form;
        egui::Grid::new("cond-grid").num_columns(2).show(ui, |ui| {
            let fields: [(&str, &str, &mut String); 9] = [
                ("operation", "* (every one)", &mut f.op),
                ("thread", "every thread", &mut f.thread),
                ("peer", "rank or MPI_ANY_SOURCE", &mut f.peer),
                ("tag", "number or MPI_ANY_TAG", &mut f.tag),
                ("datatype", "MPI_INT", &mut f.datatype),
                ("comm", "MPI_COMM_WORLD", &mut f.comm),
                ("min bytes", "", &mut f.min_bytes),
                ("max bytes", "", &mut f.max_bytes),
                ("hit", "1 (every match)", &mut f.hit),
            ];
            for (label, hint, value) in fields {
                let l = ui.label(label);
                ui.add(
                    egui::TextEdit::singleline(value)
                        .hint_text(hint)
                        .desired_width(140.0),
                )
                .labelled_by(l.id);
                ui.end_row();
            }
        });
        if ui.button("Add breakpoint").clicked() {
            match self.ui.cond_form.command() {
                Ok(cmd) => {
                    self.ui.cond_form.error = None;
                    self.act("break", cmd);
                }
                Err(e) => self.ui.cond_form.error = Some(e),
            }
        }
        if let Some(e) = &self.ui.cond_form.error {
            ui.colored_label(Color32::from_rgb(220, 60, 60), RichText::new(e).small());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn form(fill: impl FnOnce(&mut CondForm)) -> Result<Command, String> {
        let mut f = CondForm::default();
        fill(&mut f);
        f.command()
    }

    #[test]
    fn the_form_builds_the_break_it_shows() {
        let cmd = form(|f| {
            f.op = "MPI_Send".into();
            f.thread = "rank[0]".into();
            f.peer = "2".into();
            f.tag = "MPI_ANY_TAG".into();
            f.datatype = " MPI_INT ".into();
            f.min_bytes = "8".into();
            f.hit = "3".into();
        })
        .expect("valid");
        let json = serde_json::to_value(&cmd).expect("serializes");
        assert_eq!(
            json,
            serde_json::json!({"cmd":"break","op":"MPI_Send","thread":"rank[0]","on":true,
                "trace":false,"when":{"peer":2,"tag":"MPI_ANY_TAG","datatype":"MPI_INT","min_bytes":8},"hit":3})
        );
        let every = form(|_| {}).expect("valid");
        assert_eq!(
            serde_json::to_value(&every).expect("serializes"),
            serde_json::json!({"cmd":"break","op":"*","on":true,"trace":false,"hit":1})
        );
    }

    #[test]
    fn the_form_says_what_is_wrong() {
        let err = |fill: fn(&mut CondForm)| form(fill).expect_err("refused");
        assert_eq!(
            err(|f| f.peer = "MPI_ANY_TAG".into()),
            "peer: `MPI_ANY_TAG` is neither a number nor its MPI name"
        );
        assert_eq!(err(|f| f.hit = "x".into()), "hit: `x` is not a number");
        assert_eq!(err(|f| f.hit = "0".into()), "hit counts matching starts from 1");
        assert_eq!(
            err(|f| {
                f.min_bytes = "9".into();
                f.max_bytes = "8".into();
            }),
            "min_bytes 9 is above max_bytes 8"
        );
    }
}
