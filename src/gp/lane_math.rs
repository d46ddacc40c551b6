//! Branch-free `exp` and `ln_1p` that the compiler can vectorise. The kernel's fast path evaluates
//! millions of exponentials per bound evaluation; libm's `exp`/`log1p` are calls the loop cannot
//! be vectorised across, so they cost most of the time. These are written with arithmetic, bit
//! casts and selects only, so a loop over a slice becomes SIMD code (AVX2/AVX-512 natively under
//! `multiversion`, simd128 in the browser when enabled). Both agree with libm to a few units in the
//! last place (tested below over their whole useful range).
//!
//! `exp`: x = n ln 2 + r with n = round(x / ln 2) and |r| ≤ ln 2 / 2 (Cody–Waite: ln 2 split into
//! a high part exact in products with n and a low part), e^r by its Taylor series to degree 13
//! (truncation error below 4e-18 there), and 2^n put into the exponent bits.
//!
//! `ln_1p`: u = 1 + x = 2^e m with m ∈ [√½, √2), f = m − 1 (exact), ln m = 2 atanh(s) with
//! s = f/(2 + f), |s| ≤ 0.1716, by its odd series to s²¹ (truncation error below 5e-18) arranged
//! as f − f²/2 + s(f²/2 + R) so the exact f carries the leading term, plus the rounding error of
//! 1 + x put back as (x − (u − 1))/u.

/// Marks a function for run-time CPU dispatch: besides the baseline build it is compiled for
/// AVX-512 and AVX2 (x86-64) and NEON (aarch64), and the first version the running CPU supports
/// is called (`multiversion`). For the hot loops written with this module's functions.
macro_rules! vectorised {
    ($(#[$meta:meta])* $vis:vis fn $($rest:tt)*) => {
        $(#[$meta])*
        #[multiversion::multiversion(targets(
            "x86_64+avx512f+avx512dq+avx512vl+avx512bw+avx512cd+avx2+fma+avx+sse4.2+sse4.1+ssse3+sse3",
            "x86_64+avx2+fma+avx+sse4.2+sse4.1+ssse3+sse3",
            "aarch64+neon",
        ))]
        $vis fn $($rest)*
    };
}
pub(crate) use vectorised;

/// ln 2 split for Cody–Waite reduction: `LN2_HI` has its low 32 bits zero, so n·LN2_HI is exact
/// for every |n| < 2^20.
const LN2_HI: f64 = f64::from_bits(0x3fe6_2e42_fee0_0000);
const LN2_LO: f64 = 1.908_214_929_270_587_7e-10; // ln 2 − LN2_HI
const LOG2_E: f64 = std::f64::consts::LOG2_E;
/// Adding 1.5·2^52 rounds a float of magnitude below 2^51 to an integer, which then sits in the
/// low mantissa bits (so no float-to-integer conversion is needed: AVX2 has none for f64).
const ROUNDING_SHIFT: f64 = 6_755_399_441_055_744.0;
/// 2^52 as the bits of a float: OR-ing a small integer k into its mantissa gives 2^52 + k.
const TWO_POW_52_BITS: u64 = 0x4330_0000_0000_0000;
const MANTISSA_MASK: u64 = (1 << 52) - 1;
const ONE_BITS: u64 = 0x3ff0_0000_0000_0000;

/// Below this e^x is under 3.1e-308 (the smallest normal float is 2.2e-308): returned as 0.
const EXP_MIN: f64 = -708.0;
/// Above this e^x overflows.
const EXP_MAX: f64 = 709.782_712_893_384;

/// a·b + c, fused (one rounding) when `FMA`: callers pass `true` only where the target has the
/// instruction (otherwise `mul_add` is a slow library call).
#[inline(always)]
fn madd<const FMA: bool>(a: f64, b: f64, c: f64) -> f64 {
    if FMA {
        a.mul_add(b, c)
    } else {
        a * b + c
    }
}

/// e^x to within 2 ulp for x ∈ [−708, 709.78]; 0 below, +∞ above, NaN for NaN (unfused; the
/// kernel loops call [`exp_with`] with their target's choice).
#[cfg(test)]
pub fn exp(x: f64) -> f64 {
    exp_with::<false>(x)
}

