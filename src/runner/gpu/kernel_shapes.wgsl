// The four stationary shapes of MODEL.md §2.2 as functions of r², unit variance: the float32 twin
// of the CPU's `gp::kernel::scalar` (`unit_value_and_dr2`, `unit_dvalue_dalpha`), held equal to it
// by the test `gpu_parity::the_shapes_equal_the_cpus`. Binding-free; needs `log_one_plus`
// (positive.wgsl) before it.
//   0 squared exponential  κ = e^{−r²/2}              κ′ = −κ/2
//   1 Matérn-1/2           κ = e^{−r}                 κ′ = −e^{−r}/(2r)
//   2 Matérn-3/2           κ = (1 + √3 r) e^{−√3 r}   κ′ = −(3/2) e^{−√3 r}
//   3 rational quadratic   κ = (1 + x)^{−a}, x = r²/(2a),  κ′ = −κ/(2(1 + x)),
//                          ∂κ/∂a = κ (x/(1 + x) − ln(1 + x))
// with κ′ = ∂κ/∂r² and r = √max(r², 1e-36) (GPflow's guard, so 1/r stays finite for Matérn-1/2).

// (κ, κ′, ∂κ/∂a) of `kind` at `r2` (a = `alpha`, read by the rational quadratic only). At r² ≤ 0
// (coincident points) exactly (1, 0, 0), as on the CPU: every gradient through r² carries a
// factor Δ = 0 there, and the branch makes it an exact 0 rather than 0 × (huge) for Matérn-1/2.
fn shape(kind: u32, r2: f32, alpha: f32) -> vec3<f32> {
    if (r2 <= 0.0) {
        return vec3<f32>(1.0, 0.0, 0.0);
    }
    switch kind {
        case 0u: {
            let e = exp(-0.5 * r2);
            return vec3<f32>(e, -0.5 * e, 0.0);
        }
        case 1u: {
            let r = guarded_r(r2);
            let e = exp(-r);
            return vec3<f32>(e, -0.5 * e / r, 0.0);
        }
        case 2u: {
            let sr = sqrt(3.0) * guarded_r(r2);
            let e = exp(-sr);
            return vec3<f32>((1.0 + sr) * e, -1.5 * e, 0.0);
        }
        default: {
            // ln(1 + x) by its series for small x, as the CPU's ln_1p: 1 + x rounds there.
            let x = r2 / (2.0 * alpha);
            let l = log_one_plus(x);
            let kappa = exp(-alpha * l);
            return vec3<f32>(kappa, -0.5 * kappa / (1.0 + x), kappa * (x / (1.0 + x) - l));
        }
    }
}

// r = √max(r², 1e-36), written as a comparison like the CPU's `guarded_r`.
fn guarded_r(r2: f32) -> f32 {
    if (r2 < 1e-36) {
        return 1e-18;
    }
    return sqrt(r2);
}
