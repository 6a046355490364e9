//! JSON values as collapsible trees.

use serde_json::Value;

/// A JSON value as a collapsible tree.
pub(crate) fn json_tree_ui(ui: &mut egui::Ui, salt: &str, v: &Value) {
    match v {
        Value::Object(map) => {
            for (k, x) in map {
                node_ui(ui, salt, k, x);
            }
        }
        Value::Array(a) => {
            for (i, x) in a.iter().enumerate().take(1000) {
                node_ui(ui, salt, &i.to_string(), x);
            }
            if a.len() > 1000 {
                ui.label(format!("... {} more", a.len() - 1000));
            }
        }
        other => {
            ui.monospace(other.to_string());
        }
    }
}

fn node_ui(ui: &mut egui::Ui, salt: &str, key: &str, v: &Value) {
    match v {
        Value::Object(_) | Value::Array(_) => {
            let n = match v {
                Value::Object(m) => m.len(),
                Value::Array(a) => a.len(),
                _ => 0,
            };
            egui::CollapsingHeader::new(format!("{key} ({n})"))
                .id_salt((salt, key, n))
                .show(ui, |ui| json_tree_ui(ui, &format!("{salt}.{key}"), v));
        }
        leaf => {
            ui.monospace(format!("{key}: {leaf}"));
        }
    }
}
