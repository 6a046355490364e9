//! The toolbar: what the window is attached to, Continue, global step, pause all, counts.

use crate::gui::app::App;
use egui::{Color32, RichText};
use racetrack_protocol::Command;

impl App {
    pub(crate) fn status_text(&self) -> String {
        if self.timeline.is_some() {
            return format!(
                "trace of {} (pid {})",
                self.model.first().program.as_deref().unwrap_or("?"),
                self.model.first().pid.unwrap_or_default()
            );
        }
        match (&self.model.control.exited, self.model.control.attached) {
            (Some(Some(code)), _) => format!("program exited with code {code}"),
            (Some(None), _) => "program ended (detached)".to_owned(),
            (None, true) => format!(
                "attached to {} (pid {})",
                self.model.first().program.as_deref().unwrap_or("?"),
                self.model.first().pid.unwrap_or_default()
            ),
            (None, false) => "connecting...".to_owned(),
        }
    }

    pub(crate) fn toolbar_ui(&mut self, ui: &mut egui::Ui) {
        ui.horizontal_wrapped(|ui| {
            ui.heading("Racetrack");
            ui.separator();
            let status = self.status_text();
            let color = if self.model.control.exited.is_some() {
                Color32::from_rgb(70, 110, 170)
            } else {
                Color32::from_rgb(60, 170, 90)
            };
            ui.label(RichText::new(status).color(color).strong());
            if let Some(matches) = self.result_matches() {
                let (text, c) = if matches {
                    ("result: matches reference", Color32::from_rgb(60, 170, 90))
                } else {
                    ("result: differs from reference", Color32::from_rgb(220, 60, 60))
                };
                ui.label(RichText::new(text).color(c).strong());
            }
            ui.separator();
            let can_continue = !self.model.control.held.is_empty()
                && self.model.control.exited.is_none()
                && self.session.is_some();
            if ui
                .add_enabled(can_continue, egui::Button::new("Continue"))
                .clicked()
            {
                self.act(
                    "continue",
                    Command::Continue {
                        thread: None,
                        event_id: None,
                        trace: None,
                    },
                );
            }
            let mut step = self.model.control.step_mode;
            if ui.toggle_value(&mut step, "Global step").changed() {
                self.act("step_mode", Command::StepMode { on: step });
            }
            let mut pause = self.pause_all;
            if ui.toggle_value(&mut pause, "Pause all").changed() {
                self.pause_all = pause;
                let threads: Vec<String> = self
                    .model
                    .first()
                    .collections
                    .iter()
                    .flat_map(|c| c.threads.clone())
                    .collect();
                for t in threads {
                    self.act("pause", Command::Pause { thread: t, on: pause });
                }
            }
            ui.separator();
            let threads: usize = self
                .model
                .first()
                .collections
                .iter()
                .map(|c| c.threads.len())
                .sum();
            ui.label(format!(
                "events {} · {:.0}/s · held {} · threads {}",
                self.model.control.event_count,
                self.rate.per_s,
                self.model.control.held.len(),
                threads
            ));
        });
    }
}
