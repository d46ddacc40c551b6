//! Tests of the GP-CDE kernel (src/gp/kernel): closed-form values against hand-computed numbers,
//! structural properties of the dense matrices, the mask, the r = 0 branch, the flat parameter
//! order, and every gradient against central finite differences.

use nalgebra::{Cholesky, DMatrix, DVector};
use occam::gp::kernel::{
    unit_dvalue_dalpha, unit_dvalue_dr2, unit_value, Kernel, StationaryKind, StationaryPart,
};
use occam::gp::params::{ParamBlock, ParamStore};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

use StationaryKind::{Matern12, Matern32, RationalQuadratic, SquaredExponential};

const KINDS: [StationaryKind; 4] = StationaryKind::ALL;

fn close(x: f64, y: f64, tol: f64) -> bool {
    (x - y).abs() <= tol * x.abs().max(y.abs()).max(1e-300)
}

// ---------------------------------------------------------------------------------------------
// Values
// ---------------------------------------------------------------------------------------------

#[test]
fn unit_values_match_hand_computed_numbers() {
    let cases = [
        // (kind, r², a, value)
        (SquaredExponential, 0.0, 1.0, 1.0),
        (SquaredExponential, 1.0, 1.0, 0.6065306597126334), // e^{-1/2}
        (SquaredExponential, 4.0, 1.0, 0.1353352832366127), // e^{-2}
        (Matern12, 0.0, 1.0, 1.0),
        (Matern12, 0.25, 1.0, 0.6065306597126334), // r = 1/2: e^{-1/2}
        (Matern12, 1.0, 1.0, 0.36787944117144233), // e^{-1}
        (Matern12, 4.0, 1.0, 0.1353352832366127),  // r = 2: e^{-2}
        (Matern32, 0.0, 1.0, 1.0),
        (Matern32, 1.0, 1.0, 0.4833577245965077), // (1 + √3) e^{-√3}
        (Matern32, 4.0, 1.0, 0.13973135019231467), // (1 + 2√3) e^{-2√3}
        (RationalQuadratic, 0.0, 2.0, 1.0),
        (RationalQuadratic, 1.0, 2.0, 0.64), // (1 + 1/4)^{-2}
        (RationalQuadratic, 2.0, 0.5, 0.5773502691896257), // 3^{-1/2}
        (RationalQuadratic, 2.0, 1.0, 0.5),  // (1 + 1)^{-1}
    ];
    for (kind, r2, a, want) in cases {
        let got = unit_value(kind, r2, a);
        assert!(
            close(got, want, 1e-14),
            "{kind:?} r²={r2} a={a}: {got} vs {want}"
        );
    }
    // Exactly 1 at coincidence, for every kind (the diagonal is Σ s exactly).
    for kind in KINDS {
        assert_eq!(unit_value(kind, 0.0, 0.7), 1.0);
    }
}

#[test]
fn unit_derivatives_match_hand_computed_numbers_and_branch() {
    let cases = [
        (SquaredExponential, 1.0, 1.0, -0.3032653298563167), // −e^{-1/2}/2
        (Matern12, 4.0, 1.0, -0.033833820809153176),         // −e^{-2}/(2·2)
        (Matern32, 1.0, 1.0, -0.26538180947664636),          // −(3/2) e^{-√3}
        (RationalQuadratic, 1.0, 2.0, -0.256),               // −(1/2)(5/4)^{-3}
    ];
    for (kind, r2, a, want) in cases {
        let got = unit_dvalue_dr2(kind, r2, a);
        assert!(close(got, want, 1e-14), "{kind:?}: {got} vs {want}");
    }
    // ∂κ_rq/∂a at r² = 1, a = 2: (5/4)^{-2} (1/5 − ln(5/4)).
    assert!(close(
        unit_dvalue_dalpha(1.0, 2.0),
        -0.014811872841094243,
        1e-13
    ));
    // Branch: exactly 0 (not NaN, not huge) at r² = 0 and for round-off negatives.
    for kind in KINDS {
        assert_eq!(unit_dvalue_dr2(kind, 0.0, 1.3), 0.0);
        assert_eq!(unit_dvalue_dr2(kind, -1e-17, 1.3), 0.0);
        assert_eq!(unit_value(kind, -1e-17, 1.3), 1.0);
        assert!(unit_value(kind, f64::NAN, 1.3).is_nan());
    }
    assert_eq!(unit_dvalue_dalpha(0.0, 1.3), 0.0);
    // Derivatives against central differences in r² and a, away from 0.
    for kind in KINDS {
        for r2 in [0.01, 0.3, 1.7, 6.0] {
            let h = 1e-6;
            let fd = (unit_value(kind, r2 + h, 1.7) - unit_value(kind, r2 - h, 1.7)) / (2.0 * h);
            let an = unit_dvalue_dr2(kind, r2, 1.7);
            assert!(
                (fd - an).abs() <= 1e-6 * fd.abs().max(1.0),
                "{kind:?} r²={r2}"
            );
            if kind == RationalQuadratic {
                let fd =
                    (unit_value(kind, r2, 1.7 + h) - unit_value(kind, r2, 1.7 - h)) / (2.0 * h);
                let an = unit_dvalue_dalpha(r2, 1.7);
                assert!((fd - an).abs() <= 1e-6 * fd.abs().max(1.0), "∂/∂a r²={r2}");
            }
        }
    }
}