/// [`exp`] with the polynomial's multiply-adds fused when `FMA` (same accuracy bound).
#[inline(always)]
pub fn exp_with<const FMA: bool>(x: f64) -> f64 {
    // Clamp so the exponent arithmetic stays in range (clamp keeps a NaN).
    let xc = x.clamp(EXP_MIN, EXP_MAX);
    let shifted = madd::<FMA>(xc, LOG2_E, ROUNDING_SHIFT);
    let n = shifted - ROUNDING_SHIFT;
    let r = madd::<FMA>(-n, LN2_LO, madd::<FMA>(-n, LN2_HI, xc));
    // Taylor series of e^r, Horner form, 1/k! coefficients.
    let mut p = 1.0 / 6_227_020_800.0; // 1/13!
    p = madd::<FMA>(p, r, 1.0 / 479_001_600.0);
    p = madd::<FMA>(p, r, 1.0 / 39_916_800.0);
    p = madd::<FMA>(p, r, 1.0 / 3_628_800.0);
    p = madd::<FMA>(p, r, 1.0 / 362_880.0);
    p = madd::<FMA>(p, r, 1.0 / 40_320.0);
    p = madd::<FMA>(p, r, 1.0 / 5_040.0);
    p = madd::<FMA>(p, r, 1.0 / 720.0);
    p = madd::<FMA>(p, r, 1.0 / 120.0);
    p = madd::<FMA>(p, r, 1.0 / 24.0);
    p = madd::<FMA>(p, r, 1.0 / 6.0);
    p = madd::<FMA>(p, r, 0.5);
    p = madd::<FMA>(p, r, 1.0);
    p = madd::<FMA>(p, r, 1.0);
    // n = shifted's low bits − the shift's. Scaling by 2^(n−1) then 2 keeps the exponent field in
    // range for n = 1024 (x near ln f64::MAX) as well as for n = −1021 (x = −708).
    let n_bits = shifted
        .to_bits()
        .wrapping_sub(ROUNDING_SHIFT.to_bits())
        .wrapping_add(1022);
    let value = p * f64::from_bits(n_bits << 52) * 2.0;
    if x < EXP_MIN {
        0.0
    } else if x > EXP_MAX {
        f64::INFINITY
    } else {
        value
    }
}

/// ln(1 + x) to within 2 ulp for x > −1 (−∞ at −1, NaN below −1 and for NaN, +∞ at +∞)
/// (unfused; the kernel loops call [`ln_1p_with`] with their target's choice).
#[cfg(test)]
pub fn ln_1p(x: f64) -> f64 {
    ln_1p_with::<false>(x)
}

/// [`ln_1p`] with the series' multiply-adds fused when `FMA` (same accuracy bound).
#[cfg(test)]
pub fn ln_1p_with<const FMA: bool>(x: f64) -> f64 {
    ln_1p_and_recip_with::<FMA>(x).0
}

