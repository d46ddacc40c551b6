//! Liveness and interruption from inside long computations.
//!
//! - A beat, so a driver that watches for silence (the page's watchdog) can tell a busy worker
//!   from a stuck one: the hot bound evaluations call [`beat`], which calls the installed hook at
//!   most once per [`BEAT_INTERVAL_SECONDS`]. Without a hook (natively) a beat costs one
//!   thread-local check.
//! - A stop request that reaches inside a unit of work: a session [`watch`]es its [`StopFlag`]
//!   while it works, the bound evaluations ask [`interrupted`] and give up at once, and
//!   [`crate::base::pool::Pool`] carries the watched flag into its threads. So Ctrl-C
//!   lands within one bound evaluation, not at the end of a fit of hundreds of them.

use std::cell::{Cell, RefCell};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use crate::base::clock::now_seconds;

/// The least time between two calls of the hook.
pub const BEAT_INTERVAL_SECONDS: f64 = 1.0;

type Hook = Box<dyn FnMut()>;

thread_local! {
    static HOOK: RefCell<Option<Hook>> = RefCell::new(None);
    static LAST: Cell<f64> = const { Cell::new(f64::NEG_INFINITY) };
    static WATCHED: RefCell<Option<StopFlag>> = const { RefCell::new(None) };
}

/// A stop request shared between whoever may ask for it (a signal handler, another thread) and
/// the computation that answers it. Once raised it stays raised.
#[derive(Debug, Clone, Default)]
pub struct StopFlag(Arc<AtomicBool>);

impl StopFlag {
    pub fn new() -> Self {
        Self::default()
    }

    /// Asks the watching computation to stop (safe from any thread or a signal handler).
    pub fn raise(&self) {
        self.0.store(true, Ordering::SeqCst);
    }

    pub fn is_raised(&self) -> bool {
        self.0.load(Ordering::SeqCst)
    }
}

/// While alive, this thread's computations answer `flag` (see [`interrupted`]); dropping it
/// restores what was watched before, so watches nest.
#[must_use = "the watch ends when the guard is dropped"]
pub struct Watch {
    previous: Option<StopFlag>,
}

/// Makes this thread's computations answer `flag` until the returned guard is dropped (None
/// watches nothing).
pub fn watch(flag: Option<StopFlag>) -> Watch {
    let previous = WATCHED.with(|w| std::mem::replace(&mut *w.borrow_mut(), flag));
    Watch { previous }
}

impl Drop for Watch {
    fn drop(&mut self) {
        let previous = self.previous.take();
        WATCHED.with(|w| *w.borrow_mut() = previous);
    }
}

/// The flag this thread watches, for handing on to helper threads.
pub fn watched() -> Option<StopFlag> {
    WATCHED.with(|w| w.borrow().clone())
}

/// Whether the flag this thread watches has been raised: long computations check this and
/// return early (with an error that says so), and callers then keep nothing they computed.
pub fn interrupted() -> bool {
    WATCHED.with(|w| w.borrow().as_ref().is_some_and(StopFlag::is_raised))
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

    #[test]
    fn a_watched_flag_interrupts_until_the_watch_ends_and_watches_nest() {
        assert!(!interrupted(), "nothing watched: never interrupted");
        let outer = StopFlag::new();
        let inner = StopFlag::new();
        {
            let _w = watch(Some(outer.clone()));
            assert!(!interrupted());
            {
                let _v = watch(Some(inner.clone()));
                outer.raise();
                assert!(!interrupted(), "the inner watch hides the outer flag");
                inner.raise();
                assert!(interrupted());
            }
            assert!(
                interrupted(),
                "the outer watch is back, and its flag is raised"
            );
            let handed_on = watched().expect("a flag is watched");
            let other = std::thread::spawn(move || {
                let _w = watch(Some(handed_on));
                interrupted()
            });
            assert!(
                other.join().unwrap(),
                "a flag handed to a thread interrupts there"
            );
        }
        assert!(!interrupted(), "the watch ended");
    }
}
