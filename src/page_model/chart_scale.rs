//! Pure helpers for the page's canvas charts (`app::charts`): colour scale, ranges and ticks,
//! downsampling, labels, sizes and layout. Nothing here touches the DOM, so it is tested natively.

/// An sRGB colour as `(red, green, blue)`.
pub type Rgb = (u8, u8, u8);

/// The low end of the weight colour scale (weight 0): white.
pub const SCALE_LOW: Rgb = (0xff, 0xff, 0xff);
/// The middle of the weight colour scale (weight = the scale midpoint): the app's accent.
pub const SCALE_MID: Rgb = (0x2f, 0x5d, 0x9a);
/// The high end of the weight colour scale (weight → ∞): the app's ink colour.
pub const SCALE_HIGH: Rgb = (0x1d, 0x24, 0x30);

/// Histories longer than this are downsampled before drawing.
pub const MAX_CURVE_POINTS: usize = 2000;
/// Values of h(A) at or below `10^LOG_FLOOR_EXP` are drawn at that floor.
pub const LOG_FLOOR_EXP: f64 = -8.0;
/// Variable names longer than this many characters are truncated with an ellipsis.
pub const LABEL_CHARS: usize = 12;
/// The colour bar's ticks, as values of `t` (see [`weight_to_t`]).
pub const COLOUR_BAR_TICKS: [f64; 3] = [0.0, 0.5, 0.9];

/// The heatmap's font size in CSS pixels.
pub const FONT_PX: f64 = 12.0;
/// The estimated width of one character at [`FONT_PX`], in CSS pixels.
pub const CHAR_PX: f64 = 7.0;
/// Outer padding of the heatmap, in CSS pixels.
pub const PAD_PX: f64 = 8.0;
/// Height kept below the heatmap grid for its caption, in CSS pixels.
pub const CAPTION_PX: f64 = 24.0;
/// Width kept right of the heatmap grid for the colour bar and its tick labels, in CSS pixels.
pub const BAR_BLOCK_PX: f64 = 84.0;
/// Gap between the heatmap grid and the colour bar, in CSS pixels.
pub const BAR_GAP_PX: f64 = 16.0;
/// Largest heatmap cell, in CSS pixels.
pub const MAX_CELL_PX: f64 = 72.0;
/// Smallest heatmap cell worth drawing, in CSS pixels.
pub const MIN_CELL_PX: f64 = 3.0;

/// Largest side of a canvas backing store, in pixels.
pub const MAX_BACKING_SIDE: f64 = 8192.0;
/// Largest area of a canvas backing store, in pixels (Safari refuses larger canvases).
pub const MAX_BACKING_AREA: f64 = 16_000_000.0;

/// What a heatmap's values are, and so how they map to colours.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HeatmapScale {
    /// Non-negative weights of no fixed range (kernel weights, evidence gains in nats): t = w / (w
    /// + s) around the midpoint s = [`scale_midpoint`], so the typical value is mid-scale.
    Weight { title: &'static str },
    /// Probabilities: t = p, so 0.5 is mid-scale whatever the other cells hold (a midpoint
    /// would make 10⁻⁴⁰ look like certainty when most cells are smaller still).
    Probability,
}

impl HeatmapScale {
    /// The kernel weights θ of the continuous search.
    pub const WEIGHT: Self = Self::Weight { title: "weight" };

    /// The midpoint the scale needs for `values` (1 for probabilities, which need none).
    pub fn midpoint(self, values: &[Vec<f64>]) -> f64 {
        match self {
            Self::Weight { .. } => scale_midpoint(values),
            Self::Probability => 1.0,
        }
    }

    /// The position of `v` on the colour scale, in [0, 1]; `None` for NaN.
    pub fn to_t(self, v: f64, s: f64) -> Option<f64> {
        match self {
            Self::Weight { .. } => weight_to_t(v, s),
            Self::Probability => (!v.is_nan()).then(|| v.clamp(0.0, 1.0)),
        }
    }

    /// The value at position `t` (the inverse of [`HeatmapScale::to_t`]), for the colour bar.
    pub fn value_at(self, t: f64, s: f64) -> f64 {
        match self {
            Self::Weight { .. } => t_to_weight(t, s),
            Self::Probability => t.clamp(0.0, 1.0),
        }
    }

