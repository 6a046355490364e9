//! The event log, filterable.

use crate::gui::app::App;
use egui::{Color32, RichText};

impl App {
    pub(crate) fn log_ui(&mut self, ui: &mut egui::Ui) {
        ui.horizontal(|ui| {
            ui.strong("Event log");
            ui.add(
                egui::TextEdit::singleline(&mut self.ui.log_filter)
                    .hint_text("filter")
                    .desired_width(120.0),
            );
        });
        ui.separator();
        let filter = self.ui.log_filter.to_lowercase();
        egui::ScrollArea::vertical()
            .id_salt("log-scroll")
            .stick_to_bottom(true)
            .show(ui, |ui| {
                for line in self.model.control.log.iter().filter(|l| {
                    filter.is_empty() || l.text.to_lowercase().contains(&filter) || l.level.contains(&filter)
                }) {
                    let color = match line.level {
                        "error" | "panic" | "deadlock" => Color32::from_rgb(220, 60, 60),
                        "stderr" => Color32::from_rgb(200, 150, 60),
                        _ => ui.visuals().text_color(),
                    };
                    ui.label(
                        RichText::new(format!("[{}] {}", line.level, line.text))
                            .color(color)
                            .small(),
                    );
                }
            });
    }
}
