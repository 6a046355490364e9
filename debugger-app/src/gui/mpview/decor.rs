//! What frames the message-passing graph: the logical-time axis on its left and the
//! ranks' names and statuses above it.

use super::{MpView, HEADER, LANE_DX, ROW_DY};
use crate::gui::mpstyle::lane_status;
use crate::gui::node::elided;
use crate::model::mpgraph::MpGraph;
use crate::model::Model;
use egui::{Align2, FontId, Pos2, Rect};

impl MpView {
    /// Logical time down the left: a tick every few rows, at least 40 points apart.
    pub(super) fn axis(&self, ui: &egui::Ui, rect: Rect, area: Rect, (lo, hi): (u32, u32)) {
        let painter = ui.painter_at(Rect::from_min_max(
            Pos2::new(rect.min.x, area.min.y),
            Pos2::new(area.min.x, rect.max.y),
        ));
        let px = ROW_DY * self.zoom;
        let step = [
            1u32, 2, 5, 10, 20, 50, 100, 200, 500, 1_000, 2_000, 5_000, 10_000, 100_000, 1_000_000,
        ]
        .into_iter()
        .find(|&s| s as f32 * px >= 40.0)
        .unwrap_or(10_000_000);
        let color = ui.visuals().weak_text_color();
        // Folds put many rows in view: a few thousand ticks looked at, at most.
        let step = step.max((hi.saturating_sub(lo) / 2_000).next_power_of_two());
        let mut r = lo.div_ceil(step) * step;
        // Folds bring ticks together: one in 12 points is read.
        let mut last_y = f32::NEG_INFINITY;
        while r <= hi {
            let y = self.to_screen(area, 0, r).y;
            if self.folds.fold_of(r).is_some() || y - last_y < 12.0 {
                r = match r.checked_add(step) {
                    Some(n) => n,
                    None => break,
                };
                continue;
            }
            last_y = y;
            painter.text(
                Pos2::new(area.min.x - 6.0, y),
                Align2::RIGHT_CENTER,
                r.to_string(),
                FontId::monospace(10.0),
                color,
            );
            r = match r.checked_add(step) {
                Some(n) => n,
                None => break,
            };
        }
        // Above the axis, in the rank names' band.
        let over = ui.painter_at(Rect::from_min_max(rect.min, Pos2::new(area.min.x, area.min.y)));
        over.text(
            Pos2::new(rect.min.x + 4.0, rect.min.y + HEADER / 2.0),
            Align2::LEFT_CENTER,
            "time",
            FontId::proportional(10.0),
            color,
        );
    }

    /// Each column's rank and status, above the graph.
    pub(super) fn headers(
        &self,
        ui: &egui::Ui,
        rect: Rect,
        area: Rect,
        model: &Model,
        g: &MpGraph,
        cols: &[u32],
    ) {
        let band = Rect::from_min_max(
            Pos2::new(area.min.x, rect.min.y),
            Pos2::new(rect.max.x, area.min.y),
        );
        let painter = ui.painter_at(band);
        painter.rect_filled(band, 0.0, ui.visuals().faint_bg_color);
        for (col, &lane) in cols.iter().enumerate() {
            let x = self.to_screen(area, col, 0).x;
            let (status, color) = lane_status(model, g, lane);
            let name = model.thread_name(g.lanes()[lane as usize].thread);
            // Elided to its column, so that neighbours' statuses never overlap.
            let room = (LANE_DX * self.zoom - 8.0).max(24.0);
            let text = format!("{name} · {status}");
            let galley = elided(ui.ctx(), text, FontId::proportional(11.0), color, room);
            let at = Pos2::new(x - galley.size().x / 2.0, band.center().y - galley.size().y / 2.0);
            painter.galley(at, galley, color);
        }
    }
}
