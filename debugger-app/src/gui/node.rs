//! How `egui_graphs` draws a node of the unfolded graph: a box in its status colour with
//! its label inside (as in the thesis' fig. 4.5), the text at a fixed *screen* size.
//!
//! `egui_graphs`' default node scales its label with the zoom (font size = node radius on
//! screen), so after "Fit" on a tall graph the labels were about 4 px high. Here the font
//! is [`LABEL_PT`] points whatever the zoom; only the distance between nodes scales. When
//! zooming out brings neighbours closer than a label is wide, the label is elided to the
//! room its column leaves ([`label_room`]); with less room than a few characters (or rows
//! too close for a box and an edge) the node is a dot, labelled on hover or selection.

use super::graph::{DX, DY};
use egui::epaint::{CircleShape, RectShape, TextShape};
use egui::text::{LayoutJob, TextFormat, TextWrapping};
use egui::Galley;
use egui::{Color32, CornerRadius, FontId, Pos2, Rect, Shape, Stroke, StrokeKind, Vec2};
use egui_graphs::{DefaultEdgeShape, DisplayEdge, DisplayNode, DrawContext, EdgeProps, Node, NodeProps};
use petgraph::stable_graph::IndexType;
use petgraph::EdgeType;
use std::sync::Arc;

/// Font size of node labels, in screen points, at every zoom.
pub const LABEL_PT: f32 = 13.0;
/// Font size of edge labels (message counts), in screen points, at every zoom.
pub const EDGE_PT: f32 = 11.0;
/// Padding between a box's border and its text, in screen points.
const PAD: Vec2 = Vec2::new(6.0, 3.0);
/// Least screen distance between the boxes of two neighbouring columns.
const GAP: f32 = 10.0;
/// Least screen distance between the boxes of two neighbouring rows.
const ROW_GAP: f32 = 4.0;
/// Least width of text worth drawing (else the node is a dot).
const MIN_TEXT: f32 = 3.0 * LABEL_PT;
/// Radius of a node drawn as a dot, in graph units (as `egui_graphs` draws them), and its
/// least radius on screen.
const DOT: f32 = 5.0;
const DOT_MIN: f32 = 3.0;

/// The most room a label's text has at `zoom` (screen points per graph unit): the width
/// of its column less the padding and the gap to the neighbours, or `None` when the nodes
/// are too dense for labelled boxes (the node is drawn as a dot).
pub fn label_room(zoom: f32) -> Option<f32> {
    let width = DX * zoom - GAP - 2.0 * PAD.x;
    let box_h = LABEL_PT * 1.25 + 2.0 * PAD.y;
    (width >= MIN_TEXT && DY * zoom >= box_h + ROW_GAP).then_some(width)
}

/// `text` on one line at `font`, elided with `…` past `room` points.
pub fn elided(ctx: &egui::Context, text: String, font: FontId, color: Color32, room: f32) -> Arc<Galley> {
    let mut job = LayoutJob::single_section(text, TextFormat::simple(font, color));
    job.wrap = TextWrapping {
        max_width: room,
        max_rows: 1,
        break_anywhere: true,
        overflow_character: Some('…'),
    };
    ctx.fonts_mut(|f| f.layout_job(job))
}

/// Black or white, whichever reads better on `fill`.
fn text_on(fill: Color32) -> Color32 {
    let l = 0.299 * f32::from(fill.r()) + 0.587 * f32::from(fill.g()) + 0.114 * f32::from(fill.b());
    if l > 135.0 {
        Color32::BLACK
    } else {
        Color32::WHITE
    }
}

/// What a node looked like the last time it was drawn (tests, hit testing).
#[derive(Debug, Clone, PartialEq)]
pub struct Drawn {
    /// Its box (or dot) on the screen.
    pub rect: Rect,
    /// Its label, if one was drawn.
    pub label: Option<DrawnLabel>,
    /// The label drawn inside a box (else: a dot, maybe labelled on hover above it).
    pub boxed: bool,
}

/// A node's label as drawn.
#[derive(Debug, Clone, PartialEq)]
pub struct DrawnLabel {
    /// Font size, in screen points.
    pub font_pt: f32,
    /// The laid-out text's size on screen.
    pub size: Vec2,
    /// The text shown: the whole label, or its start and `…` when the column is narrower.
    pub text: String,
}

