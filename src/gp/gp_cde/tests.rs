use super::*;
use crate::data::standardise;
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;

fn small_settings(latent: LatentKind) -> GpCdeSettings {
    GpCdeSettings {
        inducing: 15,
        samples: 3,
        latent,
        encoder_width: 16,
        encoder_depth: 2,
        ..GpCdeSettings::default()
    }
}

/// y = sin(2x) + noise: training must raise the full-data bound well above its start.
fn sine_data(n: usize, rng: &mut ChaCha8Rng) -> DMatrix<f64> {
    let x: Vec<f64> = (0..n).map(|_| rng.random_range(-2.0..2.0)).collect();
    let y: Vec<f64> = x
        .iter()
        .map(|v| (2.0 * v).sin() + 0.1 * rng.sample::<f64, _>(StandardNormal))
        .collect();
    let (x, y) = (standardise(&x), standardise(&y));
    DMatrix::from_fn(n, 2, |r, c| if c == 0 { x[r] } else { y[r] })
}

#[test]
fn training_improves_the_bound_for_both_latent_kinds() {
    for latent in [LatentKind::Free, LatentKind::Encoder] {
        let mut rng = ChaCha8Rng::seed_from_u64(4);
        let data = sine_data(60, &mut rng);
        let mut v = GpCdeModel::new(&data, 1, &[1.0, 1.0], &small_settings(latent), &mut rng);
        let start = v.full_bound(&data, 10, 25, &mut rng).unwrap();
        let rows: Vec<usize> = (0..60).collect();
        for _ in 0..150 {
            v.step(&data, &rows[..30], &mut rng).unwrap();
            v.step(&data, &rows[30..], &mut rng).unwrap();
        }
        let end = v.full_bound(&data, 10, 25, &mut rng).unwrap();
        assert!(end > start + 20.0, "{latent:?}: bound {start} → {end}");
    }
}

#[test]
fn a_non_finite_gradient_changes_nothing() {
    let mut rng = ChaCha8Rng::seed_from_u64(1);
    let data = sine_data(20, &mut rng);
    let mut v = GpCdeModel::new(
        &data,
        1,
        &[1.0, 1.0],
        &small_settings(LatentKind::Free),
        &mut rng,
    );
    let rows: Vec<usize> = (0..20).collect();
    let prepared = v.prepare(&data, &rows, &mut rng);
    let mut out = bound_and_gradient(&v.input(&prepared)).unwrap();
    out.grad.noise = f64::NAN;
    let before = v.clone();
    assert!(matches!(
        v.apply(&prepared, &out, None),
        Err(StepError::NonFinite(_))
    ));
    assert_eq!(v, before);
}

