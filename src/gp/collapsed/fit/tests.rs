#[test]
fn inverse_normal_cdf_matches_tabulated_quantiles() {
    for (p, z) in [
        (0.5, 0.0),
        (0.975, 1.959963984540054),
        (0.841344746068543, 1.0),
        (0.001, -3.090232306167814),
        (0.99999, 4.264890793922825),
    ] {
        assert!((inverse_normal_cdf(p) - z).abs() < 1e-11, "p = {p}");
        assert!((inverse_normal_cdf(1.0 - p) + z).abs() < 1e-11, "p = {p}");
    }
}

use super::*;
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;

/// The raw-space gradient (softplus chain included) against central differences of F in raw
/// coordinates: |fd − an| ≤ 1e-6 · max(1, |fd|, |an|).
#[test]
fn raw_gradient_matches_finite_differences() {
    let mut rng = ChaCha8Rng::seed_from_u64(11);
    let n = 6;
    let x: DMatrix<f64> = DMatrix::from_fn(n, 1, |_, _| rng.random_range(-1.5..1.5));
    let y = DVector::from_fn(n, |i, _| (2.0 * x[(i, 0)]).sin() + 0.1);
    let model = CollapsedModel::new(x, y).unwrap();
    let settings = FitSettings {
        inducing_points: 4,
        ..FitSettings::default()
    };
    let mut init = model.initial_params(&settings, &mut rng);
    // Moderate precisions and noise keep the difference quotients accurate.
    init.kernel.stationary[0].precision = vec![0.8, 1.3];
    init.noise_variance = 0.2;
    let layout = CollapsedLayout::new(&model, &init).unwrap();
    let raw = layout.pack(&init);
    let f = |r: &[f64]| {
        super::super::bound::collapsed_bound(&model.parents, &model.y, &layout.unpack(r), 1e-6)
            .unwrap()
    };
    let (_, g) =
        collapsed_bound_with_grad(&model.parents, &model.y, &layout.unpack(&raw), 1e-6).unwrap();
    let an = layout.raw_gradient(&raw, &g);
    let h = 1e-5;
    for k in 0..raw.len() {
        let mut rp = raw.clone();
        let mut rm = raw.clone();
        rp[k] += h;
        rm[k] -= h;
        let fd = (f(&rp) - f(&rm)) / (2.0 * h);
        let tol = 1e-6 * fd.abs().max(an[k].abs()).max(1.0);
        assert!((fd - an[k]).abs() <= tol, "raw[{k}]: fd {fd} vs {}", an[k]);
    }
    // Packing round-trips.
    let back = layout.unpack(&raw);
    assert!((back.noise_variance - init.noise_variance).abs() < 1e-15);
    assert_eq!(back.z, init.z);
}

fn same_shape(model: &CollapsedModel, settings: &FitSettings) -> CollapsedParams {
    model.initial_params(settings, &mut ChaCha8Rng::seed_from_u64(1))
}

/// The warm start is the subset's model plus a parent: with the new parent's SE precision
/// and linear variance set back to 0 the bound equals the subset's bound (the columns land
/// where they belong), wherever the new parent sits; the new inducing column holds data
/// values; a subset of the wrong shape gives no start.
#[test]
fn a_warm_start_with_the_new_parent_switched_off_is_the_subset_model() {
    let mut rng = ChaCha8Rng::seed_from_u64(5);
    let n = 25;
    let cols: Vec<Vec<f64>> = (0..3)
        .map(|_| (0..n).map(|_| rng.random_range(-2.0..2.0)).collect())
        .collect();
    let y = DVector::from_fn(n, |i, _| cols[0][i].sin() + 0.5 * cols[2][i] * cols[1][i]);
    let take = |idx: &[usize]| DMatrix::from_fn(n, idx.len(), |r, k| cols[idx[k]][r]);
    let settings = FitSettings {
        inducing_points: 6,
        ..FitSettings::default()
    };
    // Family {0, 1, 2}; subsets without 0 (new input first), 1 (middle), 2 (last).
    let full = CollapsedModel::new(take(&[0, 1, 2]), y.clone()).unwrap();
    for (subset, new_input) in [(vec![1, 2], 0), (vec![0, 2], 1), (vec![0, 1], 2)] {
        let sub = CollapsedModel::new(take(&subset), y.clone()).unwrap();
        let sub_params = sub.initial_params(&settings, &mut rng);
        let f_sub =
            super::super::bound::collapsed_bound(&sub.parents, &y, &sub_params, 1e-6).unwrap();
        let mut warm = full.warm_start(&sub_params, new_input).unwrap();
        assert_eq!(
            warm.kernel.stationary[0].precision[new_input],
            WARM_NEW_PRECISION
        );
        assert_eq!(
            warm.kernel.linear.as_ref().unwrap()[new_input],
            WARM_NEW_LINEAR
        );
        for i in 0..warm.z.nrows() {
            let v = warm.z[(i, new_input)];
            assert!(
                cols[new_input].contains(&v),
                "inducing value {v} is no data value"
            );
        }
        warm.kernel.stationary[0].precision[new_input] = 0.0;
        warm.kernel.linear.as_mut().unwrap()[new_input] = 0.0;
        let f_full = super::super::bound::collapsed_bound(&full.parents, &y, &warm, 1e-6).unwrap();
        assert!(
            (f_full - f_sub).abs() <= 1e-9 * f_sub.abs().max(1.0),
            "new input {new_input}: {f_full} vs the subset's {f_sub}"
        );
        // Switching the new parent off again is the subset's point exactly.
        let warm = full.warm_start(&sub_params, new_input).unwrap();
        let kept: Vec<usize> = (0..3).filter(|&k| k != new_input).collect();
        let off = full.bound_with_parents(&warm, &kept, 1e-6).unwrap();
        assert!(
            (off - f_sub).abs() <= 1e-9 * f_sub.abs().max(1.0),
            "switched off {new_input}: {off} vs the subset's {f_sub}"
        );
    }
    let params = same_shape(&full, &settings);
    assert!(full.bound_with_parents(&params, &[0, 3], 1e-6).is_err());
    assert!(full.bound_with_parents(&params, &[1, 0], 1e-6).is_err());
    // Every parent switched off: the root model of the child (w alone) at the same point.
    let root = CollapsedModel::new(DMatrix::zeros(n, 0), y.clone()).unwrap();
    let mut root_params = params.clone();
    root_params.kernel = Kernel::se_plus_linear(
        vec![params.kernel.linear.as_ref().unwrap()[3]],
        params.kernel.stationary[0].variance,
        vec![params.kernel.stationary[0].precision[3]],
    );
    root_params.z = params.z.columns(3, 1).into_owned();
    let direct =
        super::super::bound::collapsed_bound(&root.parents, &y, &root_params, 1e-6).unwrap();
    assert_eq!(full.bound_with_parents(&params, &[], 1e-6).unwrap(), direct);
    // A subset with as many parents as the family is no subset.
    let same = full.initial_params(&settings, &mut rng);
    assert!(full.warm_start(&same, 0).is_none());
    let sub = CollapsedModel::new(take(&[0, 1]), y.clone()).unwrap();
    let sub_params = sub.initial_params(&settings, &mut rng);
    assert!(full.warm_start(&sub_params, 3).is_none());
}

