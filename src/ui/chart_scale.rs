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
/// compact than the tables' [`crate::ui::format_number`]): `0`, `0.35`, `12.3`,
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
mod tests {
    use super::*;

    fn luminance(c: Rgb) -> f64 {
        0.2126 * f64::from(c.0) + 0.7152 * f64::from(c.1) + 0.0722 * f64::from(c.2)
    }

    #[test]
    fn colour_scale_ends_and_middle() {
        assert_eq!(colour_at(0.0), SCALE_LOW);
        assert_eq!(colour_at(0.5), SCALE_MID);
        assert_eq!(colour_at(1.0), SCALE_HIGH);
        assert_eq!(colour_at(-3.0), SCALE_LOW);
        assert_eq!(colour_at(7.0), SCALE_HIGH);
        assert_eq!(colour_at(f64::NAN), SCALE_LOW);
    }

    #[test]
    fn colour_scale_darkens_monotonically() {
        let mut previous = f64::INFINITY;
        for k in 0..=200 {
            let l = luminance(colour_at(k as f64 / 200.0));
            assert!(
                l <= previous + 1e-9,
                "lightness rose at t = {}",
                k as f64 / 200.0
            );
            previous = l;
        }
    }

    #[test]
    fn weight_position_and_inverse() {
        assert_eq!(weight_to_t(0.0, 2.0), Some(0.0));
        assert_eq!(weight_to_t(-1.0, 2.0), Some(0.0));
        assert_eq!(weight_to_t(f64::NEG_INFINITY, 2.0), Some(0.0));
        assert_eq!(weight_to_t(f64::INFINITY, 2.0), Some(1.0));
        assert_eq!(weight_to_t(f64::NAN, 2.0), None);
        assert!((weight_to_t(2.0, 2.0).unwrap() - 0.5).abs() < 1e-15);
        assert!((weight_to_t(18.0, 2.0).unwrap() - 0.9).abs() < 1e-12);
        // Huge and tiny weights stay in [0, 1].
        assert_eq!(weight_to_t(f64::MAX, 1e-300), Some(1.0));
        assert!(weight_to_t(1e-320, 1.0).unwrap() < 1e-300);
        // Bad midpoints count as 1.
        assert_eq!(weight_to_t(1.0, 0.0), Some(0.5));
        assert_eq!(weight_to_t(1.0, f64::NAN), Some(0.5));
        for &t in &COLOUR_BAR_TICKS {
            let w = t_to_weight(t, 0.3);
            assert!((weight_to_t(w, 0.3).unwrap() - t).abs() < 1e-12);
        }
        assert_eq!(t_to_weight(0.0, 0.3), 0.0);
        assert!((t_to_weight(0.5, 0.3) - 0.3).abs() < 1e-15);
        assert!((t_to_weight(0.9, 0.3) - 2.7).abs() < 1e-12);
        assert_eq!(t_to_weight(1.0, 0.3), f64::INFINITY);
        assert_eq!(t_to_weight(f64::NAN, 0.3), 0.0);
        assert_eq!(weight_colour(f64::NAN, 1.0), None);
        assert_eq!(weight_colour(1.0, 1.0), Some(SCALE_MID));
    }

    #[test]
    fn midpoint_is_median_of_positive_off_diagonal() {
        let w = vec![
            vec![100.0, 1.0, 0.0],
            vec![3.0, 100.0, f64::NAN],
            vec![2.0, -1.0, 100.0],
        ];
        assert_eq!(scale_midpoint(&w), 2.0);
        let even = vec![vec![0.0, 1.0], vec![4.0, 0.0]];
        assert_eq!(scale_midpoint(&even), 2.5);
        assert_eq!(scale_midpoint(&[]), 1.0);
        assert_eq!(scale_midpoint(&[vec![5.0]]), 1.0);
        assert_eq!(scale_midpoint(&[vec![0.0, 0.0], vec![0.0, 0.0]]), 1.0);
        // Ragged rows: entries beyond the square part are ignored, short rows are fine.
        assert_eq!(scale_midpoint(&[vec![0.0, 7.0, 99.0], vec![]]), 7.0);
        // No overflow for huge weights.
        let huge = vec![vec![0.0, f64::MAX], vec![f64::MAX, 0.0]];
        assert_eq!(scale_midpoint(&huge), f64::MAX);
    }

