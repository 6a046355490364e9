//! Race mode, for MPI jobs: every wildcard receive of the chosen ranks is held at its
//! start (a conditional breakpoint `peer: MPI_ANY_SOURCE` on every call), its candidate
//! sends are listed here and drawn as arrows in the graph, and a pick forces the match:
//! `match` by the held thread, then, once the rank said `ok`, `continue`. A refused pick
//! (its source cannot send the message) leaves the receive held and says why. A receive
//! whose order the user accepts ("any order") is released now and at every later hold at
//! its site.

use crate::gui::app::App;
use crate::model::mpgraph::{Candidate, Vx};
use egui::{Color32, RichText};
use racetrack_protocol::{Command, Peer, SpecialPeer, When};

/// A held wildcard receive: its rank, held event, call and the sends it could take.
#[derive(Debug, Clone)]
pub struct Race {
    pub thread: String,
    pub event_id: u64,
    pub recv: Vx,
    pub candidates: Vec<Candidate>,
}

/// The condition race mode breaks on.
fn wildcard() -> When {
    When {
        peer: Some(Peer::Special(SpecialPeer::AnySource)),
        ..When::default()
    }
}

impl App {
    /// Whether race mode is on for `thread` (`None`: for every rank at once).
    pub(crate) fn race_on(&self, thread: Option<&str>) -> bool {
        let when = wildcard();
        self.model
            .control
            .conditional
            .iter()
            .any(|c| c.op == "*" && c.thread.as_deref() == thread && c.when == when && c.hit == 1)
    }

    /// Turn race mode on or off for `thread` (`None`: every rank).
    pub(crate) fn set_race(&mut self, thread: Option<String>, on: bool) {
        let cmd = Command::Break {
            op: "*".into(),
            thread,
            on,
            trace: false,
            when: Some(wildcard()),
            hit: None,
        };
        self.act("break", cmd);
    }

    /// Every rank held at the start of a wildcard receive or probe, with its candidates.
    pub fn races(&self) -> Vec<Race> {
        let Some(g) = self.model.messages() else {
            return Vec::new();
        };
        let mut out = Vec::new();
        for lane in g.lane_order() {
            let l = &g.lanes()[lane as usize];
            let Some((id, _)) = self.model.control.held_of(l.thread) else {
                continue;
            };
            let Some(&v) = l.vertices.last() else { continue };
            let x = &g.vertices()[v as usize];
            if x.start == id.event_id && x.pending_wildcard() {
                out.push(Race {
                    thread: self.model.thread_name(l.thread).to_owned(),
                    event_id: id.event_id,
                    recv: v,
                    candidates: g.candidates(v),
                });
            }
        }
        out
    }

    /// Force `thread`'s held receive onto `source`; it is released once the rank agrees.
    pub(crate) fn pick(&mut self, thread: &str, source: i32) {
        let cmd = Command::Match {
            event_id: None,
            thread: Some(thread.to_owned()),
            source,
            tag: None,
        };
        self.ui.pick = Some(thread.to_owned());
        self.act("match", cmd);
    }

    fn release(&mut self, thread: &str) {
        let cmd = Command::Continue {
            thread: Some(thread.to_owned()),
            event_id: None,
            trace: None,
        };
        self.act("continue", cmd);
    }

    /// The races waiting for a pick, above the graph (nothing when there are none); a
    /// pick the rank agreed to is released here, as are holds at accepted sites.
    pub(crate) fn race_ui(&mut self, ui: &mut egui::Ui) {
        if let Some(t) = self.ui.picked.take() {
            self.release(&t);
        }
        let races = self.races();
        for r in &races {
            if self.accepted(r) && self.ui.released.insert(r.event_id) {
                self.release(&r.thread);
            }
        }
        let open: Vec<&Race> = races.iter().filter(|r| !self.accepted(r)).collect();
        for r in open {
            self.race_row_ui(ui, r);
        }
        if let Some(("match", e)) = &self.ui.action_error {
            ui.colored_label(Color32::from_rgb(220, 60, 60), format!("match refused: {e}"));
        }
    }

    /// Whether `r`'s site is one whose order the user accepts.
    fn accepted(&self, r: &Race) -> bool {
        let site = self.site_of(r.recv);
        site.is_some_and(|s| self.ui.accepted.contains(&s))
    }

    fn site_of(&self, v: Vx) -> Option<String> {
        let g = self.model.messages()?;
        Some(g.name(g.vertices().get(v as usize)?.params.site?).to_owned())
    }

    fn race_row_ui(&mut self, ui: &mut egui::Ui, r: &Race) {
        let Some(g) = self.model.messages() else { return };
        let x = &g.vertices()[r.recv as usize];
        let call = self.model.first().op_name(x.call).to_owned();
        let room = x.params.bytes;
        let site = self.site_of(r.recv);
        let at = site.as_deref().map(|s| format!(" at {s}")).unwrap_or_default();
        let names: Vec<(String, Option<i64>)> = r
            .candidates
            .iter()
            .map(|c| {
                let y = &g.vertices()[c.send as usize];
                let lane = &g.lanes()[y.lane as usize];
                (self.model.thread_name(lane.thread).to_owned(), y.params.bytes)
            })
            .collect();
        ui.horizontal_wrapped(|ui| {
            ui.label(RichText::new(format!("race: {}'s {call}{at} may take", r.thread)).strong());
            if r.candidates.is_empty() {
                ui.label(RichText::new("no message yet").weak());
            }
            for (c, (sender, bytes)) in r.candidates.iter().zip(&names) {
                let size = bytes
                    .map(|b| format!("{b} bytes"))
                    .unwrap_or_else(|| "size unknown".into());
                let text = format!("{sender}: {size}{}", if c.fits { "" } else { " (too big)" });
                let mut button = egui::Button::new(&text);
                if !c.fits {
                    button = button.fill(ui.visuals().faint_bg_color);
                }
                let hint = match (c.fits, room) {
                    (false, Some(room)) => {
                        format!("would be truncated: the receive has room for {room} bytes")
                    }
                    _ => format!("force the match onto {sender} (source {})", c.source),
                };
                if ui.add(button).on_hover_text(hint).clicked() {
                    self.pick(&r.thread, c.source);
                }
            }
            ui.label(RichText::new("· others may still send").small().weak());
            let accept = ui
                .button("Any order here")
                .on_hover_text("release it, and every later hold at this site");
            if accept.clicked() {
                if let Some(s) = site.clone() {
                    self.ui.accepted.insert(s);
                }
                self.ui.released.insert(r.event_id);
                self.release(&r.thread);
            }
        });
    }

    /// The candidate pick a click on send `v` in the graph makes, if it is one.
    pub(crate) fn pick_by_send(&mut self, v: Vx) -> bool {
        let hit = self.races().into_iter().find_map(|r| {
            Some((
                r.thread.clone(),
                r.candidates.iter().find(|c| c.send == v)?.source,
            ))
        });
        match hit {
            Some((thread, source)) => {
                self.pick(&thread, source);
                true
            }
            None => false,
        }
    }
}
