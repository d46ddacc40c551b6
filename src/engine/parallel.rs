//! The one way the engine fans independent work out: `map_parallel` runs `f` over a slice on up to
//! `threads` scoped threads natively and in order on one thread in the browser, and returns the
//! results in the items' order, so results never depend on the thread count.

/// `f` over `items`, in order; on up to `threads` scoped threads natively.
pub fn map_parallel<T: Sync, R: Send>(
    items: &[T],
    threads: usize,
    f: impl Fn(&T) -> R + Sync,
) -> Vec<R> {
    #[cfg(not(target_arch = "wasm32"))]
    if threads > 1 && items.len() > 1 {
        let chunk = items.len().div_ceil(threads);
        let f = &f;
        // The caller's stop request reaches the helper threads' computations too.
        let flag = crate::heartbeat::watched();
        return std::thread::scope(|scope| {
            let handles: Vec<_> = items
                .chunks(chunk)
                .map(|part| {
                    let flag = flag.clone();
                    scope.spawn(move || {
                        let _watch = crate::heartbeat::watch(flag);
                        part.iter().map(f).collect::<Vec<_>>()
                    })
                })
                .collect();
            handles
                .into_iter()
                .flat_map(|h| h.join().expect("a worker thread panicked"))
                .collect()
        });
    }
    let _ = threads;
    items.iter().map(f).collect()
}

#[cfg(test)]
mod tests {
    use super::map_parallel;

    #[test]
    fn results_keep_the_items_order_for_any_thread_count() {
        let items: Vec<u64> = (0..37).collect();
        let serial: Vec<u64> = items.iter().map(|x| x * x + 1).collect();
        for threads in [0, 1, 2, 3, 8, 64] {
            assert_eq!(map_parallel(&items, threads, |x| x * x + 1), serial);
        }
        assert!(map_parallel(&[] as &[u64], 4, |x| *x).is_empty());
    }
}
