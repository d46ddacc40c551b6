//! Canvas charts (wasm only): the weighted-adjacency heatmap and the objective curves.
//!
//! Owns everything the page draws on `<canvas>` elements with plotters and plotters-canvas: the
//! heatmap of the learnt kernel weights ([`draw_heatmap`]) and the three stacked curves of the
//! training objective ([`draw_curves`]). The caller owns the canvas elements and decides when to
//! redraw; these functions only draw, and report every failure as a `String` (they never panic on
//! data: non-finite values, empty or ragged inputs and tiny canvases are all handled).
//!
//! Sharpness: each draw reads the canvas's CSS size, sets the canvas's `width`/`height` attributes
//! to that size times `window.devicePixelRatio`, and draws in those backing pixels with fonts,
//! margins and strokes scaled by the same ratio. The element's `style` attribute is never touched
//! (the Content-Security-Policy forbids inline styles): the page's stylesheet must give the canvas
//! its CSS size (for example `width: 100%; height: 320px`, or `width: 100%` alone, which keeps the
//! attributes' aspect ratio). The CSS size used is remembered in a `data-css-size` attribute so that
//! a canvas laid out at its intrinsic size does not grow on every redraw.
//!
//! Text is drawn with the canvas's own `fillText`; nothing here asks plotters to measure text
//! (captions, `titled` areas and right-hand label areas would), because plotters measures text by
//! inserting a `<span>` with an inline `style` attribute, which the CSP forbids. Widths are
//! estimated from the character count instead.
//!
//! The pure helpers (colour scale, tick choice, downsampling, label truncation, sizes and layout)
//! live in `page_model::chart_scale`, which uses no web-sys types so that its tests run natively.

use crate::page_model::chart_scale as scale;

use plotters::coord::ranged1d::{DefaultFormatting, KeyPointHint};
use plotters::coord::Shift;
use plotters::element::DashedPathElement;
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};
use plotters_canvas::CanvasBackend;
use scale::{HeatmapLayout, Rgb};

/// One sample of the objective curves, taken from a snapshot: `iteration`, `bound` (ELBO, nats),
/// `h` (h(A) = |λ_max|) and `gamma` (γ).
///
/// This is the history's own point type ([`crate::page_model::CurvePoint`], native so that the history
/// is tested natively), re-exported here so that the page passes its history to [`draw_curves`]
/// without copying.
pub use crate::page_model::CurvePoint;

/// The font family of all chart text.
const FONT: &str = "sans-serif";
/// The attribute that remembers the CSS size drawn at (see [`scale::css_size`]).
const CSS_SIZE_ATTR: &str = "data-css-size";
/// The attribute that says where the heatmap's cells are ([`scale::HeatmapGrid`]), for clicks.
const GRID_ATTR: &str = "data-grid";

const INK: RGBColor = RGBColor(0x1d, 0x24, 0x30);
const MUTED: RGBColor = RGBColor(0x5b, 0x66, 0x76);
const LINE: RGBColor = RGBColor(0xd9, 0xde, 0xe6);
const GRID: RGBColor = RGBColor(0xee, 0xf0, 0xf3);
const ACCENT: RGBColor = RGBColor(0x2f, 0x5d, 0x9a);
/// Diagonal cells of the heatmap (a variable is not its own cause).
const DIAGONAL: RGBColor = RGBColor(0xc4, 0xc9, 0xd1);
/// Heatmap cells whose weight is missing or NaN.
const MISSING: RGBColor = RGBColor(0xfd, 0xec, 0xec);

/// The loss curves' layout in CSS pixels: a band for the phase labels on top, then three panels,
/// each a title band over its plot, with the y labels left of the plots and the x labels under
/// the last one.
struct CurveLayout {
    phase_band: f64,
    title_band: f64,
    y_labels: f64,
    right_pad: f64,
    x_labels: f64,
    bottom_pad: f64,
    /// Below this plot height the canvas says it is too small instead of drawing.
    min_plot: f64,
}

const CURVES: CurveLayout = CurveLayout {
    phase_band: 18.0,
    title_band: 18.0,
    y_labels: 64.0,
    right_pad: 24.0,
    x_labels: 38.0,
    bottom_pad: 4.0,
    min_plot: 24.0,
};