/// The awaited bound against the blocking one of a fitted model (here, beside the model, so
/// `awaited` needs nothing of the fit).
mod awaited {
    use crate::gp::collapsed::awaited::*;
    use crate::gp::collapsed::bound::collapsed_bound_with_grad_on;
    use crate::gp::collapsed::psi::Psi2Factors;
    use crate::gp::collapsed::{CollapsedModel, FitSettings};
    use crate::gp::ready::ready;
    use nalgebra::{DMatrix, DVector};
    use rand::SeedableRng;
    use rand_chacha::ChaCha8Rng;
    use std::cell::Cell;

    /// Answers with the sums written out from their definition (`Psi2Device`'s), row by row,
    /// counting the questions.
    struct DefinitionAnswers {
        asked: Cell<usize>,
    }

    /// p(n, i, j) = pref_n exp(B_ni + B_nj − h_n Δ²_ij) and Δ²_ij.
    fn p(f: &Psi2Factors, n: usize, i: usize, j: usize) -> (f64, f64) {
        let d2 = (f.zw[i] - f.zw[j]).powi(2);
        let value = f.pref[n] * (f.b[(n, i)] + f.b[(n, j)] - f.h[n] * d2).exp();
        (value, d2)
    }

    impl AwaitedPsi2 for DefinitionAnswers {
        fn sums(&self, wanted: Psi2Wanted) -> Psi2Answer<'_> {
            self.asked.set(self.asked.get() + 1);
            Box::pin(async move {
                Ok(match &wanted {
                    Psi2Wanted::Pairs(f) => {
                        let (n, m) = f.b.shape();
                        let mut sums = (DMatrix::zeros(m, m), DMatrix::zeros(m, m));
                        for r in 0..n {
                            for i in 0..m {
                                for j in 0..m {
                                    let (v, _) = p(f, r, i, j);
                                    sums.0[(i, j)] += v;
                                    sums.1[(i, j)] += f.h[r] * v;
                                }
                            }
                        }
                        sums
                    }
                    Psi2Wanted::Rows(f, w) => {
                        let (n, m) = f.b.shape();
                        let mut sums = (DMatrix::zeros(n, m), DMatrix::zeros(n, m));
                        for r in 0..n {
                            for i in 0..m {
                                for j in 0..m {
                                    let (v, d2) = p(f, r, i, j);
                                    sums.0[(r, i)] += w[(i, j)] * v;
                                    sums.1[(r, i)] += w[(i, j)] * v * d2;
                                }
                            }
                        }
                        sums
                    }
                })
            })
        }
    }

    #[test]
    fn an_awaited_device_gives_the_blocking_bound_after_two_questions() {
        let mut rng = ChaCha8Rng::seed_from_u64(3);
        let n = 40;
        let x = DMatrix::from_fn(n, 2, |r, c| ((r * (c + 3)) as f64 * 0.37).sin());
        let y = DVector::from_fn(n, |r, _| x[(r, 0)] * x[(r, 1)] + 0.1 * (r as f64).cos());
        let model = CollapsedModel::new(x.clone(), y.clone()).unwrap();
        let settings = FitSettings {
            inducing_points: 8,
            ..FitSettings::default()
        };
        let params = model.initial_params(&settings, &mut rng);
        let (f, g) = collapsed_bound_with_grad_on(&x, &y, &params, 1e-6, 1.0, None).unwrap();
        let device = DefinitionAnswers {
            asked: Cell::new(0),
        };
        let (fa, ga) = ready(bound_with_grad_awaited(&x, &y, &params, 1e-6, &device)).unwrap();
        assert_eq!(device.asked.get(), 2, "pair sums, then row sums");
        assert!((f - fa).abs() <= 1e-9 * f.abs(), "{f} vs {fa}");
        let (a, b) = (g.z.as_slice(), ga.z.as_slice());
        let scale = a.iter().fold(1e-12f64, |m, v| m.max(v.abs()));
        let worst = a
            .iter()
            .zip(b)
            .fold(0.0f64, |m, (p, q)| m.max((p - q).abs()));
        assert!(worst <= 1e-9 * scale, "∂F/∂Z differs by {worst:e}");
    }
}
