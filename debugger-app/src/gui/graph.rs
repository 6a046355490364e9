//! The unfolded flow graph as an `egui_graphs` graph, kept in step with the model.
//!
//! Layout is computed here, not by a force simulation: an operation's row is its place in
//! flow order and a thread's column its index in its collection, so a node's position
//! depends only on the program's structure and existing nodes never move when new ones
//! appear. Colours show status; `*` marks nodes that processed a traced message.

use super::node::{CountEdge, LabelNode};
use crate::model::{FastMap, Model, NodeKey, NodeStatus};
use egui::{Color32, Pos2};
use egui_graphs::{Graph, Layout, LayoutState};
use petgraph::stable_graph::{EdgeIndex, NodeIndex};
use serde::{Deserialize, Serialize};

/// Column and row spacing of the layout, in graph units. Columns are wide for their
/// height: a node's label is a line of text at a fixed screen size (see
/// [`super::node`]), and the graphs are taller than wide (an operation per row), so after
/// "Fit" a column must still be as wide as a label (`BorderReq @ proc[1]`, ~125 points).
pub const DX: f32 = 300.0;
/// See [`DX`].
pub const DY: f32 = 90.0;

/// A layout that leaves positions as set (they are set once, when a node appears).
#[derive(Debug, Default, Clone, Serialize, Deserialize)]
pub struct FixedState;
impl LayoutState for FixedState {}

/// See [`FixedState`].
#[derive(Debug, Default)]
pub struct FixedLayout;

impl Layout<FixedState> for FixedLayout {
    fn from_state(_: FixedState) -> impl Layout<FixedState> {
        FixedLayout
    }
    fn next<N, E, Ty, Ix, Dn, De>(&mut self, _g: &mut Graph<N, E, Ty, Ix, Dn, De>, _ui: &egui::Ui)
    where
        N: Clone,
        E: Clone,
        Ty: petgraph::EdgeType,
        Ix: petgraph::stable_graph::IndexType,
        Dn: egui_graphs::DisplayNode<N, E, Ty, Ix>,
        De: egui_graphs::DisplayEdge<N, E, Ty, Ix, Dn>,
    {
    }
    fn state(&self) -> FixedState {
        FixedState
    }
}

/// The colour of a status (also used by the legend).
pub fn status_color(s: NodeStatus) -> Color32 {
    match s {
        NodeStatus::Idle => Color32::from_rgb(140, 140, 150),
        NodeStatus::Running => Color32::from_rgb(60, 170, 90),
        NodeStatus::HeldStart => Color32::from_rgb(220, 60, 60),
        NodeStatus::HeldSend => Color32::from_rgb(235, 150, 40),
        NodeStatus::HeldStop => Color32::from_rgb(170, 80, 200),
        NodeStatus::Finished => Color32::from_rgb(70, 110, 170),
    }
}

/// Human name of a status.
pub fn status_name(s: NodeStatus) -> &'static str {
    match s {
        NodeStatus::Idle => "idle",
        NodeStatus::Running => "running",
        NodeStatus::HeldStart => "held at start",
        NodeStatus::HeldSend => "held at send",
        NodeStatus::HeldStop => "held at stop",
        NodeStatus::Finished => "finished",
    }
}

/// The egui_graphs graph mirroring the model's unfolded graph.
#[derive(Default)]
pub struct GraphSync {
    /// The drawable graph.
    pub g: Graph<NodeKey, u64, petgraph::Directed, petgraph::stable_graph::DefaultIx, LabelNode, CountEdge>,
    /// Drawn node of each model node, with the (status, traced) it was drawn with.
    nodes: FastMap<NodeKey, (NodeIndex, Option<(NodeStatus, bool)>)>,
    /// Drawn edges by their ends, with the count shown.
    edges: FastMap<(NodeIndex, NodeIndex), (EdgeIndex, u64)>,
    /// Flat copies for painting large graphs directly ([`super::canvas`]), by node index
    /// (nodes are never removed, so an index is the order of addition): position...
    pub pos: Vec<Pos2>,
    /// ...colour...
    pub color: Vec<Color32>,
    /// ...and model key; and every edge's ends.
    keys: Vec<NodeKey>,
    /// Ends of every edge (node indexes).
    pub edge_ends: Vec<(u32, u32)>,
}