    /// The colour bar's title.
    pub fn title(self) -> &'static str {
        match self {
            Self::Weight { title } => title,
            Self::Probability => "probability",
        }
    }

    /// Where the colour bar's ticks go (positions t).
    pub fn ticks(self) -> &'static [f64] {
        match self {
            Self::Weight { .. } => &COLOUR_BAR_TICKS,
            Self::Probability => &PROBABILITY_TICKS,
        }
    }
}

/// The colour bar's ticks on the probability scale: 0, ½ and 1.
pub const PROBABILITY_TICKS: [f64; 3] = [0.0, 0.5, 1.0];

/// The colour-scale midpoint `s`: the median of the positive, finite, off-diagonal weights of
/// the square part of `weights` (`i != j`, both below `weights.len()`), or 1 if there is none.
pub fn scale_midpoint(weights: &[Vec<f64>]) -> f64 {
    let n = weights.len();
    let mut positive: Vec<f64> = weights
        .iter()
        .enumerate()
        .flat_map(|(i, row)| {
            row.iter()
                .take(n)
                .enumerate()
                .filter(move |(j, _)| *j != i)
                .map(|(_, w)| *w)
        })
        .filter(|w| w.is_finite() && *w > 0.0)
        .collect();
    if positive.is_empty() {
        return 1.0;
    }
    positive.sort_by(f64::total_cmp);
    let m = positive.len() / 2;
    if positive.len() % 2 == 1 {
        positive[m]
    } else {
        positive[m - 1] / 2.0 + positive[m] / 2.0
    }
}

/// The position `t = w / (w + s)` of weight `w` on the colour scale with midpoint `s` (an `s`
/// that is not finite and positive counts as 1). `t` is 0 for `w ≤ 0`, ½ for `w = s`, and
/// tends to 1 as `w → ∞`; `None` for NaN.
pub fn weight_to_t(w: f64, s: f64) -> Option<f64> {
    let s = if s.is_finite() && s > 0.0 { s } else { 1.0 };
    if w.is_nan() {
        None
    } else if w <= 0.0 {
        Some(0.0)
    } else if w == f64::INFINITY {
        Some(1.0)
    } else {
        // 1 / (1 + s/w) equals w / (w + s) without overflowing for huge w.
        Some(1.0 / (1.0 + s / w))
    }
}

/// The weight at position `t` of the colour scale with midpoint `s`: `s·t / (1 − t)` (0 for
/// `t ≤ 0`, ∞ for `t ≥ 1`); the inverse of [`weight_to_t`].
pub fn t_to_weight(t: f64, s: f64) -> f64 {
    let s = if s.is_finite() && s > 0.0 { s } else { 1.0 };
    if t.is_nan() || t <= 0.0 {
        0.0
    } else if t >= 1.0 {
        f64::INFINITY
    } else {
        s * t / (1.0 - t)
    }
}

/// The colour at position `t ∈ [0, 1]` of the weight scale: linear interpolation from white
/// (t = 0) through the accent #2f5d9a (t = ½) to the ink #1d2430 (t = 1). Lightness decreases
/// monotonically, so the scale reads in order. `t` is clamped; NaN counts as 0.
pub fn colour_at(t: f64) -> Rgb {
    let t = if t.is_nan() { 0.0 } else { t.clamp(0.0, 1.0) };
    let (from, to, u) = if t <= 0.5 {
        (SCALE_LOW, SCALE_MID, t / 0.5)
    } else {
        (SCALE_MID, SCALE_HIGH, (t - 0.5) / 0.5)
    };
    let mix = |a: u8, b: u8| (f64::from(a) + (f64::from(b) - f64::from(a)) * u).round() as u8;
    (mix(from.0, to.0), mix(from.1, to.1), mix(from.2, to.2))
}

/// The colour of weight `w` on the scale with midpoint `s`: `colour_at(w / (w + s))`; `None`
/// for NaN.
pub fn weight_colour(w: f64, s: f64) -> Option<Rgb> {
    weight_to_t(w, s).map(colour_at)
}