    #[test]
    fn labels_are_truncated_with_an_ellipsis() {
        assert_eq!(truncate_label("x1", 12), "x1");
        assert_eq!(truncate_label("abcdefghijkl", 12), "abcdefghijkl");
        assert_eq!(truncate_label("abcdefghijklm", 12), "abcdefghijk…");
        assert_eq!(truncate_label("abcdefghijklm", 12).chars().count(), 12);
        assert_eq!(truncate_label("température_moyenne", 5), "temp…");
        assert_eq!(truncate_label("ααααααααααααααα", 3), "αα…");
        assert_eq!(truncate_label("abc", 0), "");
        assert_eq!(truncate_label("", 0), "");
    }

    #[test]
    fn downsampling_keeps_every_kth_and_the_last() {
        let items: Vec<usize> = (0..10).collect();
        assert_eq!(downsample(&items, 10), items);
        assert_eq!(downsample(&items, 20), items);
        assert_eq!(downsample(&items, 0), Vec::<usize>::new());
        assert_eq!(downsample(&items, 1), vec![9]);
        assert_eq!(downsample(&items, 2), vec![0, 9]);
        assert_eq!(downsample(&items, 5), vec![0, 3, 6, 9]);
        for n in [2001usize, 2002, 3999, 4000, 4001, 10_000, 123_457] {
            let items: Vec<usize> = (0..n).collect();
            for max in [2usize, 3, 7, 1000, 2000] {
                let out = downsample(&items, max);
                assert!(
                    out.len() <= max,
                    "n = {n}, max = {max}: {} items",
                    out.len()
                );
                assert!(
                    out.len() >= max / 2,
                    "n = {n}, max = {max}: {} items",
                    out.len()
                );
                assert_eq!(out.first(), Some(&0));
                assert_eq!(out.last(), Some(&(n - 1)));
                assert!(out.windows(2).all(|p| p[0] < p[1]));
                // Every k-th: the stride is constant apart from the final item.
                if out.len() > 3 {
                    let k = out[1] - out[0];
                    assert!(out[..out.len() - 1].windows(2).all(|p| p[1] - p[0] == k));
                }
            }
        }
    }

    #[test]
    fn padded_range_handles_constant_and_non_finite() {
        assert_eq!(padded_range([1.0, 3.0], 0.05), (0.9, 3.1));
        assert_eq!(
            padded_range([f64::NAN, 1.0, f64::INFINITY, 3.0], 0.0),
            (1.0, 3.0)
        );
        assert_eq!(padded_range(Vec::<f64>::new(), 0.05), (0.0, 1.0));
        assert_eq!(
            padded_range([f64::NAN, f64::NEG_INFINITY], 0.05),
            (0.0, 1.0)
        );
        assert_eq!(padded_range([0.0, 0.0], 0.05), (-1.0, 1.0));
        let (lo, hi) = padded_range([-250.0; 4], 0.05);
        assert!((lo + 275.0).abs() < 1e-9 && (hi + 225.0).abs() < 1e-9);
        let (lo, hi) = padded_range([1e-9], 0.05);
        assert!(lo < 1e-9 && hi > 1e-9 && lo > 0.0);
        // A bad pad fraction means no padding.
        assert_eq!(padded_range([1.0, 2.0], f64::NAN), (1.0, 2.0));
        for values in [
            vec![f64::MAX, -f64::MAX],
            vec![f64::MAX],
            vec![1e15, 1e15 + 0.1],
            vec![-f64::MIN_POSITIVE],
        ] {
            let (lo, hi) = padded_range(values.iter().copied(), 0.05);
            assert!(
                lo.is_finite() && hi.is_finite() && lo < hi,
                "{values:?}: {lo} {hi}"
            );
        }
    }