/// Where `key` goes: row = operation order, column = thread index centred in its collection.
pub fn position(model: &Model, key: &NodeKey) -> Pos2 {
    let row = model
        .operations
        .iter()
        .position(|o| o.name == key.0)
        .unwrap_or(model.operations.len());
    let (col, n) = model
        .collections
        .iter()
        .find_map(|c| {
            c.threads
                .iter()
                .position(|t| *t == key.1)
                .map(|i| (i, c.threads.len()))
        })
        .unwrap_or((0, 1));
    Pos2::new((col as f32 - (n as f32 - 1.0) / 2.0) * DX, row as f32 * DY)
}

impl GraphSync {
    /// Bring the drawable graph up to date with `model` (adds, recolours, relabels).
    ///
    /// Runs every frame over every node and edge, so it touches the drawing (and formats
    /// labels) only for what changed since the last frame.
    pub fn sync(&mut self, model: &Model) {
        for (key, node) in &model.nodes {
            let (idx, drawn) = match self.nodes.get_mut(key) {
                Some(entry) => entry,
                None => {
                    let label = format!("{} @ {}", key.0, key.1);
                    let at = position(model, key);
                    let i = self.g.add_node_with_label_and_location(key.clone(), label, at);
                    if i.index() >= self.pos.len() {
                        self.pos.resize(i.index() + 1, Pos2::ZERO);
                        self.color.resize(i.index() + 1, Color32::GRAY);
                        self.keys.resize(i.index() + 1, NodeKey::default());
                    }
                    self.pos[i.index()] = at;
                    self.keys[i.index()] = key.clone();
                    self.nodes.entry(key.clone()).or_insert((i, None))
                }
            };
            let now = (node.status, node.traced);
            if *drawn == Some(now) {
                continue;
            }
            *drawn = Some(now);
            if let Some(c) = self.color.get_mut(idx.index()) {
                *c = status_color(node.status);
            }
            if let Some(n) = self.g.node_mut(*idx) {
                n.set_color(status_color(node.status));
                let label = format!("{}{} @ {}", if node.traced { "* " } else { "" }, key.0, key.1);
                if n.label() != label {
                    n.set_label(label);
                }
            }
        }
        for ((a, b), count) in &model.edges {
            let (Some(&(ia, _)), Some(&(ib, _))) = (self.nodes.get(a), self.nodes.get(b)) else {
                continue;
            };
            match self.edges.get_mut(&(ia, ib)) {
                Some((e, shown)) => {
                    if shown != count {
                        *shown = *count;
                        if let Some(edge) = self.g.edge_mut(*e) {
                            edge.set_label(count.to_string());
                        }
                    }
                }
                None => {
                    let e = self.g.add_edge_with_label(ia, ib, *count, count.to_string());
                    self.edges.insert((ia, ib), (e, *count));
                    self.edge_ends.push((ia.index() as u32, ib.index() as u32));
                }
            }
        }
    }

    /// The model key of a drawable node.
    pub fn key_of(&self, idx: NodeIndex) -> Option<&NodeKey> {
        self.g.node(idx).map(|n| n.payload())
    }

    /// The model key of the node with index `i`.
    pub fn key_at(&self, i: usize) -> Option<&NodeKey> {
        self.keys.get(i)
    }

    /// The index of the node drawn for `key`.
    pub fn index_of(&self, key: &NodeKey) -> Option<usize> {
        self.nodes.get(key).map(|(i, _)| i.index())
    }

    /// The label of the node with index `i` (status marks included).
    pub fn label_of(&self, i: usize) -> Option<String> {
        self.g.node(NodeIndex::new(i)).map(|n| n.label())
    }

    /// Mark `key` as the selected node in the drawing.
    pub fn select(&mut self, key: Option<&NodeKey>) {
        let want = key.and_then(|k| self.nodes.get(k)).map(|(i, _)| *i);
        let current: Vec<NodeIndex> = self.g.selected_nodes().to_vec();
        if current.first().copied() == want && current.len() <= 1 {
            return;
        }
        for i in current {
            if let Some(n) = self.g.node_mut(i) {
                n.set_selected(false);
            }
        }
        if let Some(i) = want {
            if let Some(n) = self.g.node_mut(i) {
                n.set_selected(true);
            }
            self.g.set_selected_nodes(vec![i]);
        } else {
            self.g.set_selected_nodes(Vec::new());
        }
    }
}