/// `name` cut to at most `max_chars` characters, the last one an ellipsis when it was cut.
pub fn truncate_label(name: &str, max_chars: usize) -> String {
    if name.chars().count() <= max_chars {
        return name.to_string();
    }
    if max_chars == 0 {
        return String::new();
    }
    let mut out: String = name.chars().take(max_chars - 1).collect();
    out.push('…');
    out
}

/// At most `max_len` items of `items`, in order: every k-th item (k as small as fits) plus the
/// last one. Returns all items when there are at most `max_len`.
pub fn downsample<T: Clone>(items: &[T], max_len: usize) -> Vec<T> {
    let n = items.len();
    if n <= max_len {
        return items.to_vec();
    }
    match max_len {
        0 => return Vec::new(),
        1 => return items[n - 1..].to_vec(),
        _ => {}
    }
    // n > max_len ≥ 2. With k ≥ (n − 1) / (max_len − 2) the stride keeps at most
    // max_len − 1 items, so adding the last one stays within max_len.
    let k = if max_len == 2 {
        n - 1
    } else {
        (n - 1).div_ceil(max_len - 2)
    };
    let mut out: Vec<T> = items.iter().step_by(k).cloned().collect();
    if !(n - 1).is_multiple_of(k) {
        out.push(items[n - 1].clone());
    }
    out
}

/// The range of the finite `values`, widened by `pad_fraction` of its span on each side.
/// A constant series gets ±10 % of its magnitude (±1 around 0); no finite value gives
/// `(0, 1)`. The result is finite, with `lo < hi`.
pub fn padded_range<I: IntoIterator<Item = f64>>(values: I, pad_fraction: f64) -> (f64, f64) {
    const LIMIT: f64 = 1e300;
    let (mut lo, mut hi) = (f64::INFINITY, f64::NEG_INFINITY);
    for v in values.into_iter().filter(|v| v.is_finite()) {
        lo = lo.min(v);
        hi = hi.max(v);
    }
    if lo > hi {
        return (0.0, 1.0);
    }
    let lo = lo.clamp(-LIMIT, LIMIT);
    let hi = hi.clamp(-LIMIT, LIMIT);
    let span = hi - lo;
    let magnitude = lo.abs().max(hi.abs());
    let pad_fraction = if pad_fraction.is_finite() && pad_fraction > 0.0 {
        pad_fraction
    } else {
        0.0
    };
    if span > magnitude * 1e-12 {
        let pad = span * pad_fraction;
        (lo - pad, hi + pad)
    } else {
        let mid = lo + span / 2.0;
        let d = if magnitude == 0.0 {
            1.0
        } else {
            magnitude * 0.1
        };
        (mid - d, mid + d)
    }
}

/// "Nice" ticks (1, 2 or 5 × 10^k apart) inside `[lo, hi]`, with their spacing: the coarsest
/// step giving at most `target` ticks (at least 2), refined while it leaves a single tick and
/// the finer step gives at most `max_ticks`. Never more than `max(target, max_ticks)` ticks;
/// at least two are guaranteed when `max_ticks ≥ 5`. Empty for a non-finite range; the single
/// value for an empty one.
pub fn nice_ticks(lo: f64, hi: f64, target: usize, max_ticks: usize) -> (Vec<f64>, f64) {
    if !(lo.is_finite() && hi.is_finite()) {
        return (Vec::new(), 0.0);
    }
    let (lo, hi) = if lo <= hi { (lo, hi) } else { (hi, lo) };
    let span = hi - lo;
    if !(span > 0.0 && span.is_finite()) {
        return (vec![lo], 0.0);
    }
    let target = target.max(2);
    let max_ticks = max_ticks.max(target);
    let raw = span / (target - 1) as f64;
    let decade = 10f64.powf(raw.log10().floor());
    let mut step = [1.0, 2.0, 5.0, 10.0]
        .iter()
        .map(|m| m * decade)
        .find(|s| *s >= raw * (1.0 - 1e-9))
        .unwrap_or(10.0 * decade);
    let too_fine = |step: f64| (lo / step).abs() > 1e15 || (hi / step).abs() > 1e15;
    if !(step > 0.0 && step.is_finite()) || too_fine(step) {
        return (vec![lo, hi], span);
    }
    let count = |step: f64| (hi / step + 1e-9).floor() - (lo / step - 1e-9).ceil() + 1.0;
    for _ in 0..3 {
        if count(step) >= 2.0 {
            break;
        }
        let finer = finer_nice_step(step);
        if count(finer) > max_ticks as f64 || too_fine(finer) {
            break;
        }
        step = finer;
    }
    let first = (lo / step - 1e-9).ceil() as i64;
    let last = (hi / step + 1e-9).floor() as i64;
    let ticks = (first..=last)
        .take(max_ticks)
        .map(|k| {
            let v = k as f64 * step;
            if v == 0.0 {
                0.0
            } else {
                v
            }
        })
        .collect();
    (ticks, step)
}

