//! The message-passing graph of an MPI job ([`MpGraph`]), painted directly: one column per
//! rank, logical time running down (the axis on the left), one box per call coloured by
//! its family ([`Family`]), an arrow from each send to the call that received it, and a
//! band across the ranks of each collective instance.
//!
//! A frame costs what is in view: rows along a lane only grow, so each column's visible
//! calls are found by binary search; edges and collectives are culled by their rows.
//! Labels are drawn at a fixed screen size when the boxes are tall enough for them.
//! While the job runs the view follows its latest calls ("Follow"); dragging or zooming
//! stops that.

use super::canvas::{quad, triangle, zoom_about, zoom_asked};
use super::graph::DEADLOCKED;
use super::mpstyle::HELD;
use super::mpstyle::{short_label, tooltip_lines, Family};
use crate::model::mpgraph::{Candidate, MpGraph, Vx};
use crate::model::Model;
use egui::epaint::Mesh;
use egui::{Align2, Color32, FontId, Pos2, Rect, Sense, Shape, Stroke, StrokeKind, Vec2};
use std::collections::BTreeSet;

mod decor;
mod fold;
pub use fold::Folds;

/// Distance between two ranks' columns, in graph units.
pub const LANE_DX: f32 = 180.0;
/// Distance between two rows of logical time, in graph units.
pub const ROW_DY: f32 = 30.0;
/// A call's box, in graph units.
const BOX: Vec2 = Vec2::new(150.0, 22.0);
/// The time axis's width and the rank names' height, in screen points.
const GUTTER: f32 = 52.0;
const HEADER: f32 = 20.0;
/// Label size in screen points, and the least box height on screen that fits one.
const LABEL_PT: f32 = 12.0;
const LABEL_MIN_H: f32 = 13.0;
/// Most calls in view that get labels.
const LABELS_MAX: usize = 1_000;
const EDGE: Color32 = Color32::from_rgb(190, 190, 205);
const HIGHLIGHT: Color32 = Color32::from_rgb(250, 210, 40);
/// A candidate send's arrow, in race mode.
const CANDIDATE: Color32 = Color32::from_rgb(255, 140, 30);

/// What the view of the message-passing graph remembers between frames.
#[derive(Debug, Clone)]
pub struct MpView {
    zoom: f32,
    pan: Vec2,
    placed: bool,
    /// Keep the latest calls in view as the job runs.
    pub follow: bool,
    /// Lanes not drawn (the ranks panel hides them).
    pub hidden: BTreeSet<u32>,
    /// Calls on this communicator (an interned name) are highlighted.
    pub comm: Option<u32>,
    /// Calls at these sites (interned names, sorted) are highlighted: a file's, a
    /// function's or one line's, chosen in the call-site tree.
    pub sites: Vec<u32>,
    /// The call selected by a click.
    pub selected: Option<Vx>,
    area: Option<Rect>,
    labelled: usize,
    drawn: usize,
    /// Fit every call into view on the next frame.
    whole: bool,
    /// The stretches between collectives drawn as one row.
    pub folds: Folds,
}

impl Default for MpView {
    fn default() -> Self {
        Self {
            zoom: 1.0,
            pan: Vec2::ZERO,
            placed: false,
            follow: true,
            hidden: BTreeSet::new(),
            comm: None,
            sites: Vec::new(),
            selected: None,
            area: None,
            labelled: 0,
            drawn: 0,
            whole: false,
            folds: Folds::default(),
        }
    }
}

/// The calls drawn specially: held, deadlocked, by lane's last vertex.
struct Marks {
    held: Vec<Vx>,
    stuck: Vec<Vx>,
}

fn marks(model: &Model, g: &MpGraph) -> Marks {
    let last = |t| {
        g.lane(t)
            .and_then(|l| g.lanes()[l as usize].vertices.last().copied())
    };
    let held = model
        .control
        .held
        .values()
        .filter_map(|h| last(h.thread?))
        .collect();
    let stuck = model
        .control
        .deadlock
        .iter()
        .flat_map(|d| &d.waits)
        .filter_map(|w| last(model.thread_key(&w.thread)?))
        .collect();
    Marks { held, stuck }
}

impl MpView {
    /// The lanes drawn, left to right.
    pub fn columns(&self, g: &MpGraph) -> Vec<u32> {
        g.lane_order()
            .into_iter()
            .filter(|l| !self.hidden.contains(l))
            .collect()
    }