/// A node as a labelled box; see the module's documentation.
#[derive(Debug, Clone)]
pub struct LabelNode {
    pos: Pos2,
    selected: bool,
    dragged: bool,
    hovered: bool,
    color: Option<Color32>,
    label: String,
    /// Zoom of the last drawing (screen points per graph unit).
    zoom: f32,
    /// Half the size of the box (or dot) on screen, as last drawn.
    half: Vec2,
    /// The last drawing.
    drawn: Option<Drawn>,
}

impl<N: Clone> From<NodeProps<N>> for LabelNode {
    fn from(p: NodeProps<N>) -> Self {
        Self {
            pos: p.location(),
            selected: p.selected,
            dragged: p.dragged,
            hovered: p.hovered,
            color: p.color(),
            label: p.label.to_string(),
            zoom: 1.0,
            half: Vec2::splat(DOT),
            drawn: None,
        }
    }
}

impl LabelNode {
    /// The last drawing of this node (none before the first frame).
    pub fn drawn(&self) -> Option<&Drawn> {
        self.drawn.as_ref()
    }

    /// Half the box in graph units.
    fn half_graph(&self) -> Vec2 {
        self.half / self.zoom.max(1e-6)
    }

    /// The node's box in graph units, as last drawn.
    pub fn graph_rect(&self) -> Rect {
        Rect::from_center_size(self.pos, 2.0 * self.half_graph())
    }

    /// Where the ray from the centre in direction `dir` leaves the box (or dot).
    fn boundary_point(&self, dir: Vec2) -> Pos2 {
        let dir = dir.normalized();
        let h = self.half_graph();
        if !dir.is_finite() {
            return self.pos;
        }
        if !self.boxed() {
            return self.pos + dir * h.y;
        }
        // Where the ray from the centre leaves the box.
        let tx = if dir.x == 0.0 {
            f32::INFINITY
        } else {
            h.x / dir.x.abs()
        };
        let ty = if dir.y == 0.0 {
            f32::INFINITY
        } else {
            h.y / dir.y.abs()
        };
        self.pos + dir * tx.min(ty)
    }

    fn boxed(&self) -> bool {
        self.drawn.as_ref().is_some_and(|d| d.boxed)
    }
}

impl<N: Clone, E: Clone, Ty: EdgeType, Ix: IndexType> DisplayNode<N, E, Ty, Ix> for LabelNode {
    fn closest_boundary_point(&self, dir: Vec2) -> Pos2 {
        self.boundary_point(dir)
    }

    fn shapes(&mut self, ctx: &DrawContext) -> Vec<Shape> {
        let zoom = ctx.meta.zoom;
        if (zoom / self.zoom - 1.0).abs() > 1e-3 {
            // Edges were drawn this frame with the box of the last zoom: draw again.
            ctx.ctx.request_repaint();
        }
        self.zoom = zoom;
        let center = ctx.meta.canvas_to_screen_pos(self.pos);
        let fill = self.color.unwrap_or(Color32::GRAY);
        let style = ctx.ctx.global_style();
        let stroke = if self.selected || self.dragged {
            Stroke::new(2.5, style.visuals.strong_text_color())
        } else if self.hovered {
            Stroke::new(1.5, style.visuals.text_color())
        } else {
            Stroke::NONE
        };
        let font = FontId::proportional(LABEL_PT);
        let mut res = Vec::with_capacity(2);
        if let Some(room) = label_room(zoom) {
            let galley = elided(ctx.ctx, self.label.clone(), font.clone(), text_on(fill), room);
            self.half = (galley.size() / 2.0 + PAD).ceil();
            let rect = Rect::from_center_size(center, 2.0 * self.half);
            res.push(RectShape::new(rect, CornerRadius::same(4), fill, stroke, StrokeKind::Outside).into());
            let label = DrawnLabel {
                font_pt: font.size,
                size: galley.size(),
                // The glyphs laid out (the job's text is the whole label, even elided).
                text: galley.rows.iter().map(|r| r.row.text()).collect(),
            };
            res.push(TextShape::new(center - galley.size() / 2.0, galley, text_on(fill)).into());
            self.drawn = Some(Drawn {
                rect,
                label: Some(label),
                boxed: true,
            });
            return res;
        }
        let r = (DOT * zoom).max(DOT_MIN);
        self.half = Vec2::splat(r);
        res.push(
            CircleShape {
                center,
                radius: r,
                fill,
                stroke,
            }
            .into(),
        );
        let mut label = None;
        if self.selected || self.dragged || self.hovered {
            let font_pt = font.size;
            let galley = ctx
                .ctx
                .fonts_mut(|f| f.layout_no_wrap(self.label.clone(), font, fill));
            let at = center - Vec2::new(galley.size().x / 2.0, r + 4.0 + galley.size().y);
            label = Some(DrawnLabel {
                font_pt,
                size: galley.size(),
                text: galley.text().to_owned(),
            });
            res.push(TextShape::new(at, galley, fill).into());
        }
        self.drawn = Some(Drawn {
            rect: Rect::from_center_size(center, Vec2::splat(2.0 * r)),
            label,
            boxed: false,
        });
        res
    }

