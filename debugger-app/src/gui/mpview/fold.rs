//! Folding the stretches between collectives: with folding on, the rows strictly between
//! two consecutive collectives' rows are drawn as one row, a band that says how many
//! calls it holds; a click on it opens that stretch again. A long run becomes its
//! collectives, one row of everything between each two, and the stretches opened.

use super::{MpView, BOX, LANE_DX};
use crate::model::mpgraph::MpGraph;
use egui::{Align2, Color32, FontId, Id, Rect, Sense, Stroke, StrokeKind, Vec2};
use std::collections::BTreeSet;

/// Fewest rows between two collectives that fold.
const FOLD_MIN: u32 = 2;
const FOLD: Color32 = Color32::from_rgb(120, 120, 150);

/// The stretches folded this frame, and which the user opened.
#[derive(Debug, Clone, Default)]
pub struct Folds {
    /// Folding is on.
    pub on: bool,
    /// Stretches opened, by their first row.
    pub opened: BTreeSet<u32>,
    /// This frame's folds, (first row, last row), sorted and disjoint; and for each, the
    /// rows hidden by it and the folds before it.
    ranges: Vec<(u32, u32)>,
    hidden: Vec<u32>,
}

impl Folds {
    /// Work out this frame's folds from the collectives' rows (rows only grow, so a
    /// stretch's first row names it from frame to frame, until a collective moves).
    pub fn update(&mut self, g: &MpGraph) {
        self.ranges.clear();
        self.hidden.clear();
        if !self.on {
            return;
        }
        let mut rows: Vec<u32> = g
            .collectives()
            .iter()
            .filter(|c| c.members.len() > 1)
            .map(|c| c.row)
            .collect();
        rows.sort_unstable();
        rows.dedup();
        let mut hidden = 0;
        for w in rows.windows(2) {
            let (a, b) = (w[0] + 1, w[1] - 1);
            if b >= a + FOLD_MIN - 1 && !self.opened.contains(&a) {
                self.ranges.push((a, b));
                hidden += b - a;
                self.hidden.push(hidden);
            }
        }
    }

    /// The folds of this frame.
    pub fn ranges(&self) -> &[(u32, u32)] {
        &self.ranges
    }

    /// Rows hidden by the folds before the `i`th.
    fn hidden_before(&self, i: usize) -> u32 {
        i.checked_sub(1).map_or(0, |j| self.hidden[j])
    }

    /// The row graph row `r` is drawn on: a fold's rows share its first's.
    pub fn shown(&self, r: u32) -> u32 {
        let i = self.ranges.partition_point(|&(a, _)| a <= r);
        match i.checked_sub(1).map(|j| self.ranges[j]) {
            Some((a, b)) if r <= b => a - self.hidden_before(i - 1),
            Some(_) => r - self.hidden[i - 1],
            None => r,
        }
    }

    /// The first graph row drawn on row `d` (a fold's: its first row).
    pub fn graph_row(&self, d: u32) -> u32 {
        // The last fold drawn on row `d` or above (those rows only grow along the folds).
        let drawn = |j: usize| self.ranges[j].0 - self.hidden_before(j);
        let (mut lo, mut hi) = (0, self.ranges.len());
        while lo < hi {
            let m = (lo + hi) / 2;
            if drawn(m) <= d {
                lo = m + 1;
            } else {
                hi = m;
            }
        }
        match lo.checked_sub(1) {
            Some(j) if d == drawn(j) => self.ranges[j].0,
            Some(j) => self.ranges[j].1 + (d - drawn(j)),
            None => d,
        }
    }

    /// The fold graph row `r` is in, if any.
    pub fn fold_of(&self, r: u32) -> Option<(u32, u32)> {
        let i = self.ranges.partition_point(|&(a, _)| a <= r);
        let (a, b) = *self.ranges.get(i.checked_sub(1)?)?;
        (r <= b).then_some((a, b))
    }
}

impl MpView {
    /// Each fold in view (graph rows `lo..=hi`) as a band across the columns, saying how
    /// many calls it holds; a click opens it. Returns whether one was opened.
    pub(super) fn fold_bands(
        &mut self,
        ui: &mut egui::Ui,
        g: &MpGraph,
        cols: &[u32],
        (lo, hi): (u32, u32),
    ) -> bool {
        let Some(area) = self.area else { return false };
        let mut opened = None;
        for &(a, b) in self.folds.ranges() {
            if b < lo || a > hi {
                continue;
            }
            let calls: usize = cols.iter().map(|&l| g.in_rows(l, a, b).len()).sum();
            let left = self.box_at(area, 0, a);
            let right = self.box_at(area, cols.len().saturating_sub(1), a);
            let r = Rect::from_min_max(left.min, right.max).intersect(area);
            if r.height() <= 0.0 || r.width() <= 0.0 {
                continue;
            }
            let text = format!("⋯ {calls} calls in rows {a}–{b}, folded: click to open");
            let resp = ui.interact(r, Id::new(("mp-fold", a)), Sense::click());
            resp.widget_info(|| egui::WidgetInfo::labeled(egui::WidgetType::Button, true, &text));
            let painter = ui.painter_at(area);
            let fill = if resp.hovered() {
                FOLD.gamma_multiply(0.6)
            } else {
                FOLD.gamma_multiply(0.35)
            };
            painter.rect(r, 3.0, fill, Stroke::new(1.0, FOLD), StrokeKind::Inside);
            if r.height() >= 10.0 {
                let at = r.left_center() + Vec2::new((BOX.x / 2.0 - LANE_DX / 2.0).max(4.0), 0.0);
                painter.text(
                    at,
                    Align2::LEFT_CENTER,
                    &text,
                    FontId::proportional(11.0),
                    Color32::WHITE,
                );
            }
            if resp.clicked() {
                opened = Some(a);
            }
        }
        if let Some(a) = opened {
            self.folds.opened.insert(a);
        }
        opened.is_some()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn folds(ranges: &[(u32, u32)]) -> Folds {
        let mut f = Folds {
            on: true,
            ..Folds::default()
        };
        let mut hidden = 0;
        for &(a, b) in ranges {
            f.ranges.push((a, b));
            hidden += b - a;
            f.hidden.push(hidden);
        }
        f
    }

    #[test]
    fn folded_rows_share_one_row_and_map_back() {
        // Rows 3..=6 and 10..=19 folded: 3 and 9 rows hidden.
        let f = folds(&[(3, 6), (10, 19)]);
        let shown: Vec<u32> = (0..=22).map(|r| f.shown(r)).collect();
        assert_eq!(
            shown,
            [0, 1, 2, 3, 3, 3, 3, 4, 5, 6, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 8, 9, 10]
        );
        // Each drawn row's first graph row.
        let back: Vec<u32> = (0..=10).map(|d| f.graph_row(d)).collect();
        assert_eq!(back, [0, 1, 2, 3, 7, 8, 9, 10, 20, 21, 22]);
        for d in 0..=10 {
            assert_eq!(f.shown(f.graph_row(d)), d, "row {d}");
        }
        assert_eq!(f.fold_of(5), Some((3, 6)));
        assert_eq!(f.fold_of(7), None);
        assert_eq!(f.fold_of(19), Some((10, 19)));
        assert_eq!(f.fold_of(2), None);
        // No folds: the identity.
        let none = Folds::default();
        assert_eq!(
            (none.shown(42), none.graph_row(42), none.fold_of(42)),
            (42, 42, None)
        );
    }
}
