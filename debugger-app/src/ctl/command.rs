//! The controller's commands, parsed into types at the edge: the protocol's [`Command`]s,
//! sent to the agent, and the controller's own — `wait` (see [`super::wait`]), `move` and
//! `edit_field` (resolved from the controller's model into a `reorder` or an `edit`).

use super::clock::ClockCmd;
use super::state::Ctl;
use super::wait::{self, WaitCmd};
use super::VERDICT_TIMEOUT;
use crate::conn::CommandSender;
use crate::model::Model;
use racetrack_protocol::{Command, Event, Request, Rest};
use serde_json::{Map, Value};
use std::time::{Duration, Instant};

/// One command line.
pub(super) enum CtlCommand {
    Wait(WaitCmd),
    Clock(ClockCmd),
    Move(MoveCmd),
    EditField(EditFieldCmd),
    Agent(Command),
}

impl CtlCommand {
    /// A command line and the request number it carries (`"req": N`, which any command
    /// may carry, the controller's own ones included); on error, the number too when it
    /// could be read (the refusal carries it).
    pub(super) fn parse(line: &str) -> Result<(Self, Option<u64>), (Option<u64>, String)> {
        let mut v: Value = serde_json::from_str(line).map_err(|e| (None, format!("malformed JSON: {e}")))?;
        let req = match v.as_object_mut().and_then(|o| o.remove("req")) {
            None => None,
            Some(r) => Some(
                r.as_u64()
                    .ok_or_else(|| (None, format!("`req` must be a non-negative integer, not {r}")))?,
            ),
        };
        let cmd = match v.get("cmd").and_then(Value::as_str) {
            Some("wait") => WaitCmd::parse(&v).map(Self::Wait),
            Some("clock") => ClockCmd::parse(&v).map(Self::Clock),
            Some("move") => MoveCmd::parse(&v).map(Self::Move),
            Some("edit_field") => EditFieldCmd::parse(&v).map(Self::EditField),
            Some(other) if !Command::NAMES.contains(&other) => Err(unknown_command(other)),
            // The protocol's own parser (`req` is its business: it reads it again).
            _ => Request::parse(line)
                .map(|r| Self::Agent(r.cmd))
                .map_err(|e| e.error.to_string()),
        };
        cmd.map(|c| (c, req)).map_err(|e| (req, e))
    }

    /// The command's name, for its verdict.
    fn name(&self) -> &'static str {
        match self {
            CtlCommand::Wait(_) => "wait",
            CtlCommand::Clock(_) => "clock",
            CtlCommand::Move(_) => "move",
            CtlCommand::EditField(_) => "edit_field",
            CtlCommand::Agent(c) => c.name(),
        }
    }
}

/// The controller's own commands, beside the agent's ([`Command::NAMES`]).
const OWN: [&str; 4] = ["wait", "clock", "move", "edit_field"];

/// `cmd` names no command: the closest one, if a typo away, and the list.
fn unknown_command(cmd: &str) -> String {
    let all = Command::NAMES.iter().chain(OWN.iter());
    let closest = all
        .clone()
        .map(|name| (edit_distance(cmd, name), *name))
        .min()
        .filter(|(d, _)| *d <= 2);
    let hint = closest.map_or(String::new(), |(_, name)| format!(" (did you mean `{name}`?)"));
    let list: Vec<&str> = all.copied().collect();
    format!("unknown command `{cmd}`{hint}; the commands: {}", list.join(", "))
}

/// The Levenshtein distance between `a` and `b`.
fn edit_distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut row: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut diag = row[0];
        row[0] = i + 1;
        for (j, cb) in b.iter().enumerate() {
            let next = (row[j + 1] + 1)
                .min(row[j] + 1)
                .min(diag + usize::from(ca != *cb));
            diag = row[j + 1];
            row[j + 1] = next;
        }
    }
    row[b.len()]
}

/// Why a command line failed.
pub(super) struct Failed {
    pub(super) message: String,
    /// The request number the line carried itself (`"req": N`), if it did: its verdict
    /// carries it.
    pub(super) req: Option<u64>,
    /// The agent refused it, and its `error` carrying the request number was printed.
    pub(super) answered: bool,
}

impl Failed {
    fn here(message: String, req: Option<u64>) -> Self {
        Failed {
            message,
            req,
            answered: false,
        }
    }
}

/// The fields of one of the controller's own commands: unknown ones are refused, and each
/// is read with the type it must have, so that a typo is an error rather than ignored.
pub(super) struct Fields<'a> {
    obj: &'a Map<String, Value>,
    cmd: &'static str,
}

