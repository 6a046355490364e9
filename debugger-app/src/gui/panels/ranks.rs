//! The left panel of an MPI job, in three tabs: the ranks (status; show or hide a
//! column; Continue, Next, Pause), with the communicators (a click highlights their
//! calls); the breakpoints of the calls the job has made, grouped by call, with a filter;
//! and the call sites as a tree (file → function → line) whose entries highlight their
//! calls in the graph.

use crate::gui::app::App;
use crate::gui::mpstyle::lane_status;
use egui::RichText;
use racetrack_protocol::Command;
use std::collections::BTreeMap;

/// The left panel's tab for an MPI job.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum LeftTab {
    #[default]
    Ranks,
    Breakpoints,
    Sites,
}

/// A call site split as `file:line (function)` reads; other forms (no debug information)
/// are a file of their own.
fn split_site(site: &str) -> (&str, &str, &str) {
    let parsed = site.strip_suffix(')').and_then(|s| {
        let (place, function) = s.split_once(" (")?;
        let (file, line) = place.rsplit_once(':')?;
        line.parse::<u32>().ok()?;
        Some((file, function, line))
    });
    parsed.unwrap_or(("(no line information)", site, ""))
}

/// One rank's row, read from the model before the panel acts.
struct RankRow {
    lane: u32,
    name: String,
    status: (String, egui::Color32),
    held: bool,
    paused: bool,
}

impl App {
    /// Whether the session is an MPI job (its calls make a message-passing graph).
    pub(crate) fn mpi_job(&self) -> bool {
        self.model.messages().is_some_and(|g| !g.lanes().is_empty())
    }

    /// The left panel: breakpoints and threads, or for an MPI job its three tabs.
    pub(crate) fn left_ui(&mut self, ui: &mut egui::Ui) {
        if !self.mpi_job() {
            self.breakpoints_ui(ui);
            return;
        }
        ui.horizontal(|ui| {
            for (tab, name) in [
                (LeftTab::Ranks, "Ranks"),
                (LeftTab::Breakpoints, "Breakpoints"),
                (LeftTab::Sites, "Call sites"),
            ] {
                ui.selectable_value(&mut self.ui.left, tab, name);
            }
        });
        ui.separator();
        match self.ui.left {
            LeftTab::Ranks => self.ranks_ui(ui),
            LeftTab::Breakpoints => self.mpi_breakpoints_ui(ui),
            LeftTab::Sites => self.sites_ui(ui),
        }
    }

    fn rank_rows(&self) -> Vec<RankRow> {
        let Some(g) = self.model.messages() else {
            return Vec::new();
        };
        g.lane_order()
            .into_iter()
            .map(|lane| {
                let t = g.lanes()[lane as usize].thread;
                RankRow {
                    lane,
                    name: self.model.thread_name(t).to_owned(),
                    status: lane_status(&self.model, g, lane),
                    held: self.model.control.held_of(t).is_some(),
                    paused: self.model.control.paused.contains(&t),
                }
            })
            .collect()
    }

    fn ranks_ui(&mut self, ui: &mut egui::Ui) {
        ui.label(
            RichText::new("shown · status · Continue releases the rank · Next runs it to its next event")
                .small()
                .weak(),
        );
        egui::ScrollArea::vertical()
            .id_salt("ranks-scroll")
            .max_height(ui.available_height() * 0.6)
            .show(ui, |ui| {
                for r in self.rank_rows() {
                    self.rank_ui(ui, &r);
                }
            });
        ui.separator();
        ui.strong("Communicators");
        let comms: Vec<(u32, String)> = self
            .model
            .messages()
            .map(|g| g.comms().iter().map(|&c| (c, g.name(c).to_owned())).collect())
            .unwrap_or_default();
        for (c, name) in comms {
            let on = self.mp.comm == Some(c);
            if ui
                .selectable_label(on, &name)
                .on_hover_text("highlight its calls")
                .clicked()
            {
                self.mp.comm = (!on).then_some(c);
            }
        }
        if let Some((what @ ("continue" | "pause"), e)) = &self.ui.action_error {
            ui.colored_label(egui::Color32::from_rgb(220, 60, 60), format!("{what}: {e}"));
        }
    }

    fn rank_ui(&mut self, ui: &mut egui::Ui, r: &RankRow) {
        ui.horizontal(|ui| {
            let mut shown = !self.mp.hidden.contains(&r.lane);
            if ui.checkbox(&mut shown, &r.name).changed() {
                if shown {
                    self.mp.hidden.remove(&r.lane);
                } else {
                    self.mp.hidden.insert(r.lane);
                }
            }
            ui.colored_label(r.status.1, RichText::new(&r.status.0).small());
        });
        ui.horizontal(|ui| {
            ui.add_space(18.0);
            let release = Command::Continue {
                thread: Some(r.name.clone()),
                event_id: None,
                trace: None,
            };
            if ui
                .add_enabled(r.held, egui::Button::new("Continue").small())
                .clicked()
            {
                if r.paused {
                    let pause = Command::Pause {
                        thread: r.name.clone(),
                        on: false,
                    };
                    self.act("pause", pause);
                }
                self.act("continue", release.clone());
            }
            let next = ui.add_enabled(r.held, egui::Button::new("Next").small());
            if next.on_hover_text("release it and hold its next event").clicked() {
                if !r.paused {
                    let pause = Command::Pause {
                        thread: r.name.clone(),
                        on: true,
                    };
                    self.act("pause", pause);
                }
                self.act("continue", release);
            }
            let mut race = self.race_on(Some(&r.name));
            let toggle = ui.toggle_value(&mut race, "Race");
            if toggle
                .on_hover_text("hold its wildcard receives, to pick their sends")
                .changed()
            {
                self.set_race(Some(r.name.clone()), race);
            }
            let mut paused = r.paused;
            if ui.toggle_value(&mut paused, "Pause").changed() {
                let pause = Command::Pause {
                    thread: r.name.clone(),
                    on: paused,
                };
                self.act("pause", pause);
            }
        });
    }

