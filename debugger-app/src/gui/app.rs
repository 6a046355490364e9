//! The debugger window: toolbar, breakpoints panel, unfolded graph, queue tabs, message
//! and state inspector, event log. UI code only *reads* the model and returns
//! [`Command`]s; they are applied in one place after the frame ([`App::apply`]).

use super::canvas::Canvas;
use super::graph::{status_color, status_name, FixedLayout, FixedState, GraphSync};
use super::script::Script;
use super::session::{ProcessEvent, Session};
use crate::conn::ConnEvent;
use crate::model::{LogLine, Model, Node, NodeKey, NodeStatus};
use egui::{Color32, RichText};
use egui_graphs::{GraphView, SettingsInteraction, SettingsNavigation, SettingsStyle};
use racetrack_protocol::{Command, Event, QueueEntry};
use serde_json::Value;
use std::collections::HashMap;
use std::time::{Duration, Instant};

/// How long a frame may spend ingesting events before drawing.
const INGEST_BUDGET: Duration = Duration::from_millis(6);

/// Bottom tabs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Tab {
    /// All pending messages of the node's thread (reorderable).
    ThreadQueue,
    /// Pending messages for the node's operation.
    OpQueue,
    /// Messages the node processed.
    Processed,
    /// Messages the node sent.
    Sent,
}

