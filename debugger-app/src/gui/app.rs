//! The debugger window: toolbar, breakpoints panel, unfolded graph, queue tabs, message
//! and state inspector, event log. UI code only *reads* the model and returns
//! [`Command`]s; they are applied in one place after the frame ([`App::apply`]).

use super::canvas::Canvas;
use super::graph::GraphSync;
use super::mpview::MpView;
use super::script::Script;
use super::session::{ProcessEvent, Session};
use crate::conn::ConnEvent;
use crate::model::{Model, NodeId, ThreadKey};
use racetrack_protocol::{Command, Event};
use serde_json::Value;
use std::time::{Duration, Instant};

/// Largest unfolded graph whose node labels are always drawn.
pub const LABELS_MAX: usize = 1000;

/// How long a frame may spend ingesting events before drawing.
const INGEST_BUDGET: Duration = Duration::from_millis(6);

/// The same when the last frame left events waiting: a program streaming events is
/// followed at [`STREAM_FRAME`] intervals, most of each spent ingesting. Every frame is
/// drawn in full (under Xvfb or on a machine without a GPU, by the CPU, on the cores
/// the program runs on), so drawing fewer while events pour in is what keeps the window
/// from slowing the program: a window that repainted as fast as it could took hpcc
/// (N = 400, 4 ranks) from 1.4 s to 38 s.
const INGEST_BACKLOG: Duration = Duration::from_millis(60);

/// The interval between frames while events keep arriving (10 per second).
pub const STREAM_FRAME: Duration = Duration::from_millis(250);