/// The next finer step of the 1, 2, 5 × 10^k sequence.
fn finer_nice_step(step: f64) -> f64 {
    let decade = 10f64.powf((step.log10() + 1e-9).floor());
    let mantissa = step / decade;
    if mantissa > 3.5 {
        2.0 * decade
    } else if mantissa > 1.5 {
        decade
    } else {
        0.5 * decade
    }
}

/// A tick label for `v` on an axis whose ticks are `step` apart: just enough decimals to tell
/// neighbouring ticks apart, scientific notation for |v| ≥ 10⁶ or tiny steps.
pub fn format_tick(v: f64, step: f64) -> String {
    if !(v.is_finite() && step.is_finite() && step > 0.0) {
        return format_axis_number(v);
    }
    let v = if v.abs() < step * 1e-6 { 0.0 } else { v };
    let step_exp = (step.log10() + 1e-9).floor() as i32;
    if v.abs() >= 1e6 || step_exp < -5 {
        if v == 0.0 {
            return "0".to_string();
        }
        let v_exp = (v.abs().log10() + 1e-9).floor() as i32;
        let digits = (v_exp - step_exp).clamp(0, 6) as usize;
        return format!("{v:.digits$e}");
    }
    let decimals = (-step_exp).clamp(0, 10) as usize;
    format!("{v:.decimals$}")
}

/// A short label for a number on an axis or the colour bar (about three significant digits, more
/// compact than the tables' [`crate::page_model::format_number`]): `0`, `0.35`, `12.3`,
/// `2.5e-4`, `1.2e5`, `∞`.
pub fn format_axis_number(v: f64) -> String {
    if v.is_nan() {
        return "NaN".to_string();
    }
    if v.is_infinite() {
        return if v > 0.0 { "∞" } else { "−∞" }.to_string();
    }
    if v == 0.0 {
        return "0".to_string();
    }
    let a = v.abs();
    if !(1e-2..1e4).contains(&a) {
        let s = format!("{v:.1e}");
        let s = s.replace(".0e", "e");
        // Rounding can carry into the exponent (9.96e3 → "1.0e4"), already handled by format.
        return s;
    }
    let decimals = if a >= 100.0 {
        0
    } else if a >= 10.0 {
        1
    } else if a >= 1.0 {
        2
    } else {
        3
    };
    let s = format!("{v:.decimals$}");
    if s.contains('.') {
        s.trim_end_matches('0').trim_end_matches('.').to_string()
    } else {
        s
    }
}

/// `log10(h)` with values at or below `10^LOG_FLOOR_EXP` (zero and negatives included) drawn
/// at the floor; `None` for a non-finite `h`.
pub fn log10_clamped(h: f64) -> Option<f64> {
    if !h.is_finite() {
        return None;
    }
    let floor = 10f64.powf(LOG_FLOOR_EXP);
    if h <= floor {
        Some(LOG_FLOOR_EXP)
    } else {
        Some(h.log10().max(LOG_FLOOR_EXP))
    }
}