impl CurveLayout {
    /// Each panel's plot height on a canvas `css_h` tall, or `None` when it (or the canvas's width
    /// `css_w`) leaves no room to draw: (h − phase band − 3 title bands − x labels − pad) / 3.
    fn plot_height(&self, css_w: f64, css_h: f64) -> Option<f64> {
        let plot_h =
            (css_h - self.phase_band - 3.0 * self.title_band - self.x_labels - self.bottom_pad)
                / 3.0;
        (plot_h >= self.min_plot && css_w >= self.y_labels + self.right_pad + 60.0)
            .then_some(plot_h)
    }

    /// The middle of the three plots, where a note stands while there is nothing to draw.
    fn plots_centre(&self, css_w: f64, plot_h: f64) -> (f64, f64) {
        (
            self.y_labels + (css_w - self.y_labels - self.right_pad) / 2.0,
            self.phase_band + 2.0 * self.title_band + 1.5 * plot_h,
        )
    }
}

type Area = DrawingArea<CanvasBackend, Shift>;

/// A canvas prepared for drawing: its CSS size and the backing pixels per CSS pixel.
struct Surface {
    css_w: f64,
    css_h: f64,
    ratio: f64,
}

impl Surface {
    /// A length in CSS pixels as backing pixels.
    fn px(&self, css: f64) -> i32 {
        (css * self.ratio).round() as i32
    }

    /// A stroke width of `css` CSS pixels, at least one backing pixel.
    fn stroke(&self, css: f64) -> u32 {
        (css * self.ratio).round().max(1.0) as u32
    }

    /// Text of `css` CSS pixels in `colour`.
    fn text(&self, css: f64, colour: &RGBColor) -> TextStyle<'static> {
        (FONT, css * self.ratio).into_font().color(colour)
    }
}

fn rgb(c: Rgb) -> RGBColor {
    RGBColor(c.0, c.1, c.2)
}

fn draw_err<E: std::fmt::Display>(e: E) -> String {
    format!("chart drawing failed: {e}")
}

/// Sizes the canvas's backing store for the screen (CSS size × devicePixelRatio) and opens a
/// plotters drawing area on it, cleared to white.
fn open(canvas: &web_sys::HtmlCanvasElement) -> Result<(Area, Surface), String> {
    let client = (
        u32::try_from(canvas.client_width()).unwrap_or(0),
        u32::try_from(canvas.client_height()).unwrap_or(0),
    );
    let attr = (canvas.width(), canvas.height());
    let recorded = canvas
        .get_attribute(CSS_SIZE_ATTR)
        .and_then(|s| scale::parse_size(&s));
    let css = scale::css_size(client, attr, recorded);
    let device_ratio = web_sys::window().map_or(1.0, |w| w.device_pixel_ratio());
    let ((bw, bh), ratio) = scale::backing_size(css, device_ratio);
    if canvas.width() != bw {
        canvas.set_width(bw);
    }
    if canvas.height() != bh {
        canvas.set_height(bh);
    }
    canvas
        .set_attribute(CSS_SIZE_ATTR, &format!("{}x{}", css.0, css.1))
        .map_err(|e| format!("could not size the canvas: {e:?}"))?;
    let backend = CanvasBackend::with_canvas_object(canvas.clone())
        .ok_or_else(|| "the canvas has no 2D drawing context".to_string())?;
    let root = backend.into_drawing_area();
    root.fill(&WHITE).map_err(draw_err)?;
    let surface = Surface {
        css_w: f64::from(css.0),
        css_h: f64::from(css.1),
        ratio,
    };
    Ok((root, surface))
}

/// Writes `message` in the middle of the canvas.
fn note(root: &Area, surface: &Surface, message: &str) -> Result<(), String> {
    let style = surface
        .text(13.0, &MUTED)
        .pos(Pos::new(HPos::Center, VPos::Center));
    root.draw_text(
        message,
        &style,
        (
            surface.px(surface.css_w / 2.0),
            surface.px(surface.css_h / 2.0),
        ),
    )
    .map_err(draw_err)?;
    root.present().map_err(draw_err)
}

