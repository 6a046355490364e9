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
            (Some(None), _) => match self.model.control.killed_by {
                Some(s) => format!("program killed by {}", racetrack_model::signal_name(s)),
                None => "program ended (detached)".to_owned(),
            },
            (None, true) => {
                let p = self.model.first();
                let program = p.program.as_deref().unwrap_or("?");
                match p.separate_processes() {
                    0 => format!("attached to {program} (pid {})", p.pid.unwrap_or_default()),
                    n => format!("attached to {program} ({n} ranks)"),
                }
            }
            (None, false) => "connecting...".to_owned(),
        }
    }

    /// The Session menu: save the session's choices as a scenario, take over a replay.
    fn session_menu(&mut self, ui: &mut egui::Ui) {
        let running = self.model.control.exited.is_none() && self.session.is_some();
        // A scenario can be saved whenever a session is there: after the program ended,
        // from the session as it ended.
        let saving = self.session.is_some();
        if self.ui.scenario_path.is_empty() {
            let program = self.model.first().program.as_deref().unwrap_or("program");
            self.ui.scenario_path = format!("{program}.scenario.rtrec");
        }
        ui.menu_button("Session", |ui| {
            ui.label("Save what this session did so far (reorders, edits) as a scenario;
`racetrack replay FILE -- PROGRAM` plays it again without you.");
            ui.add(egui::TextEdit::singleline(&mut self.ui.scenario_path).desired_width(260.0))
                .labelled_by(ui.label("File (on this machine)").id);
            let path = self.ui.scenario_path.trim().to_owned();
            if ui
                .add_enabled(saving && !path.is_empty(), egui::Button::new("Save scenario"))
                .clicked()
            {
                self.act("save_scenario", Command::SaveScenario { path });
                ui.close();
            }
            ui.separator();
            if ui
                .add_enabled(running, egui::Button::new("Take over"))
                .on_hover_text("End a replay (racetrack replay --gui): from here the program runs free, under your holds")
                .clicked()
            {
                self.act("take_over", Command::TakeOver);
                ui.close();
            }
        });
        if let Some(note) = &self.model.control.session_note {
            ui.label(RichText::new(note).color(Color32::from_rgb(70, 110, 170)));
        }
    }

    /// The last deadlock the job's debugger told, if any: who is stuck, the cycle, and
    /// every stuck call on hover.
    fn deadlock_ui(&self, ui: &mut egui::Ui) {
        let Some(d) = &self.model.control.deadlock else {
            return;
        };
        let cycle = match d.cycle.as_slice() {
            [] => String::new(),
            c => format!(", cycle {}", c.join(" -> ")),
        };
        let text = format!("deadlock: {} ranks stuck{cycle}", d.waits.len());
        let detail = racetrack_model::deadlock::describe(&d.waits, &d.cycle);
        ui.label(RichText::new(text).color(Color32::from_rgb(220, 60, 60)).strong())
            .on_hover_text(detail.replace("; ", "\n"));
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
            self.deadlock_ui(ui);
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
            if self.timeline.is_none() {
                self.session_menu(ui);
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