/// The whole decades `(lo, hi)` (in log10 units, `lo < hi`) covering the finite log10 values
/// `logs`; `(LOG_FLOOR_EXP, 0)` when there is none.
pub fn decade_range<I: IntoIterator<Item = f64>>(logs: I) -> (f64, f64) {
    let (mut lo, mut hi) = (f64::INFINITY, f64::NEG_INFINITY);
    for v in logs.into_iter().filter(|v| v.is_finite()) {
        lo = lo.min(v);
        hi = hi.max(v);
    }
    if lo > hi {
        return (LOG_FLOOR_EXP, 0.0);
    }
    let lo = lo.floor().clamp(-300.0, 300.0);
    let hi = hi.ceil().clamp(-300.0, 300.0);
    if hi - lo < 1.0 {
        (lo, lo + 1.0)
    } else {
        (lo, hi)
    }
}

/// At most `max_ticks` (at least 2) whole decades from `lo` up to `hi`, evenly spaced.
pub fn decade_ticks(lo: f64, hi: f64, max_ticks: usize) -> Vec<f64> {
    if !(lo.is_finite() && hi.is_finite()) || hi < lo {
        return Vec::new();
    }
    let (lo, hi) = (lo.ceil(), hi.floor());
    let max_ticks = max_ticks.max(2);
    let step = ((hi - lo) / (max_ticks - 1) as f64).ceil().max(1.0);
    (0..=max_ticks)
        .map(|k| lo + k as f64 * step)
        .take_while(|v| *v <= hi)
        .collect()
}

/// The label of the decade `10^k` given as its exponent `k`: plain numbers for 0.01 … 100,
/// `1e{k}` otherwise.
pub fn decade_label(k: f64) -> String {
    match k.round() as i64 {
        -2 => "0.01".to_string(),
        -1 => "0.1".to_string(),
        0 => "1".to_string(),
        1 => "10".to_string(),
        2 => "100".to_string(),
        k => format!("1e{k}"),
    }
}

/// The runs of consecutive points with a finite `y`, in order; a non-finite `y` ends a run.
pub fn finite_runs<I: IntoIterator<Item = (i64, f64)>>(points: I) -> Vec<Vec<(i64, f64)>> {
    let mut runs = Vec::new();
    let mut current = Vec::new();
    for (x, y) in points {
        if y.is_finite() {
            current.push((x, y));
        } else if !current.is_empty() {
            runs.push(std::mem::take(&mut current));
        }
    }
    if !current.is_empty() {
        runs.push(current);
    }
    runs
}

/// Parses a `"WxH"` size as written in the canvas's `data-css-size` attribute.
pub fn parse_size(text: &str) -> Option<(u32, u32)> {
    let (w, h) = text.split_once('x')?;
    Some((w.trim().parse().ok()?, h.trim().parse().ok()?))
}

/// The CSS size to draw at, from the canvas's laid-out size `client`, its `width`/`height`
/// attributes `attr`, and the CSS size `recorded` at the previous draw (if any).
///
/// A laid-out size equal to the attributes while a different size was recorded means the page
/// gives the canvas no CSS size, so it is laid out at the backing size set last time: the
/// recorded size is used, which keeps the canvas from growing on every redraw. A canvas that is
/// not laid out (size 0, e.g. hidden) uses the recorded size, then the attributes, then the
/// HTML default 300 × 150.
pub fn css_size(client: (u32, u32), attr: (u32, u32), recorded: Option<(u32, u32)>) -> (u32, u32) {
    let usable = |s: (u32, u32)| s.0 > 0 && s.1 > 0;
    if let Some(rec) = recorded.filter(|r| usable(*r)) {
        if !usable(client) || client == attr {
            return rec;
        }
    }
    if usable(client) {
        client
    } else if usable(attr) {
        attr
    } else {
        (300, 150)
    }
}

/// The backing-store size for a canvas of CSS size `css` on a screen with `device_ratio`
/// device pixels per CSS pixel, and the ratio actually used (the device ratio, sanitised to
/// 0.5 … 4 and lowered if needed to keep the backing store within browser limits).
pub fn backing_size(css: (u32, u32), device_ratio: f64) -> ((u32, u32), f64) {
    let w = f64::from(css.0.max(1));
    let h = f64::from(css.1.max(1));
    let mut ratio = if device_ratio.is_finite() && device_ratio > 0.0 {
        device_ratio.clamp(0.5, 4.0)
    } else {
        1.0
    };
    ratio = ratio.min(MAX_BACKING_SIDE / w).min(MAX_BACKING_SIDE / h);
    if w * h * ratio * ratio > MAX_BACKING_AREA {
        ratio = (MAX_BACKING_AREA / (w * h)).sqrt();
    }
    let side = |v: f64| (v * ratio).round().clamp(1.0, MAX_BACKING_SIDE) as u32;
    ((side(w), side(h)), ratio)
}