/// Draws the weighted adjacency as a heatmap.
///
/// Row `i` is the cause `names[i]`, column `j` the effect `names[j]`; cell `(i, j)` is coloured by
/// `weights[i][j] ≥ 0`. The colour scale is perceptually ordered: white → #2f5d9a (the app's
/// accent) → #1d2430, interpolated on `t = w / (w + s)` where `s` is the median positive
/// off-diagonal weight (1 if there is none), so that `w = s` is the accent and weights spanning
/// many orders of magnitude stay distinguishable. A colour bar shows ticks at the weights for
/// `t = 0, 0.5, 0.9` (0, `s`, `9s`). Diagonal cells are grey; cells with a missing or NaN weight
/// are pale red. The cells in `edges` (the current graph, `(cause, effect)` indices) get a dark
/// border with a light inner line, visible on light and dark cells alike. Names longer than 12
/// characters are truncated with an ellipsis; column labels are rotated when they do not fit
/// flat; with many variables the names shrink (down to 8 px) so that each row and column keeps
/// its name, and only on a canvas too small even for that is every k-th name written (give the
/// canvas [`scale::heatmap_size_class`]'s size). The canvas's `data-row-labels` and
/// `data-column-labels` attributes say how many names were written. The caption reads
/// "row = cause, column = effect".
///
/// Only the first `min(names.len(), weights.len())` variables are drawn (ragged rows are
/// tolerated); none draws a "no data" note. Errors are the canvas's drawing errors, as text.
pub fn draw_heatmap(
    canvas: &web_sys::HtmlCanvasElement,
    names: &[String],
    weights: &[Vec<f64>],
    edges: &[(usize, usize)],
    kind: scale::HeatmapScale,
) -> Result<(), String> {
    // Until the names are drawn, the canvas names none, and no click finds a cell.
    set_label_counts(canvas, (0, 0))?;
    canvas
        .remove_attribute(GRID_ATTR)
        .map_err(|e| format!("could not mark the canvas: {e:?}"))?;
    let (root, surface) = open(canvas)?;
    let n = names.len().min(weights.len());
    if n == 0 {
        return note(&root, &surface, "no data");
    }
    let labels: Vec<String> = names[..n]
        .iter()
        .map(|name| scale::truncate_label(name, scale::LABEL_CHARS))
        .collect();
    let max_chars = labels.iter().map(|l| l.chars().count()).max().unwrap_or(0);
    let Some(layout) = scale::heatmap_layout(surface.css_w, surface.css_h, n, max_chars) else {
        return note(&root, &surface, "canvas too small");
    };
    let weights = &weights[..n];
    let s = kind.midpoint(weights);

    draw_cells(&root, &surface, &layout, weights, kind, s)?;
    draw_edges(&root, &surface, &layout, n, edges)?;
    let counts = draw_matrix_labels(&root, &surface, &layout, &labels)?;
    draw_colour_bar(&root, &surface, &layout, kind, s)?;
    set_label_counts(canvas, counts)?;
    canvas
        .set_attribute(GRID_ATTR, &layout.grid(n).to_attr())
        .map_err(|e| format!("could not mark the canvas: {e:?}"))?;

    let caption = surface
        .text(scale::FONT_PX, &MUTED)
        .pos(Pos::new(HPos::Left, VPos::Top));
    let grid = n as f64 * layout.cell;
    root.draw_text(
        "row = cause, column = effect",
        &caption,
        (surface.px(layout.left), surface.px(layout.top + grid + 8.0)),
    )
    .map_err(draw_err)?;
    root.present().map_err(draw_err)
}

/// The heatmap cell (row = cause, column = effect) under a click on `canvas`, as last drawn by
/// [`draw_heatmap`]; `None` off the grid or before anything is drawn. The click's offset is taken
/// back to the CSS size the heatmap was drawn at, should the canvas have been resized since.
pub fn heatmap_cell_at(
    canvas: &web_sys::HtmlCanvasElement,
    event: &web_sys::MouseEvent,
) -> Option<(usize, usize)> {
    let grid = scale::HeatmapGrid::parse(&canvas.get_attribute(GRID_ATTR)?)?;
    let drawn = canvas
        .get_attribute(CSS_SIZE_ATTR)
        .and_then(|s| scale::parse_size(&s))?;
    let sx = f64::from(drawn.0) / f64::from(canvas.client_width().max(1));
    let sy = f64::from(drawn.1) / f64::from(canvas.client_height().max(1));
    grid.cell_at(
        f64::from(event.offset_x()) * sx,
        f64::from(event.offset_y()) * sy,
    )
}

