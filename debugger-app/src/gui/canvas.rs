//! The unfolded graph past [`LABELS_MAX`](super::app::LABELS_MAX) nodes, painted directly:
//! every edge and node into one mesh; labels for the hovered and the selected node, and
//! for every node in view once zoomed in so far that they fit between neighbours (at most
//! [`VISIBLE_LABELS_MAX`] nodes in view).
//!
//! `egui_graphs` draws smaller graphs (labels, arrows, edge counts). At thousands of nodes
//! it took most of a frame: it clones both end nodes of every edge, and every circle and
//! line is a shape of its own for the tessellator. Here a frame costs one pass over the
//! [`GraphSync`] mirror's flat arrays, culled to the visible rectangle. Navigation is the
//! same: drag to pan, scroll (or pinch) to zoom, "Fit" to fit; a click selects a node.

use super::graph::GraphSync;
use super::node::{elided, label_room, LABEL_PT};
use egui::epaint::{Mesh, Vertex, WHITE_UV};
use egui::{Color32, Pos2, Rect, Sense, Shape, Stroke, Vec2};

/// Radius of a node, in graph units (as `egui_graphs` draws them).
const RADIUS: f32 = 5.0;
/// Rim vertices of a node's disc.
const RIM: usize = 10;
/// Most nodes in view for which labels are drawn (text layout per node and frame).
pub const VISIBLE_LABELS_MAX: usize = 400;
/// Colour of edges.
const EDGE: Color32 = Color32::from_rgba_premultiplied(110, 110, 120, 160);

/// View state of the directly painted graph: `screen = rect.min + pan + graph * zoom`.
#[derive(Debug, Clone)]
pub struct Canvas {
    zoom: f32,
    pan: Vec2,
    /// Whether the view was placed (the first frame fits the graph).
    placed: bool,
    /// Where the view was last drawn.
    rect: Option<Rect>,
    /// Nodes labelled in the last frame.
    labelled: usize,
}

impl Default for Canvas {
    fn default() -> Self {
        Self {
            zoom: 1.0,
            pan: Vec2::ZERO,
            placed: false,
            rect: None,
            labelled: 0,
        }
    }
}

impl Canvas {
    /// Draw `g` in the remaining space; returns the node clicked this frame (its index in
    /// the mirror). `selected`: the node to ring and label; `fit`: fit the graph to the
    /// space on every frame.
    pub fn show(
        &mut self,
        ui: &mut egui::Ui,
        g: &GraphSync,
        selected: Option<usize>,
        fit: bool,
    ) -> Option<usize> {
        let (rect, resp) = ui.allocate_exact_size(ui.available_size(), Sense::click_and_drag());
        self.rect = Some(rect);
        let count = g.pos.len();
        resp.widget_info(|| {
            egui::WidgetInfo::labeled(
                egui::WidgetType::Other,
                true,
                format!("unfolded graph, {count} nodes (drawn directly)"),
            )
        });
        if fit || !self.placed {
            self.fit(rect, &g.pos);
        }
        if resp.dragged() {
            self.pan += resp.drag_delta();
        }
        if let Some((p, factor)) = zoom_asked(ui, &resp) {
            self.zoom_at(rect, p, factor);
        }

        let painter = ui.painter_at(rect);
        painter.add(Shape::mesh(self.mesh(rect, g)));

        let hovered = resp.hover_pos().and_then(|p| self.node_at(rect, &g.pos, p));
        let radius = self.screen_radius();
        self.labels(ui, rect, g, [selected, hovered]);
        for (i, ring) in [(selected, true), (hovered, false)] {
            let Some(i) = i.filter(|&i| i < count) else {
                continue;
            };
            let c = self.to_screen(rect, g.pos[i]);
            if ring {
                painter.circle_stroke(
                    c,
                    radius + 2.0,
                    Stroke::new(2.0, ui.visuals().strong_text_color()),
                );
            }
            if let Some(label) = g.label_of(i) {
                painter.text(
                    c - Vec2::new(0.0, radius + 4.0),
                    egui::Align2::CENTER_BOTTOM,
                    label,
                    egui::FontId::proportional(LABEL_PT),
                    g.color[i],
                );
            }
        }
        if resp.clicked() {
            return resp
                .interact_pointer_pos()
                .and_then(|p| self.node_at(rect, &g.pos, p));
        }
        None
    }

