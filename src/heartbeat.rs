//! A beat from inside long computations, so a driver that watches for silence (the page's
//! watchdog) can tell a busy worker from a stuck one: the hot bound evaluations call [`beat`],
//! which calls the installed hook at most once per [`BEAT_INTERVAL_SECONDS`]. Without a hook
//! (natively) a beat costs one thread-local check.

use std::cell::{Cell, RefCell};

use crate::engine::now_seconds;

/// The least time between two calls of the hook.
pub const BEAT_INTERVAL_SECONDS: f64 = 1.0;

type Hook = Box<dyn FnMut()>;

thread_local! {
    static HOOK: RefCell<Option<Hook>> = RefCell::new(None);
    static LAST: Cell<f64> = const { Cell::new(f64::NEG_INFINITY) };
}

/// Installs (or, with None, removes) this thread's hook.
pub fn install(hook: Option<Hook>) {
    HOOK.with(|h| *h.borrow_mut() = hook);
    LAST.with(|l| l.set(f64::NEG_INFINITY));
}

/// Calls the hook if one is installed and the last call was at least
/// [`BEAT_INTERVAL_SECONDS`] ago.
pub fn beat() {
    HOOK.with(|h| {
        // A hook that beats itself (re-entrance) is skipped rather than borrowed twice.
        let Ok(mut hook) = h.try_borrow_mut() else {
            return;
        };
        let Some(f) = hook.as_mut() else {
            return;
        };
        let now = now_seconds();
        if now - LAST.with(Cell::get) >= BEAT_INTERVAL_SECONDS {
            LAST.with(|l| l.set(now));
            f();
        }
    });
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::rc::Rc;

    #[test]
    fn beats_reach_the_hook_at_most_once_per_interval() {
        let count = Rc::new(Cell::new(0));
        beat(); // no hook: nothing happens
        let c = count.clone();
        install(Some(Box::new(move || c.set(c.get() + 1))));
        for _ in 0..1000 {
            beat();
        }
        assert_eq!(count.get(), 1, "a burst of beats is one call");
        LAST.with(|l| l.set(now_seconds() - BEAT_INTERVAL_SECONDS));
        beat();
        assert_eq!(count.get(), 2, "after the interval the hook runs again");
        install(None);
        LAST.with(|l| l.set(f64::NEG_INFINITY));
        beat();
        assert_eq!(count.get(), 2);
    }
}