/// The backing-pixel rectangle of cell `(i, j)`: upper-left and lower-right corners, with a
/// one-pixel white gap to the next cell when the cells are large enough.
fn cell_rect(
    surface: &Surface,
    layout: &HeatmapLayout,
    i: usize,
    j: usize,
) -> ((i32, i32), (i32, i32)) {
    let x0 = surface.px(layout.left + j as f64 * layout.cell);
    let x1 = surface.px(layout.left + (j + 1) as f64 * layout.cell);
    let y0 = surface.px(layout.top + i as f64 * layout.cell);
    let y1 = surface.px(layout.top + (i + 1) as f64 * layout.cell);
    let gap = if x1 - x0 >= 6 {
        surface.px(1.0).max(1)
    } else {
        0
    };
    ((x0, y0), (x1 - gap, y1 - gap))
}

fn draw_cells(
    root: &Area,
    surface: &Surface,
    layout: &HeatmapLayout,
    weights: &[Vec<f64>],
    kind: scale::HeatmapScale,
    s: f64,
) -> Result<(), String> {
    let n = weights.len();
    for (i, row) in weights.iter().enumerate() {
        for j in 0..n {
            let colour = if i == j {
                DIAGONAL
            } else {
                row.get(j)
                    .and_then(|w| kind.to_t(*w, s).map(scale::colour_at))
                    .map_or(MISSING, rgb)
            };
            let (a, b) = cell_rect(surface, layout, i, j);
            root.draw(&Rectangle::new([a, b], colour.filled()))
                .map_err(draw_err)?;
        }
    }
    Ok(())
}

fn draw_edges(
    root: &Area,
    surface: &Surface,
    layout: &HeatmapLayout,
    n: usize,
    edges: &[(usize, usize)],
) -> Result<(), String> {
    let outer = surface.stroke(2.0);
    let inner = surface.stroke(1.0);
    let o = (outer / 2) as i32;
    let k = outer as i32 + (inner / 2) as i32;
    for &(i, j) in edges.iter().filter(|(i, j)| *i < n && *j < n) {
        let ((x0, y0), (x1, y1)) = cell_rect(surface, layout, i, j);
        if x1 - x0 > 2 * outer as i32 {
            root.draw(&Rectangle::new(
                [(x0 + o, y0 + o), (x1 - o, y1 - o)],
                INK.stroke_width(outer),
            ))
            .map_err(draw_err)?;
        }
        if x1 - x0 > 2 * k + 2 {
            root.draw(&Rectangle::new(
                [(x0 + k, y0 + k), (x1 - k, y1 - k)],
                WHITE.stroke_width(inner),
            ))
            .map_err(draw_err)?;
        }
    }
    Ok(())
}

/// Writes the row and column names and returns how many of each it wrote.
fn draw_matrix_labels(
    root: &Area,
    surface: &Surface,
    layout: &HeatmapLayout,
    labels: &[String],
) -> Result<(usize, usize), String> {
    let text = surface.text(layout.font, &INK);
    let row_style = text.pos(Pos::new(HPos::Right, VPos::Center));
    let col_style = if layout.rotated {
        text.transform(FontTransform::Rotate270)
            .pos(Pos::new(HPos::Left, VPos::Center))
    } else {
        text.pos(Pos::new(HPos::Center, VPos::Bottom))
    };
    let (mut rows, mut columns) = (0, 0);
    for (k, label) in labels.iter().enumerate().step_by(layout.label_step) {
        let centre = (k as f64 + 0.5) * layout.cell;
        root.draw_text(
            label,
            &row_style,
            (
                surface.px(layout.left - 6.0),
                surface.px(layout.top + centre),
            ),
        )
        .map_err(draw_err)?;
        rows += 1;
        root.draw_text(
            label,
            &col_style,
            (
                surface.px(layout.left + centre),
                surface.px(layout.top - 5.0),
            ),
        )
        .map_err(draw_err)?;
        columns += 1;
    }
    Ok((rows, columns))
}

/// Records on the canvas how many row and column names it shows (`data-row-labels`,
/// `data-column-labels`), for tests and for anyone inspecting the page.
fn set_label_counts(
    canvas: &web_sys::HtmlCanvasElement,
    (rows, columns): (usize, usize),
) -> Result<(), String> {
    let set = |name: &str, value: usize| {
        canvas
            .set_attribute(name, &value.to_string())
            .map_err(|e| format!("could not mark the canvas: {e:?}"))
    };
    set("data-row-labels", rows)?;
    set("data-column-labels", columns)
}