impl<'a> Fields<'a> {
    pub(super) fn new(v: &'a Value, cmd: &'static str, known: &[&str]) -> Result<Self, String> {
        let obj = v
            .as_object()
            .ok_or_else(|| format!("{cmd}: a command is a JSON object"))?;
        if let Some(k) = obj.keys().find(|k| !known.contains(&k.as_str())) {
            return Err(format!(
                "{cmd}: unknown field `{k}` (fields: {})",
                known[1..].join(", ")
            ));
        }
        Ok(Fields { obj, cmd })
    }

    pub(super) fn str(&self, name: &str) -> Result<Option<&'a str>, String> {
        match self.obj.get(name) {
            None => Ok(None),
            Some(Value::String(s)) => Ok(Some(s)),
            Some(other) => Err(format!("{}: `{name}` must be a string, not {other}", self.cmd)),
        }
    }

    pub(super) fn string(&self, name: &str) -> Result<Option<String>, String> {
        Ok(self.str(name)?.map(str::to_owned))
    }

    pub(super) fn u64(&self, name: &str) -> Result<Option<u64>, String> {
        match self.obj.get(name) {
            None => Ok(None),
            Some(v) => v
                .as_u64()
                .map(Some)
                .ok_or_else(|| format!("{}: `{name}` must be a non-negative integer, not {v}", self.cmd)),
        }
    }

    fn bool(&self, name: &str) -> Result<Option<bool>, String> {
        match self.obj.get(name) {
            None => Ok(None),
            Some(Value::Bool(b)) => Ok(Some(*b)),
            Some(other) => Err(format!(
                "{}: `{name}` must be true or false, not {other}",
                self.cmd
            )),
        }
    }
}

/// `{"cmd":"move","thread":T,"op":OP|"msg":ID,"to":"front"|"back"}`: a partial reorder of
/// a held thread naming the matching messages the controller has seen (pending, plus the
/// one the thread is about to start): they go to the front (`"rest":"after"`) or the back
/// (`"rest":"before"`), and every other message — including ones that arrive after the
/// controller looked — keeps its relative order. `"optional": true`: nothing matching is
/// not an error (nothing is sent).
pub(super) struct MoveCmd {
    thread: String,
    op: Option<String>,
    msg: Option<String>,
    rest: Rest,
    optional: bool,
}

impl MoveCmd {
    fn parse(v: &Value) -> Result<Self, String> {
        let f = Fields::new(v, "move", &["cmd", "thread", "op", "msg", "to", "optional"])?;
        let thread = f.string("thread")?.ok_or("move needs `thread`")?;
        let rest = match f.str("to")?.unwrap_or("front") {
            "front" => Rest::After,
            "back" => Rest::Before,
            other => return Err(format!("move: `to` must be front or back, not {other}")),
        };
        let (op, msg) = (f.string("op")?, f.string("msg")?);
        if op.is_none() && msg.is_none() {
            return Err("move needs `op` or `msg` to say which messages move".into());
        }
        let optional = f.bool("optional")?.unwrap_or(false);
        Ok(MoveCmd {
            thread,
            op,
            msg,
            rest,
            optional,
        })
    }

    /// The `reorder` this move is, from what `model` shows of the thread; `None` when
    /// nothing matches and the move is optional.
    ///
    /// A move that names its message (`msg`) is sent even when the controller has not
    /// seen that message pending or held, nor the thread held: the agent knows the
    /// thread's real queue and the message a held start was about to process (which goes
    /// back into the queue: `reorder` in docs/PROTOCOL.md), and refuses what does not apply. The
    /// controller's view may lag the agent: a user or script that reacts to the held
    /// `start` it just printed must not be refused because of that.
    fn to_command(&self, model: &Model) -> Result<Option<Command>, String> {
        let thread = self.thread.as_str();
        let mut rows: Vec<(String, String)> = Vec::new();
        match model.held_of_named(thread).map(|(_, h)| &h.event) {
            Some(Event::Start(s)) if s.step != racetrack_protocol::Step::Final => {
                rows.push((s.msg.to_string(), s.op.to_string()));
            }
            Some(_) => {}
            None if self.msg.is_some() && self.op.is_none() && !self.optional => {}
            None => return Err(format!("{thread} is not held; a move needs it suspended")),
        }
        rows.extend(
            model
                .queue_named(thread)
                .into_iter()
                .flatten()
                .map(|m| (m.id.to_string(), m.op.to_string())),
        );
        // `id@op` when the id is not unique among what the controller has seen (a message
        // arriving later with the same id for another operation makes the agent ask for it).
        let key = |(id, op): &(String, String)| {
            if rows.iter().filter(|r| &r.0 == id).count() > 1 {
                format!("{id}@{op}")
            } else {
                id.clone()
            }
        };
        let picked = |r: &&(String, String)| {
            self.op.as_deref().is_some_and(|o| r.1 == o) || self.msg.as_deref().is_some_and(|m| r.0 == m)
        };
        let mut order: Vec<String> = rows.iter().filter(picked).map(key).collect();
        if order.is_empty() {
            match (&self.msg, &self.op) {
                _ if self.optional => return Ok(None),
                // Not seen here (yet): the agent decides, on the real queue.
                (Some(m), None) => order.push(m.clone()),
                _ => return Err(format!("no message pending on {thread} matches")),
            }
        }
        Ok(Some(Command::Reorder {
            thread: thread.to_owned(),
            order,
            rest: Some(self.rest),
        }))
    }
}