    /// Whether call `v` is highlighted by the communicator or the site chosen.
    pub fn highlighted(&self, g: &MpGraph, v: Vx) -> bool {
        let p = &g.vertices()[v as usize].params;
        let comm = self.comm.is_some_and(|c| p.comm == Some(c));
        let site = p.site.is_some_and(|i| self.sites.binary_search(&i).is_ok());
        comm || site
    }

    fn highlighting(&self) -> bool {
        self.comm.is_some() || !self.sites.is_empty()
    }

    /// Draw the graph in the remaining space; returns the call clicked this frame.
    pub fn show(
        &mut self,
        ui: &mut egui::Ui,
        model: &Model,
        g: &MpGraph,
        races: &[(Vx, Vec<Candidate>)],
    ) -> Option<Vx> {
        let (rect, resp) = ui.allocate_exact_size(ui.available_size(), Sense::click_and_drag());
        let area = Rect::from_min_max(rect.min + Vec2::new(GUTTER, HEADER), rect.max);
        self.area = Some(area);
        let cols = self.columns(g);
        let mut column = vec![None; g.lanes().len()];
        for (i, &l) in cols.iter().enumerate() {
            column[l as usize] = Some(i);
        }
        self.folds.update(g);
        self.navigate(ui, &resp, area, g, cols.len());
        resp.widget_info(|| {
            egui::WidgetInfo::labeled(
                egui::WidgetType::Other,
                true,
                format!(
                    "message-passing graph, {} calls, {} ranks",
                    g.vertices().len(),
                    cols.len()
                ),
            )
        });
        let (lo, hi) = self.rows_in(area);
        let marks = marks(model, g);
        let painter = ui.painter_at(area);
        let mut mesh = Mesh::default();
        self.collectives(&mut mesh, g, &column, (lo, hi));
        let boxes = self.boxes(&mut mesh, model, g, &cols, (lo, hi), &marks);
        // Arrows over the boxes they pass (a message may skip several rows of a rank).
        self.edges(&mut mesh, g, &column, (lo, hi));
        painter.add(Shape::mesh(mesh));
        self.outlines(&painter, g, &boxes, &marks);
        self.candidates(&painter, g, &column, races);
        self.labels(ui, &painter, model, g, &boxes);
        self.axis(ui, rect, area, (lo, hi));
        self.headers(ui, rect, area, model, g, &cols);
        if self.fold_bands(ui, g, &cols, (lo, hi)) {
            return None;
        }
        let hovered = resp.hover_pos().and_then(|p| self.vertex_at(g, &cols, p));
        let resp = match hovered {
            Some(v) => resp.on_hover_ui_at_pointer(|ui| {
                let x = &g.vertices()[v as usize];
                let name = model.first().op_name(x.call);
                let rank = model.thread_name(g.lanes()[x.lane as usize].thread);
                for line in tooltip_lines(g, x, g.row(v), name, rank) {
                    ui.label(line);
                }
            }),
            None => resp,
        };
        if resp.clicked() {
            let v = resp
                .interact_pointer_pos()
                .and_then(|p| self.vertex_at(g, &cols, p));
            if v.is_some() {
                self.selected = v;
            }
            return v;
        }
        None
    }

    /// Drag to pan, scroll to zoom (both stop following); follow or place the view.
    fn navigate(&mut self, ui: &egui::Ui, resp: &egui::Response, area: Rect, g: &MpGraph, ncols: usize) {
        if resp.dragged() {
            self.pan += resp.drag_delta();
            self.follow = false;
        }
        if let Some((p, factor)) = zoom_asked(ui, resp) {
            zoom_about(&mut self.zoom, &mut self.pan, p - area.min, factor, 1e-4..=8.0);
            self.follow = false;
        }
        if !self.placed || self.follow {
            self.place(area, g, ncols);
        }
        if std::mem::take(&mut self.whole) {
            let width = ncols.max(1) as f32 * LANE_DX;
            let height = (self.folds.shown(g.last_row()) + 2) as f32 * ROW_DY;
            self.zoom = (area.width() / width).min(area.height() / height).max(1e-4);
            self.pan = Vec2::new(LANE_DX / 2.0, ROW_DY) * self.zoom;
            self.placed = true;
        }
    }