/// Where the heatmap goes on a canvas, in CSS pixels.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct HeatmapLayout {
    /// Side of one cell.
    pub cell: f64,
    /// Left edge of the grid (row labels are to its left).
    pub left: f64,
    /// Top edge of the grid (column labels are above it).
    pub top: f64,
    /// Whether the column labels are rotated to read upwards.
    pub rotated: bool,
    /// Font size of the variable names: [`FONT_PX`], shrunk towards [`MIN_FONT_PX`] so that
    /// each name fits its row and column.
    pub font: f64,
    /// Label every `label_step`-th row and column (1 unless the cells are smaller than even the
    /// smallest font).
    pub label_step: usize,
    /// Left edge of the colour bar.
    pub bar_left: f64,
    /// Height of the colour bar (its top is at `top`).
    pub bar_height: f64,
}

impl HeatmapLayout {
    /// The grid of `n` variables drawn with this layout, as clicks read it.
    pub fn grid(&self, n: usize) -> HeatmapGrid {
        HeatmapGrid {
            left: self.left,
            top: self.top,
            cell: self.cell,
            n,
        }
    }
}

/// Where a drawn heatmap's cells are, in CSS pixels from the canvas's upper-left corner: the
/// canvas keeps it as an attribute ([`HeatmapGrid::to_attr`]) so that a click can be mapped to
/// the cell under it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct HeatmapGrid {
    pub left: f64,
    pub top: f64,
    pub cell: f64,
    /// Rows (= columns) drawn.
    pub n: usize,
}

impl HeatmapGrid {
    /// "left,top,cell,n".
    pub fn to_attr(&self) -> String {
        format!(
            "{:.2},{:.2},{:.3},{}",
            self.left, self.top, self.cell, self.n
        )
    }

    /// The grid written by [`HeatmapGrid::to_attr`]; `None` for anything else.
    pub fn parse(text: &str) -> Option<Self> {
        let mut parts = text.split(',');
        let mut number = || parts.next()?.trim().parse::<f64>().ok();
        let (left, top, cell, n) = (number()?, number()?, number()?, number()?);
        let ok = [left, top, cell].iter().all(|v| v.is_finite())
            && cell > 0.0
            && n >= 0.0
            && n.fract() == 0.0;
        ok.then_some(Self {
            left,
            top,
            cell,
            n: n as usize,
        })
    }

    /// The cell (row, column) = (cause, effect) under the point (x, y), `None` outside the grid:
    /// row ⌊(y − top) / cell⌋, column ⌊(x − left) / cell⌋.
    pub fn cell_at(&self, x: f64, y: f64) -> Option<(usize, usize)> {
        let column = (x - self.left) / self.cell;
        let row = (y - self.top) / self.cell;
        let inside = |v: f64| v.is_finite() && v >= 0.0 && v < self.n as f64;
        (inside(row) && inside(column)).then_some((row as usize, column as usize))
    }
}

/// The smallest font the heatmap's variable names shrink to, in CSS pixels; with cells smaller
/// than this only every k-th name is written.
pub const MIN_FONT_PX: f64 = 8.0;
/// The font sizes tried for the names, largest first (half-pixel steps).
const FONT_STEPS: usize = ((FONT_PX - MIN_FONT_PX) * 2.0) as usize;

/// The layout for one font size: cell side, the band above the grid, rotation, row-label width.
struct Placement {
    cell: f64,
    band: f64,
    rotated: bool,
    row_label_w: f64,
}