fn draw_colour_bar(
    root: &Area,
    surface: &Surface,
    layout: &HeatmapLayout,
    kind: scale::HeatmapScale,
    s: f64,
) -> Result<(), String> {
    const BAR_W: f64 = 12.0;
    let x0 = surface.px(layout.bar_left);
    let x1 = surface.px(layout.bar_left + BAR_W);
    let top = surface.px(layout.top);
    let bottom = surface.px(layout.top + layout.bar_height);
    let height = (bottom - top).max(1);
    // One strip per backing pixel row, at most 256: t = 1 at the top, 0 at the bottom.
    let strips = height.min(256);
    for k in 0..strips {
        let y0 = top + height * k / strips;
        let y1 = top + height * (k + 1) / strips;
        let t = 1.0 - (f64::from(k) + 0.5) / f64::from(strips);
        let colour = rgb(scale::colour_at(t));
        root.draw(&Rectangle::new([(x0, y0), (x1, y1)], colour.filled()))
            .map_err(draw_err)?;
    }
    root.draw(&Rectangle::new(
        [(x0, top), (x1, bottom)],
        LINE.stroke_width(surface.stroke(1.0)),
    ))
    .map_err(draw_err)?;

    let label = surface
        .text(scale::FONT_PX, &MUTED)
        .pos(Pos::new(HPos::Left, VPos::Center));
    let tick_len = surface.px(4.0);
    for &t in kind.ticks() {
        let y = bottom - (f64::from(height) * t).round() as i32;
        root.draw(&PathElement::new(
            vec![(x1, y), (x1 + tick_len, y)],
            MUTED.stroke_width(surface.stroke(1.0)),
        ))
        .map_err(draw_err)?;
        root.draw_text(
            &scale::format_axis_number(kind.value_at(t, s)),
            &label,
            (x1 + tick_len + surface.px(3.0), y),
        )
        .map_err(draw_err)?;
    }
    let title = surface
        .text(scale::FONT_PX, &MUTED)
        .pos(Pos::new(HPos::Left, VPos::Bottom));
    // Clear of the top tick's label, which is centred on the bar's top on the probability scale.
    root.draw_text(kind.title(), &title, (x0, top - surface.px(10.0)))
        .map_err(draw_err)
}

/// A linear f64 axis whose ticks are given (plotters' own `with_key_points` loses the label
/// formatter on f64 axes).
#[derive(Clone)]
struct TickedAxis {
    lo: f64,
    hi: f64,
    ticks: Vec<f64>,
}

impl Ranged for TickedAxis {
    type FormatOption = DefaultFormatting;
    type ValueType = f64;

    fn map(&self, value: &f64, limit: (i32, i32)) -> i32 {
        let span = self.hi - self.lo;
        let u = if span > 0.0 && value.is_finite() {
            ((value - self.lo) / span).clamp(-1.0, 2.0)
        } else {
            0.5
        };
        limit.0 + (f64::from(limit.1 - limit.0) * u).round() as i32
    }

    fn key_points<Hint: KeyPointHint>(&self, hint: Hint) -> Vec<f64> {
        if hint.weight().allow_light_points() {
            // No light grid lines: the ticks are the bold ones.
            Vec::new()
        } else {
            self.ticks.clone()
        }
    }

    fn range(&self) -> std::ops::Range<f64> {
        self.lo..self.hi
    }
}

/// What one panel of the curves shows.
struct Panel {
    title: &'static str,
    /// `(iteration, y)`; a non-finite `y` is a gap.
    values: Vec<(i64, f64)>,
    y_range: (f64, f64),
    ticks: Vec<f64>,
    /// The y tick labels are powers of ten (the values are log10).
    log: bool,
    /// Spacing of linear ticks, for their labels.
    step: f64,
}