    /// Fit the columns to the width (labels stay readable: the zoom has a floor) and show
    /// the latest rows.
    fn place(&mut self, area: Rect, g: &MpGraph, ncols: usize) {
        let width = ncols.max(1) as f32 * LANE_DX;
        self.zoom = (area.width() / width).clamp(0.65, 1.5);
        let used = (ncols.max(1) as f32 - 1.0) * LANE_DX * self.zoom;
        self.pan.x = ((area.width() - used) / 2.0).max(BOX.x * self.zoom / 2.0 + 4.0);
        let top = BOX.y * self.zoom;
        let bottom = (self.folds.shown(g.last_row()) as f32 * ROW_DY + BOX.y) * self.zoom;
        self.pan.y = if bottom + top <= area.height() {
            top
        } else {
            area.height() - bottom
        };
        self.placed = true;
    }

    /// Bring call `v` to the middle of the view (and stop following).
    pub fn reveal(&mut self, g: &MpGraph, v: Vx) {
        let (Some(area), Some(x)) = (self.area, g.vertices().get(v as usize)) else {
            return;
        };
        let Some(col) = self.columns(g).iter().position(|&l| l == x.lane) else {
            return;
        };
        // A call in a fold opens it, before its row is placed.
        if let Some((a, _)) = self.folds.fold_of(g.row(v)) {
            self.folds.opened.insert(a);
            self.folds.update(g);
        }
        let at = Vec2::new(col as f32 * LANE_DX, self.folds.shown(g.row(v)) as f32 * ROW_DY) * self.zoom;
        self.pan = area.size() / 2.0 - at;
        self.follow = false;
        self.placed = true;
    }

    /// Show the whole job at once, every call in view (boxes as thin as it takes).
    pub fn whole(&mut self) {
        self.whole = true;
        self.follow = false;
    }

    /// Show the whole graph's width again and follow the latest calls.
    pub fn refit(&mut self) {
        self.placed = false;
        self.follow = true;
    }

    /// Where graph row `row` of column `col` is drawn (folds drawn as one row).
    fn to_screen(&self, area: Rect, col: usize, row: u32) -> Pos2 {
        let shown = self.folds.shown(row);
        area.min + self.pan + Vec2::new(col as f32 * LANE_DX, shown as f32 * ROW_DY) * self.zoom
    }

    /// The graph rows in view, with one row of margin.
    fn rows_in(&self, area: Rect) -> (u32, u32) {
        let row = |y: f32| (y - area.min.y - self.pan.y) / (self.zoom * ROW_DY);
        let lo = (row(area.min.y) - 1.0).floor().max(0.0);
        let hi = (row(area.max.y) + 1.0).ceil().max(0.0).min((u32::MAX - 1) as f32);
        let next = self.folds.graph_row((hi as u32).saturating_add(1));
        (self.folds.graph_row(lo as u32), next.saturating_sub(1))
    }

    fn box_at(&self, area: Rect, col: usize, row: u32) -> Rect {
        Rect::from_center_size(self.to_screen(area, col, row), BOX * self.zoom)
    }

    /// Bands across the ranks of each collective in view.
    fn collectives(&self, mesh: &mut Mesh, g: &MpGraph, column: &[Option<usize>], (lo, hi): (u32, u32)) {
        let Some(area) = self.area else { return };
        // Zoomed far out, many bands share a pixel row: one stands for them.
        let mut last_y = f32::NEG_INFINITY;
        for c in g.collectives() {
            let mut span: Option<Rect> = None;
            for &m in &c.members {
                let (row, lane) = g.place(m);
                let Some(col) = column[lane as usize] else {
                    continue;
                };
                if row < lo || row > hi {
                    continue;
                }
                let r = self.box_at(area, col, row).expand(3.0 * self.zoom.min(1.0));
                span = Some(span.map_or(r, |s| s.union(r)));
            }
            if let Some(r) = span.filter(|r| c.members.len() > 1 && (r.center().y - last_y).abs() >= 1.0) {
                last_y = r.center().y;
                quad(
                    mesh,
                    [r.left_top(), r.right_top(), r.right_bottom(), r.left_bottom()],
                    Family::Collective.color().gamma_multiply(0.25),
                );
            }
        }
    }

