use super::slots::sync_due;
use super::*;

/// The paper's encoder state at D = 3 with its kernel's 20 hyperparameters and φ²
/// (805 820 bytes) is read every 394 evaluations at the default budget, and never before
/// 2 s; a test's (0 s, unbounded) reads it every time, an infinite period never.
#[test]
fn a_state_is_read_when_both_the_clock_and_the_budget_allow() {
    let shape = StateShape {
        m: 10,
        d: 3,
        encoder: 66_818,
        parameters: 21,
    };
    let bytes = (state_words(shape.m) + held_words(shape)) * 4;
    assert_eq!(bytes, 805_820);
    let due =
        |elapsed, unsynced| sync_due(elapsed, SYNC_SECONDS, unsynced, SYNC_BUDGET_BYTES, bytes);
    assert!(!due(1.9, 10_000), "not before 2 s");
    assert!(!due(60.0, 393), "not before the evaluations pay for it");
    assert!(due(60.0, 394));
    assert!(due(2.0, 394));
    assert!(sync_due(0.0, 0.0, 1, usize::MAX, bytes));
    assert!(!sync_due(1e9, f64::INFINITY, 1_000_000, usize::MAX, bytes));
}