/// (ln(1 + x), 1/(1 + x)): [`ln_1p_with`] and the reciprocal it computes anyway (1 + x rounded,
/// then divided once), for callers that need both (the rational quadratic's value and slope).
#[inline(always)]
pub fn ln_1p_and_recip_with<const FMA: bool>(x: f64) -> (f64, f64) {
    let u = 1.0 + x;
    let recip = 1.0 / u;
    // What rounding 1 + x lost, to first order in the relative error: ln(u + c·u) ≈ ln u + c.
    let correction = (x - (u - 1.0)) * recip;
    let bits = u.to_bits();
    // For u ≥ 2^−1022 (every x > −1 + 2^−53) the sign bit is clear, so bits >> 52 is the biased
    // exponent; turn it into a float without an integer conversion.
    let biased = f64::from_bits(TWO_POW_52_BITS | (bits >> 52)) - f64::from_bits(TWO_POW_52_BITS);
    let m = f64::from_bits((bits & MANTISSA_MASK) | ONE_BITS); // u = 2^(biased − 1023) m, m ∈ [1, 2)
    let high = m > std::f64::consts::SQRT_2;
    let m = if high { 0.5 * m } else { m };
    let e = biased - if high { 1022.0 } else { 1023.0 };
    // ln(1 + f) = 2 atanh(s) with s = f/(2 + f) = f − f²/2 + s(f²/2 + R), R = Σ_{k≥1} 2s^{2k}/(2k+1):
    // f = m − 1 is exact, so the rounding errors fall on the small terms only.
    let f = m - 1.0;
    let s = f / (2.0 + f);
    let s2 = s * s;
    let mut r = 2.0 / 21.0;
    r = madd::<FMA>(r, s2, 2.0 / 19.0);
    r = madd::<FMA>(r, s2, 2.0 / 17.0);
    r = madd::<FMA>(r, s2, 2.0 / 15.0);
    r = madd::<FMA>(r, s2, 2.0 / 13.0);
    r = madd::<FMA>(r, s2, 2.0 / 11.0);
    r = madd::<FMA>(r, s2, 2.0 / 9.0);
    r = madd::<FMA>(r, s2, 2.0 / 7.0);
    r = madd::<FMA>(r, s2, 2.0 / 5.0);
    r = madd::<FMA>(r, s2, 2.0 / 3.0);
    r *= s2;
    let half_f2 = 0.5 * f * f;
    let value = e * LN2_HI - ((half_f2 - (s * (half_f2 + r) + (e * LN2_LO + correction))) - f);
    let value = if x == f64::INFINITY {
        f64::INFINITY
    } else if x == -1.0 {
        f64::NEG_INFINITY
    } else if x < -1.0 {
        f64::NAN
    } else {
        value
    };
    (value, recip)
}

/// Lanes of the manual reductions: 8 f64 are one AVX-512 register or two AVX2 ones.
pub const LANES: usize = 8;

/// The sum of 8 lane accumulators in a fixed order (a pairwise tree): the same order for every
/// target and thread count.
#[inline(always)]
pub fn lane_total(a: &[f64; LANES]) -> f64 {
    ((a[0] + a[4]) + (a[1] + a[5])) + ((a[2] + a[6]) + (a[3] + a[7]))
}

/// Σ_i f(i) over `0..len`, accumulated in 8 independent lanes (then summed in a fixed order), so
/// the loop vectorises: a plain running sum is a dependency chain the compiler must keep in order.
/// The result is a fixed function of the inputs (no dependence on threads or targets).
#[inline(always)]
pub fn lane_sum(len: usize, mut f: impl FnMut(usize) -> f64) -> f64 {
    let mut acc = [0.0; LANES];
    let full = len - len % LANES;
    let mut i = 0;
    while i < full {
        for (l, a) in acc.iter_mut().enumerate() {
            *a += f(i + l);
        }
        i += LANES;
    }
    for (l, a) in acc.iter_mut().enumerate().take(len - full) {
        *a += f(full + l);
    }
    lane_total(&acc)
}

