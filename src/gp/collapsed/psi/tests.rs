use super::*;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

/// The reverse pass of Ψ2's SE part gives the same gradients whether it reuses the forward
/// pass's terms or recomputes them (the path fits too large for [`MAX_CACHED_TERMS`] take).
#[test]
fn reverse_pass_with_kept_terms_equals_recomputing_them() {
    let mut rng = ChaCha8Rng::seed_from_u64(7);
    let (n, m, obs) = (37, 9, 3);
    let x = DMatrix::from_fn(n, obs, |_, _| rng.random_range(-1.5..1.5));
    let z = DMatrix::from_fn(m, obs + 1, |_, _| rng.random_range(-2.0..2.0));
    let q = LatentPosterior {
        mean: DVector::from_fn(n, |_, _| rng.random_range(-1.0..1.0)),
        variance: DVector::from_fn(n, |_, _| rng.random_range(0.05..0.5)),
    };
    let kernel = Kernel::se_plus_linear(
        (0..=obs).map(|_| rng.random_range(0.2..1.5)).collect(),
        1.3,
        (0..=obs).map(|_| rng.random_range(0.5..1.5)).collect(),
    );
    let w = {
        let a = DMatrix::from_fn(m, m, |_, _| rng.random_range(-1.0..1.0));
        (&a + a.transpose()) * 0.5
    };
    let p = SeLinear::new(&kernel, &x, &z, &q).unwrap();
    let factors = p.factors(&p.log_se_observed());
    let (_, terms) = psi2_se_unit(&factors);
    let terms = terms.expect("small enough to keep");
    let (mut bar_kept, mut bar_fresh) = (DMatrix::zeros(n, m), DMatrix::zeros(n, m));
    let kept = p.psi2_se_backward(&factors, Some(&terms), &w, &mut bar_kept);
    let fresh = p.psi2_se_backward(&factors, None, &w, &mut bar_fresh);
    assert_eq!(kept.total, fresh.total);
    assert_eq!(kept.theta_w, fresh.theta_w);
    assert_eq!((kept.zw, kept.mu, kept.s), (fresh.zw, fresh.mu, fresh.s));
    assert_eq!(bar_kept, bar_fresh);
    assert!(bar_kept.amax() > 0.0);
}