    fn update(&mut self, p: &NodeProps<N>) {
        self.pos = p.location();
        self.selected = p.selected;
        self.dragged = p.dragged;
        self.hovered = p.hovered;
        self.label = p.label.to_string();
        self.color = p.color();
    }

    fn is_inside(&self, pos: Pos2) -> bool {
        if self.boxed() {
            return self.graph_rect().contains(pos);
        }
        // A dot: at least 4 points of reach on screen.
        pos.distance(self.pos) * self.zoom <= self.half.x.max(4.0)
    }
}

/// `egui_graphs`' edge, whose bounds also cover its ends' boxes, so that "Fit" leaves
/// room for the labels of the outer columns (`egui_graphs` measures a node's extent
/// vertically only).
#[derive(Debug, Clone)]
pub struct CountEdge(DefaultEdgeShape);

impl<E: Clone> From<EdgeProps<E>> for CountEdge {
    fn from(p: EdgeProps<E>) -> Self {
        Self(DefaultEdgeShape::from(p))
    }
}

impl<N: Clone, E: Clone, Ty: EdgeType, Ix: IndexType> DisplayEdge<N, E, Ty, Ix, LabelNode> for CountEdge {
    fn shapes(
        &mut self,
        start: &Node<N, E, Ty, Ix, LabelNode>,
        end: &Node<N, E, Ty, Ix, LabelNode>,
        ctx: &DrawContext,
    ) -> Vec<Shape> {
        // The line and arrow as `egui_graphs` draws them, without its label (sized like
        // the end nodes in the edge's direction: huge for a box's long side)...
        let plain = ctx.style.clone().with_labels_always(false);
        let line_ctx = DrawContext {
            ctx: ctx.ctx,
            painter: ctx.painter,
            style: &plain,
            is_directed: ctx.is_directed,
            meta: ctx.meta,
        };
        let mut res = DisplayEdge::<N, E, Ty, Ix, LabelNode>::shapes(&mut self.0, start, end, &line_ctx);
        if !ctx.style.labels_always() || start.id() == end.id() || self.0.label_text.is_empty() {
            return res;
        }
        // ...and the count at a fixed screen size, 40% along: not in the middle, where
        // the two edges of a crossing pair (heat's border exchange) meet.
        let dir = (end.location() - start.location()).normalized();
        let a = start.display().boundary_point(dir);
        let b = end.display().boundary_point(-dir);
        let at = ctx.meta.canvas_to_screen_pos(a + (b - a) * 0.4);
        let visuals = &ctx.ctx.global_style().visuals;
        let (color, bg) = (visuals.text_color(), visuals.panel_fill);
        let galley = ctx
            .ctx
            .fonts_mut(|f| f.layout_no_wrap(self.0.label_text.clone(), FontId::monospace(EDGE_PT), color));
        let rect = Rect::from_center_size(at, galley.size());
        res.push(RectShape::filled(rect.expand(1.0), CornerRadius::same(2), bg).into());
        res.push(TextShape::new(rect.min, galley, color).into());
        res
    }

    fn update(&mut self, state: &EdgeProps<E>) {
        DisplayEdge::<N, E, Ty, Ix, LabelNode>::update(&mut self.0, state);
    }

    fn is_inside(
        &self,
        start: &Node<N, E, Ty, Ix, LabelNode>,
        end: &Node<N, E, Ty, Ix, LabelNode>,
        pos: Pos2,
    ) -> bool {
        DisplayEdge::<N, E, Ty, Ix, LabelNode>::is_inside(&self.0, start, end, pos)
    }

    fn extra_bounds(
        &self,
        start: &Node<N, E, Ty, Ix, LabelNode>,
        end: &Node<N, E, Ty, Ix, LabelNode>,
    ) -> Option<(Pos2, Pos2)> {
        let mut r = start.display().graph_rect().union(end.display().graph_rect());
        if let Some((a, b)) = DisplayEdge::<N, E, Ty, Ix, LabelNode>::extra_bounds(&self.0, start, end) {
            r = r.union(Rect::from_two_pos(a, b));
        }
        Some((r.min, r.max))
    }
}