    /// An arrow from each send to its receive, when either end is in view.
    fn edges(&self, mesh: &mut Mesh, g: &MpGraph, column: &[Option<usize>], (lo, hi): (u32, u32)) {
        let Some(area) = self.area else { return };
        let half = (0.8 * self.zoom).clamp(0.5, 1.2);
        let head = (6.0 * self.zoom).clamp(3.0, 8.0);
        // Zoomed far out, many arrows between two columns share a pixel row: one stands
        // for them (by the pair of columns, the last one's screen row).
        let ncols = column.iter().flatten().count();
        let mut last_y = vec![f32::NEG_INFINITY; ncols * ncols];
        let folded = !self.folds.ranges().is_empty();
        for &(a, b) in g.edges() {
            let ((ra, la), (rb, lb)) = (g.place(a), g.place(b));
            if rb < lo || ra > hi {
                continue;
            }
            // Inside one fold: nothing to draw between its calls.
            if folded && self.folds.fold_of(ra).is_some_and(|f| f.1 >= rb) {
                continue;
            }
            let (Some(ca), Some(cb)) = (column[la as usize], column[lb as usize]) else {
                continue;
            };
            let s = self.box_at(area, ca, ra).center_bottom();
            let e = self.box_at(area, cb, rb).center_top();
            let pair = &mut last_y[ca * ncols + cb];
            if (e.y - *pair).abs() < 1.0 {
                continue;
            }
            *pair = e.y;
            let d = e - s;
            let len = d.length();
            if len < 1.0 {
                continue;
            }
            let dir = d / len;
            let n = dir.rot90() * half;
            quad(mesh, [s - n, s + n, e + n, e - n], EDGE);
            let back = e - dir * head;
            let side = dir.rot90() * (head * 0.5);
            triangle(mesh, [e, back + side, back - side], EDGE);
        }
    }

    /// Each call in view as a filled box (deadlocked calls in [`DEADLOCKED`], others in
    /// their family's colour, dimmed when another is highlighted). Returns the boxes.
    fn boxes(
        &mut self,
        mesh: &mut Mesh,
        model: &Model,
        g: &MpGraph,
        cols: &[u32],
        rows: (u32, u32),
        marks: &Marks,
    ) -> Vec<(Vx, Rect)> {
        let Some(area) = self.area else { return Vec::new() };
        let mut out = Vec::new();
        // A call's family by its operation, worked out once per frame and operation.
        let mut families: Vec<Option<Family>> = Vec::new();
        let folded = !self.folds.ranges().is_empty();
        for (col, &lane) in cols.iter().enumerate() {
            let mut last_y = f32::NEG_INFINITY;
            for &v in g.in_rows(lane, rows.0, rows.1) {
                // A fold's calls are its band.
                if folded && self.folds.fold_of(g.row(v)).is_some() {
                    continue;
                }
                let r = self.box_at(area, col, g.row(v));
                // Zoomed far out, many calls share a pixel row: one box stands for them.
                if r.center().y - last_y < 1.0 && !marks.stuck.contains(&v) {
                    continue;
                }
                last_y = r.center().y;
                let x = &g.vertices()[v as usize];
                let op = x.call.index();
                if families.len() <= op {
                    families.resize(op + 1, None);
                }
                let family = *families[op]
                    .get_or_insert_with(|| Family::of(model.first().op_name(x.call), x.coll.is_some()));
                let mut fill = if marks.stuck.contains(&v) {
                    DEADLOCKED
                } else {
                    family.color()
                };
                if self.highlighting() && !self.highlighted(g, v) {
                    fill = fill.gamma_multiply(0.3);
                }
                quad(
                    mesh,
                    [r.left_top(), r.right_top(), r.right_bottom(), r.left_bottom()],
                    fill,
                );
                out.push((v, r));
            }
        }
        self.drawn = out.len();
        out
    }

    /// Outlines: the selected call, held calls, calls still open, pending wildcards
    /// (dashed), highlighted ones.
    fn outlines(&self, painter: &egui::Painter, g: &MpGraph, boxes: &[(Vx, Rect)], marks: &Marks) {
        for &(v, r) in boxes {
            let x = &g.vertices()[v as usize];
            let stroke = if Some(v) == self.selected {
                Stroke::new(3.0, Color32::WHITE)
            } else if marks.held.contains(&v) {
                Stroke::new(3.0, HELD)
            } else if self.highlighting() && self.highlighted(g, v) {
                Stroke::new(2.0, HIGHLIGHT)
            } else if x.open {
                Stroke::new(1.5, Color32::from_gray(235))
            } else {
                continue;
            };
            if x.pending_wildcard() {
                let c = [
                    r.left_top(),
                    r.right_top(),
                    r.right_bottom(),
                    r.left_bottom(),
                    r.left_top(),
                ];
                painter.extend(Shape::dashed_line(&c, stroke, 5.0, 3.0));
            } else {
                painter.rect_stroke(r, 3.0, stroke, StrokeKind::Outside);
            }
        }
    }