/// How the program ended: its exit code, or the signal that killed it.
type ExitStatus = (Option<i32>, Option<i32>);

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
    pub selected: Option<NodeId>,
    /// Selected message: its id, destination op and content if known.
    pub selected_msg: Option<(String, String, Option<Value>)>,
    /// The bottom tab.
    pub tab: Option<Tab>,
    /// A reorder being edited: thread and message keys.
    pub order: Option<(ThreadKey, Vec<String>)>,
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
    /// The conditional breakpoint being written.
    pub cond_form: super::panels::CondForm,
    /// The last user action and the error the agent answered, shown where the user acted.
    pub action_error: Option<(&'static str, String)>,
    /// Where the Session menu saves a scenario (empty: not chosen yet, the program's
    /// name is proposed).
    pub scenario_path: String,
    /// The left panel's tab, for an MPI job.
    pub left: super::panels::LeftTab,
    /// The MPI breakpoints' filter.
    pub bp_filter: String,
    /// Show an MPI job's unfolded graph instead of its message-passing graph.
    pub unfolded_view: bool,
    /// Race mode: the thread whose `match` was sent and not answered yet, then (once the
    /// rank said `ok`) the thread to release.
    pub pick: Option<String>,
    pub picked: Option<String>,
    /// Sites of wildcard receives whose order the user accepts (released at once).
    pub accepted: std::collections::BTreeSet<String>,
    /// Held events released because of an accepted site.
    pub released: std::collections::BTreeSet<u64>,
    last_action: Option<(&'static str, Instant)>,
}

/// Events per second, over a sliding second.
#[derive(Default)]
pub(crate) struct Rate {
    window_start: Option<Instant>,
    count_at_start: u64,
    pub(crate) per_s: f64,
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

/// The debugger's window: the model, the session it is fed from, and what the panels
/// remember between frames.
pub struct App {
    /// The model (plain Rust).
    pub model: Model,
    /// The session (connection, program).
    pub session: Option<Session>,
    /// What the panels remember between frames (selection, tabs, edits in progress).
    pub ui: UiState,
    pub(crate) graph: GraphSync,
    /// The view of graphs past [`LABELS_MAX`] nodes, painted directly.
    pub(crate) canvas: Canvas,
    /// The view of an MPI job's message-passing graph.
    pub mp: MpView,
    pub(crate) rate: Rate,
    pub(crate) script: Option<Script>,
    /// Set when the window should close with this exit code (scripted runs).
    pub quit: Option<i32>,
    /// Where the graph was drawn in the last frame.
    pub(crate) graph_rect: Option<egui::Rect>,
    pub(crate) commands: Vec<Command>,
    pub(crate) pause_all: bool,
    /// The program exited while its connection was still open: the exit is shown once the
    /// agent's last events are in (the connection closes), or after [`EXIT_GRACE`].
    pub(crate) pending_exit: Option<(ExitStatus, Instant)>,
    /// A trace viewed without its program (`racetrack open`).
    pub timeline: Option<super::timeline::Timeline>,
    /// The last frame left events waiting.
    backlog: bool,
    /// Frames drawn (`RACETRACK_DEBUG` prints it at the end).
    frames: u64,
}

/// How long an exit waits for the connection's last events.
const EXIT_GRACE: Duration = Duration::from_secs(2);

impl App {
    /// A window on `session`, optionally driven by a script.
    pub fn new(session: Session, script: Option<Script>) -> Self {
        Self {
            model: Model::new().with_unfolded().with_messages(),
            session: Some(session),
            ui: UiState {
                tab: Some(Tab::ThreadQueue),
                fit: true,
                ..UiState::default()
            },
            graph: GraphSync::default(),
            canvas: Canvas::default(),
            mp: MpView::default(),
            rate: Rate::default(),
            script,
            quit: None,
            graph_rect: None,
            commands: Vec::new(),
            pause_all: false,
            pending_exit: None,
            timeline: None,
            backlog: false,
            frames: 0,
        }
    }

    /// The same window driven by `script`.
    pub fn with_script(mut self, script: Option<Script>) -> Self {
        self.script = script;
        self
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
            mp: MpView::default(),
            rate: Rate::default(),
            script: None,
            quit: None,
            graph_rect: None,
            commands: Vec::new(),
            pause_all: false,
            pending_exit: None,
            timeline: None,
            backlog: false,
            frames: 0,
        }
    }

    /// Ingest what has arrived, within a time budget. Returns whether more is waiting.
    pub fn ingest(&mut self) -> bool {
        let Some(s) = &self.session else { return false };
        let budget = if self.backlog {
            INGEST_BACKLOG
        } else {
            INGEST_BUDGET
        };
        let deadline = Instant::now() + budget;
        let mut more = false;
        loop {
            match s.events.try_recv() {
                Ok(ConnEvent::Event(ev)) => ingest_event(&mut self.ui, &mut self.model, &ev),
                Ok(ConnEvent::Events(evs)) => {
                    for ev in &evs {
                        ingest_event(&mut self.ui, &mut self.model, ev);
                    }
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
                    self.model.connection_closed(s.process.is_none());
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
                        self.model.log(stream, line);
                    }
                    ProcessEvent::Exited(code, signal) => {
                        self.pending_exit = Some(((code, signal), Instant::now()))
                    }
                }
            }
        }
        if let Some(((code, signal), at)) = self.pending_exit {
            // The agent closes the connection as the program ends; its last events may
            // still be on the way when the process is seen gone.
            if !self.model.control.attached || (!more && at.elapsed() >= EXIT_GRACE) {
                self.pending_exit = None;
                self.model.program_exited(code, signal);
            }
        }
        self.rate.update(self.model.control.event_count);
        self.backlog = more;
        more
    }

    /// Send a command from the UI (mirrored in the model's policy).
    pub(crate) fn act(&mut self, what: &'static str, cmd: Command) {
        self.ui.last_action = Some((what, Instant::now()));
        self.ui.action_error = None;
        self.commands.push(cmd);
    }

    /// Apply the commands the frame produced.
    pub fn apply(&mut self) {
        for cmd in std::mem::take(&mut self.commands) {
            self.model.note_command(&cmd);
            // The program gone, a scenario is saved from the session as it ended.
            if let (Command::SaveScenario { path }, Some(s), false) =
                (&cmd, &self.session, self.model.control.attached)
            {
                let verdict = s.save_kept(path);
                self.model.ingest(&verdict);
                continue;
            }
            let sent = self.session.as_ref().is_some_and(|s| s.send(cmd));
            if !sent {
                self.model.log("error", "not connected: command not sent".into());
            }
        }
    }

    /// One frame of the whole UI.
    pub fn frame_ui(&mut self, ui: &mut egui::Ui) {
        self.frames += 1;
        if self.ingest() {
            ui.ctx().request_repaint_after(STREAM_FRAME);
        } else if self.model.control.attached {
            ui.ctx().request_repaint_after(Duration::from_millis(250));
        }
        if let Some(script) = &mut self.script {
            match script.step(&self.model) {
                Ok(super::script::Step::Send(cmd)) => self.commands.push(cmd),
                Ok(super::script::Step::Wait) => ui.ctx().request_repaint_after(STREAM_FRAME),
                Ok(super::script::Step::Quit(code)) => self.quit = Some(code),
                Ok(super::script::Step::Select(key)) => self.select_node(key),
                Ok(super::script::Step::Seek(ms)) => self.seek_ms(ms),
                Ok(super::script::Step::View { whole, fold }) => {
                    if whole {
                        self.mp.whole();
                    }
                    if let Some(on) = fold {
                        self.mp.folds.on = on;
                        self.mp.folds.opened.clear();
                    }
                }
                Ok(super::script::Step::Done) => {}
                Err(e) => {
                    self.model.log("error", format!("script: {e}"));
                    self.quit = Some(1);
                }
            }
        }
        let changes = self.model.take_changes();
        self.graph.sync(&self.model, &changes);

        egui::Panel::top("toolbar").show(ui, |ui| self.toolbar_ui(ui));
        if self.timeline.is_some() {
            egui::Panel::top("timeline").show(ui, |ui| self.timeline_ui(ui));
        }
        egui::Panel::left("breakpoints")
            .resizable(true)
            .default_size(260.0)
            .show(ui, |ui| self.left_ui(ui));
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
        let line = self
            .model
            .control
            .log
            .iter()
            .rev()
            .find(|l| l.level == "stdout")?;
        let v: Value = serde_json::from_str(&line.text).ok()?;
        v.get("matches_reference")?.as_bool()
    }
}