/// A small kernel with every part and distinct numbers, for hand computation.
fn hand_kernel() -> Kernel {
    let part = |kind, variance, precision: [f64; 2]| {
        StationaryPart::new(kind, variance, precision.to_vec(), 2.0)
    };
    Kernel {
        linear: Some(vec![0.5, 0.25]),
        stationary: vec![
            part(SquaredExponential, 2.0, [1.0, 0.5]),
            part(Matern12, 1.5, [0.5, 1.0]),
            part(Matern32, 1.0, [1.0, 1.0]),
            part(RationalQuadratic, 0.5, [2.0, 0.0]),
        ],
        mask: vec![1.0, 1.0],
    }
}

#[test]
fn full_kernel_value_and_diagonal_match_hand_computation() {
    let k = hand_kernel();
    let a = DMatrix::from_row_slice(1, 2, &[1.0, 2.0]);
    let b = DMatrix::from_row_slice(1, 2, &[0.0, -1.0]);
    // Δ = (1, 3). lin = 0.5·1·0 + 0.25·2·(−1) = −0.5
    // se:  r² = 1² + (0.5·3)² = 3.25           → 2 e^{−1.625}
    // m12: r² = 0.5² + 3² = 9.25               → 1.5 e^{−√9.25}
    // m32: r² = 1 + 9 = 10                     → (1 + √30) e^{−√30}
    // rq:  r² = (2·1)² + 0 = 4, a = 2          → 0.5 (1 + 4/4)^{−2} = 0.125
    // total = 0.11755736230812704
    let kab = k.cross(&a, &b);
    assert_eq!(kab.shape(), (1, 1));
    assert!(
        close(kab[(0, 0)], 0.11755736230812704, 1e-14),
        "{}",
        kab[(0, 0)]
    );
    // Diagonal at a: 0.5·1 + 0.25·4 + (2 + 1.5 + 1 + 0.5) = 6.5, exactly.
    assert_eq!(k.diag(&a)[0], 6.5);
    assert_eq!(k.gram(&a)[(0, 0)], 6.5);
    assert_eq!(k.cross(&a, &a)[(0, 0)], 6.5);
    // Symmetry of the cross form in its arguments.
    assert!(close(k.cross(&b, &a)[(0, 0)], kab[(0, 0)], 1e-15));
}

#[test]
fn rational_quadratic_tends_to_squared_exponential() {
    for r2 in [0.0, 0.5, 1.0, 4.0, 9.0] {
        let se = unit_value(SquaredExponential, r2, 1.0);
        // (1 + r²/(2a))^{−a} = e^{−r²/2} (1 + r⁴/(8a) + O(a^{−2})): the gap shrinks like 1/a.
        let gap = |a: f64| (unit_value(RationalQuadratic, r2, a) - se).abs();
        let bound = r2 * r2 / 8.0 * se * 1.01;
        assert!(gap(1e4) <= bound / 1e4 + 1e-15, "r²={r2}: {}", gap(1e4));
        assert!(gap(1e9) <= bound / 1e9 + 1e-15, "r²={r2}: {}", gap(1e9));
    }
}