/// Draws three stacked panels sharing the x axis (iteration): the bound (ELBO, nats); h(A) =
/// |λ_max| on a log10 scale, values ≤ 1e-8 drawn at 1e-8; and γ. Vertical dashed lines mark
/// `phase_starts` (iteration, label), e.g. `(0, "warm-up")`, `(350, "acyclic")`, labelled at the
/// top; phases outside the plotted iterations are left out.
///
/// Non-finite values are skipped (they break the line); a lone finite point is drawn as a dot.
/// More than 2000 points are downsampled (every k-th plus the last). Empty `points` draws the
/// axes and a "waiting for the first iteration" note. Errors are the canvas's drawing errors, as
/// text.
pub fn draw_curves(
    canvas: &web_sys::HtmlCanvasElement,
    points: &[CurvePoint],
    phase_starts: &[(usize, String)],
) -> Result<(), String> {
    let (root, surface) = open(canvas)?;
    let Some(plot_h) = CURVES.plot_height(surface.css_w, surface.css_h) else {
        return note(&root, &surface, "canvas too small");
    };
    let points = scale::downsample(points, scale::MAX_CURVE_POINTS);
    let iteration = |p: &CurvePoint| i64::try_from(p.iteration).unwrap_or(i64::MAX);
    let (x_lo, x_hi) = match (
        points.iter().map(iteration).min(),
        points.iter().map(iteration).max(),
    ) {
        (Some(lo), Some(hi)) => (lo, hi.max(lo.saturating_add(1))),
        _ => (0, 100),
    };
    // About one tick per 24 CSS pixels, more only when that would leave a single tick.
    let target_ticks = ((plot_h / 24.0).floor() as usize).clamp(3, 8);
    let max_ticks = target_ticks + 2;

    let linear = |title: &'static str, values: Vec<(i64, f64)>| {
        let (lo, hi) = scale::padded_range(values.iter().map(|v| v.1), 0.06);
        let (ticks, step) = scale::nice_ticks(lo, hi, target_ticks, max_ticks);
        Panel {
            title,
            values,
            y_range: (lo, hi),
            ticks,
            log: false,
            step,
        }
    };
    let bound = linear(
        "bound (ELBO, nats)",
        points.iter().map(|p| (iteration(p), p.bound)).collect(),
    );
    let h_values: Vec<(i64, f64)> = points
        .iter()
        .map(|p| (iteration(p), scale::log10_clamped(p.h).unwrap_or(f64::NAN)))
        .collect();
    let (h_lo, h_hi) = scale::decade_range(h_values.iter().map(|v| v.1));
    let h = Panel {
        title: "h(A) = |λ_max| (log scale)",
        ticks: scale::decade_ticks(h_lo, h_hi, target_ticks + 1),
        values: h_values,
        y_range: (h_lo, h_hi),
        log: true,
        step: 1.0,
    };
    let gamma = linear(
        "γ (acyclicity penalty)",
        points.iter().map(|p| (iteration(p), p.gamma)).collect(),
    );

    let band = surface.px(CURVES.phase_band);
    let panel_h = surface.px(CURVES.title_band + plot_h);
    let (_, rest) = root.split_vertically(band);
    let (area_bound, rest) = rest.split_vertically(panel_h);
    let (area_h, area_gamma) = rest.split_vertically(panel_h);

    let phases: Vec<(i64, &str)> = phase_starts
        .iter()
        .map(|(it, label)| (i64::try_from(*it).unwrap_or(i64::MAX), label.as_str()))
        .filter(|(it, _)| (x_lo..=x_hi).contains(it))
        .collect();
    let phase_x = draw_panel(&area_bound, &surface, &bound, (x_lo, x_hi), &phases, false)?;
    draw_panel(&area_h, &surface, &h, (x_lo, x_hi), &phases, false)?;
    draw_panel(&area_gamma, &surface, &gamma, (x_lo, x_hi), &phases, true)?;
    draw_phase_labels(&root, &surface, &phase_x)?;

    if points.is_empty() {
        let style = surface
            .text(13.0, &MUTED)
            .pos(Pos::new(HPos::Center, VPos::Center));
        let (x, y) = CURVES.plots_centre(surface.css_w, plot_h);
        root.draw_text(
            "waiting for the first iteration",
            &style,
            (surface.px(x), surface.px(y)),
        )
        .map_err(draw_err)?;
    }
    root.present().map_err(draw_err)
}

