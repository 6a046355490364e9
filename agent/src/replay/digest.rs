//! Digests (`RACETRACK_DIGEST=FILE`, written for `racetrack explore`): a hash of every
//! message's content as it is sent and of each thread's state after each of its steps, so
//! that the explorer can tell when two orderings led to the same state (thesis §4.5's
//! merging of equal states) without the program's types.
//!
//! One line per record, tab-separated, the hash as 16 hex digits:
//! - `m MSG OP THREAD HASH`: the message `MSG` for operation `OP` on thread `THREAD`
//!   (global index) was sent with content of hash `HASH` (`OP` and `THREAD` are `-` for a
//!   result, back to the schedule's caller);
//! - `s THREAD KIND HASH [ACC]`: thread `THREAD` stopped a step (`run`, `absorb` or
//!   `final`) with its state of hash `HASH`; after an absorb into a merge made with
//!   `ops::merge_serde`, `ACC` is the hash of the merge's accumulator.
//!
//! A content or state that cannot be serialized hashes as `-` (the explorer then merges
//! nothing of that run). The hash is the standard library's `DefaultHasher::new()` (fixed
//! keys), over the value's JSON text: equal within one build of one program, which is all
//! the explorer compares.

use racetrack_runtime::hook::{SendEvent, StepEvent, StepKind};
use std::fs::File;
use std::hash::{Hash, Hasher};
use std::io::{BufWriter, Write};
use std::sync::Mutex;

pub(super) struct Digest {
    out: Mutex<Option<BufWriter<File>>>,
}

fn hash_of(v: Result<serde_json::Value, impl std::fmt::Debug>) -> String {
    match v {
        Ok(v) => {
            let mut h = std::collections::hash_map::DefaultHasher::new();
            v.to_string().hash(&mut h);
            format!("{:016x}", h.finish())
        }
        Err(_) => "-".to_owned(),
    }
}

impl Digest {
    pub(super) fn create(path: &str) -> std::io::Result<Self> {
        Ok(Self {
            out: Mutex::new(Some(BufWriter::new(File::create(path)?))),
        })
    }

    fn write(&self, line: std::fmt::Arguments<'_>) {
        let Ok(mut out) = self.out.lock() else { return };
        // A write that fails ends the digests: the explorer then merges nothing.
        if out.as_mut().is_some_and(|w| w.write_fmt(line).is_err()) {
            *out = None;
        }
    }

    pub(super) fn send(&self, ev: &SendEvent<'_>) {
        let hash = hash_of(ev.content_json());
        match (ev.to_op, ev.to_thread) {
            (Some(op), Some(to)) => {
                self.write(format_args!(
                    "m\t{}\t{}\t{}\t{hash}\n",
                    ev.msg_id, op.name, to.global
                ));
            }
            // A result, back to the schedule's caller.
            _ => self.write(format_args!("m\t{}\t-\t-\t{hash}\n", ev.msg_id)),
        }
    }

    pub(super) fn stop(&self, ev: &StepEvent<'_>) {
        let kind = match ev.step {
            StepKind::Run => "run",
            StepKind::Absorb => "absorb",
            StepKind::Final => "final",
        };
        let hash = hash_of(ev.access.state_json());
        match ev.access.instance_json() {
            Some(acc) => {
                let acc = hash_of(Ok::<_, ()>(acc.clone()));
                self.write(format_args!("s\t{}\t{kind}\t{hash}\t{acc}\n", ev.thread.global));
            }
            None => self.write(format_args!("s\t{}\t{kind}\t{hash}\n", ev.thread.global)),
        }
    }

    pub(super) fn finish(&self) {
        if let Ok(mut out) = self.out.lock() {
            if let Some(mut w) = out.take() {
                let _ = w.flush();
            }
        }
    }
}