    /// Race mode: a dashed arrow from each candidate send to the held wildcard receive
    /// (grey when the message would not fit).
    fn candidates(
        &self,
        painter: &egui::Painter,
        g: &MpGraph,
        column: &[Option<usize>],
        races: &[(Vx, Vec<Candidate>)],
    ) {
        let Some(area) = self.area else { return };
        let at = |v: Vx| {
            let x = &g.vertices()[v as usize];
            column[x.lane as usize].map(|c| self.box_at(area, c, g.row(v)))
        };
        for (recv, candidates) in races {
            let Some(to) = at(*recv) else { continue };
            for c in candidates {
                let Some(from) = at(c.send) else { continue };
                let color = if c.fits {
                    CANDIDATE
                } else {
                    Color32::from_gray(130)
                };
                let (s, e) = (from.center(), to.center_top());
                painter.extend(Shape::dashed_line(&[s, e], Stroke::new(2.5, color), 8.0, 4.0));
                let dir = (e - s).normalized();
                let back = e - dir * 10.0;
                let side = dir.rot90() * 5.0;
                painter.add(Shape::convex_polygon(
                    vec![e, back + side, back - side],
                    color,
                    Stroke::NONE,
                ));
            }
        }
    }

    /// Each box's label, when boxes are tall enough and not too many are in view; and the
    /// labels of `MPI_Pcontrol` calls, as rules across the graph.
    fn labels(
        &mut self,
        ui: &egui::Ui,
        painter: &egui::Painter,
        model: &Model,
        g: &MpGraph,
        boxes: &[(Vx, Rect)],
    ) {
        self.labelled = 0;
        let Some(area) = self.area else { return };
        let font = FontId::proportional(LABEL_PT);
        for &(v, r) in boxes {
            let x = &g.vertices()[v as usize];
            if let Some(l) = x.params.label {
                let y = r.center().y;
                let stroke = Stroke::new(1.0, HIGHLIGHT.gamma_multiply(0.6));
                painter.extend(Shape::dashed_line(
                    &[Pos2::new(area.min.x, y), Pos2::new(area.max.x, y)],
                    stroke,
                    6.0,
                    4.0,
                ));
                painter.text(
                    Pos2::new(area.min.x + 4.0, y - 2.0),
                    Align2::LEFT_BOTTOM,
                    g.name(l),
                    font.clone(),
                    HIGHLIGHT,
                );
            }
        }
        if boxes.first().is_none_or(|(_, r)| r.height() < LABEL_MIN_H) || boxes.len() > LABELS_MAX {
            return;
        }
        let color = ui.visuals().strong_text_color();
        for &(v, r) in boxes {
            let x = &g.vertices()[v as usize];
            let text = short_label(g, x, model.first().op_name(x.call));
            let clip = painter.with_clip_rect(r.intersect(area));
            let ink = if ui.visuals().dark_mode {
                color
            } else {
                Color32::WHITE
            };
            clip.text(
                r.left_center() + Vec2::new(4.0, 0.0),
                Align2::LEFT_CENTER,
                text,
                font.clone(),
                ink,
            );
            self.labelled += 1;
        }
    }

    /// The call at screen point `p`, if any.
    pub fn vertex_at(&self, g: &MpGraph, cols: &[u32], p: Pos2) -> Option<Vx> {
        let area = self.area?;
        let local = (p - area.min - self.pan) / self.zoom;
        let col = (local.x / LANE_DX).round();
        let shown = (local.y / ROW_DY).round();
        if col < 0.0 || shown < 0.0 || !area.contains(p) {
            return None;
        }
        let row = self.folds.graph_row(shown as u32);
        if self.folds.fold_of(row).is_some() {
            return None;
        }
        let lane = *cols.get(col as usize)?;
        g.in_rows(lane, row, row)
            .iter()
            .copied()
            .find(|&v| self.box_at(area, col as usize, g.row(v)).contains(p))
    }

    /// Where call `v` was drawn in the last frame (tests click it).
    pub fn screen_rect(&self, g: &MpGraph, v: Vx) -> Option<Rect> {
        let area = self.area?;
        let x = g.vertices().get(v as usize)?;
        let col = self.columns(g).iter().position(|&l| l == x.lane)?;
        Some(self.box_at(area, col, g.row(v)))
    }

    /// Calls drawn and labelled in the last frame.
    pub fn drawn(&self) -> (usize, usize) {
        (self.drawn, self.labelled)
    }
}
