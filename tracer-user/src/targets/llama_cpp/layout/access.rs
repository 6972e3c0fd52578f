//! What the layout derivation reads out of an accessor's machine code: its memory
//! accesses relative to where the registers' values came from (the function's arguments,
//! the first call's return value, a pointer loaded from an argument). The instruction
//! readers ([`super::x86`], [`super::a64`]) produce them; [`super::rules`] pick offsets
//! from them.

/// Instructions decoded per accessor (they are a handful; the rest is assert paths).
pub const MAX_INSTRUCTIONS: usize = 40;

/// Where a value in a register came from, as far as a straight-line walk can tell.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Origin {
    /// The function's n-th integer argument, unchanged.
    Arg(u8),
    /// The return value of the (first) call the function made.
    Returned,
    /// A pointer loaded from `[argument + offset]`.
    Field(u8, i64),
    /// Anything else.
    Other,
}

/// What an instruction did with memory.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AccessKind {
    /// Read (a load, a compare, an arithmetic source).
    Read,
    /// Written; `value` is where the stored register came from.
    Write {
        /// The stored register's origin (`Other` for an immediate).
        value: Origin,
    },
    /// Only the address was computed (`lea`, `add xd, xn, #imm`).
    Address,
}

/// One memory access of a function, relative to a register's origin.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Access {
    /// Read, written or only addressed.
    pub kind: AccessKind,
    /// The base register's origin.
    pub base: Origin,
    /// The displacement.
    pub disp: i64,
    /// Bytes accessed (0 for an address).
    pub size: u8,
}
