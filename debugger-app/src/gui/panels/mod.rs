//! The window's panels: each an `impl App` block of `*_ui` functions that read the model
//! and push commands (applied in one place, [`App::apply`](super::app::App::apply)).

mod breakpoints;
mod conditions;
mod graph_view;
mod inspector;
mod json;
mod log;
mod queues;
mod race;
mod ranks;
mod toolbar;

pub use conditions::CondForm;
pub(crate) use json::json_tree_ui;
pub use race::Race;
pub use ranks::LeftTab;
