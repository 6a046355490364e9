//! The unfolded graph: `egui_graphs` up to `LABELS_MAX` nodes, the direct canvas past it;
//! selection, and what tests read of the drawing.

use crate::gui::app::App;
use crate::gui::app::LABELS_MAX;
use crate::gui::graph::{status_color, status_name, FixedLayout, FixedState, DEADLOCKED};
use crate::gui::mpstyle::Family;
use crate::model::{NodeId, NodeKey, NodeStatus, ProcId};
use egui::RichText;
use egui_graphs::{GraphView, SettingsInteraction, SettingsNavigation, SettingsStyle};

impl App {
    pub(crate) fn graph_ui(&mut self, ui: &mut egui::Ui) {
        if self.mpi_job() && !self.ui.unfolded_view {
            self.messages_ui(ui);
            return;
        }
        self.legend_ui(ui);
        if self.model.nodes().len() < 2 {
            self.no_graph_yet_ui(ui);
            return;
        }
        // Dragging or zooming the graph turns Fit off (with Fit on, the view refits every
        // frame and would snap back).
        let area = ui.available_rect_before_wrap();
        let navigating = ui.input(|i| {
            i.pointer.hover_pos().is_some_and(|p| area.contains(p))
                && (i.pointer.is_decidedly_dragging()
                    || i.smooth_scroll_delta != egui::Vec2::ZERO
                    || i.zoom_delta() != 1.0)
        });
        if navigating {
            self.ui.fit = false;
        }
        if self.model.nodes().len() > LABELS_MAX {
            // Thousands of nodes: painted directly (see `canvas.rs`).
            let selected = self.ui.selected.map(NodeId::index);
            let clicked = self.canvas.show(ui, &self.graph, selected, self.ui.fit);
            // The canvas draws node `i` of the model at index `i`.
            let clicked = clicked.filter(|&i| i < self.model.nodes().len());
            if let Some(id) = clicked.map(|i| NodeId(i as u32)) {
                if self.ui.selected != Some(id) {
                    self.select_node(id);
                }
            }
            return;
        }
        self.graph_view_ui(ui);
    }

    /// The status colours, what the labels mean, and the Fit toggle.
    fn legend_ui(&mut self, ui: &mut egui::Ui) {
        ui.horizontal_wrapped(|ui| {
            for s in [
                NodeStatus::Idle,
                NodeStatus::Running,
                NodeStatus::HeldStart,
                NodeStatus::HeldSend,
                NodeStatus::HeldStop,
                NodeStatus::Finished,
            ] {
                let (rect, _) = ui.allocate_exact_size(egui::vec2(10.0, 10.0), egui::Sense::hover());
                ui.painter().circle_filled(rect.center(), 5.0, status_color(s));
                ui.label(RichText::new(status_name(s)).small());
            }
            if self.model.control.deadlock.is_some() {
                let (rect, _) = ui.allocate_exact_size(egui::vec2(10.0, 10.0), egui::Sense::hover());
                ui.painter().circle_filled(rect.center(), 5.0, DEADLOCKED);
                ui.label(RichText::new("deadlocked").small());
            }
            let labels = if self.model.nodes().len() <= LABELS_MAX {
                "* traced · edge labels: message counts · scroll to zoom, drag to pan"
            } else {
                "* traced · large graph: a node's label shows on hover or selection · scroll to zoom, drag to pan"
            };
            ui.label(RichText::new(labels).small().weak());
            ui.toggle_value(&mut self.ui.fit, "Fit");
            if self.mpi_job() && ui.button("Message-passing graph").clicked() {
                self.ui.unfolded_view = false;
            }
        });
    }

    /// An MPI job's message-passing graph, with its legend.
    fn messages_ui(&mut self, ui: &mut egui::Ui) {
        ui.horizontal_wrapped(|ui| {
            for f in Family::ALL {
                let (rect, _) = ui.allocate_exact_size(egui::vec2(14.0, 10.0), egui::Sense::hover());
                ui.painter().rect_filled(rect, 2.0, f.color());
                ui.label(RichText::new(f.name()).small());
            }
            ui.label(
                RichText::new(
                    "dashed: wildcard pending · red: held · white: in the call · arrows: send -> receive",
                )
                .small()
                .weak(),
            );
            if self.model.control.deadlock.is_some() {
                let (rect, _) = ui.allocate_exact_size(egui::vec2(14.0, 10.0), egui::Sense::hover());
                ui.painter().rect_filled(rect, 2.0, DEADLOCKED);
                ui.label(RichText::new("deadlocked").small());
            }
            let mut race = self.race_on(None);
            let toggle = ui.toggle_value(&mut race, "Race mode");
            if toggle
                .on_hover_text("hold every wildcard receive, to pick the send it takes")
                .changed()
            {
                self.set_race(None, race);
            }
            ui.toggle_value(&mut self.mp.follow, "Follow")
                .on_hover_text("keep the latest calls in view");
            if ui.button("Fit width").clicked() {
                self.mp.refit();
            }
            if ui.button("Whole job").clicked() {
                self.mp.whole();
            }
            let fold = ui.toggle_value(&mut self.mp.folds.on, "Fold between collectives");
            if fold
                .on_hover_text("draw the calls between two collectives as one row; a click on it opens it")
                .changed()
            {
                self.mp.folds.opened.clear();
            }
            if ui.button("Unfolded graph").clicked() {
                self.ui.unfolded_view = true;
            }
        });
        self.race_ui(ui);
        let races: Vec<_> = self.races().into_iter().map(|r| (r.recv, r.candidates)).collect();
        let Some(g) = self.model.messages() else { return };
        if g.dropped() > 0 {
            ui.label(RichText::new(format!("{} later calls not drawn (graph full)", g.dropped())).small());
        }
        let Some(v) = self.mp.show(ui, &self.model, g, &races) else {
            return;
        };
        // A click on a candidate send picks it; on another call, selects it.
        if self.pick_by_send(v) {
            return;
        }
        let Some(g) = self.model.messages() else { return };
        let x = &g.vertices()[v as usize];
        let key = NodeKey {
            proc: ProcId::FIRST,
            op: x.call,
            thread: g.lanes()[x.lane as usize].thread.thread,
        };
        if let Some(id) = self.model.unfolded().and_then(|u| u.find(key)) {
            self.select_node(id);
        }
    }