    /// Zoomed in so far that labels fit between neighbours (see [`label_room`]), with at
    /// most [`VISIBLE_LABELS_MAX`] nodes in view: each visible node's label above it, at
    /// [`LABEL_PT`] points, elided to its column's width (`except`: drawn by the caller).
    /// Zoomed out further, only the hovered and the selected node are labelled.
    fn labels(&mut self, ui: &egui::Ui, rect: Rect, g: &GraphSync, except: [Option<usize>; 2]) {
        self.labelled = 0;
        let Some(room) = label_room(self.zoom) else {
            return;
        };
        let visible: Vec<(usize, Pos2)> = g
            .pos
            .iter()
            .map(|&p| self.to_screen(rect, p))
            .enumerate()
            .filter(|(_, c)| rect.contains(*c))
            .take(VISIBLE_LABELS_MAX + 1)
            .collect();
        if visible.len() > VISIBLE_LABELS_MAX {
            return;
        }
        let painter = ui.painter_at(rect);
        let up = self.screen_radius() + 4.0;
        for (i, c) in visible {
            self.labelled += 1;
            let Some(label) = g.label_of(i).filter(|_| !except.contains(&Some(i))) else {
                continue;
            };
            let font = egui::FontId::proportional(LABEL_PT);
            let galley = elided(ui.ctx(), label, font, g.color[i], room);
            let at = c - Vec2::new(galley.size().x / 2.0, up + galley.size().y);
            painter.galley(at, galley, g.color[i]);
        }
    }

    /// How many nodes were labelled in the last frame (not counting the hovered and the
    /// selected one when nodes are too dense for labels).
    pub fn labelled(&self) -> usize {
        self.labelled
    }

    /// Where graph point `p` was on the screen in the last frame drawn.
    pub fn screen_pos(&self, p: Pos2) -> Option<Pos2> {
        self.rect.map(|r| self.to_screen(r, p))
    }

    /// Where node position `p` (graph units) is on the screen, in a widget at `rect`.
    pub fn to_screen(&self, rect: Rect, p: Pos2) -> Pos2 {
        rect.min + self.pan + p.to_vec2() * self.zoom
    }

    fn screen_radius(&self) -> f32 {
        (RADIUS * self.zoom).clamp(1.5, 40.0)
    }

    /// The node under screen point `p`, if any (the nearest within reach).
    pub fn node_at(&self, rect: Rect, pos: &[Pos2], p: Pos2) -> Option<usize> {
        let reach = self.screen_radius().max(4.0);
        let reach2 = reach * reach;
        pos.iter()
            .enumerate()
            .map(|(i, &q)| (i, self.to_screen(rect, q).distance_sq(p)))
            .filter(|&(_, d)| d <= reach2)
            .min_by(|a, b| a.1.total_cmp(&b.1))
            .map(|(i, _)| i)
    }

    /// Fit every node into `rect` with some margin (as `egui_graphs` does).
    fn fit(&mut self, rect: Rect, pos: &[Pos2]) {
        let Some(bounds) = pos
            .iter()
            .map(|&p| Rect::from_center_size(p, Vec2::splat(2.0 * RADIUS)))
            .reduce(|a, b| a.union(b))
        else {
            return;
        };
        let size = bounds.size() * 1.3;
        let zoom = (rect.width() / size.x).min(rect.height() / size.y);
        if !zoom.is_finite() || zoom <= 0.0 {
            return;
        }
        self.zoom = zoom;
        self.pan = rect.size() / 2.0 - bounds.center().to_vec2() * zoom;
        self.placed = true;
    }

    /// Zoom by `factor` keeping the graph point under `at` in place.
    fn zoom_at(&mut self, rect: Rect, at: Pos2, factor: f32) {
        // Fitting a very wide graph can need a very small zoom: the bounds leave room.
        zoom_about(&mut self.zoom, &mut self.pan, at - rect.min, factor, 1e-6..=100.0);
    }