/// Per-window UI state (not the model).
#[derive(Default)]
pub struct UiState {
    /// Selected unfolded node.
    pub selected: Option<NodeKey>,
    /// Selected message: its id, destination op and content if known.
    pub selected_msg: Option<(String, String, Option<Value>)>,
    /// The bottom tab.
    pub tab: Option<Tab>,
    /// A reorder being edited: thread and message keys.
    pub order: Option<(String, Vec<String>)>,
    /// Held send being edited: event id and JSON text.
    pub edit: Option<(u64, String)>,
    /// Thread state being edited: thread and JSON text.
    pub state_edit: Option<(String, String)>,
    /// Event log filter.
    pub log_filter: String,
    /// Keep the whole graph fitted to the view (off: zoom and pan freely).
    pub fit: bool,
    /// Operations whose breakpoint rows are folded.
    pub collapsed: std::collections::BTreeSet<String>,
    /// The last user action and the error the agent answered, shown where the user acted.
    pub action_error: Option<(&'static str, String)>,
    last_action: Option<(&'static str, Instant)>,
}

/// Events per second, over a sliding second.
#[derive(Default)]
struct Rate {
    window_start: Option<Instant>,
    count_at_start: u64,
    per_s: f64,
}

impl Rate {
    fn update(&mut self, count: u64) {
        let now = Instant::now();
        let start = *self.window_start.get_or_insert(now);
        let dt = now - start;
        if dt >= Duration::from_secs(1) {
            self.per_s = (count - self.count_at_start) as f64 / dt.as_secs_f64();
            self.window_start = Some(now);
            self.count_at_start = count;
        }
    }
}

/// The application.
pub struct App {
    /// The model (plain Rust).
    pub model: Model,
    /// The session (connection, program).
    pub session: Option<Session>,
    /// UI state.
    pub ui: UiState,
    graph: GraphSync,
    /// The view of graphs past [`LABELS_MAX`] nodes, painted directly.
    canvas: Canvas,
    rate: Rate,
    script: Option<Script>,
    /// Set when the window should close with this exit code (scripted runs).
    pub quit: Option<i32>,
    /// Where the graph was drawn in the last frame.
    graph_rect: Option<egui::Rect>,
    commands: Vec<Command>,
    pause_all: bool,
    /// The program exited while its connection was still open: the exit is shown once the
    /// agent's last events are in (the connection closes), or after [`EXIT_GRACE`].
    pending_exit: Option<(Option<i32>, Instant)>,
}

/// How long an exit waits for the connection's last events.
const EXIT_GRACE: Duration = Duration::from_secs(2);

impl App {
    /// A window on `session`, optionally driven by a script.
    pub fn new(session: Session, script: Option<Script>) -> Self {
        Self {
            model: Model::default(),
            session: Some(session),
            ui: UiState {
                tab: Some(Tab::ThreadQueue),
                fit: true,
                ..UiState::default()
            },
            graph: GraphSync::default(),
            canvas: Canvas::default(),
            rate: Rate::default(),
            script,
            quit: None,
            graph_rect: None,
            commands: Vec::new(),
            pause_all: false,
            pending_exit: None,
        }
    }

    /// A window with no connection over a given model (benchmarks, previews).
    pub fn offline(model: Model) -> Self {
        Self {
            model,
            session: None,
            ui: UiState {
                tab: Some(Tab::ThreadQueue),
                fit: true,
                ..UiState::default()
            },
            graph: GraphSync::default(),
            canvas: Canvas::default(),
            rate: Rate::default(),
            script: None,
            quit: None,
            graph_rect: None,
            commands: Vec::new(),
            pause_all: false,
            pending_exit: None,
        }
    }

    /// Ingest what has arrived, within a time budget. Returns whether more is waiting.
    pub fn ingest(&mut self) -> bool {
        let Some(s) = &self.session else { return false };
        let deadline = Instant::now() + INGEST_BUDGET;
        let mut more = false;
        loop {
            match s.events.try_recv() {
                Ok(ConnEvent::Event(ev)) => {
                    if let Event::Error { message, .. } = &ev {
                        if let Some((what, at)) = self.ui.last_action {
                            if at.elapsed() < Duration::from_secs(3) {
                                self.ui.action_error = Some((what, message.clone()));
                            }
                        }
                    }
                    self.model.ingest(&ev);
                }
                Ok(ConnEvent::Packed(names, ps)) => {
                    for p in &ps {
                        self.model.ingest_packed(&names, p);
                    }
                }
                Ok(ConnEvent::Closed(reason)) => {
                    if let Some(r) = reason {
                        self.model.ingest(&Event::Error {
                            message: r,
                            req: None,
                        });
                    }
                    self.model.attached = false;
                    if s.process.is_none() && self.model.exited.is_none() {
                        self.model.exited = Some(None);
                    }
                }
                Err(_) => break,
            }
            if Instant::now() >= deadline {
                more = true;
                break;
            }
        }
        if let Some(p) = &s.process {
            while let Ok(pe) = p.try_recv() {
                match pe {
                    ProcessEvent::Output(stream, line) => {
                        self.model.log.push_back(LogLine {
                            level: stream,
                            text: line,
                        });
                    }
                    ProcessEvent::Exited(code) => self.pending_exit = Some((code, Instant::now())),
                }
            }
        }
        if let Some((code, at)) = self.pending_exit {
            // The agent closes the connection as the program ends; its last events may
            // still be on the way when the process is seen gone.
            if !self.model.attached || (!more && at.elapsed() >= EXIT_GRACE) {
                self.pending_exit = None;
                self.model.program_exited(code);
            }
        }
        self.rate.update(self.model.event_count);
        more
    }

    /// Send a command from the UI (mirrored in the model's policy).
    fn act(&mut self, what: &'static str, cmd: Command) {
        self.ui.last_action = Some((what, Instant::now()));
        self.ui.action_error = None;
        self.commands.push(cmd);
    }

    /// Apply the commands the frame produced.
    pub fn apply(&mut self) {
        for cmd in std::mem::take(&mut self.commands) {
            self.model.note_command(&cmd);
            let sent = self.session.as_ref().is_some_and(|s| s.send(cmd));
            if !sent {
                self.model.log.push_back(LogLine {
                    level: "error",
                    text: "not connected: command not sent".into(),
                });
            }
        }
    }

    /// One frame of the whole UI.
    pub fn frame_ui(&mut self, ui: &mut egui::Ui) {
        if self.ingest() {
            ui.ctx().request_repaint();
        } else if self.model.attached {
            ui.ctx().request_repaint_after(Duration::from_millis(250));
        }
        if let Some(script) = &mut self.script {
            match script.step(&self.model) {
                Ok(super::script::Step::Send(cmd)) => self.commands.push(cmd),
                Ok(super::script::Step::Wait) => ui.ctx().request_repaint_after(Duration::from_millis(20)),
                Ok(super::script::Step::Quit(code)) => self.quit = Some(code),
                Ok(super::script::Step::Select(key)) => self.select_node(key),
                Ok(super::script::Step::Done) => {}
                Err(e) => {
                    self.model.log.push_back(LogLine {
                        level: "error",
                        text: format!("script: {e}"),
                    });
                    self.quit = Some(1);
                }
            }
        }
        self.graph.sync(&self.model);

        egui::Panel::top("toolbar").show(ui, |ui| self.toolbar_ui(ui));
        egui::Panel::left("breakpoints")
            .resizable(true)
            .default_size(260.0)
            .show(ui, |ui| self.breakpoints_ui(ui));
        egui::Panel::right("log")
            .resizable(true)
            .default_size(280.0)
            .show(ui, |ui| self.log_ui(ui));
        egui::Panel::bottom("details")
            .resizable(true)
            .default_size(260.0)
            .min_size(250.0)
            .show(ui, |ui| self.details_ui(ui));
        egui::CentralPanel::default().show(ui, |ui| self.graph_ui(ui));
        self.apply();
    }

    /// Whether the program's final report (its last stdout line, JSON with
    /// `matches_reference`) says its result matches the sequential reference.
    pub fn result_matches(&self) -> Option<bool> {
        let line = self.model.log.iter().rev().find(|l| l.level == "stdout")?;
        let v: Value = serde_json::from_str(&line.text).ok()?;
        v.get("matches_reference")?.as_bool()
    }

    fn status_text(&self) -> String {
        match (&self.model.exited, self.model.attached) {
            (Some(Some(code)), _) => format!("program exited with code {code}"),
            (Some(None), _) => "program ended (detached)".to_owned(),
            (None, true) => format!(
                "attached to {} (pid {})",
                self.model.program.as_deref().unwrap_or("?"),
                self.model.pid.unwrap_or_default()
            ),
            (None, false) => "connecting...".to_owned(),
        }
    }

    fn toolbar_ui(&mut self, ui: &mut egui::Ui) {
        ui.horizontal_wrapped(|ui| {
            ui.heading("Racetrack");
            ui.separator();
            let status = self.status_text();
            let color = if self.model.exited.is_some() {
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
            let can_continue = !self.model.held.is_empty() && self.model.exited.is_none();
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
            let mut step = self.model.step_mode;
            if ui.toggle_value(&mut step, "Global step").changed() {
                self.act("step_mode", Command::StepMode { on: step });
            }
            let mut pause = self.pause_all;
            if ui.toggle_value(&mut pause, "Pause all").changed() {
                self.pause_all = pause;
                let threads: Vec<String> = self
                    .model
                    .collections
                    .iter()
                    .flat_map(|c| c.threads.clone())
                    .collect();
                for t in threads {
                    self.act("pause", Command::Pause { thread: t, on: pause });
                }
            }
            ui.separator();
            let threads: usize = self.model.collections.iter().map(|c| c.threads.len()).sum();
            ui.label(format!(
                "events {} · {:.0}/s · held {} · threads {}",
                self.model.event_count,
                self.rate.per_s,
                self.model.held.len(),
                threads
            ));
        });
    }

    fn held_start_of(&self, op: &str, thread: &str) -> Option<u64> {
        self.model.held.iter().find_map(|(id, e)| match e {
            Event::Start(s) if s.op == op && s.thread == thread => Some(*id),
            _ => None,
        })
    }

    /// One breakpoint slot: break box, trace box, Continue (enabled when hit).
    fn slot_ui(&mut self, ui: &mut egui::Ui, op: &str, t: &str) {
        ui.add_space(12.0);
        let key = (op.to_owned(), t.to_owned());
        let set = self.model.breakpoints.get(&key).copied();
        let mut on = set.is_some();
        if ui.checkbox(&mut on, format!("{op} @ {t}")).changed() {
            let trace = set.unwrap_or(false);
            self.act(
                "break",
                Command::Break {
                    op: op.to_owned(),
                    thread: Some(t.to_owned()),
                    on,
                    trace,
                },
            );
        }
        let mut trace = set.unwrap_or(false);
        if ui.checkbox(&mut trace, "trace").changed() {
            self.act(
                "break",
                Command::Break {
                    op: op.to_owned(),
                    thread: Some(t.to_owned()),
                    on: true,
                    trace,
                },
            );
        }
        let hit = self.held_start_of(op, t);
        if ui
            .add_enabled(hit.is_some(), egui::Button::new("Continue"))
            .clicked()
        {
            self.act(
                "continue",
                Command::Continue {
                    thread: None,
                    event_id: hit,
                    trace: None,
                },
            );
        }
    }

    fn breakpoints_ui(&mut self, ui: &mut egui::Ui) {
        ui.strong("Operation breakpoints");
        ui.label(
            RichText::new("break: hold its starts · trace: follow its outputs")
                .small()
                .weak(),
        );
        // One row per operation header and per (operation, thread) slot; only the rows in
        // view are built, so thousands of slots cost what a screenful does.
        let ops = &self.model.operations;
        let mut rows: Vec<(usize, Option<usize>)> = Vec::new();
        for (o, op) in ops.iter().enumerate() {
            rows.push((o, None));
            if !self.ui.collapsed.contains(&op.name) {
                rows.extend((0..op.threads.len()).map(|t| (o, Some(t))));
            }
        }
        let row_h = ui.spacing().interact_size.y + ui.spacing().item_spacing.y;
        let ops = ops.clone();
        egui::ScrollArea::vertical()
            .id_salt("bp-scroll")
            .max_height(ui.available_height() * 0.7)
            .show_rows(ui, row_h, rows.len(), |ui, range| {
                for &(o, slot) in &rows[range] {
                    let op = &ops[o];
                    match slot {
                        None => {
                            let open = !self.ui.collapsed.contains(&op.name);
                            let text = format!("{} {} ({})", if open { "-" } else { "+" }, op.name, op.kind);
                            if ui.selectable_label(false, RichText::new(text).strong()).clicked() {
                                if open {
                                    self.ui.collapsed.insert(op.name.clone());
                                } else {
                                    self.ui.collapsed.remove(&op.name);
                                }
                            }
                        }
                        Some(ti) => {
                            let t = &op.threads[ti];
                            ui.horizontal(|ui| self.slot_ui(ui, &op.name, t));
                        }
                    }
                }
            });
        ui.separator();
        ui.strong("Threads");
        let colls = self.model.collections.clone();
        egui::ScrollArea::vertical()
            .id_salt("threads-scroll")
            .show(ui, |ui| {
                for c in &colls {
                    ui.horizontal_wrapped(|ui| {
                        for t in &c.threads {
                            let mut paused = self.model.paused.contains(t);
                            if ui.toggle_value(&mut paused, format!("pause {t}")).changed() {
                                self.act(
                                    "pause",
                                    Command::Pause {
                                        thread: t.clone(),
                                        on: paused,
                                    },
                                );
                            }
                        }
                    });
                }
            });
        if let Some((what @ ("break" | "pause" | "continue"), e)) = &self.ui.action_error {
            ui.colored_label(Color32::from_rgb(220, 60, 60), format!("{what}: {e}"));
        }
    }

    fn graph_ui(&mut self, ui: &mut egui::Ui) {
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
            let labels = if self.model.nodes.len() <= LABELS_MAX {
                "* traced · edge labels: message counts · scroll to zoom, drag to pan"
            } else {
                "* traced · large graph: a node's label shows on hover or selection · scroll to zoom, drag to pan"
            };
            ui.label(RichText::new(labels).small().weak());
            ui.toggle_value(&mut self.ui.fit, "Fit");
        });
        if self.model.nodes.len() < 2 {
            // The view fits itself to the graph on its first frame: wait for a graph that
            // has an extent (one node alone would fill the screen).
            ui.add_space(20.0);
            ui.label("The unfolded graph appears as the program runs: press Continue.");
            for (key, n) in &self.model.nodes {
                ui.label(
                    RichText::new(format!("{} @ {}: {}", key.0, key.1, status_name(n.status)))
                        .color(status_color(n.status)),
                );
            }
            if let Some(key) = self
                .model
                .nodes
                .values()
                .min_by_key(|n| n.order)
                .map(|n| n.key.clone())
            {
                if self.ui.selected.is_none() {
                    self.select_node(key);
                }
            }
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
        if self.model.nodes.len() > LABELS_MAX {
            // Thousands of nodes: painted directly (see `canvas.rs`).
            let selected = self.ui.selected.as_ref().and_then(|k| self.graph.index_of(k));
            let clicked = self.canvas.show(ui, &self.graph, selected, self.ui.fit);
            if let Some(key) = clicked.and_then(|i| self.graph.key_at(i)).cloned() {
                if self.ui.selected.as_ref() != Some(&key) {
                    self.select_node(key);
                }
            }
            return;
        }
        self.graph.select(self.ui.selected.as_ref());
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
            if let Some(key) = self.graph.key_of(idx).cloned() {
                if self.ui.selected.as_ref() != Some(&key) {
                    self.select_node(key);
                }
            }
        }
    }

    /// How each node was drawn in the last frame (its box on the screen, its label's font
    /// size and text), when `egui_graphs` draws the graph (up to [`LABELS_MAX`] nodes).
    pub fn drawn_nodes(&self) -> Vec<(NodeKey, super::node::Drawn)> {
        if self.model.nodes.len() > LABELS_MAX {
            return Vec::new();
        }
        self.graph
            .g
            .nodes_iter()
            .filter_map(|(_, n)| Some((n.payload().clone(), n.display().drawn()?.clone())))
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

    /// Where the node `key` was drawn in the last frame, when the graph is painted
    /// directly (past [`LABELS_MAX`] nodes).
    pub fn node_screen_pos(&self, key: &NodeKey) -> Option<egui::Pos2> {
        if self.model.nodes.len() <= LABELS_MAX {
            return None;
        }
        let i = self.graph.index_of(key)?;
        self.canvas.screen_pos(*self.graph.pos.get(i)?)
    }

    /// Select an unfolded node (as a click on it does).
    pub fn select_node(&mut self, key: NodeKey) {
        self.ui.selected = Some(key);
        self.ui.selected_msg = None;
        self.ui.order = None;
    }

    /// The selected thread's pending messages, with the message of a held start first.
    fn thread_queue(&self, thread: &str) -> Vec<QueueEntry> {
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

    fn details_ui(&mut self, ui: &mut egui::Ui) {
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

    fn is_selected_msg(&self, id: &str, op: &str) -> bool {
        self.ui
            .selected_msg
            .as_ref()
            .is_some_and(|(i, o, _)| i == id && o == op)
    }

    fn rows_ui(&mut self, ui: &mut egui::Ui, rows: &[QueueEntry]) {
        for m in rows {
            self.message_row_ui(ui, m);
        }
    }

    /// One pending message (type, source, destination); clicking it selects it.
    fn message_row_ui(&mut self, ui: &mut egui::Ui, m: &QueueEntry) {
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
    fn running_queue_ui(&mut self, ui: &mut egui::Ui, thread: &str) {
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
    fn recent_history<T: Clone>(&self, op: &str, thread: &str, of: impl Fn(&Node) -> &Vec<T>) -> Vec<T> {
        self.model
            .nodes
            .get(&(op.to_owned(), thread.to_owned()))
            .map(|n| of(n).iter().rev().take(500).cloned().collect())
            .unwrap_or_default()
    }

    /// Ask the agent for the thread's queue, with contents.
    fn refresh_button(&mut self, ui: &mut egui::Ui, thread: &str) {
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

    fn unlisted_ui(&self, ui: &mut egui::Ui, thread: &str) {
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

    fn thread_queue_ui(&mut self, ui: &mut egui::Ui, thread: &str) {
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

    fn inspector_ui(&mut self, ui: &mut egui::Ui, thread: &str) {
        // A held send of this thread can be edited before it leaves.
        let held = self.model.held_of(thread).map(|(id, e)| (*id, e.clone()));
        if let Some((id, Event::Send(s))) = &held {
            ui.strong(format!(
                "Held send {} -> {}",
                s.msg,
                s.to_op.as_deref().unwrap_or("(result)")
            ));
            let text = match &self.ui.edit {
                Some((eid, t)) if eid == id => t.clone(),
                _ => serde_json::to_string_pretty(s.content.as_ref().unwrap_or(&Value::Null))
                    .unwrap_or_default(),
            };
            let mut text_mut = text;
            ui.add(
                egui::TextEdit::multiline(&mut text_mut)
                    .code_editor()
                    .desired_rows(6)
                    .id_salt("edit-text"),
            );
            self.ui.edit = Some((*id, text_mut.clone()));
            if ui.button("Apply edit").clicked() {
                match serde_json::from_str::<Value>(&text_mut) {
                    Ok(content) => self.act(
                        "edit",
                        Command::Edit {
                            event_id: *id,
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
        } else {
            self.ui.edit = None;
        }
        // The state of a thread suspended at a step boundary.
        if matches!(&held, Some((_, Event::Start(_) | Event::Stop(_)))) {
            ui.horizontal(|ui| {
                ui.strong(format!("State of {thread}"));
                if ui.button("Load state").clicked() {
                    self.ui.state_edit = None;
                    self.act(
                        "state",
                        Command::State {
                            thread: thread.to_owned(),
                        },
                    );
                }
            });
            if let Some(v) = self.model.states.get(thread) {
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
                                thread: thread.to_owned(),
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
        // The selected message's content as a tree.
        match self.ui.selected_msg.clone() {
            Some((id, op, content)) => {
                ui.strong(format!("Message {id} -> {op}"));
                let content = content.or_else(|| {
                    self.model
                        .queues
                        .get(thread)
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
                                    thread: thread.to_owned(),
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
            None => {
                ui.label(RichText::new("select a message to see its content").weak());
            }
        }
    }

    fn log_ui(&mut self, ui: &mut egui::Ui) {
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
                for line in self.model.log.iter().filter(|l| {
                    filter.is_empty() || l.text.to_lowercase().contains(&filter) || l.level.contains(&filter)
                }) {
                    let color = match line.level {
                        "error" | "panic" => Color32::from_rgb(220, 60, 60),
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

/// A JSON value as a collapsible tree.
fn json_tree_ui(ui: &mut egui::Ui, salt: &str, v: &Value) {
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

/// Largest unfolded graph whose node labels are always drawn.
pub const LABELS_MAX: usize = 1000;

impl eframe::App for App {
    fn ui(&mut self, ui: &mut egui::Ui, _frame: &mut eframe::Frame) {
        self.frame_ui(ui);
        if let Some(code) = self.quit {
            if std::env::var(racetrack_protocol::launch::ENV_DEBUG).is_ok() {
                for (k, n) in &self.model.nodes {
                    eprintln!(
                        "node {k:?}: {:?} traced={} processed={:?}",
                        n.status, n.traced, n.processed
                    );
                }
                for (_, n) in self.graph.g.nodes_iter() {
                    eprintln!("drawn {:?} label={:?}", n.payload(), n.label());
                }
            }
            if code != 0 {
                eprintln!("racetrack: scripted run failed; log:");
                for l in self.model.log.iter().rev().take(10) {
                    eprintln!("  [{}] {}", l.level, l.text);
                }
            }
            ui.ctx().send_viewport_cmd(egui::ViewportCommand::Close);
        }
    }
}
