//! The unfolded flow graph as an `egui_graphs` graph, kept in step with the model.
//!
//! Layout is computed here, not by a force simulation: an operation's row is its place in
//! flow order and a thread's column its index in its collection, so a node's position
//! depends only on the program's structure and existing nodes never move when new ones
//! appear. Colours show status; `*` marks nodes that processed a traced message.

use super::node::{CountEdge, LabelNode};
use crate::model::{Changes, Edge, Model, Node, NodeId, NodeKey, NodeStatus, Unfolded};
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

/// The egui_graphs graph mirroring the model's unfolded graph. Drawn nodes are added in
/// the model's node order, so a node's [`NodeId`] is its drawn index too (both graphs only
/// ever grow; a rebuild starts both over).
#[derive(Default)]
pub struct GraphSync {
    /// The drawable graph.
    pub g: Graph<NodeId, u64, petgraph::Directed, petgraph::stable_graph::DefaultIx, LabelNode, CountEdge>,
    /// Drawn edge of each model edge, by [`EdgeId`].
    edges: Vec<EdgeIndex>,
    /// Flat copies for painting large graphs directly ([`super::canvas`]), by node index:
    /// each node's position,
    pub pos: Vec<Pos2>,
    /// its status colour,
    pub color: Vec<Color32>,
    /// Ends of every edge (node indexes).
    pub edge_ends: Vec<(u32, u32)>,
}

/// Where `key` goes: row = operation order, column = thread index centred in its collection.
pub fn position(model: &Model, key: NodeKey) -> Pos2 {
    let Some(p) = model.process(key.proc) else {
        return Pos2::ZERO;
    };
    let row = p.op_row(key.op).unwrap_or(p.operations.len());
    let (col, n) = p.thread_column(key.thread).unwrap_or((0, 1));
    Pos2::new((col as f32 - (n as f32 - 1.0) / 2.0) * DX, row as f32 * DY)
}

/// A node's label: `Op @ thread`, `*` first when it processed a traced message.
fn label(model: &Model, node: &Node) -> String {
    let (op, thread) = model.node_names(node.key);
    let stuck = if model.deadlocked(node.key) {
        " (deadlocked)"
    } else {
        ""
    };
    format!("{}{op} @ {thread}{stuck}", if node.traced { "* " } else { "" })
}

/// The colour of a call a rank is stuck in (a deadlock told).
pub const DEADLOCKED: Color32 = Color32::from_rgb(255, 40, 140);

/// A node's colour: its status's, or [`DEADLOCKED`].
fn node_color(model: &Model, node: &Node) -> Color32 {
    if model.deadlocked(node.key) {
        DEADLOCKED
    } else {
        status_color(node.status)
    }
}

impl GraphSync {
    /// Bring the drawable graph up to date with `model`, given what changed since the last
    /// call: only added and changed nodes and edges are touched. A structure change (node
    /// positions derive from it), or a drawing out of step with the model, rebuilds it all.
    pub fn sync(&mut self, model: &Model, changes: &Changes) {
        let Some(u) = model.unfolded() else { return };
        let drawn = self.pos.len() + changes.nodes_added.len();
        if changes.structure
            || drawn != u.nodes().len()
            || self.edges.len() + changes.edges_added.len() != u.edges().len()
        {
            self.rebuild(model, u);
            return;
        }
        for &id in &changes.nodes_added {
            self.add_node(model, &u.nodes()[id.index()]);
        }
        for &id in &changes.nodes_changed {
            self.restyle(model, &u.nodes()[id.index()], id);
        }
        for &e in &changes.edges_added {
            self.add_edge(u.edges()[e.index()]);
        }
        for &e in &changes.edges_changed {
            let count = u.edges()[e.index()].count;
            if let Some(edge) = self.edges.get(e.index()).and_then(|&i| self.g.edge_mut(i)) {
                edge.set_label(count.to_string());
            }
        }
    }

    /// Draw the whole graph anew.
    fn rebuild(&mut self, model: &Model, u: &Unfolded) {
        *self = GraphSync::default();
        for n in u.nodes() {
            self.add_node(model, n);
        }
        for e in u.edges() {
            self.add_edge(*e);
        }
    }

    fn add_node(&mut self, model: &Model, node: &Node) {
        let at = position(model, node.key);
        let id = NodeId(self.pos.len() as u32);
        let i = self
            .g
            .add_node_with_label_and_location(id, label(model, node), at);
        debug_assert_eq!(i.index(), id.index(), "drawn in the model's order");
        self.pos.push(at);
        self.color.push(node_color(model, node));
        if let Some(n) = self.g.node_mut(i) {
            n.set_color(node_color(model, node));
        }
    }

    fn restyle(&mut self, model: &Model, node: &Node, id: NodeId) {
        if let Some(c) = self.color.get_mut(id.index()) {
            *c = node_color(model, node);
        }
        if let Some(n) = self.g.node_mut(NodeIndex::new(id.index())) {
            n.set_color(node_color(model, node));
            let label = label(model, node);
            if n.label() != label {
                n.set_label(label);
            }
        }
    }

    fn add_edge(&mut self, e: Edge) {
        let (a, b) = (NodeIndex::new(e.from.index()), NodeIndex::new(e.to.index()));
        let i = self.g.add_edge_with_label(a, b, e.count, e.count.to_string());
        self.edges.push(i);
        self.edge_ends.push((e.from.0, e.to.0));
    }

    /// The model node of a drawable node.
    pub fn id_of(&self, idx: NodeIndex) -> Option<NodeId> {
        self.g.node(idx).map(|n| *n.payload())
    }

    /// The label of the node with index `i` (status marks included).
    pub fn label_of(&self, i: usize) -> Option<String> {
        self.g.node(NodeIndex::new(i)).map(|n| n.label())
    }

    /// Mark node `id` as the selected node in the drawing.
    pub fn select(&mut self, id: Option<NodeId>) {
        let want = id
            .map(|i| NodeIndex::new(i.index()))
            .filter(|&i| self.g.node(i).is_some());
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
