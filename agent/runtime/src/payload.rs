//! Type-erased messages and thread states: what lets the runtime carry user types between
//! threads and still show and replace them as JSON.

use crate::error::ContentError;
use serde::de::DeserializeOwned;
use serde::Serialize;
use std::any::Any;
use std::collections::VecDeque;

/// A message value whose concrete type the runtime does not know statically.
pub trait Payload: Any + Send {
    /// The Rust type name, shown by the debugger.
    fn type_name(&self) -> &'static str;
    /// The content as JSON.
    fn to_json(&self) -> Result<serde_json::Value, ContentError>;
    /// Replace the content by `value`, deserialized into this message's own type.
    /// On error nothing changes.
    fn replace_from_json(&mut self, value: serde_json::Value) -> Result<(), ContentError>;
    /// For downcasting in the typed operation wrappers.
    fn as_any(&self) -> &dyn Any;
    /// For downcasting by value.
    fn into_any(self: Box<Self>) -> Box<dyn Any>;
}

impl<T: Serialize + DeserializeOwned + Send + 'static> Payload for T {
    fn type_name(&self) -> &'static str {
        short_type_name::<T>()
    }
    fn to_json(&self) -> Result<serde_json::Value, ContentError> {
        serde_json::to_value(self).map_err(ContentError::ToJson)
    }
    fn replace_from_json(&mut self, value: serde_json::Value) -> Result<(), ContentError> {
        let v: T = serde_json::from_value(value).map_err(|source| ContentError::Message {
            type_name: short_type_name::<T>(),
            source,
        })?;
        *self = v;
        Ok(())
    }
    fn as_any(&self) -> &dyn Any {
        self
    }
    fn into_any(self: Box<Self>) -> Box<dyn Any> {
        self
    }
}

/// The payloads of a batch of messages of one type, in order (a `VecDeque<T>`): unless a
/// debugger that may hold messages is attached, a split's outputs travel this way, without
/// a box each.
pub(crate) trait PayloadQueue: Send {
    /// Move the first payload into `slot`, reusing the slot when it already holds the
    /// type (so taking the payloads of a batch one by one allocates nothing).
    fn pop_into(&mut self, slot: &mut Option<Box<dyn Slot>>) -> bool;
    /// The first payload, boxed like a message of its own.
    fn pop_boxed(&mut self) -> Option<Box<dyn Payload>>;
    /// For appending in the typed `Outputs`.
    fn as_any_mut(&mut self) -> &mut dyn Any;
    /// Make room for a full batch of small payloads at once: a split's batches fill up,
    /// and growing by doubling would copy the payloads several times on the way.
    fn reserve_batch(&mut self);
    /// Move every payload of `other` to the back of this queue, if it is a queue of the
    /// same type (else nothing moves: `false`).
    fn append(&mut self, other: &mut dyn PayloadQueue) -> bool;
    /// The payloads' type.
    fn item_type(&self) -> std::any::TypeId;
    /// Whether no payload is left.
    fn is_empty(&self) -> bool;
}

impl<T: Serialize + DeserializeOwned + Send + 'static> PayloadQueue for VecDeque<T> {
    fn pop_into(&mut self, slot: &mut Option<Box<dyn Slot>>) -> bool {
        let Some(v) = self.pop_front() else {
            return false;
        };
        match slot
            .as_mut()
            .and_then(|s| s.as_any_mut().downcast_mut::<Option<T>>())
        {
            Some(s) => *s = Some(v),
            None => *slot = Some(Box::new(Some(v))),
        }
        true
    }
    fn pop_boxed(&mut self) -> Option<Box<dyn Payload>> {
        self.pop_front().map(|v| Box::new(v) as Box<dyn Payload>)
    }
    fn as_any_mut(&mut self) -> &mut dyn Any {
        self
    }
    fn reserve_batch(&mut self) {
        if std::mem::size_of::<T>() <= 256 {
            self.reserve(super::thread::BATCH_MAX);
        }
    }
    fn append(&mut self, other: &mut dyn PayloadQueue) -> bool {
        match other.as_any_mut().downcast_mut::<VecDeque<T>>() {
            Some(o) => {
                VecDeque::append(self, o);
                true
            }
            None => false,
        }
    }
    fn item_type(&self) -> std::any::TypeId {
        std::any::TypeId::of::<T>()
    }
    fn is_empty(&self) -> bool {
        VecDeque::is_empty(self)
    }
}

/// A new, empty queue of `T`s.
pub(crate) fn new_queue<T: Serialize + DeserializeOwned + Send + 'static>() -> Box<dyn PayloadQueue> {
    Box::new(VecDeque::<T>::new())
}

/// One payload taken from a batch (an `Option<T>`), for the typed operation to take.
pub(crate) trait Slot: Send {
    /// Box the payload like a message of its own (when it must go back into a queue).
    fn take_boxed(&mut self) -> Option<Box<dyn Payload>>;
    fn as_any_mut(&mut self) -> &mut dyn Any;
}

impl<T: Serialize + DeserializeOwned + Send + 'static> Slot for Option<T> {
    fn take_boxed(&mut self) -> Option<Box<dyn Payload>> {
        self.take().map(|v| Box::new(v) as Box<dyn Payload>)
    }
    fn as_any_mut(&mut self) -> &mut dyn Any {
        self
    }
}

/// A thread-local state behind `dyn`, readable and replaceable as JSON.
pub trait ErasedState: Send {
    /// The state as JSON.
    fn to_json(&self) -> Result<serde_json::Value, ContentError>;
    /// Replace the state; on error nothing changes.
    fn replace_from_json(&mut self, value: serde_json::Value) -> Result<(), ContentError>;
}

impl<T: Serialize + DeserializeOwned + Send> ErasedState for T {
    fn to_json(&self) -> Result<serde_json::Value, ContentError> {
        serde_json::to_value(self).map_err(ContentError::ToJson)
    }
    fn replace_from_json(&mut self, value: serde_json::Value) -> Result<(), ContentError> {
        *self = serde_json::from_value(value).map_err(|source| ContentError::State {
            type_name: short_type_name::<T>(),
            source,
        })?;
        Ok(())
    }
}

/// `my_crate::Foo` → `Foo`. Generic names (`alloc::vec::Vec<my_crate::Foo>`) stay whole:
/// shortening their parts would need a new string, and this runs for every message sent
/// while a debugger is attached (byte scans only: a substring search cost more than the
/// rest of the send on the splitting thread).
pub(crate) fn short_type_name<T: ?Sized>() -> &'static str {
    let full = std::any::type_name::<T>();
    let bytes = full.as_bytes();
    if bytes.contains(&b'<') {
        return full;
    }
    match bytes.iter().rposition(|&c| c == b':') {
        // Type names are valid UTF-8 and `:` is ASCII, so `i + 1` is a char boundary.
        Some(i) => &full[i + 1..],
        None => full,
    }
}

#[cfg(test)]
mod tests {
    use super::short_type_name;

    struct Local;

    #[test]
    fn type_names_lose_their_path_unless_generic() {
        assert_eq!(short_type_name::<u64>(), "u64");
        assert_eq!(short_type_name::<Local>(), "Local");
        assert_eq!(short_type_name::<String>(), "String");
        assert_eq!(
            short_type_name::<Vec<Local>>(),
            std::any::type_name::<Vec<Local>>()
        );
        assert_eq!(short_type_name::<(u8, u16)>(), "(u8, u16)");
    }
}