    /// Before the graph has two nodes: the view fits itself to the graph on its first
    /// frame, so it waits for a graph that has an extent (one node alone would fill the
    /// screen); the nodes so far are listed, the first selected.
    fn no_graph_yet_ui(&mut self, ui: &mut egui::Ui) {
        ui.add_space(20.0);
        ui.label("The unfolded graph appears as the program runs: press Continue.");
        for n in self.model.nodes() {
            let (op, thread) = self.model.node_names(n.key);
            ui.label(
                RichText::new(format!("{op} @ {thread}: {}", status_name(n.status)))
                    .color(status_color(n.status)),
            );
        }
        if !self.model.nodes().is_empty() && self.ui.selected.is_none() {
            self.select_node(NodeId(0));
        }
    }

    /// Up to [`LABELS_MAX`] nodes: `egui_graphs` draws the graph.
    fn graph_view_ui(&mut self, ui: &mut egui::Ui) {
        self.graph.select(self.ui.selected);
        let resp = GraphView::<FixedState, FixedLayout>::new()
            .with_interactions(
                // Nodes stay where the layout puts them (egui_graphs drags them by
                // default: a click on a box could move it); a drag pans the view.
                &SettingsInteraction::new()
                    .with_dragging_enabled(false)
                    .with_node_clicking_enabled(true)
                    .with_node_selection_enabled(true),
            )
            .with_navigations(
                &SettingsNavigation::new()
                    .with_zoom_and_pan_enabled(true)
                    .with_fit_to_screen_enabled(self.ui.fit)
                    .with_fit_to_screen_padding(0.08),
            )
            // Up to LABELS_MAX nodes (larger graphs are painted by the canvas). Nodes are
            // labelled boxes (`node.rs`); edge labels are message counts.
            .with_styles(&SettingsStyle::new().with_labels_always(true))
            .show(ui, &mut self.graph.g);
        self.graph_rect = Some(resp.response.rect);
        if let Some(&idx) = self.graph.g.selected_nodes().first() {
            if let Some(id) = self.graph.id_of(idx) {
                if self.ui.selected != Some(id) {
                    self.select_node(id);
                }
            }
        }
    }

    /// How each node was drawn in the last frame (its box on the screen, its label's font
    /// size and text), when `egui_graphs` draws the graph (up to [`LABELS_MAX`] nodes).
    pub fn drawn_nodes(&self) -> Vec<(NodeId, crate::gui::node::Drawn)> {
        if self.model.nodes().len() > LABELS_MAX {
            return Vec::new();
        }
        self.graph
            .g
            .nodes_iter()
            .filter_map(|(_, n)| Some((*n.payload(), n.display().drawn()?.clone())))
            .collect()
    }

    /// How many nodes the directly painted graph (past [`LABELS_MAX`] nodes) labelled in
    /// the last frame: none while nodes are too dense for their labels.
    pub fn canvas_labelled(&self) -> usize {
        self.canvas.labelled()
    }

    /// Where the graph was drawn in the last frame.
    pub fn graph_rect(&self) -> Option<egui::Rect> {
        self.graph_rect
    }

    /// Where node `id` was drawn in the last frame, when the graph is painted directly
    /// (past [`LABELS_MAX`] nodes).
    pub fn node_screen_pos(&self, id: NodeId) -> Option<egui::Pos2> {
        if self.model.nodes().len() <= LABELS_MAX {
            return None;
        }
        self.canvas.screen_pos(*self.graph.pos.get(id.index())?)
    }

    /// Select an unfolded node (as a click on it does).
    pub fn select_node(&mut self, id: NodeId) {
        self.ui.selected = Some(id);
        self.ui.selected_msg = None;
        self.ui.order = None;
    }
}
