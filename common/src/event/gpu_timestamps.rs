//! Operator level on a GPU backend: the timestamps the GPU wrote between a split's nodes,
//! as the target read them back (llama.cpp's Vulkan backend with `GGML_VK_PERF_LOGGER`
//! writes one before its first node and one after each node, and reads them with
//! `vkGetQueryPoolResults`). Node `i`'s GPU time is `ticks[i + 1] - ticks[i]` in the
//! device's timestamp period. A split's array leaves the kernel as a run of
//! [`GpuTimestampsEvent`]s of [`GPU_TIMESTAMPS_PER_EVENT`] values each.

use core::mem::{offset_of, size_of};

use super::EventHeader;

/// Timestamps in one [`GpuTimestampsEvent`].
pub const GPU_TIMESTAMPS_PER_EVENT: usize = 32;

/// Most timestamps read from one `vkGetQueryPoolResults` call (a split of up to 2047
/// nodes; SmolLM2's whole graph has 1055); [`GpuTimestampsEvent::total`] keeps the real count, so a reader sees a cut.
pub const GPU_TIMESTAMPS_MAX: u32 = 2048;

/// Thread `header.tid` read `count` GPU timestamps, queries `first..first + count` of the
/// `total` it asked for, at `header.ts_ns` (the call's return).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct GpuTimestampsEvent {
    /// Common header ([`super::EventKind::GpuTimestamps`]).
    pub header: EventHeader,
    /// Index of `ticks[0]` among the call's queries.
    pub first: u32,
    /// Valid values in `ticks`.
    pub count: u32,
    /// Queries the call returned (`queryCount`).
    pub total: u32,
    /// Chunk number of the call (0 for its first record).
    pub chunk: u32,
    /// The timestamps, in device ticks.
    pub ticks: [u64; GPU_TIMESTAMPS_PER_EVENT],
}
const _: () = assert!(size_of::<GpuTimestampsEvent>() == 32 + 16 + 8 * GPU_TIMESTAMPS_PER_EVENT);
const _: () = assert!(offset_of!(GpuTimestampsEvent, first) == 32);
const _: () = assert!(offset_of!(GpuTimestampsEvent, ticks) == 48);

impl GpuTimestampsEvent {
    /// The valid timestamps.
    pub fn valid(&self) -> &[u64] {
        &self.ticks[..(self.count as usize).min(GPU_TIMESTAMPS_PER_EVENT)]
    }
}