fn full_kernel(rng: &mut ChaCha8Rng, d: usize) -> Kernel {
    let mut prec = || {
        (0..d)
            .map(|_| rng.random_range(0.5..2.0))
            .collect::<Vec<_>>()
    };
    let precisions = [prec(), prec(), prec(), prec()];
    let mut k = Kernel::cgp_cde(d, 0.25, 1.0, precisions, rng.random_range(0.5..3.0));
    for (i, part) in k.stationary.iter_mut().enumerate() {
        part.variance = 0.5 + 0.4 * i as f64;
    }
    k
}

fn random_points(rng: &mut ChaCha8Rng, n: usize, d: usize) -> DMatrix<f64> {
    DMatrix::from_fn(n, d, |_, _| rng.random_range(-3.0..3.0))
}

#[test]
fn gram_is_exactly_symmetric_matches_cross_and_is_psd() {
    let mut rng = ChaCha8Rng::seed_from_u64(11);
    for d in [1, 3, 5] {
        let full = full_kernel(&mut rng, d);
        let mut kernels = vec![full.clone()];
        for part in &full.stationary {
            kernels.push(Kernel {
                linear: None,
                stationary: vec![part.clone()],
                ..full.clone()
            });
        }
        kernels.push(Kernel {
            stationary: vec![],
            ..full.clone()
        });
        for k in &kernels {
            let a = random_points(&mut rng, 30, d);
            let g = k.gram(&a);
            let c = k.cross(&a, &a);
            let scale = g.amax();
            assert_eq!(g, g.transpose(), "gram not exactly symmetric");
            assert_eq!(g.diagonal(), k.diag(&a), "gram diagonal differs from diag");
            for p in 0..30 {
                for q in p..30 {
                    assert_eq!(g[(p, q)], c[(p, q)], "upper triangle differs from cross");
                }
            }
            assert!((&g - &c).amax() <= 1e-14 * scale);
            let jittered = &g + DMatrix::identity(30, 30) * 1e-10;
            assert!(
                Cholesky::new(jittered).is_some(),
                "gram not PSD for {:?}",
                k.stationary
            );
        }
    }
}

#[test]
fn masked_dimension_changes_no_value_or_gradient() {
    let mut rng = ChaCha8Rng::seed_from_u64(5);
    let mut k = full_kernel(&mut rng, 3);
    k.mask = vec![1.0, 0.0, 1.0];
    let a = random_points(&mut rng, 6, 3);
    let b = random_points(&mut rng, 4, 3);
    let dk = random_points(&mut rng, 6, 4);
    let (mut a2, mut b2) = (a.clone(), b.clone());
    a2.column_mut(1).fill(f64::NAN); // not even 0 × NaN may reach a value
    b2.column_mut(1).fill(1e3);
    assert_eq!(k.cross(&a, &b), k.cross(&a2, &b2));
    assert_eq!(k.gram(&b), k.gram(&b2));
    assert_eq!(k.diag(&a), k.diag(&a2));
    let (g1, da1, db1) = k.cross_backward(&a, &b, &dk);
    let (g2, da2, db2) = k.cross_backward(&a2, &b2, &dk);
    assert_eq!(g1, g2);
    assert_eq!((&da1, &db1), (&da2, &db2));
    assert!(da1
        .column(1)
        .iter()
        .chain(db1.column(1).iter())
        .all(|&x| x == 0.0));
    assert_eq!(g1.linear.as_ref().unwrap()[1], 0.0);
    assert!(g1.stationary.iter().all(|p| p.precision[1] == 0.0));
    // Changing the masked parameter itself changes nothing either.
    let mut k2 = k.clone();
    k2.linear.as_mut().unwrap()[1] = 7.0;
    k2.stationary.iter_mut().for_each(|p| p.precision[1] = 9.0);
    assert_eq!(k.cross(&a, &b), k2.cross(&a, &b));
}