/// Draws one panel of the curves in `area` (title band on top; x labels only when `last`) and
/// returns the backing-pixel x of each phase line with its label.
fn draw_panel<'p>(
    area: &Area,
    surface: &Surface,
    panel: &Panel,
    (x_lo, x_hi): (i64, i64),
    phases: &[(i64, &'p str)],
    last: bool,
) -> Result<Vec<(i32, &'p str)>, String> {
    let (y_lo, y_hi) = panel.y_range;
    let mut builder = ChartBuilder::on(area);
    builder
        .margin_top(surface.px(CURVES.title_band))
        .margin_right(surface.px(CURVES.right_pad))
        .margin_bottom(if last {
            surface.px(CURVES.bottom_pad)
        } else {
            0
        })
        .y_label_area_size(surface.px(CURVES.y_labels))
        .x_label_area_size(if last { surface.px(CURVES.x_labels) } else { 0 });
    let mut chart = builder
        .build_cartesian_2d(
            x_lo..x_hi,
            TickedAxis {
                lo: y_lo,
                hi: y_hi,
                ticks: panel.ticks.clone(),
            },
        )
        .map_err(draw_err)?;

    let step = panel.step;
    let log = panel.log;
    let y_format = move |y: &f64| {
        if log {
            scale::decade_label(*y)
        } else {
            scale::format_tick(*y, step)
        }
    };
    let x_format = |x: &i64| x.to_string();
    let labels = surface.text(scale::FONT_PX, &MUTED);
    let mut mesh = chart.configure_mesh();
    mesh.x_labels(6)
        .x_label_formatter(&x_format)
        .y_label_formatter(&y_format)
        .label_style(labels.clone())
        .axis_style(LINE.stroke_width(surface.stroke(1.0)))
        .bold_line_style(GRID.stroke_width(surface.stroke(1.0)))
        .light_line_style(TRANSPARENT)
        .set_all_tick_mark_size(surface.px(4.0));
    if last {
        mesh.x_desc("iteration").axis_desc_style(labels);
    }
    mesh.draw().map_err(draw_err)?;

    let dash = surface.px(5.0).max(1);
    let gap = surface.px(4.0).max(1);
    let mut phase_x = Vec::with_capacity(phases.len());
    for &(x, label) in phases {
        chart
            .draw_series(std::iter::once(DashedPathElement::new(
                vec![(x, y_lo), (x, y_hi)],
                dash,
                gap,
                MUTED.stroke_width(surface.stroke(1.0)),
            )))
            .map_err(draw_err)?;
        phase_x.push((chart.backend_coord(&(x, y_hi)).0, label));
    }

    let line = ACCENT.stroke_width(surface.stroke(1.5));
    for run in scale::finite_runs(panel.values.iter().copied()) {
        if run.len() == 1 {
            chart
                .draw_series(
                    run.into_iter()
                        .map(|p| Circle::new(p, surface.px(2.0).max(1), ACCENT.filled())),
                )
                .map_err(draw_err)?;
        } else {
            chart
                .draw_series(LineSeries::new(run, line))
                .map_err(draw_err)?;
        }
    }

    let title = surface
        .text(scale::FONT_PX, &INK)
        .pos(Pos::new(HPos::Left, VPos::Center));
    area.draw_text(
        panel.title,
        &title,
        (
            surface.px(CURVES.y_labels),
            surface.px(CURVES.title_band / 2.0),
        ),
    )
    .map_err(draw_err)?;
    Ok(phase_x)
}

/// Writes the phase labels in the band above the panels, next to their lines: right of the line
/// where there is room, else left of it; a label that fits neither way is left out. Later phases
/// are placed first, so the current phase keeps its label when phases crowd together.
fn draw_phase_labels(
    root: &Area,
    surface: &Surface,
    phase_x: &[(i32, &str)],
) -> Result<(), String> {
    const PHASE_FONT_PX: f64 = 11.0;
    let y = surface.px(CURVES.phase_band / 2.0);
    let offset = surface.px(3.0);
    let gap = surface.px(6.0);
    // Right to left; phases on the same pixel in reverse order of starting (the input order).
    let mut sorted: Vec<(usize, i32, &str)> = phase_x
        .iter()
        .enumerate()
        .map(|(k, &(x, label))| (k, x, label))
        .collect();
    sorted.sort_by_key(|&(k, x, _)| std::cmp::Reverse((x, k)));
    // Labels are placed right to left: everything must end before `limit`.
    let mut limit = surface.px(surface.css_w - 2.0);
    for (_, x, label) in sorted {
        let text = scale::truncate_label(label, 20);
        let width = surface.px(text.chars().count() as f64 * PHASE_FONT_PX * 0.6);
        let (anchor, at, start) = if x + offset + width <= limit {
            (HPos::Left, x + offset, x + offset)
        } else if x - offset <= limit && x - offset - width >= 0 {
            (HPos::Right, x - offset, x - offset - width)
        } else {
            continue;
        };
        let style = surface
            .text(PHASE_FONT_PX, &MUTED)
            .pos(Pos::new(anchor, VPos::Center));
        root.draw_text(&text, &style, (at, y)).map_err(draw_err)?;
        limit = start - gap;
    }
    Ok(())
}

/// Draws a variable's fitted conditional: the data (x_p, x_i) as dots, the predictive band
/// between its `lower` and `upper` quantiles, and the predictive mean as a line, with the axes
/// named `x_name` (the parent) and `y_name` (the child). Errors are the canvas's, as text.
pub fn draw_conditional(
    canvas: &web_sys::HtmlCanvasElement,
    curve: &crate::discovery::explain::ConditionalCurve,
    x_name: &str,
    y_name: &str,
) -> Result<(), String> {
    let (root, surface) = open(canvas)?;
    let finite = |v: &f64| v.is_finite();
    let xs = curve
        .points
        .iter()
        .map(|p| p[0])
        .chain(curve.grid.iter().copied())
        .filter(finite);
    let ys = curve
        .points
        .iter()
        .map(|p| p[1])
        .chain(curve.lower.iter().copied())
        .chain(curve.upper.iter().copied())
        .filter(finite);
    let range = |values: &mut dyn Iterator<Item = f64>| {
        let (lo, hi) = values.fold((f64::INFINITY, f64::NEG_INFINITY), |(lo, hi), v| {
            (lo.min(v), hi.max(v))
        });
        if lo.is_finite() && hi > lo {
            let pad = 0.05 * (hi - lo);
            (lo - pad, hi + pad)
        } else {
            (-1.0, 1.0)
        }
    };
    let (x_lo, x_hi) = range(&mut { xs });
    let (y_lo, y_hi) = range(&mut { ys });
    let mut chart = ChartBuilder::on(&root)
        .margin(surface.px(10.0))
        .x_label_area_size(surface.px(34.0))
        .y_label_area_size(surface.px(44.0))
        .build_cartesian_2d(x_lo..x_hi, y_lo..y_hi)
        .map_err(draw_err)?;
    let labels = surface.text(scale::FONT_PX, &MUTED);
    chart
        .configure_mesh()
        // About one x label per 80 CSS px, so a narrow chart's labels do not run together.
        .x_labels((surface.css_w / 80.0).clamp(3.0, 10.0) as usize)
        .x_desc(x_name)
        .y_desc(y_name)
        .label_style(labels.clone())
        .axis_desc_style(labels)
        .axis_style(LINE.stroke_width(surface.stroke(1.0)))
        .bold_line_style(GRID.stroke_width(surface.stroke(1.0)))
        .light_line_style(TRANSPARENT)
        .draw()
        .map_err(draw_err)?;
    let band: Vec<(f64, f64)> = curve
        .grid
        .iter()
        .zip(&curve.upper)
        .map(|(&x, &y)| (x, y))
        .chain(
            curve
                .grid
                .iter()
                .zip(&curve.lower)
                .rev()
                .map(|(&x, &y)| (x, y)),
        )
        .filter(|(x, y)| x.is_finite() && y.is_finite())
        .collect();
    chart
        .draw_series(std::iter::once(Polygon::new(
            band,
            ACCENT.mix(0.18).filled(),
        )))
        .map_err(draw_err)?;
    chart
        .draw_series(
            curve
                .points
                .iter()
                .filter(|p| p[0].is_finite() && p[1].is_finite())
                .map(|p| {
                    Circle::new(
                        (p[0], p[1]),
                        surface.px(1.6).max(1),
                        MUTED.mix(0.55).filled(),
                    )
                }),
        )
        .map_err(draw_err)?;
    chart
        .draw_series(LineSeries::new(
            curve
                .grid
                .iter()
                .zip(&curve.mean)
                .map(|(&x, &y)| (x, y))
                .filter(|(x, y)| x.is_finite() && y.is_finite()),
            ACCENT.stroke_width(surface.stroke(2.0)),
        ))
        .map_err(draw_err)?;
    root.present().map_err(draw_err)
}
