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