#[test]
fn coincident_points_give_exactly_zero_distance_gradients() {
    let mut rng = ChaCha8Rng::seed_from_u64(9);
    let k = full_kernel(&mut rng, 3);
    for part in &k.stationary {
        let kk = Kernel {
            linear: None,
            stationary: vec![part.clone()],
            ..k.clone()
        };
        let x = random_points(&mut rng, 1, 3);
        let dk = DMatrix::from_element(1, 1, 1.7);
        let (g, da, db) = kk.cross_backward(&x, &x, &dk);
        assert!(
            da.iter().chain(db.iter()).all(|&v| v == 0.0),
            "{:?}: {da} {db}",
            part.kind
        );
        assert!(
            g.stationary[0].precision.iter().all(|&v| v == 0.0),
            "{:?}",
            part.kind
        );
        assert_eq!(g.stationary[0].variance, 1.7);
        assert_eq!(g.stationary[0].alpha.unwrap_or(0.0), 0.0);
        // Duplicated rows in a Gram matrix: every pair coincides.
        let a = DMatrix::from_fn(3, 3, |_, j| x[(0, j)]);
        let (g, da) = kk.gram_backward(&a, &random_points(&mut rng, 3, 3));
        assert!(da.iter().all(|&v| v == 0.0), "{:?}: {da}", part.kind);
        assert!(g.stationary[0].precision.iter().all(|&v| v == 0.0));
        // Coincident in the active dimensions only (dimension 0 masked).
        let mut km = kk.clone();
        km.mask[0] = 0.0;
        let mut y = x.clone();
        y[(0, 0)] += 1.0;
        let (g, da, db) = km.cross_backward(&x, &y, &dk);
        assert!(
            da.iter().chain(db.iter()).all(|&v| v == 0.0),
            "{:?}",
            part.kind
        );
        assert!(g.stationary[0].precision.iter().all(|&v| v == 0.0));
    }
}

// ---------------------------------------------------------------------------------------------
// Parameter order, constructors
// ---------------------------------------------------------------------------------------------

#[test]
fn flat_parameter_order_round_trips() {
    let k = hand_kernel();
    // linear[0..2], then (s, θ[0..2]) per part in order, then a.
    let want = [
        0.5, 0.25, 2.0, 1.0, 0.5, 1.5, 0.5, 1.0, 1.0, 1.0, 1.0, 0.5, 2.0, 0.0, 2.0,
    ];
    assert_eq!(k.params_to_vec(), want);
    assert_eq!(k.param_count(), want.len());
    let mut k2 = k.clone();
    let shifted: Vec<f64> = want.iter().map(|x| x + 1.0).collect();
    k2.set_params_from_slice(&shifted);
    assert_eq!(k2.params_to_vec(), shifted);
    assert_eq!(k2.rq_alpha(), Some(3.0));
    assert_eq!(k2.stationary[1].precision, vec![1.5, 2.0]);
    let g = k.new_zeroed_grad();
    assert_eq!(g.to_vec().len(), k.param_count());
    // No RQ part, no linear part: no a, no θ^lin.
    let se = Kernel {
        linear: None,
        ..Kernel::se_plus_linear(vec![0.1, 0.2], 1.5, vec![3.0, 4.0])
    };
    assert_eq!(se.params_to_vec(), [1.5, 3.0, 4.0]);
    assert_eq!(se.new_zeroed_grad().to_vec().len(), 3);
    let json = serde_json::to_string(&k).unwrap();
    assert_eq!(serde_json::from_str::<Kernel>(&json).unwrap(), k);
}