/// Σ_i a_i b_i over the shorter of the two, in 8 lanes then [`lane_total`] (a fixed order), as
/// straight-line code the compiler vectorises.
#[inline(always)]
pub fn lane_dot(a: &[f64], b: &[f64]) -> f64 {
    let mut acc = [0.0; LANES];
    let (a_chunks, b_chunks) = (a.chunks_exact(LANES), b.chunks_exact(LANES));
    let (a_rest, b_rest) = (a_chunks.remainder(), b_chunks.remainder());
    for (x, y) in a_chunks.zip(b_chunks) {
        for l in 0..LANES {
            acc[l] += x[l] * y[l];
        }
    }
    for (l, (x, y)) in a_rest.iter().zip(b_rest).enumerate() {
        acc[l] += x * y;
    }
    lane_total(&acc)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Distance in units in the last place of the reference (0 for equal values).
    fn ulps(a: f64, reference: f64) -> f64 {
        if a == reference {
            return 0.0;
        }
        let spacing = f64::from_bits(reference.abs().to_bits() + 1) - reference.abs();
        (a - reference).abs() / spacing
    }

    fn grid(lo: f64, hi: f64, count: usize) -> impl Iterator<Item = f64> {
        (0..=count).map(move |k| lo + (hi - lo) * k as f64 / count as f64)
    }

    type Variant = (fn(f64) -> f64, &'static str);
    const EXPS: [Variant; 2] = [(exp, "plain"), (exp_with::<true>, "fused")];
    const LN_1PS: [Variant; 2] = [(ln_1p, "plain"), (ln_1p_with::<true>, "fused")];

    #[test]
    fn exp_is_within_two_ulp_of_libm_over_its_range() {
        for (f, name) in EXPS {
            let mut worst: f64 = 0.0;
            let points = grid(-708.0, 709.7, 400_000)
                .chain(grid(-1.0, 1.0, 100_000))
                .chain(grid(-1e-6, 1e-6, 1_000))
                .chain([0.0, -0.0, 1e-300, -1e-300, 0.5 * std::f64::consts::LN_2]);
            for x in points {
                let u = ulps(f(x), x.exp());
                worst = worst.max(u);
                assert!(u <= 2.0, "{name} exp({x}) = {} vs libm {}", f(x), x.exp());
            }
            assert!(worst > 0.0, "the grid should meet some rounding difference");
        }
    }

    #[test]
    fn exp_saturates_and_propagates_nan() {
        for (f, _) in EXPS {
            assert_eq!(f(-709.0), 0.0);
            assert_eq!(f(-1e300), 0.0);
            assert_eq!(f(f64::NEG_INFINITY), 0.0);
            assert_eq!(f(710.0), f64::INFINITY);
            assert_eq!(f(f64::INFINITY), f64::INFINITY);
            assert!(f(f64::NAN).is_nan());
            assert_eq!(f(0.0), 1.0);
        }
    }

    #[test]
    fn ln_1p_is_within_two_ulp_of_libm_over_its_range() {
        for (f, name) in LN_1PS {
            let points = grid(0.0, 10.0, 200_000)
                .chain(grid(-0.999, 0.999, 100_000))
                .chain((-300..300).map(|k| 10f64.powf(k as f64 / 2.0)))
                .chain((1..300).map(|k| -(10f64.powf(-(k as f64) / 10.0))))
                .chain([0.0, -0.0, 1e-300, f64::MAX, std::f64::consts::SQRT_2 - 1.0]);
            for x in points {
                let u = ulps(f(x), x.ln_1p());
                assert!(
                    u <= 2.0,
                    "{name} ln_1p({x}) = {} vs libm {}",
                    f(x),
                    x.ln_1p()
                );
            }
        }
    }

    #[test]
    fn the_reciprocal_beside_ln_1p_is_the_correctly_rounded_one_over_one_plus_x() {
        for x in grid(-0.999, 50.0, 20_000).chain([0.0, 1e-300, 1e300, f64::INFINITY]) {
            let (l, recip) = ln_1p_and_recip_with::<true>(x);
            assert_eq!(recip, 1.0 / (1.0 + x), "1/(1 + {x})");
            assert_eq!(l, ln_1p_with::<true>(x));
        }
    }

    #[test]
    fn ln_1p_edges() {
        for (f, _) in LN_1PS {
            assert_eq!(f(-1.0), f64::NEG_INFINITY);
            assert!(f(-1.5).is_nan());
            assert!(f(f64::NAN).is_nan());
            assert_eq!(f(f64::INFINITY), f64::INFINITY);
            assert_eq!(f(0.0), 0.0);
        }
    }

    #[test]
    fn lane_dot_equals_the_plain_dot_for_every_remainder() {
        for len in 0..40 {
            // Small integers: exact in any order.
            let a: Vec<f64> = (0..len).map(|i| (i % 5) as f64 - 2.0).collect();
            let b: Vec<f64> = (0..len).map(|i| (i * 3 % 7) as f64).collect();
            let plain: f64 = a.iter().zip(&b).map(|(x, y)| x * y).sum();
            assert_eq!(lane_dot(&a, &b), plain, "length {len}");
        }
    }

    #[test]
    fn lane_sum_equals_the_plain_sum_for_every_remainder() {
        for len in 0..40 {
            let f = |i: usize| (i as f64 + 1.0).powi(2); // integers: exact in any order
            let plain: f64 = (0..len).map(f).sum();
            assert_eq!(lane_sum(len, f), plain, "length {len}");
        }
    }
}
