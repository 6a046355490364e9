//! How the message-passing graph names and colours a call: a colour per family of calls
//! (sends, receives, collectives, completion, communicators, the rest), a short label for
//! its box, and the lines of its tooltip.

use super::graph::DEADLOCKED;
use crate::model::mpgraph::{MpGraph, Params, Vertex};
use crate::model::Model;
use egui::Color32;
use racetrack_protocol::{Peer, SpecialPeer, Tag};

/// The outline of a held call.
pub const HELD: Color32 = Color32::from_rgb(220, 60, 60);

/// A family of MPI calls, coloured alike.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Family {
    Send,
    Recv,
    /// `MPI_Sendrecv`, `MPI_Sendrecv_replace`.
    SendRecv,
    Collective,
    /// `Wait*`, `Test*`.
    Completion,
    /// Communicators, groups, datatypes.
    Setup,
    Other,
}

impl Family {
    /// Every family, in the legend's order.
    pub const ALL: [Family; 7] = [
        Family::Send,
        Family::Recv,
        Family::SendRecv,
        Family::Collective,
        Family::Completion,
        Family::Setup,
        Family::Other,
    ];

    /// The family of call `name` (`MPI_Isend`); `collective`: it is a collective instance.
    pub fn of(name: &str, collective: bool) -> Family {
        let n = name.strip_prefix("MPI_").unwrap_or(name);
        if n.starts_with("Sendrecv") {
            Family::SendRecv
        } else if collective {
            Family::Collective
        } else if [
            "Send", "Isend", "Ssend", "Issend", "Bsend", "Ibsend", "Rsend", "Irsend",
        ]
        .contains(&n)
            || n.ends_with("send_init")
            || n == "Send_init"
        {
            Family::Send
        } else if [
            "Recv", "Irecv", "Probe", "Iprobe", "Mprobe", "Improbe", "Mrecv", "Imrecv",
        ]
        .contains(&n)
            || n == "Recv_init"
        {
            Family::Recv
        } else if n.starts_with("Wait") || n.starts_with("Test") || n.starts_with("Start") {
            Family::Completion
        } else if n.starts_with("Comm_")
            || n.starts_with("Group_")
            || n.starts_with("Type_")
            || n.starts_with("Cart_")
        {
            Family::Setup
        } else if is_collective_name(n) {
            Family::Collective
        } else {
            Family::Other
        }
    }

    pub fn color(self) -> Color32 {
        match self {
            Family::Send => Color32::from_rgb(70, 130, 220),
            Family::Recv => Color32::from_rgb(50, 160, 90),
            Family::SendRecv => Color32::from_rgb(40, 160, 170),
            Family::Collective => Color32::from_rgb(150, 95, 205),
            Family::Completion => Color32::from_rgb(160, 140, 100),
            Family::Setup => Color32::from_rgb(215, 145, 50),
            Family::Other => Color32::from_rgb(120, 125, 140),
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Family::Send => "send",
            Family::Recv => "receive",
            Family::SendRecv => "sendrecv",
            Family::Collective => "collective",
            Family::Completion => "wait / test",
            Family::Setup => "communicators",
            Family::Other => "other",
        }
    }
}

/// Collectives by name (a collective's events carry its instance, this is for the rest).
/// A one-sided call (`MPI_Put`, `MPI_Win_lock`): its peer is a target.
fn is_one_sided(name: &str) -> bool {
    let n = name.strip_prefix("MPI_").unwrap_or(name);
    n.starts_with("Win_") || ["Put", "Get", "Accumulate"].contains(&n)
}

fn is_collective_name(n: &str) -> bool {
    // The nonblocking ones: `MPI_Iallreduce` is `MPI_Allreduce` begun.
    let n = n.strip_prefix('I').unwrap_or(n).to_ascii_lowercase();
    [
        "Barrier",
        "Bcast",
        "Reduce",
        "Allreduce",
        "Reduce_scatter",
        "Reduce_scatter_block",
        "Gather",
        "Gatherv",
        "Allgather",
        "Allgatherv",
        "Scatter",
        "Scatterv",
        "Alltoall",
        "Alltoallv",
        "Alltoallw",
        "Scan",
        "Exscan",
    ]
    .iter()
    .any(|c| c.eq_ignore_ascii_case(&n))
}

