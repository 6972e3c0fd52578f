//! The cost classes of a uprobe by the instruction under its breakpoint, shared by the
//! x86-64 ([`crate::probe_points`]) and arm64 ([`crate::a64_uprobe`]) decoders.

/// How expensive a uprobe at an instruction is. The costs are x86-64's
/// (`shared/reference.md`); on arm64 every hit traps, and the classes differ by the
/// out-of-line step only ([`crate::a64_uprobe`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CostClass {
    /// A nop: the kernel skips it (~0.35 µs per hit).
    Nop,
    /// `push` and friends: emulated by the kernel (~0.7 µs).
    Emulated,
    /// Anything else: single-stepped out of line (~6 µs).
    SingleStep,
    /// An instruction the kernel's uprobes refuse (`perf_event_open` fails with
    /// ENOTSUPP, 524): on x86-64 VEX/EVEX/XOP-encoded vector instructions, which
    /// compilers put first in some functions; on arm64 exclusive loads and stores,
    /// `msr`/`mrs` and the like. Such a point is not probed.
    Unsupported,
}

impl CostClass {
    /// Short name as written in traces and listings.
    pub fn name(self) -> &'static str {
        match self {
            CostClass::Nop => "nop",
            CostClass::Emulated => "emulated",
            CostClass::SingleStep => "single-step",
            CostClass::Unsupported => "unsupported",
        }
    }
}
