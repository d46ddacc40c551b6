//! Numbers as the page shows them.

/// 4 significant figures in plain notation inside [1e-3, 1e5), scientific outside; trailing zeros
/// trimmed; "–" for a non-finite value.
pub fn format_number(v: f64) -> String {
    if !v.is_finite() {
        return "–".into();
    }
    if v == 0.0 {
        return "0".into();
    }
    if (1e-3..1e5).contains(&v.abs()) {
        let decimals = (3 - v.abs().log10().floor() as i32).clamp(0, 6) as usize;
        let s = format!("{v:.decimals$}");
        if s.contains('.') {
            s.trim_end_matches('0').trim_end_matches('.').to_string()
        } else {
            s
        }
    } else {
        format!("{v:.3e}")
    }
}

/// A probability as the page writes it: "62.1 %", or "3.2e-5" below 0.1 %.
pub fn format_probability(p: f64) -> String {
    if p >= 0.001 {
        format!("{:.1} %", 100.0 * p)
    } else {
        format!("{p:.1e}")
    }
}

/// The Bayes factor e^`nats` to 2 significant figures: "about 20", "about 3.1e6", "about 1/4";
/// "unknown" for a non-finite value. Past e^±700 it says so rather than overflow.
pub fn format_bayes_factor(nats: f64) -> String {
    if !nats.is_finite() {
        return "unknown".into();
    }
    if nats.abs() > 700.0 {
        let direction = if nats > 0.0 { "above" } else { "below" };
        return format!(
            "{direction} e^{}",
            format_number(nats.abs()).trim_start_matches('-')
        );
    }
    let two_figures = |x: f64| {
        if x < 100.0 {
            let text = format!("{x:.1}");
            text.trim_end_matches(".0").to_string()
        } else if x < 1e5 {
            let scale = 10f64.powi(x.log10().floor() as i32 - 1);
            format!("{}", (x / scale).round() * scale)
        } else {
            format!("{x:.1e}")
        }
    };
    if nats >= 0.0 {
        format!("about {}", two_figures(nats.exp()))
    } else {
        format!("about 1/{}", two_figures((-nats).exp()))
    }
}

/// An upper estimate of the time left, e.g. "≤ 45 s left", "≤ 3 min 20 s left", "≤ 2 h 5 min left".
pub fn format_seconds_left(seconds: f64) -> String {
    if !seconds.is_finite() || seconds < 0.0 {
        return "time left unknown".into();
    }
    let s = seconds.ceil() as u64;
    let text = if s < 60 {
        format!("{s} s")
    } else if s < 3600 {
        format!("{} min {} s", s / 60, s % 60)
    } else {
        format!("{} h {} min", s / 3600, (s % 3600) / 60)
    };
    format!("≤ {text} left")
}

/// A byte count in B, kB, MB or GB (powers of 1000, one decimal above bytes).
pub fn format_bytes(bytes: usize) -> String {
    let b = bytes as f64;
    if b < 1e3 {
        format!("{bytes} B")
    } else if b < 1e6 {
        format!("{:.1} kB", b / 1e3)
    } else if b < 1e9 {
        format!("{:.1} MB", b / 1e6)
    } else {
        format!("{:.1} GB", b / 1e9)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_have_four_significant_figures() {
        assert_eq!(format_number(0.0), "0");
        assert_eq!(format_number(1234.5678), "1235");
        assert_eq!(format_number(-12.34567), "-12.35");
        assert_eq!(format_number(0.012345), "0.01235");
        assert_eq!(format_number(2.5), "2.5");
        assert_eq!(format_number(123456.0), "1.235e5");
        assert_eq!(format_number(0.0001234), "1.234e-4");
        assert_eq!(format_number(f64::NAN), "–");
    }

    #[test]
    fn times_and_sizes_read_naturally() {
        assert_eq!(format_seconds_left(0.2), "≤ 1 s left");
        assert_eq!(format_seconds_left(200.0), "≤ 3 min 20 s left");
        assert_eq!(format_seconds_left(7500.0), "≤ 2 h 5 min left");
        assert_eq!(format_seconds_left(f64::INFINITY), "time left unknown");
        assert_eq!(format_bytes(999), "999 B");
        assert_eq!(format_bytes(52_428_800), "52.4 MB");
    }

    #[test]
    fn bayes_factors_read_as_plain_numbers() {
        assert_eq!(format_bayes_factor(0.0), "about 1");
        assert_eq!(format_bayes_factor(3.0), "about 20.1");
        assert_eq!(format_bayes_factor(-(4f64.ln())), "about 1/4");
        assert_eq!(format_bayes_factor(7.0), "about 1100");
        assert_eq!(format_bayes_factor(15.0), "about 3.3e6");
        assert_eq!(format_bayes_factor(800.0), "above e^800");
        assert_eq!(format_bayes_factor(-800.0), "below e^800");
        assert_eq!(format_bayes_factor(f64::NAN), "unknown");
    }

    #[test]
    fn probabilities_read_as_percent_or_small_numbers() {
        assert_eq!(format_probability(0.6213), "62.1 %");
        assert_eq!(format_probability(1.0), "100.0 %");
        assert_eq!(format_probability(0.000032), "3.2e-5");
    }
}