/// A rank as a call names it.
fn peer_text(p: Peer) -> String {
    match p {
        Peer::Rank(r) => r.to_string(),
        Peer::Special(SpecialPeer::AnySource) => "ANY".into(),
        Peer::Special(SpecialPeer::ProcNull) => "PROC_NULL".into(),
        Peer::Special(SpecialPeer::Root) => "ROOT".into(),
    }
}

/// The text in a vertex's box: the call without `MPI_`, and its peer or root.
pub fn short_label(g: &MpGraph, v: &Vertex, name: &str) -> String {
    let n = name.strip_prefix("MPI_").unwrap_or(name);
    let p = &v.params;
    let mut s = n.to_owned();
    match (Family::of(name, v.coll.is_some()), p.peer) {
        (Family::Send, Some(peer)) => s += &format!(" -> {}", peer_text(peer)),
        // A sendrecv names its destination; its source shows once matched.
        (Family::SendRecv, Some(peer)) => {
            s += &format!(" -> {}", peer_text(peer));
            match (p.forced.or(p.matched), p.source) {
                (Some(m), _) => s += &format!(" <- {m}"),
                (None, Some(src)) => s += &format!(" <- {}", peer_text(src)),
                (None, None) => {}
            }
            if v.pending_wildcard() {
                s += " ?";
            }
        }
        (Family::Recv, Some(peer)) => {
            s += &format!(" <- {}", peer_text(peer));
            if let (true, Some(m)) = (p.wildcard(), p.matched.or(p.forced)) {
                s += &format!(" ({m})");
            } else if v.pending_wildcard() {
                s += " ?";
            }
        }
        (Family::Collective, _) => {
            if let Some(r) = p.root {
                s += &format!(" (root {r})");
            }
        }
        _ => {}
    }
    if let Some(n) = p.polls.filter(|&n| n > 1) {
        s += &format!(" ×{n}");
    }
    if let Some(l) = p.label {
        s += &format!(" «{}»", g.name(l));
    }
    s
}

/// The lines of a vertex's tooltip: the call and rank, its parameters, what it matched,
/// and its site.
pub fn tooltip_lines(g: &MpGraph, v: &Vertex, row: u32, name: &str, rank: &str) -> Vec<String> {
    let p: &Params = &v.params;
    let mut lines = vec![format!("{name} on {rank} (logical time {row})")];
    let family = Family::of(name, v.coll.is_some());
    let mut parts = Vec::new();
    if let Some(peer) = p.peer {
        let word = if matches!(family, Family::Send | Family::SendRecv) {
            "dest"
        } else if is_one_sided(name) {
            "target"
        } else {
            "source"
        };
        parts.push(format!("{word} {}", peer_text(peer)));
    }
    if let Some(src) = p.source {
        parts.push(format!("source {}", peer_text(src)));
    }
    if let Some(r) = p.root {
        parts.push(format!("root {r}"));
    }
    match p.tag {
        Some(Tag::Tag(t)) => parts.push(format!("tag {t}")),
        Some(Tag::Any(_)) => parts.push("tag ANY".into()),
        None => {}
    }
    match (p.count, p.datatype) {
        (Some(c), Some(d)) => parts.push(format!("{c} × {}", g.name(d))),
        (Some(c), None) => parts.push(format!("count {c}")),
        _ => {}
    }
    if let Some(b) = p.bytes {
        parts.push(format!("{b} bytes"));
    }
    if let Some(c) = p.comm {
        parts.push(g.name(c).to_owned());
    }
    if !parts.is_empty() {
        lines.push(parts.join(" · "));
    }
    if let Some(s) = p.forced {
        lines.push(format!("match forced onto source {s}"));
    } else if let Some(s) = p.matched {
        lines.push(format!("matched source {s}"));
    }
    if let Some(n) = p.polls.filter(|&n| n > 1) {
        lines.push(format!("{n} polls"));
    }
    if let Some(l) = p.label {
        lines.push(format!("label: {}", g.name(l)));
    }
    lines.push(match p.site {
        Some(s) => format!("at {}", g.name(s)),
        None => "site unknown".into(),
    });
    if v.pending_wildcard() {
        lines.push("pending: waiting for a message from any source".into());
    } else if v.open {
        lines.push("in the call".into());
    }
    lines
}

