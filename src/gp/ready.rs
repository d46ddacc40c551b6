//! Running a future that never waits: the optimisers are written once, as `async` functions
//! whose objective may await a device (a browser worker must not block on WebGPU), and the
//! callers whose objective computes on the spot run them here to completion in one poll.

use std::future::Future;
use std::pin::pin;
use std::task::{Context, Poll, Waker};

/// The output of `future`, which must complete without waiting: every `await` inside it is on a
/// future that is ready when first polled (an objective computed on the spot).
///
/// # Panics
/// If `future` waits. Its callers pass only futures built from synchronous closures, for which
/// this cannot happen; a future that waits would otherwise hang, which is worse.
pub fn ready<F: Future>(future: F) -> F::Output {
    let mut future = pin!(future);
    match future
        .as_mut()
        .poll(&mut Context::from_waker(Waker::noop()))
    {
        Poll::Ready(output) => output,
        Poll::Pending => unreachable!("a future built from synchronous steps waited"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_future_without_waits_completes_in_one_poll() {
        let doubled = ready(async {
            let a = async { 21 }.await;
            a * 2
        });
        assert_eq!(doubled, 42);
    }

    #[test]
    #[should_panic(expected = "waited")]
    fn a_future_that_waits_is_refused_rather_than_hung() {
        ready(std::future::pending::<()>());
    }
}