/// `{"cmd":"edit_field","thread":T,"field":F,"value":V}`: edit one top-level field of the
/// send `T` is held at.
pub(super) struct EditFieldCmd {
    thread: String,
    field: String,
    value: Value,
}

impl EditFieldCmd {
    fn parse(v: &Value) -> Result<Self, String> {
        let f = Fields::new(v, "edit_field", &["cmd", "thread", "field", "value"])?;
        Ok(EditFieldCmd {
            thread: f.string("thread")?.ok_or("edit_field needs `thread`")?,
            field: f.string("field")?.ok_or("edit_field needs `field`")?,
            value: v.get("value").cloned().ok_or("edit_field needs `value`")?,
        })
    }

    fn to_command(&self, model: &Model) -> Result<Command, String> {
        match model
            .held_of_named(&self.thread)
            .map(|(id, h)| (id.event_id, &h.event))
        {
            Some((id, Event::Send(s))) => {
                let mut content = s.content.clone().ok_or("the held send carries no content")?;
                let obj = content.as_object_mut().ok_or("the message is not an object")?;
                obj.insert(self.field.clone(), self.value.clone());
                Ok(Command::Edit {
                    event_id: Some(id),
                    thread: None,
                    content,
                })
            }
            _ => Err(format!("{} is not held at a send", self.thread)),
        }
    }
}

/// Handle one command line. A command for the agent is sent with a request number — the
/// line's own `req`, else `default_req` (a scenario's line number) — and its verdict is
/// awaited: an agent's refusal is this line's error. A line that carries `req` gets one
/// verdict carrying it, whatever the command: the agent's for what goes to the agent,
/// the controller's `ok` (after `waited`, say) or `error` for what it answers itself.
pub(super) fn handle_line(
    ctl: &Ctl,
    conn: &CommandSender,
    line: &str,
    default_req: Option<u64>,
) -> Result<(), Failed> {
    let (parsed, own) = CtlCommand::parse(line).map_err(|(req, e)| Failed::here(e, req))?;
    let name = parsed.name();
    if matches!(
        parsed,
        CtlCommand::Move(_) | CtlCommand::EditField(_) | CtlCommand::Clock(_)
    ) {
        caught_up(ctl);
    }
    let here = |r: Result<(), String>| {
        r.map_err(|e| Failed::here(e, own))?;
        if let Some(n) = own {
            ctl.print(&Event::Ok {
                cmd: name.to_owned(),
                target: None,
                req: Some(n),
            });
        }
        Ok(())
    };
    let cmd = match parsed {
        CtlCommand::Wait(w) => return here(wait::wait(ctl, &w)),
        CtlCommand::Clock(c) => return here(c.answer(ctl)),
        CtlCommand::Move(m) => match m.to_command(&ctl.lock().model) {
            Ok(Some(cmd)) => cmd,
            Ok(None) => return here(Ok(())), // `"optional": true` and nothing to move
            Err(e) => return here(Err(e)),
        },
        CtlCommand::EditField(e) => match e.to_command(&ctl.lock().model) {
            Ok(cmd) => cmd,
            Err(e) => return here(Err(e)),
        },
        CtlCommand::Agent(cmd) => cmd,
    };
    let req = own.or(default_req);
    if let Command::SaveScenario { path } = &cmd {
        if ctl.lock().closed {
            return saved_here(ctl, conn.save_kept(path, req), own);
        }
    }
    note_sent(ctl, &cmd);
    // The program gone, the controller answers `save_scenario` from what it kept.
    let saving = match &cmd {
        Command::SaveScenario { path } => Some(path.clone()),
        _ => None,
    };
    let kept = |path: &str| saved_here(ctl, conn.save_kept(path, req), own);
    if !conn.send(Request { req, cmd }) {
        return match saving {
            Some(path) => kept(&path),
            None => Err(Failed::here(
                "not connected: the command was not sent".into(),
                own,
            )),
        };
    }
    match (req.map(|n| verdict(ctl, n)), saving) {
        (Some(Err((_, false))), Some(path)) if ctl.lock().closed => kept(&path),
        (Some(Err((message, answered))), _) => Err(Failed {
            message,
            req: own,
            answered,
        }),
        _ => Ok(()),
    }
}