/// The kernel's declared blocks cover `params_to_vec` exactly: each block's slice is that
/// parameter, input j's entries are θ^lin_j and every θ^c_j, and a belongs to the RQ part.
#[test]
fn declared_blocks_match_the_flat_order() {
    let k = hand_kernel();
    let mut store = ParamStore::new();
    let blocks = k.declare_params(&mut store, "k.");
    let flat = k.params_to_vec();
    assert_eq!(store.len(), flat.len());
    assert_eq!(blocks.all.range(), 0..flat.len());
    assert_eq!(
        &flat[blocks.linear.unwrap().range()],
        &k.linear.clone().unwrap()[..]
    );
    assert_eq!(blocks.parts.len(), k.stationary.len());
    for (part, handles) in k.stationary.iter().zip(&blocks.parts) {
        assert_eq!(flat[handles.variance.range()], [part.variance]);
        assert_eq!(&flat[handles.precision.range()], &part.precision[..]);
        assert_eq!(handles.alpha.is_some(), part.alpha.is_some());
    }
    let last = blocks.parts.last().unwrap();
    assert_eq!(flat[last.alpha.unwrap().range()], [2.0]);
    // The names stay for messages: the block at each handle is named after its part's kind.
    let name_at = |handle: ParamBlock| -> &str {
        let block = store.blocks().iter().find(|b| b.range() == handle.range());
        &block
            .unwrap_or_else(|| panic!("no block at {:?}", handle.range()))
            .name
    };
    assert_eq!(name_at(blocks.linear.unwrap()), "k.linear");
    for (part, handles) in k.stationary.iter().zip(&blocks.parts) {
        let kind: &str = part.kind.into();
        assert_eq!(name_at(handles.variance), format!("k.{kind}.variance"));
        assert_eq!(name_at(handles.precision), format!("k.{kind}.precision"));
        if let Some(alpha) = handles.alpha {
            assert_eq!(name_at(alpha), format!("k.{kind}.alpha"));
        }
    }
    assert_eq!(name_at(last.alpha.unwrap()), "k.rational_quadratic.alpha");
    for j in 0..k.dim() {
        let on: Vec<f64> = store.input_indices(j).iter().map(|&i| flat[i]).collect();
        let mut want = vec![k.linear.as_ref().unwrap()[j]];
        want.extend(k.stationary.iter().map(|p| p.precision[j]));
        assert_eq!(on, want, "input {j}");
    }
    // Values round-trip through the store's transforms (all positive, no floor; a 0, as the
    // hand kernel's last precision, comes back as the smallest normal number).
    let raw = store.pack(&flat);
    let back = store.unpack(&raw);
    for (a, b) in flat.iter().zip(back) {
        assert!((a - b).abs() <= 1e-12 * a.abs() + 1e-300, "{a} vs {b}");
    }
}

#[test]
fn constructors_build_the_documented_kernels() {
    let k = Kernel::cgp_cde(
        3,
        0.25,
        1.0,
        [vec![0.1; 3], vec![0.2; 3], vec![0.3; 3], vec![0.4; 3]],
        5.0,
    );
    assert_eq!(k.dim(), 3);
    assert_eq!(k.linear, Some(vec![0.25; 3]));
    let kinds: Vec<_> = k.stationary.iter().map(|p| p.kind).collect();
    assert_eq!(kinds, KINDS);
    assert_eq!(k.stationary[2].precision, vec![0.3; 3]);
    assert!(k.stationary.iter().all(|p| p.variance == 1.0));
    assert_eq!((k.rq_alpha(), k.mask.clone()), (Some(5.0), vec![1.0; 3]));
    assert_eq!(k.param_count(), 3 + 4 * 4 + 1);
    let s = Kernel::se_plus_linear(vec![0.5, 0.5], 2.0, vec![1.0, 3.0]);
    assert_eq!(s.stationary.len(), 1);
    assert_eq!(s.stationary[0].kind, SquaredExponential);
    assert_eq!(s.param_count(), 2 + 3);
}

#[test]
fn gradients_accumulate_with_add_assign() {
    let mut rng = ChaCha8Rng::seed_from_u64(3);
    let k = full_kernel(&mut rng, 2);
    let a = random_points(&mut rng, 4, 2);
    let (g1, _) = k.gram_backward(&a, &random_points(&mut rng, 4, 4));
    let (g2, _) = k.diag_backward(&a, &DVector::from_element(4, 0.3));
    let mut sum = g1.clone();
    sum.add_assign(&g2);
    let want: Vec<f64> = g1
        .to_vec()
        .iter()
        .zip(g2.to_vec())
        .map(|(x, y)| x + y)
        .collect();
    assert_eq!(sum.to_vec(), want);
}

// ---------------------------------------------------------------------------------------------
// Finite differences
// ---------------------------------------------------------------------------------------------

/// The documented acceptance rule: |fd − an| ≤ 1e-6 · max(1, |fd|, |an|).
fn assert_fd(what: &str, fd: f64, an: f64) {
    let tol = 1e-6 * 1f64.max(fd.abs()).max(an.abs());
    assert!(
        (fd - an).abs() <= tol,
        "{what}: finite difference {fd} vs analytic {an}"
    );
}

/// Central difference step: small enough that M12's curvature near the closest pair (r ≥ 0.05)
/// stays below the tolerance, large enough that round-off (~1e-16·|L|/h) does too.
const H: f64 = 1e-6;

