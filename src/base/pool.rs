//! The one way the engine fans independent work out: a [`Pool`] of `threads` workers (a rayon
//! thread pool natively; the calling thread in the browser's worker) whose [`Pool::map`] runs a
//! function over a slice and returns the results in the items' order, so results never depend on
//! the thread count. Items are handed out one by one (work stealing), so slow and fast jobs
//! balance across threads. A stop request the caller watches ([`crate::base::heartbeat`]) reaches the
//! pool's threads too.

use std::fmt;
#[cfg(not(target_arch = "wasm32"))]
use std::sync::Arc;

/// The most threads a pool may have (a limit a settings form can name).
pub const MAX_POOL_THREADS: usize = 4096;

/// Why a pool could not be made.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum PoolError {
    #[error("threads must be at most {MAX_POOL_THREADS} (got {0})")]
    TooMany(usize),
    #[error("the operating system refused to start {threads} worker threads: {message}")]
    Spawn { threads: usize, message: String },
}

/// A set of worker threads; cloning shares them.
#[derive(Clone)]
pub struct Pool {
    threads: usize,
    #[cfg(not(target_arch = "wasm32"))]
    inner: Option<Arc<rayon::ThreadPool>>,
}

impl Default for Pool {
    /// The calling thread only ([`Pool::serial`]).
    fn default() -> Self {
        Self::serial()
    }
}

impl fmt::Debug for Pool {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Pool")
            .field("threads", &self.threads)
            .finish()
    }
}

/// The cores this machine offers (1 in the browser's worker, where the engine has one thread).
pub fn available_threads() -> usize {
    #[cfg(not(target_arch = "wasm32"))]
    return std::thread::available_parallelism().map_or(1, |n| n.get());
    #[cfg(target_arch = "wasm32")]
    1
}

impl Pool {
    /// A pool of `threads` workers; 0 means one per available core. One thread runs everything
    /// on the calling thread (no pool is started).
    pub fn new(threads: usize) -> Result<Self, PoolError> {
        if threads > MAX_POOL_THREADS {
            return Err(PoolError::TooMany(threads));
        }
        let threads = if threads == 0 {
            available_threads()
        } else {
            threads
        };
        #[cfg(target_arch = "wasm32")]
        {
            let _ = threads;
            Ok(Self { threads: 1 })
        }
        #[cfg(not(target_arch = "wasm32"))]
        {
            let inner = if threads > 1 {
                let pool = rayon::ThreadPoolBuilder::new()
                    .num_threads(threads)
                    .thread_name(|k| format!("occam-compute-{k}"))
                    .build()
                    .map_err(|e| PoolError::Spawn {
                        threads,
                        message: e.to_string(),
                    })?;
                Some(Arc::new(pool))
            } else {
                None
            };
            Ok(Self { threads, inner })
        }
    }

    /// The calling thread only.
    pub fn serial() -> Self {
        Self {
            threads: 1,
            #[cfg(not(target_arch = "wasm32"))]
            inner: None,
        }
    }

    /// Worker threads (1 when everything runs on the calling thread).
    pub fn threads(&self) -> usize {
        self.threads
    }

    /// Runs `f` on one of the pool's threads (the calling thread without a pool), so the work
    /// `f` splits with [`split_map`] spreads over the pool.
    pub fn run<R: Send>(&self, f: impl FnOnce() -> R + Send) -> R {
        #[cfg(not(target_arch = "wasm32"))]
        if let Some(pool) = &self.inner {
            let flag = crate::base::heartbeat::watched();
            return pool.install(|| {
                let _watch = crate::base::heartbeat::watch(flag);
                f()
            });
        }
        f()
    }

    /// `f` over `items`, results in the items' order.
    pub fn map<T: Sync, R: Send>(&self, items: &[T], f: impl Fn(&T) -> R + Sync) -> Vec<R> {
        #[cfg(not(target_arch = "wasm32"))]
        if let Some(pool) = self.inner.as_ref().filter(|_| items.len() > 1) {
            use rayon::prelude::*;
            // The caller's stop request reaches the pool's threads: each job watches it.
            let flag = crate::base::heartbeat::watched();
            return pool.install(|| {
                items
                    .par_iter()
                    .with_max_len(1)
                    .map(|item| {
                        let _watch = crate::base::heartbeat::watch(flag.clone());
                        f(item)
                    })
                    .collect()
            });
        }
        items.iter().map(f).collect()
    }
}