/// The verdict of a `save_scenario` the controller answered itself, the program gone:
/// printed, and an error is the line's.
fn saved_here(ctl: &Ctl, verdict: Event, own: Option<u64>) -> Result<(), Failed> {
    ctl.print(&verdict);
    match verdict {
        Event::Error { message, .. } => Err(Failed {
            message,
            req: own,
            answered: true,
        }),
        _ => Ok(()),
    }
}

/// Wait until the model has taken in every event counted as arrived when this is called:
/// the events thread prints a chunk before it takes it in, so a command sent on seeing a
/// line (a held `start`) could otherwise be resolved against a model without it. A
/// chunk's intake is a few microseconds; the connection's end ends the wait.
fn caught_up(ctl: &Ctl) {
    let arrived = ctl.announced.load(std::sync::atomic::Ordering::SeqCst);
    let mut st = ctl.lock();
    while st.ingested < arrived && !st.closed {
        st = ctl
            .changed
            .wait_timeout(st, Duration::from_millis(50))
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .0;
    }
}

/// Before `cmd` is sent: the marks `wait until event` counts from, and the holds it will
/// release (their `released` may not have arrived yet: `wait until held` ignores them).
fn note_sent(ctl: &Ctl, cmd: &Command) {
    let mut st = ctl.lock();
    st.model.note_command(cmd);
    // Every event printed before this command counts as before it (and maybe a few not
    // printed yet: the agent has not seen the command, they cannot be its effects).
    st.mark = ctl.announced.load(std::sync::atomic::Ordering::SeqCst);
    if matches!(cmd, Command::Continue { .. }) {
        st.continue_mark = st.mark;
    }
    let releasing: Vec<u64> = match cmd {
        Command::Continue { thread, event_id, .. } => st
            .model
            .control
            .held
            .iter()
            .filter(|(id, h)| {
                event_id.is_none_or(|x| x == id.event_id)
                    && thread.as_deref().is_none_or(|t| h.event.thread() == Some(t))
            })
            .map(|(id, _)| id.event_id)
            .collect(),
        // A reorder at a held start puts the message back: that hold ends.
        Command::Reorder { thread, .. } => match st.model.held_of_named(thread) {
            Some((id, h)) if matches!(h.event, Event::Start(_)) => vec![id.event_id],
            _ => Vec::new(),
        },
        Command::Detach => st.model.control.held.keys().map(|id| id.event_id).collect(),
        _ => Vec::new(),
    };
    st.releasing.extend(releasing);
}