#[derive(Clone, Copy, Debug)]
enum Parts {
    LinearOnly,
    Only(StationaryKind),
    Full,
}

fn config_kernel(rng: &mut ChaCha8Rng, d: usize, parts: Parts, masked: bool) -> Kernel {
    let mut k = full_kernel(rng, d);
    k.linear = Some((0..d).map(|_| rng.random_range(0.2..1.0)).collect());
    match parts {
        Parts::LinearOnly => k.stationary.clear(),
        Parts::Only(kind) => {
            k.linear = None;
            k.stationary.retain(|p| p.kind == kind);
        }
        Parts::Full => {}
    }
    if masked {
        // Mask about half the dimensions, always at least one (all of them when D = 1).
        k.mask = (0..d)
            .map(|_| if rng.random_bool(0.5) { 0.0 } else { 1.0 })
            .collect();
        let j = rng.random_range(0..d);
        k.mask[j] = 0.0;
    }
    k
}

/// Points whose pairwise distance over the active dimensions is ≥ 0.1, so that no pair comes near
/// Matérn-1/2's kink at r = 0.
fn separated_points(rng: &mut ChaCha8Rng, counts: &[usize], mask: &[f64]) -> Vec<DMatrix<f64>> {
    let d = mask.len();
    let mut all: Vec<Vec<f64>> = Vec::new();
    let active_gap = |x: &[f64], y: &[f64]| -> f64 {
        (0..d)
            .filter(|&j| mask[j] != 0.0)
            .map(|j| (x[j] - y[j]).powi(2))
            .sum()
    };
    let any_active = mask.iter().any(|&e| e != 0.0);
    let mut out = Vec::new();
    for &n in counts {
        let mut rows = Vec::new();
        while rows.len() < n {
            let x: Vec<f64> = (0..d).map(|_| rng.random_range(-3.0..3.0)).collect();
            if !any_active || all.iter().all(|y| active_gap(&x, y) >= 0.01) {
                all.push(x.clone());
                rows.push(x);
            }
        }
        out.push(DMatrix::from_fn(n, d, |p, j| rows[p][j]));
    }
    out
}

fn weighted_sum(w: &DMatrix<f64>, k: &DMatrix<f64>) -> f64 {
    w.component_mul(k).sum()
}

/// Central differences of `f` in every entry of `x`, against `an`.
fn check_inputs(what: &str, x: &DMatrix<f64>, an: &DMatrix<f64>, f: impl Fn(&DMatrix<f64>) -> f64) {
    for idx in 0..x.len() {
        let (mut xp, mut xm) = (x.clone(), x.clone());
        xp[idx] += H;
        xm[idx] -= H;
        let fd = (f(&xp) - f(&xm)) / (2.0 * H);
        assert_fd(
            &format!("{what} entry {:?}", (idx % x.nrows(), idx / x.nrows())),
            fd,
            an[idx],
        );
    }
}

/// Central differences of `f` in every flat hyperparameter, against the flat gradient; masked
/// parameters must have an exactly zero gradient.
fn check_params(what: &str, k: &Kernel, an: &[f64], f: impl Fn(&Kernel) -> f64) {
    let p = k.params_to_vec();
    assert_eq!(an.len(), p.len(), "{what}: gradient length");
    let d = k.dim();
    let mut masked = vec![false; p.len()];
    let mut off = 0;
    if k.linear.is_some() {
        (0..d).for_each(|j| masked[j] = k.mask[j] == 0.0);
        off = d;
    }
    for _ in &k.stationary {
        (0..d).for_each(|j| masked[off + 1 + j] = k.mask[j] == 0.0);
        off += 1 + d;
    }
    let mut kk = k.clone();
    for i in 0..p.len() {
        let mut q = p.clone();
        q[i] = p[i] + H;
        kk.set_params_from_slice(&q);
        let lp = f(&kk);
        q[i] = p[i] - H;
        kk.set_params_from_slice(&q);
        let lm = f(&kk);
        assert_fd(
            &format!("{what} parameter {i}"),
            (lp - lm) / (2.0 * H),
            an[i],
        );
        if masked[i] {
            assert_eq!(an[i], 0.0, "{what}: masked parameter {i}");
        }
    }
}