/// `f` over the owned `items` (disjoint pieces of one computation), results in the items' order,
/// spread over the threads of the pool the caller runs in ([`Pool::map`], [`Pool::run`]); outside
/// a pool, and in the browser, on the calling thread. The caller splits its work independently of
/// the thread count and combines the results in order, so the numbers never depend on the pool.
pub fn split_map<T: Send, R: Send>(items: Vec<T>, f: impl Fn(T) -> R + Sync + Send) -> Vec<R> {
    #[cfg(not(target_arch = "wasm32"))]
    if items.len() > 1 && rayon::current_thread_index().is_some() {
        use rayon::prelude::*;
        return items.into_par_iter().with_max_len(1).map(f).collect();
    }
    items.into_iter().map(f).collect()
}

/// `a` and `b` (independent pieces of one computation) on two threads of the pool the caller runs
/// in ([`Pool::run`], [`Pool::map`]); outside a pool, and in the browser, `a` then `b` on the
/// calling thread. Each result is the same either way.
pub fn join<A: Send, B: Send>(
    a: impl FnOnce() -> A + Send,
    b: impl FnOnce() -> B + Send,
) -> (A, B) {
    #[cfg(not(target_arch = "wasm32"))]
    if rayon::current_thread_index().is_some() {
        return rayon::join(a, b);
    }
    (a(), b())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::base::heartbeat::{self, StopFlag};

    #[test]
    fn results_keep_the_items_order_for_any_thread_count() {
        let items: Vec<u64> = (0..37).collect();
        let serial: Vec<u64> = items.iter().map(|x| x * x + 1).collect();
        for threads in [0, 1, 2, 3, 8, 64] {
            let pool = Pool::new(threads).unwrap();
            assert_eq!(pool.map(&items, |x| x * x + 1), serial);
            assert!(pool.map(&[] as &[u64], |x| *x).is_empty());
        }
        assert_eq!(Pool::new(0).unwrap().threads(), available_threads());
        assert_eq!(Pool::serial().threads(), 1);
    }

    #[test]
    fn join_runs_both_halves_on_the_callers_pool() {
        let here = std::thread::current().id();
        let ((a, ta), (b, tb)) = join(
            || (1, std::thread::current().id()),
            || (2, std::thread::current().id()),
        );
        assert_eq!((a, b), (1, 2));
        assert_eq!((ta, tb), (here, here), "outside a pool: the calling thread");
        let pool = Pool::new(2).unwrap();
        let (a, b) = pool.run(|| {
            join(
                || std::thread::current().name().map(str::to_owned),
                || std::thread::current().name().map(str::to_owned),
            )
        });
        for name in [a, b] {
            assert!(
                name.is_some_and(|n| n.starts_with("occam-compute")),
                "inside a pool: its threads"
            );
        }
    }

    #[test]
    fn split_work_runs_on_the_callers_pool_and_keeps_its_order() {
        let items: Vec<usize> = (0..23).collect();
        let expected: Vec<usize> = items.iter().map(|i| i * 3).collect();
        // Outside a pool: the calling thread.
        let threads = split_map(items.clone(), |i| (i * 3, std::thread::current().id()));
        assert!(threads
            .iter()
            .all(|(_, t)| *t == std::thread::current().id()));
        for n in [1, 2, 4] {
            let pool = Pool::new(n).unwrap();
            let out = pool.run(|| split_map(items.clone(), |i| i * 3));
            assert_eq!(out, expected, "{n} threads");
            let on_pool =
                pool.run(|| split_map(items.clone(), |_| rayon::current_thread_index().is_some()));
            assert!(on_pool.iter().all(|&inside| inside == (n > 1)));
        }
    }

    #[test]
    fn an_impossible_size_is_refused_with_the_limit() {
        let err = Pool::new(MAX_POOL_THREADS + 1).unwrap_err();
        assert!(err.to_string().contains("at most 4096"), "{err}");
    }

    #[test]
    fn the_callers_stop_request_reaches_every_job() {
        let pool = Pool::new(3).unwrap();
        let flag = StopFlag::new();
        let _watch = heartbeat::watch(Some(flag.clone()));
        let items: Vec<usize> = (0..12).collect();
        assert!(pool
            .map(&items, |_| !heartbeat::interrupted())
            .iter()
            .all(|&ok| ok));
        flag.raise();
        assert!(pool
            .map(&items, |_| heartbeat::interrupted())
            .iter()
            .all(|&seen| seen));
    }
}
