//! `clock`: an event's vector clock and its order with another, from the controller's
//! model (docs/PROTOCOL.md, "`racetrack ctl` additions").

use super::command::Fields;
use super::state::Ctl;
use serde_json::Value;

/// `{"cmd":"clock","event_id":N}`: event N's vector clock, from the controller's model;
/// with `"with": M`, also how N and M are ordered (`racetrack_model::Clocks`).
pub(super) struct ClockCmd {
    event_id: u64,
    with: Option<u64>,
}

impl ClockCmd {
    pub(super) fn parse(v: &Value) -> Result<Self, String> {
        let f = Fields::new(v, "clock", &["cmd", "event_id", "with"])?;
        Ok(ClockCmd {
            event_id: f.u64("event_id")?.ok_or("clock needs `event_id`")?,
            with: f.u64("with")?,
        })
    }

    pub(super) fn answer(&self, ctl: &Ctl) -> Result<(), String> {
        let mut st = ctl.lock();
        let clocks = st
            .model
            .clocks()
            .ok_or("clock: this controller keeps no clocks")?;
        let unknown = |id: u64| format!("clock: no send, recv, start or stop numbered {id} has arrived");
        let clock = clocks
            .clock(self.event_id)
            .ok_or_else(|| unknown(self.event_id))?;
        let order = match self.with {
            Some(w) => Some(
                clocks
                    .order(self.event_id, w)
                    .ok_or_else(|| unknown(w))?
                    .name()
                    .to_owned(),
            ),
            None => None,
        };
        drop(st);
        ctl.print(&racetrack_protocol::CtlEvent::Clock {
            event_id: self.event_id,
            clock: clock
                .into_iter()
                .map(|(t, n)| (t.to_string(), Value::from(n)))
                .collect(),
            with: self.with,
            order,
        });
        Ok(())
    }
}