/// The colour of a rank inside a call the library does not report.
const UNREPORTED: Color32 = Color32::from_rgb(200, 150, 40);

/// A site's file name without its directories (`deadlock.c:175 (main)`).
fn short_site(site: &str) -> &str {
    let file_end = site.rfind(" (").unwrap_or(site.len());
    site[..file_end].rfind('/').map_or(site, |i| &site[i + 1..])
}

/// A rank's status in words, and its colour: finished, deadlocked, held, in a call (a
/// reported one, or one a sample found).
pub fn lane_status(model: &Model, g: &MpGraph, lane: u32) -> (String, Color32) {
    let l = &g.lanes()[lane as usize];
    let last = l.vertices.last().map(|&v| &g.vertices()[v as usize]);
    let call = last.map_or("", |x| model.first().op_name(x.call));
    let name = model.thread_name(l.thread);
    let stuck = model
        .control
        .deadlock
        .as_ref()
        .is_some_and(|d| d.waits.iter().any(|w| w.thread == name));
    let held = model.control.held.values().any(|h| h.thread == Some(l.thread));
    if stuck {
        (format!("deadlocked in {call}"), DEADLOCKED)
    } else if held {
        (format!("held at {call}"), HELD)
    } else if l.finished || model.control.exited.is_some() {
        ("finished".into(), Color32::from_rgb(70, 110, 170))
    } else if last.is_some_and(|x| x.open) {
        (format!("in {call}"), Color32::from_rgb(60, 170, 90))
    } else if let Some(u) = model.control.unreported.get(&l.thread) {
        // After the open call: a sample told just as a reported call began is stale.
        let at = u
            .site
            .as_deref()
            .map(|s| format!(" at {}", short_site(s)))
            .unwrap_or_default();
        let why = if u.before_attach {
            "since before the attach"
        } else {
            "not reported"
        };
        (format!("in {}{at} ({why})", u.call), UNREPORTED)
    } else {
        ("running".into(), Color32::from_rgb(60, 170, 90))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_site_is_shown_without_its_directories() {
        assert_eq!(
            short_site("/src/a b/deadlock.c:175 (main)"),
            "deadlock.c:175 (main)"
        );
        assert_eq!(short_site("deadlock.c:175"), "deadlock.c:175");
        assert_eq!(short_site("f+0x10 (libx.so)"), "f+0x10 (libx.so)");
    }

    #[test]
    fn families_follow_the_call_names() {
        assert_eq!(Family::of("MPI_Isend", false), Family::Send);
        assert_eq!(Family::of("MPI_Iprobe", false), Family::Recv);
        assert_eq!(Family::of("MPI_Sendrecv_replace", false), Family::SendRecv);
        assert_eq!(Family::of("MPI_Allreduce", false), Family::Collective);
        assert_eq!(Family::of("MPI_Iallreduce", false), Family::Collective);
        assert_eq!(Family::of("MPI_Comm_split", true), Family::Collective);
        assert_eq!(Family::of("MPI_Comm_rank", false), Family::Setup);
        assert_eq!(Family::of("MPI_Waitall", false), Family::Completion);
        assert_eq!(Family::of("MPI_Ibarrier", false), Family::Collective);
        assert_eq!(Family::of("MPI_Iexscan", false), Family::Collective);
        assert_eq!(Family::of("MPI_Ireduce_scatter", false), Family::Collective);
        assert_eq!(Family::of("MPI_Rsend_init", false), Family::Send);
        assert_eq!(Family::of("MPI_Recv_init", false), Family::Recv);
        assert_eq!(Family::of("MPI_Mprobe", false), Family::Recv);
        assert_eq!(Family::of("MPI_Imrecv", false), Family::Recv);
        assert_eq!(Family::of("MPI_Startall", false), Family::Completion);
        assert_eq!(Family::of("MPI_Win_fence", false), Family::Other);
        assert!(is_one_sided("MPI_Win_lock") && is_one_sided("MPI_Put") && !is_one_sided("MPI_Send"));
        assert_eq!(Family::of("MPI_Init", false), Family::Other);
    }
}
