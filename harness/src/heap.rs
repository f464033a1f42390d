//! Peak heap bytes of a computation on the current thread ([`measure`]) or in the whole process
//! ([`measure_process`]), through a counting global allocator ([`Counting`]) that the
//! `contactlab` binary installs (DESIGN.md: "on CPU backends a counting global allocator gives
//! exact live and peak heap bytes").
//!
//! The counts are per thread: each worker of the rayon pool computes one cell at a time, so the
//! peak of its thread during [`measure`] is that computation's own (forward plus backward, the
//! tape included), unaffected by the cells other threads run. Memory freed on another thread
//! than the one that allocated it would skew the counts; the gradient computations allocate
//! and free on their own thread. Where the allocator is not installed (library tests),
//! [`measure`] returns `None`.
//!
//! The process-wide counts are for computations that spread over threads (the cpu engine's
//! rayon workers, the burn engine's shards): the throughput study runs one cell at a time and
//! reads the process's peak above the live bytes at the cell's start ([`measure_process`]) and
//! its live bytes at a point ([`process_live`], the reverse-mode tape after a forward pass).

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::sync::atomic::{AtomicBool, AtomicI64, Ordering};

thread_local! {
    static LIVE: Cell<i64> = const { Cell::new(0) };
    static PEAK: Cell<i64> = const { Cell::new(0) };
}

static INSTALLED: AtomicBool = AtomicBool::new(false);
/// Live heap bytes of the whole process.
static PROCESS_LIVE: AtomicI64 = AtomicI64::new(0);
/// Peak of [`PROCESS_LIVE`] since the last [`measure_process`] began.
static PROCESS_PEAK: AtomicI64 = AtomicI64::new(0);

/// The system allocator, counting live and peak bytes per thread.
pub struct Counting;

fn add(n: i64) {
    let live = PROCESS_LIVE.fetch_add(n, Ordering::Relaxed) + n;
    if n > 0 {
        PROCESS_PEAK.fetch_max(live, Ordering::Relaxed);
    }
    let _ = LIVE.try_with(|l| {
        let v = l.get() + n;
        l.set(v);
        let _ = PEAK.try_with(|p| {
            if v > p.get() {
                p.set(v);
            }
        });
    });
}

// SAFETY: every call is forwarded to `System` unchanged; the counting touches only atomics and
// const-initialized thread-locals without destructors (no allocation, no re-entrance).
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        INSTALLED.store(true, Ordering::Relaxed);
        // SAFETY: forwarded with the caller's layout.
        let p = unsafe { System.alloc(layout) };
        if !p.is_null() {
            add(layout.size() as i64);
        }
        p
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: forwarded with the caller's pointer and layout.
        unsafe { System.dealloc(ptr, layout) };
        add(-(layout.size() as i64));
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        INSTALLED.store(true, Ordering::Relaxed);
        // SAFETY: forwarded with the caller's layout.
        let p = unsafe { System.alloc_zeroed(layout) };
        if !p.is_null() {
            add(layout.size() as i64);
        }
        p
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        // SAFETY: forwarded with the caller's pointer, layout and size.
        let p = unsafe { System.realloc(ptr, layout, new_size) };
        if !p.is_null() {
            add(new_size as i64 - layout.size() as i64);
        }
        p
    }
}

/// Run `f` and return its result with the peak heap bytes above the thread's live bytes at the
/// start, or `None` where the counting allocator is not installed.
/// Measurements nest: an enclosing one still sees the inner computation's peak.
pub fn measure<T>(f: impl FnOnce() -> T) -> (T, Option<u64>) {
    let start = LIVE.with(Cell::get);
    let outer = PEAK.with(|p| p.replace(start));
    let out = f();
    let peak = PEAK.with(|p| {
        let inner = p.get();
        p.set(inner.max(outer));
        inner
    });
    let installed = INSTALLED.load(Ordering::Relaxed);
    (out, installed.then(|| (peak - start).max(0) as u64))
}

/// Run `f` and return its result with the peak heap bytes of the whole process above its live
/// bytes at the start, or `None` where the counting allocator is not installed. Allocations of
/// other threads while `f` runs count too: measure one computation at a time.
/// Measurements nest: an enclosing one still sees the inner computation's peak.
pub fn measure_process<T>(f: impl FnOnce() -> T) -> (T, Option<u64>) {
    let start = PROCESS_LIVE.load(Ordering::Relaxed);
    let outer = PROCESS_PEAK.swap(start, Ordering::Relaxed);
    let out = f();
    let peak = PROCESS_PEAK.fetch_max(outer, Ordering::Relaxed);
    let installed = INSTALLED.load(Ordering::Relaxed);
    (out, installed.then(|| (peak - start).max(0) as u64))
}

/// Live heap bytes of the whole process now, or `None` where the counting allocator is not
/// installed.
pub fn process_live() -> Option<i64> {
    INSTALLED
        .load(Ordering::Relaxed)
        .then(|| PROCESS_LIVE.load(Ordering::Relaxed))
}
