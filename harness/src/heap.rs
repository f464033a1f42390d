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

/// A value alone on its cache line (64 bytes on x86-64 and most aarch64 cores): the three
/// process-wide counters are written from every thread that allocates, and sharing one line
/// made each allocation of one thread evict the others' copies (measured: the counting
/// allocator took 19 % of the samples of a two-thread batched control synthesis).
#[repr(align(64))]
struct Line<T>(T);

static INSTALLED: Line<AtomicBool> = Line(AtomicBool::new(false));
/// Live heap bytes of the whole process.
static PROCESS_LIVE: Line<AtomicI64> = Line(AtomicI64::new(0));
/// Peak of [`PROCESS_LIVE`] since the last [`measure_process`] began.
static PROCESS_PEAK: Line<AtomicI64> = Line(AtomicI64::new(0));

/// Record that the allocator is installed, writing the shared flag only once (a store on
/// every allocation would keep its cache line bouncing between cores).
fn mark_installed() {
    if !INSTALLED.0.load(Ordering::Relaxed) {
        INSTALLED.0.store(true, Ordering::Relaxed);
    }
}

/// The system allocator, counting live and peak bytes per thread.
pub struct Counting;

fn add(n: i64) {
    let live = PROCESS_LIVE.0.fetch_add(n, Ordering::Relaxed) + n;
    // The read first: the peak's line is written only when the peak rises. A concurrent raise
    // between the load and `fetch_max` is kept by `fetch_max`; the one read that can mislead is
    // another thread's, within the instant after `measure_process` resets the peak at a cell's
    // start (a stale, higher peak), which the study's one-cell-at-a-time order makes moot.
    if n > 0 && live > PROCESS_PEAK.0.load(Ordering::Relaxed) {
        PROCESS_PEAK.0.fetch_max(live, Ordering::Relaxed);
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
        mark_installed();
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
        mark_installed();
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
    let installed = INSTALLED.0.load(Ordering::Relaxed);
    (out, installed.then(|| (peak - start).max(0) as u64))
}

/// Run `f` and return its result with the peak heap bytes of the whole process above its live
/// bytes at the start, or `None` where the counting allocator is not installed. Allocations of
/// other threads while `f` runs count too: measure one computation at a time.
/// Measurements nest: an enclosing one still sees the inner computation's peak.
pub fn measure_process<T>(f: impl FnOnce() -> T) -> (T, Option<u64>) {
    let start = PROCESS_LIVE.0.load(Ordering::Relaxed);
    let outer = PROCESS_PEAK.0.swap(start, Ordering::Relaxed);
    let out = f();
    let peak = PROCESS_PEAK.0.fetch_max(outer, Ordering::Relaxed);
    let installed = INSTALLED.0.load(Ordering::Relaxed);
    (out, installed.then(|| (peak - start).max(0) as u64))
}

/// Live heap bytes of the whole process now, or `None` where the counting allocator is not
/// installed.
pub fn process_live() -> Option<i64> {
    INSTALLED
        .0
        .load(Ordering::Relaxed)
        .then(|| PROCESS_LIVE.0.load(Ordering::Relaxed))
}
