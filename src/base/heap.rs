//! How the native process's heap treats the bound's scratch matrices. Every evaluation of the
//! uncollapsed bound allocates and frees matrices of M × S·b entries (megabytes each). With
//! glibc's defaults such blocks are mapped fresh from the kernel and given back when freed, so
//! every iteration pays page faults and the zeroing of new pages (about 11 % of the bound's time
//! in a profile at (M, b, S, D) = (100, 256, 10, 10)). [`reuse_freed_memory`] asks glibc to serve
//! blocks up to 32 MiB from its heap and to keep freed memory, so the next iteration reuses it.
//! Measured in BENCHMARKS.md (issue 13). Elsewhere (the browser, other C libraries) it does nothing.

/// The largest block glibc will serve from its heap (its own ceiling for M_MMAP_THRESHOLD on
/// 64-bit targets).
#[cfg(all(target_os = "linux", target_env = "gnu"))]
const HEAP_BLOCK_LIMIT: libc::c_int = 32 << 20;

/// Makes freed scratch memory reusable by the next evaluation (glibc: blocks up to 32 MiB from the
/// heap, freed memory kept rather than trimmed). Call once at the start of a native program; the
/// peak memory of a run stays reserved until it exits, which is what a run needs again next
/// iteration anyway.
pub fn reuse_freed_memory() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: mallopt only sets two of glibc's allocation parameters; it is called before any
    // thread is started and takes plain integers. A refused setting (return 0) leaves glibc's
    // defaults, which are correct, only slower.
    unsafe {
        libc::mallopt(libc::M_MMAP_THRESHOLD, HEAP_BLOCK_LIMIT);
        libc::mallopt(libc::M_TRIM_THRESHOLD, libc::c_int::MAX);
    }
}
