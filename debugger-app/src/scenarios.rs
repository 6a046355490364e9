//! Scenario files are written here, by the debugger, on its own machine. The agent answers
//! `save_scenario` with the session's choices as a `scenario` event (a job's ranks each
//! with their part, which the job merges); the connection writes the file and passes on
//! `ok` or `error` in its place. A `scenario` without a path is the program's session as
//! it ended: kept here, so that `save_scenario` still works once the program is gone
//! ([`crate::conn::CommandSender::save_kept`]).

use racetrack_protocol::replay_log::from_hex;
use racetrack_protocol::Event;
use std::sync::{Arc, Mutex};

/// A scenario's bytes and what they hold, in words.
type Scenario = (Vec<u8>, String);

/// The program's session as it ended, once it has.
#[derive(Clone, Default)]
pub struct Kept(Arc<Mutex<Option<Scenario>>>);

impl Kept {
    pub(crate) fn set(&self, bytes: Vec<u8>, summary: String) {
        *self.0.lock().unwrap_or_else(std::sync::PoisonError::into_inner) = Some((bytes, summary));
    }

    /// `save_scenario` to `path` after the program ended: the session as it ended, or
    /// why there is none.
    pub fn save(&self, path: &str, req: Option<u64>) -> Event {
        let kept = self.0.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        match &*kept {
            Some((bytes, summary)) => write(
                path,
                bytes,
                &format!("{summary} (the session as the program ended)"),
                req,
            ),
            None => Event::Error {
                message: "save_scenario: the program has ended and left no scenario: only a program started \
                          under the debugger (held at its start) records its session, and an MPI job's only \
                          when every rank reached MPI_Finalize"
                    .into(),
                req,
            },
        }
    }
}

/// Write scenario `bytes` at `path`: `ok` saying what they hold, or why not.
pub(crate) fn write(path: &str, bytes: &[u8], summary: &str, req: Option<u64>) -> Event {
    match std::fs::write(path, bytes) {
        Ok(()) => Event::Ok {
            cmd: "save_scenario".into(),
            target: Some(format!("scenario {path}: {summary}")),
            req,
        },
        Err(e) => Event::Error {
            message: format!("save_scenario: cannot write {path}: {e}"),
            req,
        },
    }
}

/// The `save_scenario` commands sent and not answered yet: their request numbers and
/// paths. Only these are written: an agent cannot name a file of its own choosing.
pub(crate) type Asked = Vec<(Option<u64>, String)>;

/// An event from a single program's agent, as the consumer gets it: a `scenario` is
/// written (its `ok` or `error` instead) if `asked` holds its request, or kept (nothing)
/// when it is the session as it ended; any other event as it is.
pub(crate) fn take(ev: Event, kept: &Kept, asked: &mut Asked) -> Option<Event> {
    let Event::Scenario {
        path,
        log,
        summary,
        req,
    } = ev
    else {
        return Some(ev);
    };
    let Some(bytes) = from_hex(&log) else {
        return Some(Event::Error {
            message: "save_scenario: the agent sent a scenario that is not hex".into(),
            req,
        });
    };
    match path {
        Some(path) => {
            let Some(i) = asked.iter().position(|(r, p)| *r == req && *p == path) else {
                return Some(Event::Error {
                    message: format!(
                        "the agent sent a scenario for {path}, which no save_scenario asked for: not written"
                    ),
                    req: None,
                });
            };
            asked.remove(i);
            Some(write(&path, &bytes, &summary, req))
        }
        None => {
            kept.set(bytes, summary);
            None
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use racetrack_protocol::replay_log::to_hex;

    #[test]
    fn scenarios_are_written_or_kept() {
        let dir = std::env::temp_dir().join(format!("racetrack-scenarios-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("s.rtrec").display().to_string();
        let kept = Kept::default();
        let none = kept.save(&path, Some(1));
        assert!(
            matches!(&none, Event::Error { message, req: Some(1) } if message.contains("left no scenario")),
            "{none:?}"
        );
        let answer = |path: Option<String>, log: String| Event::Scenario {
            path,
            log,
            summary: "3 bytes".into(),
            req: Some(7),
        };
        // Written only when asked for.
        let unasked = take(answer(Some(path.clone()), to_hex(b"abc")), &kept, &mut Vec::new());
        assert!(
            matches!(&unasked, Some(Event::Error { message, .. }) if message.contains("which no save_scenario asked for")),
            "{unasked:?}"
        );
        assert!(!std::path::Path::new(&path).exists());
        let mut asked = vec![(Some(7), path.clone())];
        let ok = take(answer(Some(path.clone()), to_hex(b"abc")), &kept, &mut asked);
        assert!(asked.is_empty(), "answered once");
        assert!(
            matches!(&ok, Some(Event::Ok { target: Some(t), req: Some(7), .. }) if *t == format!("scenario {path}: 3 bytes")),
            "{ok:?}"
        );
        assert_eq!(std::fs::read(&path).unwrap(), b"abc");
        assert!(matches!(
            take(
                answer(Some(path.clone()), "zz".into()),
                &kept,
                &mut vec![(Some(7), path.clone())]
            ),
            Some(Event::Error { .. })
        ));
        // The session as it ended is kept, not passed on, and saved on demand.
        assert_eq!(take(answer(None, to_hex(b"xyz")), &kept, &mut Vec::new()), None);
        let saved = kept.save(&path, None);
        assert!(
            matches!(&saved, Event::Ok { target: Some(t), .. } if t.ends_with("(the session as the program ended)")),
            "{saved:?}"
        );
        assert_eq!(std::fs::read(&path).unwrap(), b"xyz");
        let bad = dir.join("no-such-dir").join("s.rtrec").display().to_string();
        assert!(
            matches!(kept.save(&bad, None), Event::Error { message, .. } if message.contains("cannot write"))
        );
        let _ = std::fs::remove_dir_all(&dir);
    }
}
