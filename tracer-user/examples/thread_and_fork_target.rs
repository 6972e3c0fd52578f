//! A stand-in engine for the tracer's thread-set test: exports `engine_decode` (so
//! `profinfer record` accepts it), starts one thread and forks one child process, both
//! of which sleep a few times (scheduler events), and prints `thread TID` and
//! `child PID` on stdout.

use std::{hint::black_box, time::Duration};

/// Token level stand-in.
#[unsafe(no_mangle)]
#[inline(never)]
pub extern "C" fn engine_decode(
    ctx: *mut std::ffi::c_void,
    n_tokens: u32,
    pos: u32,
    tokens: *const i32,
) -> i32 {
    black_box((ctx, n_tokens, pos, tokens));
    0
}

fn naps() {
    for _ in 0..5 {
        std::thread::sleep(Duration::from_millis(5));
    }
}

fn main() {
    black_box(engine_decode)(std::ptr::null_mut(), 1, 0, std::ptr::null());
    let thread = std::thread::spawn(|| {
        // SAFETY: gettid has no preconditions.
        let tid = unsafe { libc::gettid() };
        naps();
        tid
    });
    // SAFETY: the child only sleeps (nanosleep) and calls _exit; no locks are taken.
    let child = unsafe { libc::fork() };
    if child == 0 {
        let ts = libc::timespec {
            tv_sec: 0,
            tv_nsec: 5_000_000,
        };
        for _ in 0..5 {
            // SAFETY: valid timespec, null remainder.
            unsafe { libc::nanosleep(&ts, std::ptr::null_mut()) };
        }
        // SAFETY: ends the child without running the parent's destructors.
        unsafe { libc::_exit(0) };
    }
    let tid = thread.join().expect("thread ran");
    // SAFETY: reaps our own child.
    unsafe { libc::waitpid(child, std::ptr::null_mut(), 0) };
    println!("thread {tid}");
    println!("child {child}");
}
