//! What the CPU does for a backend other than computing on it (graph level, llama.cpp's
//! `ggml-backend` and the Vulkan loader): a copy between backends, a wait for a backend, a
//! submission to a GPU queue, a fence wait. One [`BackendSpanEvent`] at the call's return.

use core::mem::{offset_of, size_of};

use super::EventHeader;

/// [`BackendSpanEvent::what`]: what the span is.
#[repr(u32)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum BackendSpanKind {
    /// `ggml_backend_synchronize(backend)`: the CPU waits until a backend has finished
    /// what was queued on it.
    Sync = 1,
    /// `ggml_backend_event_synchronize(event)`: the CPU waits for a backend's event.
    EventSync = 2,
    /// `ggml_backend_tensor_copy(src, dst)`: a tensor copied between backends (the
    /// scheduler's inputs of a split), `bytes` = `ggml_nbytes(src)`.
    Copy = 3,
    /// `ggml_backend_tensor_set(tensor, data, offset, size)`: host memory written into a
    /// backend's tensor (graph inputs), `bytes` = size.
    Upload = 4,
    /// `ggml_backend_tensor_get(tensor, data, offset, size)` (and `_async`): a backend's
    /// tensor read into host memory (logits, embeddings), `bytes` = size.
    Download = 5,
    /// `vkQueueSubmit(queue, submitCount, pSubmits, fence)`: command buffers handed to the
    /// GPU, `bytes` = submitCount.
    VkSubmit = 6,
    /// `vkWaitForFences(device, fenceCount, pFences, waitAll, timeout)`: the CPU blocked on
    /// the GPU, `bytes` = fenceCount.
    VkFenceWait = 7,
}

impl BackendSpanKind {
    /// Every kind, in number order.
    pub const ALL: [BackendSpanKind; 7] = [
        BackendSpanKind::Sync,
        BackendSpanKind::EventSync,
        BackendSpanKind::Copy,
        BackendSpanKind::Upload,
        BackendSpanKind::Download,
        BackendSpanKind::VkSubmit,
        BackendSpanKind::VkFenceWait,
    ];

    /// The kind for a stored value.
    pub const fn from_u32(v: u32) -> Option<BackendSpanKind> {
        match v {
            1 => Some(BackendSpanKind::Sync),
            2 => Some(BackendSpanKind::EventSync),
            3 => Some(BackendSpanKind::Copy),
            4 => Some(BackendSpanKind::Upload),
            5 => Some(BackendSpanKind::Download),
            6 => Some(BackendSpanKind::VkSubmit),
            7 => Some(BackendSpanKind::VkFenceWait),
            _ => None,
        }
    }

    /// Snake-case name (`sync`, `vk_fence_wait`, ...).
    pub const fn name(self) -> &'static str {
        match self {
            BackendSpanKind::Sync => "sync",
            BackendSpanKind::EventSync => "event_sync",
            BackendSpanKind::Copy => "copy",
            BackendSpanKind::Upload => "upload",
            BackendSpanKind::Download => "download",
            BackendSpanKind::VkSubmit => "vk_submit",
            BackendSpanKind::VkFenceWait => "vk_fence_wait",
        }
    }

    /// Whether the CPU is waiting for a backend (a sync or a fence wait).
    pub const fn is_wait(self) -> bool {
        matches!(
            self,
            BackendSpanKind::Sync | BackendSpanKind::EventSync | BackendSpanKind::VkFenceWait
        )
    }

    /// Whether data moves (a copy, an upload or a download).
    pub const fn is_transfer(self) -> bool {
        matches!(
            self,
            BackendSpanKind::Copy | BackendSpanKind::Upload | BackendSpanKind::Download
        )
    }
}

/// Graph level: thread `header.tid` spent `start_ns..header.ts_ns` in a backend call
/// ([`BackendSpanKind`]). Calls nested in a recorded one of the same family (the
/// `ggml_backend_tensor_set` a `ggml_backend_tensor_copy` makes) are not recorded
/// separately; the Vulkan calls inside a sync or a copy are (they are the driver's part).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct BackendSpanEvent {
    /// Common header ([`super::EventKind::BackendSpan`], `ts_ns` = the call's return).
    pub header: EventHeader,
    /// When the call began.
    pub start_ns: u64,
    /// [`BackendSpanKind`] value.
    pub what: u32,
    /// `BackendKind` of the backend concerned, where the call names one (syncs: the
    /// backend's GUID; copies: the destination's), else `u32::MAX`.
    pub backend_kind: u32,
    /// Bytes moved (transfers) or items handed over (submits, fences).
    pub bytes: u64,
    /// The call's first argument (the `ggml_backend_t`, tensor, queue or device).
    pub object: u64,
}
const _: () = assert!(size_of::<BackendSpanEvent>() == 64);
const _: () = assert!(offset_of!(BackendSpanEvent, start_ns) == 32);
const _: () = assert!(offset_of!(BackendSpanEvent, bytes) == 48);

/// [`BackendSpanEvent::backend_kind`] when the call names no backend.
pub const BACKEND_UNKNOWN: u32 = u32::MAX;

impl BackendSpanEvent {
    /// The span's kind, if known.
    pub const fn kind(&self) -> Option<BackendSpanKind> {
        BackendSpanKind::from_u32(self.what)
    }

    /// Duration, ns.
    pub const fn dur_ns(&self) -> u64 {
        self.header.ts_ns.saturating_sub(self.start_ns)
    }
}
