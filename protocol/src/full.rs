//! Decoding full events (JSON text) without serde's buffering of internally tagged enums.
//! `Event` is tagged by its `event` field, so serde reads every event into an
//! intermediate tree before building it: most of a debugger's time on the events of an
//! MPI job, which are full events (they carry their call). The notifications (`send`,
//! `recv`, `start`, `stop`) and `batch` frames are read directly into their structs
//! instead, when the tag comes first (as every agent writes it); anything else goes the
//! general way. The result is the same `Event`.

use crate::{Event, RecvEv, SendEv, StepEv};
use serde::Deserialize;
use serde_json::value::RawValue;

#[derive(Deserialize)]
struct BatchFrame<'a> {
    #[serde(borrow)]
    events: Vec<&'a RawValue>,
}

/// One event from its JSON text, as `serde_json::from_str::<Event>` reads it.
pub(crate) fn event(text: &str) -> Result<Event, serde_json::Error> {
    let Some(rest) = text.strip_prefix(r#"{"event":""#) else {
        return serde_json::from_str(text);
    };
    let tag = rest.split_once('"').map_or("", |(t, _)| t);
    // The tag's field is one the struct does not know: it is skipped.
    match tag {
        "start" => serde_json::from_str::<StepEv>(text).map(Event::Start),
        "stop" => serde_json::from_str::<StepEv>(text).map(Event::Stop),
        "send" => serde_json::from_str::<SendEv>(text).map(Event::Send),
        "recv" => serde_json::from_str::<RecvEv>(text).map(Event::Recv),
        "batch" => {
            let frame: BatchFrame = serde_json::from_str(text)?;
            let events = frame
                .events
                .iter()
                .map(|e| event(e.get()))
                .collect::<Result<_, _>>()?;
            Ok(Event::Batch { events })
        }
        _ => serde_json::from_str(text),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every kind of line the fast path takes, and some it does not, decode as the general
    /// way decodes them.
    #[test]
    fn decodes_as_serde_does() {
        let lines = [
            r#"{"event":"start","event_id":3,"thread":"rank[1]","op":"MPI_Recv","msg":"1.2","instance":"1.2","step":"run","traced":false,"held":false,"call":{"comm":"MPI_COMM_WORLD","peer":"MPI_ANY_SOURCE","tag":7,"count":4,"datatype":"MPI_INT","site":"ring+0x12"}}"#,
            r#"{"event":"stop","event_id":4,"thread":"rank[1]","op":"MPI_Recv","msg":"1.2","instance":"1.2","step":"run","traced":false,"held":true,"reason":"break"}"#,
            r#"{"event":"send","event_id":5,"thread":"rank[0]","op":"MPI_Send","msg":"0.1","to_thread":"rank[1]","type":"MPI_INT","traced":false,"held":false,"content":[1,2]}"#,
            r#"{"event":"recv","event_id":6,"thread":"rank[1]","op":"MPI_Recv","msg":"1.2","position":0,"traced":false,"call":{"matched":{"source":0,"tag":7,"bytes":16}}}"#,
            r#"{"event":"batch","events":[{"event":"stop","event_id":7,"thread":"t","op":"o","msg":"1","instance":"1","step":"absorb","traced":true,"held":false},{"event":"released","event_id":2,"thread":"t"}]}"#,
            r#"{"event":"released","event_id":3,"thread":"t"}"#,
            r#"{"thread":"t","event":"released","event_id":3}"#,
            r#"{"held":false,"event":"stop","event_id":4,"thread":"t","op":"o","msg":"1","instance":"1","step":"run","traced":false}"#,
        ];
        for line in lines {
            let general: Event = serde_json::from_str(line).expect(line);
            assert_eq!(event(line).expect(line), general, "{line}");
        }
        for bad in [
            r#"{"event":"start","event_id":"x"}"#,
            r#"{"event":"batch","events":[{"event":"nope"}]}"#,
        ] {
            assert!(
                event(bad).is_err() && serde_json::from_str::<Event>(bad).is_err(),
                "{bad}"
            );
        }
    }
}