/// A device that runs the encoder: the host draws the same rows' noise as on the CPU path
/// without running the encoder, its Adam step leaves Z and the encoder to the device (with
/// the same step count), and the state read back replaces both with their moments.
#[test]
fn a_device_held_encoder_is_left_to_the_device_and_taken_back_from_it() {
    let mut rng = ChaCha8Rng::seed_from_u64(4);
    let data = sine_data(20, &mut rng);
    let mut v = GpCdeModel::new(
        &data,
        1,
        &[1.0, 1.0],
        &small_settings(LatentKind::Encoder),
        &mut rng,
    );
    let rows: Vec<usize> = (3..15).collect();
    let host = v.prepare(&data, &rows, &mut ChaCha8Rng::seed_from_u64(9));
    let held = v.prepare_held(&data, &rows, &mut ChaCha8Rng::seed_from_u64(9));
    assert!(held.latent_on_device() && !host.latent_on_device());
    assert_eq!(held.latent.eps, host.latent.eps);
    assert!(held.tape.is_none() && held.latent.mu.iter().all(|&m| m == 0.0));
    // The device's output (the CPU's, with q(w)'s gradient held there).
    let out = bound_and_gradient(&v.input(&host)).unwrap();
    let output = HeldOutput {
        terms: out.terms,
        held_norm: 1.0,
        noise: out.grad.noise,
        latent_mu: DVector::zeros(0),
        latent_var: DVector::zeros(0),
    };
    let before = v.clone();
    // What the device stepped the hyperparameters and φ² to.
    let mut stepped = v.held_parameters();
    let count = stepped.values.len();
    assert_eq!(count, v.kernel_raw().len() + 1, "the kernel's and φ²");
    for (k, value) in stepped.values.iter_mut().enumerate() {
        *value += 0.01 * (k + 1) as f64;
    }
    stepped.first = vec![0.5; count];
    stepped.second = vec![0.25; count];
    let mut refused = v.clone();
    let mut short = stepped.clone();
    short.second.pop();
    assert!(matches!(
        refused.apply_held(&held, &output, &short, 7, None),
        Err(StepError::Device(_))
    ));
    let mut infinite = stepped.clone();
    infinite.values[0] = f64::NAN;
    assert!(matches!(
        refused.apply_held(&held, &output, &infinite, 7, None),
        Err(StepError::NonFinite(_))
    ));
    assert_eq!(refused, v, "a refused step changes nothing");
    v.apply_held(&held, &output, &stepped, 7, None).unwrap();
    assert_eq!(
        v.encoder(),
        before.encoder(),
        "the device steps the encoder"
    );
    assert_eq!(v.z(), before.z(), "and Z");
    assert_eq!(
        v.held_parameters(),
        stepped,
        "and the hyperparameters and φ², which the variable takes"
    );
    assert_eq!(
        v.noise(),
        softplus(stepped.values[count - 1]) + v.noise_floor()
    );
    assert_eq!(v.adam.steps(), before.adam.steps() + 1);
    // The device's state becomes the variable's.
    let view = v.resident_view();
    let weights: Vec<f64> = view
        .encoder
        .unwrap()
        .params_to_vec()
        .iter()
        .map(|w| w + 0.5)
        .collect();
    let count = weights.len();
    let state = ResidentState {
        posterior: view.posterior.clone(),
        z: view.z.map(|z| z + 1.0),
        z_first: DMatrix::from_element(view.z.nrows(), view.z.ncols(), 0.25),
        z_second: DMatrix::from_element(view.z.nrows(), view.z.ncols(), 0.5),
        encoder: HeldWeights {
            values: weights.clone(),
            first: vec![0.125; count],
            second: vec![0.0625; count],
        },
        parameters: HeldWeights {
            values: v.held_parameters().values.iter().map(|r| r - 0.5).collect(),
            first: vec![0.75; v.kernel_raw().len() + 1],
            second: vec![0.375; v.kernel_raw().len() + 1],
        },
    };
    let parameters = state.parameters.clone();
    let taken = v.with_resident(state);
    assert_eq!(taken.held_parameters(), parameters);
    assert_eq!(taken.encoder().unwrap().params_to_vec(), weights);
    let view = taken.resident_view();
    assert_eq!(view.encoder_first, &vec![0.125; count][..]);
    assert_eq!(view.encoder_second, &vec![0.0625; count][..]);
    assert_eq!(view.z_first[0], 0.25);
}

#[test]
fn masked_inputs_stay_out_and_the_latent_slot_stays_in() {
    let mut rng = ChaCha8Rng::seed_from_u64(2);
    let data = sine_data(20, &mut rng);
    let mut v = GpCdeModel::new(
        &data,
        1,
        &[0.0, 0.0],
        &small_settings(LatentKind::Free),
        &mut rng,
    );
    assert_eq!(v.kernel().mask, vec![0.0, 1.0]);
    v.set_mask(1, false);
    assert_eq!(v.kernel().mask, vec![0.0, 1.0]);
    v.set_mask(0, true);
    assert_eq!(v.kernel().mask, vec![1.0, 1.0]);
}