/// Wait for the verdict of request `n`: the agent's `error` message is the error (`true`:
/// the agent's answer); no answer for [`VERDICT_TIMEOUT`] with nothing arriving, or the
/// connection's end, is one too (`false`).
fn verdict(ctl: &Ctl, n: u64) -> Result<(), (String, bool)> {
    let mut st = ctl.lock();
    let mut seen = ctl.announced.load(std::sync::atomic::Ordering::SeqCst);
    let mut deadline = Instant::now() + VERDICT_TIMEOUT;
    loop {
        if let Some(v) = st.verdicts.remove(&n) {
            return v.map_err(|e| (e, true));
        }
        if st.closed {
            return Err((
                "the connection closed (the program ended?) before the agent answered the command".into(),
                false,
            ));
        }
        let arrived = ctl.announced.load(std::sync::atomic::Ordering::SeqCst);
        let now = Instant::now();
        if arrived != seen {
            seen = arrived;
            deadline = now + VERDICT_TIMEOUT;
        }
        if now >= deadline {
            return Err((
                format!("no answer from the agent for {} s", VERDICT_TIMEOUT.as_secs()),
                false,
            ));
        }
        st = ctl
            .changed
            .wait_timeout(st, (deadline - now).min(Duration::from_millis(50)))
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .0;
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::CtlCommand;

    #[test]
    fn an_unknown_command_gets_the_closest_name_and_the_list() {
        let (_, e) = CtlCommand::parse(r#"{"cmd":"contineu","req":4}"#).err().unwrap();
        assert!(
            e.contains("unknown command `contineu` (did you mean `continue`?)"),
            "{e}"
        );
        assert!(e.contains("save_scenario") && e.contains("edit_field"), "{e}");
        let (req, e) = CtlCommand::parse(r#"{"cmd":"wiat","req":4}"#).err().unwrap();
        assert_eq!(req, Some(4));
        assert!(e.contains("(did you mean `wait`?)"), "{e}");
        let (_, e) = CtlCommand::parse(r#"{"cmd":"frobnicate"}"#).err().unwrap();
        assert!(
            e.starts_with("unknown command `frobnicate`; the commands:"),
            "{e}"
        );
        // Every name the list gives is a command the protocol parses.
        for name in racetrack_protocol::Command::NAMES {
            let e = racetrack_protocol::Command::parse(&format!(r#"{{"cmd":"{name}"}}"#)).err();
            assert!(
                !e.as_ref()
                    .is_some_and(|e| e.to_string().contains("unknown variant")),
                "{name}: {e:?}"
            );
        }
    }

    fn error(line: &str) -> String {
        match CtlCommand::parse(line) {
            Ok(_) => panic!("accepted: {line}"),
            Err((_, e)) => e,
        }
    }

    #[test]
    fn the_controllers_own_commands_are_typed_and_checked() {
        assert!(matches!(
            CtlCommand::parse(r#"{"cmd":"wait","until":"held","thread":"proc[1]","timeout_ms":500}"#),
            Ok((CtlCommand::Wait(_), None))
        ));
        assert!(matches!(
            CtlCommand::parse(r#"{"cmd":"move","thread":"main[0]","msg":"0.0","to":"back","optional":true}"#),
            Ok((CtlCommand::Move(_), None))
        ));
        assert!(matches!(
            CtlCommand::parse(r#"{"cmd":"continue"}"#),
            Ok((
                CtlCommand::Agent(racetrack_protocol::Command::Continue { .. }),
                None
            ))
        ));
        // Any command may carry a request number, the controller's own ones too.
        assert!(matches!(
            CtlCommand::parse(r#"{"cmd":"continue","req":1}"#),
            Ok((
                CtlCommand::Agent(racetrack_protocol::Command::Continue { .. }),
                Some(1)
            ))
        ));
        assert!(matches!(
            CtlCommand::parse(r#"{"cmd":"wait","until":"exit","req":7}"#),
            Ok((CtlCommand::Wait(_), Some(7)))
        ));
        assert!(matches!(
            CtlCommand::parse(r#"{"cmd":"move","thread":"main[0]","op":"Sum","req":2}"#),
            Ok((CtlCommand::Move(_), Some(2)))
        ));
        let e = error(r#"{"cmd":"continue","req":"one"}"#);
        assert!(e.contains("`req` must be a non-negative integer"), "{e}");
        // A bad command keeps its number, so the refusal can carry it.
        assert!(matches!(
            CtlCommand::parse(r#"{"cmd":"move","thread":"main[0]","req":4}"#),
            Err((Some(4), _))
        ));
        // A misspelt field is an error, not ignored.
        let e = error(r#"{"cmd":"wait","until":"held","thred":"proc[1]"}"#);
        assert!(e.contains("wait: unknown field `thred`"), "{e}");
        let e = error(r#"{"cmd":"move","thread":"main[0]","msg":0}"#);
        assert!(e.contains("`msg` must be a string"), "{e}");
        let e = error(r#"{"cmd":"wait","until":"held","timeout_ms":-1}"#);
        assert!(e.contains("`timeout_ms` must be a non-negative integer"), "{e}");
        let e = error(r#"{"cmd":"move","thread":"main[0]","op":"Pick","to":"middle"}"#);
        assert!(e.contains("`to` must be front or back"), "{e}");
        let e = error(r#"{"cmd":"move","thread":"main[0]"}"#);
        assert!(e.contains("needs `op` or `msg`"), "{e}");
        // An unknown `until` is named before anything else is checked.
        let e = error(r#"{"cmd":"wait","until":"later","since":"continue"}"#);
        assert!(e.contains("unknown `until` value `later`"), "{e}");
        let e = error(r#"{"cmd":"wait","until":"queue"}"#);
        assert!(e.contains("needs `thread`"), "{e}");
        let e = error(r#"{"cmd":"edit_field","thread":"proc[0]","field":"target"}"#);
        assert!(e.contains("needs `value`"), "{e}");
        // Protocol commands keep the protocol's own checks.
        let e = error(r#"{"cmd":"brake","op":"Split"}"#);
        assert!(e.contains("brake"), "{e}");
    }
}