    #[test]
    fn nice_ticks_are_round_and_bounded() {
        let (ticks, step) = nice_ticks(0.0, 1.0, 6, 6);
        assert_eq!(step, 0.2);
        assert_eq!(ticks.len(), 6);
        assert_eq!(ticks[0], 0.0);
        assert!((ticks[5] - 1.0).abs() < 1e-12);
        let (ticks, step) = nice_ticks(-1234.0, -1187.0, 5, 5);
        assert_eq!(step, 20.0);
        assert_eq!(ticks, vec![-1220.0, -1200.0]);
        for (lo, hi, max) in [
            (0.3, 0.31, 4),
            (-5e7, 3e9, 6),
            (1e-9, 3e-9, 3),
            (7.0, 7.5, 2),
        ] {
            let (ticks, step) = nice_ticks(lo, hi, max, max);
            assert!(step > 0.0);
            assert!(
                !ticks.is_empty() && ticks.len() <= max,
                "{lo} {hi}: {ticks:?}"
            );
            assert!(ticks
                .iter()
                .all(|t| *t >= lo - step * 1e-6 && *t <= hi + step * 1e-6));
        }
        // A coarse step that would leave one tick is refined.
        assert_eq!(
            nice_ticks(-5060.0, -1000.0, 3, 3),
            (vec![-4000.0, -2000.0], 2000.0)
        );
        assert_eq!(nice_ticks(-1.0, 1.0, 2, 2), (vec![0.0], 2.0));
        assert_eq!(nice_ticks(-1.0, 1.0, 3, 3), (vec![-1.0, 0.0, 1.0], 1.0));
        // Property: within max_ticks, inside the range, evenly spaced, and at least two
        // ticks whenever five are allowed (with fewer, one tick can be all that fits).
        let mut seed: u64 = 0x9e37_79b9_7f4a_7c15;
        let mut next = || {
            seed = seed.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1);
            (seed >> 11) as f64 / (1u64 << 53) as f64
        };
        for _ in 0..20_000 {
            let scale = 10f64.powf(next() * 16.0 - 8.0);
            let lo = (next() - 0.5) * scale * 10.0;
            let hi = lo + next() * scale + scale * 1e-6;
            for (target, max) in (2..=8).flat_map(|t| (t..=t + 3).map(move |m| (t, m))) {
                let (ticks, step) = nice_ticks(lo, hi, target, max);
                let case = format!("{lo} {hi} {target} {max}: {ticks:?}");
                assert!(!ticks.is_empty() && ticks.len() <= max, "{case}");
                if max >= 5 {
                    assert!(ticks.len() >= 2, "{case}");
                }
                if ticks.len() > target {
                    // Refined only because the target step left a single tick.
                    assert!(nice_ticks(lo, hi, target, target).0.len() < 2, "{case}");
                }
                let slack = step * 1e-6;
                assert!(ticks.iter().all(|t| *t >= lo - slack && *t <= hi + slack));
                assert!(ticks
                    .windows(2)
                    .all(|p| ((p[1] - p[0]) - step).abs() <= slack * 10.0));
            }
        }
        // A target of 3 with room for 5: three ticks where they fit, more only if needed.
        let (ticks, step) = nice_ticks(0.9, 1.1, 3, 5);
        assert_eq!((ticks.len(), step), (3, 0.1));
        assert_eq!(nice_ticks(-5060.0, -1000.0, 3, 5).0, vec![-4000.0, -2000.0]);
        assert_eq!(nice_ticks(3.0, 3.0, 5, 5), (vec![3.0], 0.0));
        assert_eq!(nice_ticks(f64::NAN, 3.0, 5, 5).0, Vec::<f64>::new());
        assert_eq!(nice_ticks(0.0, f64::INFINITY, 5, 5).0, Vec::<f64>::new());
        // Reversed bounds are swapped.
        assert_eq!(nice_ticks(1.0, 0.0, 6, 6).1, 0.2);
    }

    #[test]
    fn tick_labels_distinguish_neighbours() {
        assert_eq!(format_tick(0.4, 0.2), "0.4");
        assert_eq!(format_tick(1e-17, 0.2), "0.0");
        assert_eq!(format_tick(-1220.0, 20.0), "-1220");
        assert_eq!(format_tick(0.05, 0.05), "0.05");
        assert_eq!(format_tick(2.5e6, 5e5), "2.5e6");
        assert_eq!(format_tick(3e-7, 1e-7), "3e-7");
        assert_eq!(format_tick(12_345_600.0, 100.0), "1.23456e7");
        assert_eq!(format_tick(0.0, 1e-7), "0");
        assert_eq!(format_tick(1.5, 0.0), "1.5");
        let (ticks, step) = nice_ticks(-12_345.0, -12_301.0, 6, 6);
        let labels: Vec<String> = ticks.iter().map(|t| format_tick(*t, step)).collect();
        let mut unique = labels.clone();
        unique.dedup();
        assert_eq!(labels, unique);
    }

    #[test]
    fn numbers_are_short() {
        assert_eq!(format_axis_number(0.0), "0");
        assert_eq!(format_axis_number(0.35), "0.35");
        assert_eq!(format_axis_number(9.000000000000002), "9");
        assert_eq!(format_axis_number(12.34), "12.3");
        assert_eq!(format_axis_number(123.4), "123");
        assert_eq!(format_axis_number(2.5e-4), "2.5e-4");
        assert_eq!(format_axis_number(1e-3), "1e-3");
        assert_eq!(format_axis_number(123_456.0), "1.2e5");
        assert_eq!(format_axis_number(-0.5), "-0.5");
        assert_eq!(format_axis_number(f64::INFINITY), "∞");
        assert_eq!(format_axis_number(f64::NAN), "NaN");
    }

    #[test]
    fn log_scale_clamps_and_covers_decades() {
        assert_eq!(log10_clamped(1.0), Some(0.0));
        assert_eq!(log10_clamped(0.0), Some(LOG_FLOOR_EXP));
        assert_eq!(log10_clamped(-3.0), Some(LOG_FLOOR_EXP));
        assert_eq!(log10_clamped(1e-12), Some(LOG_FLOOR_EXP));
        assert_eq!(log10_clamped(f64::NAN), None);
        assert_eq!(log10_clamped(f64::INFINITY), None);
        assert!((log10_clamped(0.001).unwrap() + 3.0).abs() < 1e-12);
        assert_eq!(decade_range([-2.5, -0.3]), (-3.0, 0.0));
        assert_eq!(decade_range([-8.0, -8.0]), (-8.0, -7.0));
        assert_eq!(decade_range([f64::NAN]), (LOG_FLOOR_EXP, 0.0));
        assert_eq!(decade_range([0.2]), (0.0, 1.0));
        assert_eq!(
            decade_ticks(-8.0, 0.0, 5),
            vec![-8.0, -6.0, -4.0, -2.0, 0.0]
        );
        assert_eq!(decade_ticks(-3.0, 0.0, 6), vec![-3.0, -2.0, -1.0, 0.0]);
        assert_eq!(decade_ticks(-8.0, 1.0, 3), vec![-8.0, -3.0]);
        assert!(decade_ticks(f64::NAN, 1.0, 3).is_empty());
        assert_eq!(decade_label(-8.0), "1e-8");
        assert_eq!(decade_label(-1.0), "0.1");
        assert_eq!(decade_label(0.0), "1");
        assert_eq!(decade_label(3.0), "1e3");
    }

    #[test]
    fn runs_split_at_non_finite_values() {
        let runs = finite_runs(vec![
            (0, 1.0),
            (1, f64::NAN),
            (2, 2.0),
            (3, 3.0),
            (4, f64::INFINITY),
            (5, f64::NAN),
            (6, 4.0),
        ]);
        assert_eq!(
            runs,
            vec![vec![(0, 1.0)], vec![(2, 2.0), (3, 3.0)], vec![(6, 4.0)]]
        );
        assert!(finite_runs(vec![(0, f64::NAN)]).is_empty());
        assert!(finite_runs(Vec::new()).is_empty());
    }

    #[test]
    fn canvas_sizes() {
        assert_eq!(parse_size("640x360"), Some((640, 360)));
        assert_eq!(parse_size("640"), None);
        assert_eq!(parse_size("ax3"), None);
        // Laid out by CSS: use the layout size.
        assert_eq!(
            css_size((600, 300), (1200, 600), Some((600, 300))),
            (600, 300)
        );
        assert_eq!(
            css_size((500, 250), (1200, 600), Some((600, 300))),
            (500, 250)
        );
        assert_eq!(css_size((600, 300), (300, 150), None), (600, 300));
        // Laid out at the intrinsic (backing) size: keep the recorded size, do not grow.
        assert_eq!(
            css_size((1200, 600), (1200, 600), Some((600, 300))),
            (600, 300)
        );
        // Not laid out.
        assert_eq!(css_size((0, 0), (1200, 600), Some((600, 300))), (600, 300));
        assert_eq!(css_size((0, 0), (640, 360), None), (640, 360));
        assert_eq!(css_size((0, 10), (0, 0), None), (300, 150));
        // Drawing twice at ratio 2 without CSS sizing is stable.
        let (b1, _) = backing_size(css_size((640, 360), (640, 360), None), 2.0);
        let (b2, _) = backing_size(css_size(b1, b1, Some((640, 360))), 2.0);
        assert_eq!(b1, b2);

        assert_eq!(backing_size((600, 300), 2.0), ((1200, 600), 2.0));
        assert_eq!(backing_size((600, 300), 1.25), ((750, 375), 1.25));
        assert_eq!(backing_size((600, 300), f64::NAN), ((600, 300), 1.0));
        assert_eq!(backing_size((600, 300), 0.0), ((600, 300), 1.0));
        assert_eq!(backing_size((600, 300), 10.0), ((2400, 1200), 4.0));
        assert_eq!(backing_size((0, 0), 1.0), ((1, 1), 1.0));
        let ((w, h), r) = backing_size((6000, 4000), 3.0);
        assert!(f64::from(w) * f64::from(h) <= MAX_BACKING_AREA * 1.001);
        assert!(r < 1.0 && w <= 8192 && h <= 8192);
        let ((w, _), _) = backing_size((20_000, 10), 2.0);
        assert_eq!(w, 8192);
    }

    #[test]
    fn heatmap_layout_fits_the_canvas() {
        for (w, h, n, chars) in [
            (600.0, 400.0, 3, 2),
            (600.0, 400.0, 8, 12),
            (300.0, 150.0, 5, 12),
            (900.0, 700.0, 40, 9),
            (1200.0, 900.0, 2, 1),
        ] {
            let l = heatmap_layout(w, h, n, chars).unwrap();
            let grid = n as f64 * l.cell;
            assert!(l.cell >= MIN_CELL_PX && l.cell <= MAX_CELL_PX);
            assert!(
                l.left + grid + BAR_BLOCK_PX <= w - PAD_PX + 1e-9,
                "{w} {h} {n}"
            );
            assert!(
                l.top + grid + CAPTION_PX <= h - PAD_PX + 1e-9,
                "{w} {h} {n}"
            );
            assert!(l.bar_left > l.left + grid);
            assert!(l.bar_height > 0.0 && l.top + l.bar_height <= h);
            assert!(l.label_step >= 1);
            assert!(l.label_step as f64 * l.cell >= l.font);
            assert!((MIN_FONT_PX..=FONT_PX).contains(&l.font));
            if !l.rotated {
                assert!(chars as f64 * CHAR_PX * l.font / FONT_PX <= l.cell);
            }
        }
        // Short names fit flat in big cells; long names are rotated.
        assert!(!heatmap_layout(600.0, 400.0, 3, 2).unwrap().rotated);
        assert!(heatmap_layout(600.0, 400.0, 8, 12).unwrap().rotated);
        assert_eq!(heatmap_layout(600.0, 400.0, 0, 2), None);
        assert_eq!(heatmap_layout(100.0, 80.0, 10, 12), None);
        assert_eq!(heatmap_layout(f64::NAN, 80.0, 1, 1), None);
    }

    #[test]
    fn every_name_is_written_at_the_size_class_of_its_count() {
        // The smallest canvas each class allows (a figure of 18rem for the default size), the
        // longest names (12 characters, ellipsis included) and the shortest ("X1").
        for n in 1..=HEATMAP_ALL_NAMED {
            let width = heatmap_size_class(n).map_or(288.0, |(_, w)| w);
            let height = width / HEATMAP_ASPECT;
            for chars in [2, LABEL_CHARS] {
                let l = heatmap_layout(width, height, n, chars).unwrap();
                assert_eq!(l.label_step, 1, "{n} variables, {chars} characters: {l:?}");
                assert!(l.font >= MIN_FONT_PX && l.cell >= l.font, "{n}: {l:?}");
            }
        }
        // 20 short names, as in the SynTReN example, keep the full font.
        let l = heatmap_layout(480.0, 480.0 / HEATMAP_ASPECT, 20, 3).unwrap();
        assert_eq!((l.font, l.label_step), (FONT_PX, 1));
        // Beyond the largest class, or on a canvas too small for its class, every k-th name.
        let l = heatmap_layout(960.0, 960.0 / HEATMAP_ASPECT, 150, LABEL_CHARS).unwrap();
        assert!(l.label_step > 1 && l.font == MIN_FONT_PX, "{l:?}");
        let l = heatmap_layout(400.0, 380.0, 50, LABEL_CHARS).unwrap();
        assert!(l.label_step > 1, "{l:?}");
        // The classes grow with the count.
        assert_eq!(heatmap_size_class(12), None);
        assert_eq!(heatmap_size_class(20).map(|c| c.0), Some("heatmap-large"));
        assert_eq!(heatmap_size_class(50).map(|c| c.0), Some("heatmap-huge"));
        assert_eq!(heatmap_size_class(51).map(|c| c.0), Some("heatmap-giant"));
    }

    #[test]
    fn a_click_maps_to_the_cell_under_it_and_nothing_outside_the_grid() {
        let grid = HeatmapGrid {
            left: 40.0,
            top: 30.0,
            cell: 20.0,
            n: 3,
        };
        assert_eq!(HeatmapGrid::parse(&grid.to_attr()), Some(grid));
        assert_eq!(grid.cell_at(40.0, 30.0), Some((0, 0)));
        // x picks the column (effect), y the row (cause).
        assert_eq!(grid.cell_at(65.0, 31.0), Some((0, 1)));
        assert_eq!(grid.cell_at(41.0, 79.9), Some((2, 0)));
        assert_eq!(grid.cell_at(99.9, 89.9), Some((2, 2)));
        assert_eq!(grid.cell_at(100.0, 50.0), None, "right of the grid");
        assert_eq!(grid.cell_at(39.9, 50.0), None, "on the row labels");
        assert_eq!(grid.cell_at(50.0, 90.0), None, "below the grid");
        assert_eq!(grid.cell_at(f64::NAN, 50.0), None);
        for bad in ["", "1,2,3", "a,1,1,1", "1,1,0,3", "1,1,1,2.5", "1,1,1,-1"] {
            assert_eq!(HeatmapGrid::parse(bad), None, "{bad}");
        }
    }

    #[test]
    fn probabilities_sit_on_a_fixed_scale_whatever_the_other_cells_hold() {
        let p = HeatmapScale::Probability;
        let tiny = vec![
            vec![0.0, 1e-46, 1e-46],
            vec![1e-40, 0.0, 1e-46],
            vec![1e-46, 1e-46, 0.0],
        ];
        let s = p.midpoint(&tiny);
        assert_eq!(p.to_t(1e-40, s), Some(1e-40));
        assert_eq!(p.to_t(0.5, s), Some(0.5));
        assert_eq!(p.to_t(1.2, s), Some(1.0));
        assert_eq!(p.to_t(f64::NAN, s), None);
        assert_eq!(p.value_at(0.5, s), 0.5);
        assert_eq!(p.title(), "probability");
        // The weight scale puts the median mid-scale: 1e-40 would look like a strong weight.
        let w = HeatmapScale::WEIGHT;
        let s = w.midpoint(&tiny);
        assert!(w.to_t(1e-40, s).unwrap() > 0.99);
        assert_eq!(w.value_at(0.5, s), s);
        assert_eq!(w.title(), "weight");
    }
}
