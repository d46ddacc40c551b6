// Double-float arithmetic: a value is vec2(head, tail) with |tail| ≤ ulp(head)/2, about 48
// significant bits from float32 words (Dekker, Knuth; the error-free transformations of Shewchuk's
// and the QD library's papers, written from their definitions). Shared by the shaders that need
// more than float32 (prepended to their source); each of them defines `one()`, returning 1.0 read
// from a uniform, which every step multiplies by so the shader compiler cannot rearrange the
// transformations away (lavapipe's did).

// a + b exactly, as (sum, error) (Knuth).
fn two_sum(a: f32, b: f32) -> vec2<f32> {
    let s = (a + b) * one();
    let bb = (s - a) * one();
    let err = ((a - (s - bb) * one()) * one() + (b - bb)) * one();
    return vec2<f32>(s, err);
}

// a + b exactly when |a| ≥ |b|.
fn quick_two_sum(a: f32, b: f32) -> vec2<f32> {
    let s = (a + b) * one();
    return vec2<f32>(s, (b - (s - a) * one()) * one());
}

// a = hi + lo with 12 significant bits each (Dekker), so products of halves are exact.
fn split(a: f32) -> vec2<f32> {
    let t = (4097.0 * a) * one();
    let hi = (t - (t - a) * one()) * one();
    return vec2<f32>(hi, (a - hi) * one());
}

// a · b exactly, as (product, error).
fn two_prod(a: f32, b: f32) -> vec2<f32> {
    let p = (a * b) * one();
    let sa = split(a);
    let sb = split(b);
    let err = ((((sa.x * sb.x - p) * one() + sa.x * sb.y) * one() + sa.y * sb.x) * one()
        + sa.y * sb.y) * one();
    return vec2<f32>(p, err);
}

fn df_add(a: vec2<f32>, b: vec2<f32>) -> vec2<f32> {
    var s = two_sum(a.x, b.x);
    let t = two_sum(a.y, b.y);
    s.y = (s.y + t.x) * one();
    s = quick_two_sum(s.x, s.y);
    s.y = (s.y + t.y) * one();
    return quick_two_sum(s.x, s.y);
}

fn df_mul(a: vec2<f32>, b: vec2<f32>) -> vec2<f32> {
    var p = two_prod(a.x, b.x);
    p.y = (p.y + (a.x * b.y + a.y * b.x) * one()) * one();
    return quick_two_sum(p.x, p.y);
}

// a / b: the float32 quotient q, then one correction (a − q·b) / b.
fn df_div(a: vec2<f32>, b: vec2<f32>) -> vec2<f32> {
    let q = a.x / b.x;
    let r = df_add(a, -df_mul(b, vec2<f32>(q, 0.0)));
    return quick_two_sum(q, r.x / b.x);
}

// √a for a > 0: the float32 root s, then one Newton correction (a − s²) / 2s.
fn df_sqrt(a: vec2<f32>) -> vec2<f32> {
    let s = sqrt(a.x);
    let r = df_add(a, -two_prod(s, s));
    return quick_two_sum(s, r.x / (2.0 * s));
}