    /// Every visible edge (a thin quad and an arrow head) and node (a disc) in one mesh.
    fn mesh(&self, rect: Rect, g: &GraphSync) -> Mesh {
        let mut mesh = Mesh::default();
        let r = self.screen_radius();
        let visible = rect.expand(r + 2.0);
        let screen: Vec<Pos2> = g.pos.iter().map(|&p| self.to_screen(rect, p)).collect();
        let half = 0.5;
        let arrows = r >= 3.0;
        for &(a, b) in &g.edge_ends {
            let (Some(&pa), Some(&pb)) = (screen.get(a as usize), screen.get(b as usize)) else {
                continue;
            };
            if !visible.intersects(Rect::from_two_pos(pa, pb)) {
                continue;
            }
            let d = pb - pa;
            let len = d.length();
            if len <= 2.0 * r {
                continue;
            }
            let dir = d / len;
            let n = dir.rot90() * half;
            let (s, e) = (pa + dir * r, pb - dir * r);
            quad(&mut mesh, [s - n, s + n, e + n, e - n], EDGE);
            if arrows {
                let back = e - dir * (r * 1.2);
                let side = dir.rot90() * (r * 0.6);
                triangle(&mut mesh, [e, back + side, back - side], EDGE);
            }
        }
        for (i, &c) in screen.iter().enumerate() {
            if !visible.contains(c) {
                continue;
            }
            disc(&mut mesh, c, r, g.color[i]);
        }
        mesh
    }
}

fn vertex(pos: Pos2, color: Color32) -> Vertex {
    Vertex {
        pos,
        uv: WHITE_UV,
        color,
    }
}

/// The zoom the pointer asks of a view drawn in `resp` (a pinch, or the scroll wheel):
/// where, and by what factor.
pub(crate) fn zoom_asked(ui: &egui::Ui, resp: &egui::Response) -> Option<(Pos2, f32)> {
    let p = resp.hover_pos()?;
    let (pinch, scroll) = ui.input(|i| (i.zoom_delta(), i.smooth_scroll_delta.y));
    let factor = pinch * (scroll / 200.0).exp();
    (factor != 1.0 && factor.is_finite()).then_some((p, factor))
}

/// Zoom a view (`screen = origin + pan + graph * zoom`) by `factor`, within `range`,
/// keeping the graph point at `local` (screen, from the origin) in place.
pub(crate) fn zoom_about(
    zoom: &mut f32,
    pan: &mut Vec2,
    local: Vec2,
    factor: f32,
    range: std::ops::RangeInclusive<f32>,
) {
    let new = (*zoom * factor).clamp(*range.start(), *range.end());
    let graph = (local - *pan) / *zoom;
    *zoom = new;
    *pan = local - graph * new;
}

/// A filled quadrilateral into `mesh`.
pub(crate) fn quad(mesh: &mut Mesh, corners: [Pos2; 4], color: Color32) {
    let i = mesh.vertices.len() as u32;
    mesh.vertices.extend(corners.map(|p| vertex(p, color)));
    mesh.indices.extend([i, i + 1, i + 2, i, i + 2, i + 3]);
}

/// A filled triangle into `mesh`.
pub(crate) fn triangle(mesh: &mut Mesh, corners: [Pos2; 3], color: Color32) {
    let i = mesh.vertices.len() as u32;
    mesh.vertices.extend(corners.map(|p| vertex(p, color)));
    mesh.indices.extend([i, i + 1, i + 2]);
}

fn disc(mesh: &mut Mesh, c: Pos2, r: f32, color: Color32) {
    let i = mesh.vertices.len() as u32;
    mesh.vertices.push(vertex(c, color));
    for k in 0..RIM {
        let a = k as f32 / RIM as f32 * std::f32::consts::TAU;
        mesh.vertices.push(vertex(c + Vec2::angled(a) * r, color));
    }
    for k in 0..RIM as u32 {
        mesh.indices.extend([i, i + 1 + k, i + 1 + (k + 1) % RIM as u32]);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fit_places_every_node_inside_and_zoom_keeps_the_point_under_the_pointer() {
        let rect = Rect::from_min_size(Pos2::new(10.0, 20.0), Vec2::new(800.0, 600.0));
        let pos = [
            Pos2::new(-300.0, 0.0),
            Pos2::new(300.0, 900.0),
            Pos2::new(0.0, 450.0),
        ];
        let mut c = Canvas::default();
        c.fit(rect, &pos);
        for p in pos {
            assert!(
                rect.contains(c.to_screen(rect, p)),
                "{p:?} -> {:?}",
                c.to_screen(rect, p)
            );
        }
        assert_eq!(c.node_at(rect, &pos, c.to_screen(rect, pos[2])), Some(2));
        assert_eq!(c.node_at(rect, &pos, rect.min), None);
        let at = c.to_screen(rect, pos[1]);
        c.zoom_at(rect, at, 3.0);
        assert!(c.to_screen(rect, pos[1]).distance(at) < 1e-3);
        assert_eq!(c.node_at(rect, &pos, at), Some(1));
    }
}