    /// Breakpoints on the calls the job has made, by call, filtered by name.
    fn mpi_breakpoints_ui(&mut self, ui: &mut egui::Ui) {
        ui.horizontal(|ui| {
            ui.label("filter");
            ui.text_edit_singleline(&mut self.ui.bp_filter);
        });
        let filter = self.ui.bp_filter.to_lowercase();
        let mut calls: BTreeMap<String, Vec<(Option<i32>, String)>> = BTreeMap::new();
        for n in self.model.nodes() {
            let (op, thread) = self.model.node_names(n.key);
            if op.to_lowercase().contains(&filter) {
                let rank = crate::model::links::world_rank(thread);
                calls
                    .entry(op.to_owned())
                    .or_default()
                    .push((rank, thread.to_owned()));
            }
        }
        egui::ScrollArea::vertical()
            .id_salt("mpi-bp-scroll")
            .max_height(ui.available_height() * 0.6)
            .show(ui, |ui| {
                for (op, mut ranks) in calls {
                    ranks.sort();
                    let open = !self.ui.collapsed.contains(&op);
                    let text = format!("{} {op} ({} ranks)", if open { "-" } else { "+" }, ranks.len());
                    if ui.selectable_label(false, RichText::new(text).strong()).clicked() {
                        if open {
                            self.ui.collapsed.insert(op.clone());
                        } else {
                            self.ui.collapsed.remove(&op);
                        }
                    }
                    if open {
                        for (_, t) in ranks {
                            ui.horizontal(|ui| self.slot_ui(ui, &op, &t));
                        }
                    }
                }
            });
        ui.separator();
        self.conditions_ui(ui);
    }

    /// The call sites as a tree; a file, a function or a line highlights its calls.
    fn sites_ui(&mut self, ui: &mut egui::Ui) {
        let Some(g) = self.model.messages() else { return };
        let mut tree: BTreeMap<String, BTreeMap<String, Vec<(u32, String)>>> = BTreeMap::new();
        for &s in g.sites() {
            let (file, function, line) = split_site(g.name(s));
            tree.entry(file.to_owned())
                .or_default()
                .entry(function.to_owned())
                .or_default()
                .push((s, line.to_owned()));
        }
        if ui
            .add_enabled(!self.mp.sites.is_empty(), egui::Button::new("Clear highlight"))
            .clicked()
        {
            self.mp.sites.clear();
        }
        let mut pick: Option<Vec<u32>> = None;
        let current = self.mp.sites.clone();
        egui::ScrollArea::vertical()
            .id_salt("sites-scroll")
            .show(ui, |ui| {
                for (file, functions) in &tree {
                    let all: Vec<u32> = functions.values().flatten().map(|(s, _)| *s).collect();
                    egui::CollapsingHeader::new(file)
                        .default_open(true)
                        .show(ui, |ui| {
                            if ui
                                .selectable_label(same(&current, &all), "every call in this file")
                                .clicked()
                            {
                                pick = Some(all.clone());
                            }
                            for (function, lines) in functions {
                                let ids: Vec<u32> = lines.iter().map(|(s, _)| *s).collect();
                                egui::CollapsingHeader::new(function)
                                    .default_open(true)
                                    .show(ui, |ui| {
                                        if lines.len() > 1
                                            && ui
                                                .selectable_label(same(&current, &ids), "every line")
                                                .clicked()
                                        {
                                            pick = Some(ids.clone());
                                        }
                                        for (s, line) in lines {
                                            let text = if line.is_empty() {
                                                "here".to_owned()
                                            } else {
                                                format!("line {line}")
                                            };
                                            if ui.selectable_label(same(&current, &[*s]), text).clicked() {
                                                pick = Some(vec![*s]);
                                            }
                                        }
                                    });
                            }
                        });
                }
            });
        if let Some(mut p) = pick {
            p.sort_unstable();
            self.mp.sites = if p == current { Vec::new() } else { p };
        }
    }
}

/// Whether the highlighted sites are exactly `ids`.
fn same(current: &[u32], ids: &[u32]) -> bool {
    let mut ids = ids.to_vec();
    ids.sort_unstable();
    !current.is_empty() && current == ids.as_slice()
}

#[cfg(test)]
mod tests {
    use super::split_site;

    #[test]
    fn sites_split_into_file_function_and_line() {
        assert_eq!(
            split_site("mergesort.c:133 (main)"),
            ("mergesort.c", "main", "133")
        );
        assert_eq!(split_site("a/b:c.c:7 (f (x))"), ("a/b:c.c", "f (x)", "7"));
        assert_eq!(
            split_site("main+0x1c (prog)"),
            ("(no line information)", "main+0x1c (prog)", "")
        );
    }
}
