//! Type-erased messages and thread states: what lets the runtime carry user types between
//! threads and still show and replace them as JSON.

use serde::de::DeserializeOwned;
use serde::Serialize;
use std::any::Any;

/// A message value whose concrete type the runtime does not know statically.
pub trait Payload: Any + Send {
    /// The Rust type name, shown by the debugger.
    fn type_name(&self) -> &'static str;
    /// The content as JSON.
    fn to_json(&self) -> Result<serde_json::Value, String>;
    /// Replace the content by `value`, deserialized into this message's own type.
    /// On error nothing changes.
    fn replace_from_json(&mut self, value: serde_json::Value) -> Result<(), String>;
    /// For downcasting in the typed operation wrappers.
    fn as_any(&self) -> &dyn Any;
    /// For downcasting by value.
    fn into_any(self: Box<Self>) -> Box<dyn Any>;
}

impl<T: Serialize + DeserializeOwned + Send + 'static> Payload for T {
    fn type_name(&self) -> &'static str {
        short_type_name::<T>()
    }
    fn to_json(&self) -> Result<serde_json::Value, String> {
        serde_json::to_value(self).map_err(|e| e.to_string())
    }
    fn replace_from_json(&mut self, value: serde_json::Value) -> Result<(), String> {
        let v: T = serde_json::from_value(value)
            .map_err(|e| format!("does not deserialize as {}: {e}", short_type_name::<T>()))?;
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

/// A thread-local state behind `dyn`, readable and replaceable as JSON.
pub trait ErasedState: Send {
    /// The state as JSON.
    fn to_json(&self) -> Result<serde_json::Value, String>;
    /// Replace the state; on error nothing changes.
    fn replace_from_json(&mut self, value: serde_json::Value) -> Result<(), String>;
}

impl<T: Serialize + DeserializeOwned + Send> ErasedState for T {
    fn to_json(&self) -> Result<serde_json::Value, String> {
        serde_json::to_value(self).map_err(|e| e.to_string())
    }
    fn replace_from_json(&mut self, value: serde_json::Value) -> Result<(), String> {
        *self = serde_json::from_value(value).map_err(|e| {
            format!(
                "does not deserialize as the thread state {}: {e}",
                short_type_name::<T>()
            )
        })?;
        Ok(())
    }
}

/// `alloc::vec::Vec<my_crate::Foo>` → `Vec<Foo>`.
pub(crate) fn short_type_name<T: ?Sized>() -> &'static str {
    let full = std::any::type_name::<T>();
    if !full.contains("::") {
        return full;
    }
    // Leak-free shortening is not possible for generic names; keep them as they are
    // unless they are a plain path.
    if full.contains('<') {
        full
    } else {
        full.rsplit("::").next().unwrap_or(full)
    }
}
