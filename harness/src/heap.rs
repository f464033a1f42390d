//! Peak heap bytes of a computation on the current thread ([`measure`]), through a counting
//! global allocator ([`Counting`]) that the `contactlab` binary installs (DESIGN.md: "on CPU
//! backends a counting global allocator gives exact live and peak heap bytes").
//!
//! The counts are per thread: each worker of the rayon pool computes one cell at a time, so the
//! peak of its thread during [`measure`] is that computation's own (forward plus backward, the
//! tape included), unaffected by the cells other threads run. Memory freed on another thread
//! than the one that allocated it would skew the counts; the gradient computations allocate
//! and free on their own thread. Where the allocator is not installed (library tests),
//! [`measure`] returns `None`.

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::sync::atomic::{AtomicBool, Ordering};

thread_local! {
    static LIVE: Cell<i64> = const { Cell::new(0) };
    static PEAK: Cell<i64> = const { Cell::new(0) };
}

static INSTALLED: AtomicBool = AtomicBool::new(false);

/// The system allocator, counting live and peak bytes per thread.
pub struct Counting;

fn add(n: i64) {
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

// SAFETY: every call is forwarded to `System` unchanged; the counting touches only
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
pub fn measure<T>(f: impl FnOnce() -> T) -> (T, Option<u64>) {
    let start = LIVE.with(Cell::get);
    PEAK.with(|p| p.set(start));
    let out = f();
    let peak = PEAK.with(Cell::get);
    let installed = INSTALLED.load(Ordering::Relaxed);
    (out, installed.then(|| (peak - start).max(0) as u64))
}