impl eframe::App for App {
    fn ui(&mut self, ui: &mut egui::Ui, _frame: &mut eframe::Frame) {
        self.frame_ui(ui);
        if let Some(code) = self.quit {
            if std::env::var(racetrack_protocol::launch::ENV_DEBUG).is_ok() {
                eprintln!("racetrack: {} frames drawn", self.frames);
                for n in self.model.nodes() {
                    eprintln!(
                        "node {:?}: {:?} traced={} processed={:?}",
                        self.model.node_names(n.key),
                        n.status,
                        n.traced,
                        n.processed
                    );
                }
                for (_, n) in self.graph.g.nodes_iter() {
                    eprintln!("drawn {:?} label={:?}", n.payload(), n.label());
                }
            }
            if code != 0 {
                eprintln!("racetrack: scripted run failed; log:");
                for l in self.model.control.log.iter().rev().take(10) {
                    eprintln!("  [{}] {}", l.level, l.text);
                }
            }
            ui.ctx().send_viewport_cmd(egui::ViewportCommand::Close);
        }
    }
}

/// Ingest one event; an error shortly after an action is that action's.
fn ingest_event(ui: &mut UiState, model: &mut Model, ev: &Event) {
    if let Event::Error { message, .. } = ev {
        if let Some((what, at)) = ui.last_action {
            if at.elapsed() < Duration::from_secs(3) {
                ui.action_error = Some((what, message.clone()));
                if what == "match" {
                    // A refused pick: the receive stays held.
                    ui.pick = None;
                }
            }
        }
    }
    if let Event::Ok { cmd, .. } = ev {
        if cmd == "match" {
            ui.picked = ui.pick.take();
        }
    }
    model.ingest(ev);
}