fn check_masked_columns(what: &str, mask: &[f64], da: &DMatrix<f64>) {
    for (j, &e) in mask.iter().enumerate() {
        if e == 0.0 {
            assert!(
                da.column(j).iter().all(|&v| v == 0.0),
                "{what}: masked input column {j}"
            );
        }
    }
}

#[test]
fn gradients_match_finite_differences() {
    let mut rng = ChaCha8Rng::seed_from_u64(2024);
    let parts = [
        Parts::LinearOnly,
        Parts::Only(SquaredExponential),
        Parts::Only(Matern12),
        Parts::Only(Matern32),
        Parts::Only(RationalQuadratic),
        Parts::Full,
    ];
    // The extremes of n, m ∈ [1, 12] first, then random shapes.
    let fixed = [(1, 1), (12, 12), (1, 12), (12, 1)];
    let mut config = 0;
    for d in 1..=5 {
        for &part in &parts {
            for masked in [false, true] {
                let (n, m) = fixed
                    .get(config % 6)
                    .copied()
                    .unwrap_or_else(|| (rng.random_range(1..=12), rng.random_range(1..=12)));
                config += 1;
                let what = format!("D={d} {part:?} masked={masked} n={n} m={m}");
                let k = config_kernel(&mut rng, d, part, masked);
                let pts = separated_points(&mut rng, &[n, m], &k.mask);
                let (a, b) = (&pts[0], &pts[1]);
                let w = DMatrix::from_fn(n, m, |_, _| rng.random_range(-1.0..1.0));
                let wg = DMatrix::from_fn(n, n, |_, _| rng.random_range(-1.0..1.0));
                let wd = DVector::from_fn(n, |_, _| rng.random_range(-1.0..1.0));

                // cross
                let (g, da, db) = k.cross_backward(a, b, &w);
                check_params(&format!("{what} cross"), &k, &g.to_vec(), |kk| {
                    weighted_sum(&w, &kk.cross(a, b))
                });
                check_inputs(&format!("{what} cross dL/da"), a, &da, |x| {
                    weighted_sum(&w, &k.cross(x, b))
                });
                check_inputs(&format!("{what} cross dL/db"), b, &db, |x| {
                    weighted_sum(&w, &k.cross(a, x))
                });
                check_masked_columns(&what, &k.mask, &da);
                check_masked_columns(&what, &k.mask, &db);

                // gram (non-symmetric weights)
                let (g, da) = k.gram_backward(a, &wg);
                check_params(&format!("{what} gram"), &k, &g.to_vec(), |kk| {
                    weighted_sum(&wg, &kk.gram(a))
                });
                check_inputs(&format!("{what} gram dL/da"), a, &da, |x| {
                    weighted_sum(&wg, &k.gram(x))
                });
                check_masked_columns(&what, &k.mask, &da);

                // diag
                let (g, da) = k.diag_backward(a, &wd);
                check_params(&format!("{what} diag"), &k, &g.to_vec(), |kk| {
                    wd.dot(&kk.diag(a))
                });
                check_inputs(&format!("{what} diag dL/da"), a, &da, |x| {
                    wd.dot(&k.diag(x))
                });
                check_masked_columns(&what, &k.mask, &da);
            }
        }
    }
}

/// `diag_gradient` from column sums of squares equals the dense `diag_backward` with one weight
/// for every point, a masked input included.
#[test]
fn the_diagonals_gradient_from_column_squares_equals_the_dense_adjoint() {
    let mut rng = ChaCha8Rng::seed_from_u64(31);
    for d in [1, 3] {
        let mut k = full_kernel(&mut rng, d);
        k.mask[d - 1] = 0.0;
        let a = random_points(&mut rng, 37, d);
        let weight = -2.7;
        let (want, _) = k.diag_backward(&a, &DVector::from_element(37, weight));
        let squares: Vec<f64> = (0..d).map(|j| a.column(j).norm_squared()).collect();
        let got = k.diag_gradient(&squares, 37, weight);
        for (g, w) in got.to_vec().iter().zip(want.to_vec()) {
            assert!(close(*g, w, 1e-12), "{g} vs {w}");
        }
        assert_eq!(got.to_vec().len(), want.to_vec().len());
    }
}