fn place(width: f64, height: f64, n: usize, max_chars: usize, font: f64) -> Placement {
    let nf = n as f64;
    // Character width scales with the font (CHAR_PX at FONT_PX).
    let label_len = max_chars.min(LABEL_CHARS) as f64 * CHAR_PX * font / FONT_PX;
    let row_label_w = label_len + 8.0;
    let avail_w = width - 2.0 * PAD_PX - row_label_w - BAR_BLOCK_PX;
    let avail_h = |top_band: f64| height - 2.0 * PAD_PX - CAPTION_PX - top_band;
    let flat_band = font + 10.0;
    let flat_cell = (avail_w.min(avail_h(flat_band)) / nf).min(MAX_CELL_PX);
    if label_len + 4.0 <= flat_cell {
        Placement {
            cell: flat_cell,
            band: flat_band,
            rotated: false,
            row_label_w,
        }
    } else {
        let cell = (avail_w.min(avail_h(row_label_w)) / nf).min(MAX_CELL_PX);
        Placement {
            cell,
            band: row_label_w,
            rotated: true,
            row_label_w,
        }
    }
}

/// The heatmap layout for `n` variables whose (truncated) labels have at most `max_chars`
/// characters, on a canvas of `width × height` CSS pixels; `None` when the cells would be
/// smaller than [`MIN_CELL_PX`] or `n` is 0.
///
/// The names are written at the largest font (from [`FONT_PX`] down to [`MIN_FONT_PX`]) whose
/// cells are at least a font size plus a pixel high, so that every row and column is named;
/// smaller text also leaves more room for the cells.
pub fn heatmap_layout(
    width: f64,
    height: f64,
    n: usize,
    max_chars: usize,
) -> Option<HeatmapLayout> {
    if n == 0 || !(width.is_finite() && height.is_finite()) {
        return None;
    }
    let fonts = (0..=FONT_STEPS).map(|k| FONT_PX - 0.5 * k as f64);
    let (font, p) = fonts
        .map(|font| (font, place(width, height, n, max_chars, font)))
        .find(|(font, p)| p.cell >= font + 1.0)
        .unwrap_or_else(|| (MIN_FONT_PX, place(width, height, n, max_chars, MIN_FONT_PX)));
    let cell = p.cell;
    if cell.is_nan() || cell < MIN_CELL_PX {
        return None;
    }
    let nf = n as f64;
    let grid = nf * cell;
    let avail_w = width - 2.0 * PAD_PX - p.row_label_w - BAR_BLOCK_PX;
    let avail_h = height - 2.0 * PAD_PX - CAPTION_PX - p.band;
    // Centre the block (labels, grid, colour bar; band, grid, caption) on the canvas.
    let spare_w = (avail_w - grid).max(0.0);
    let spare_h = (avail_h - grid).max(0.0);
    let left = PAD_PX + spare_w / 2.0 + p.row_label_w;
    let top = PAD_PX + spare_h / 2.0 + p.band;
    let label_step = ((font + 1.0) / cell).ceil().max(1.0) as usize;
    let bar_height = grid
        .max(60.0)
        .min((height - top - CAPTION_PX - PAD_PX).max(grid));
    Some(HeatmapLayout {
        cell,
        left,
        top,
        rotated: p.rotated,
        font,
        label_step,
        bar_left: left + grid + BAR_GAP_PX,
        bar_height,
    })
}

/// The heatmap canvas's size class for `n` variables and the smallest CSS width (px) that class
/// gives the canvas in `www/style.css` (which must agree): more variables get a larger canvas, so
/// that up to [`HEATMAP_ALL_NAMED`] variables every name is written, at [`MIN_FONT_PX`] or more.
/// `None` is the default size (up to 12 variables, which fit any figure).
pub fn heatmap_size_class(n: usize) -> Option<(&'static str, f64)> {
    match n {
        0..=12 => None,
        13..=30 => Some(("heatmap-large", 480.0)),
        31..=50 => Some(("heatmap-huge", 640.0)),
        _ => Some(("heatmap-giant", 960.0)),
    }
}

/// Up to this many variables the heatmap names every row and column (see [`heatmap_size_class`]).
pub const HEATMAP_ALL_NAMED: usize = 80;

/// The canvas's CSS aspect ratio, width / height (`aspect-ratio: 21 / 20` in `www/style.css`).
pub const HEATMAP_ASPECT: f64 = 21.0 / 20.0;

#[cfg(test)]
mod tests;
