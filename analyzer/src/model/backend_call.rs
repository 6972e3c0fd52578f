//! What the CPU did for another backend (llama.cpp's `ggml-backend` and the Vulkan
//! loader): one [`BackendCall`] per recorded copy, wait, submission or fence wait.

use common::event::{BACKEND_UNKNOWN, BackendSpanEvent, BackendSpanKind};
use serde::Serialize;

use super::graph::backend_name;

/// One call of a thread for a backend.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct BackendCall {
    /// What it was.
    #[serde(serialize_with = "kind_name")]
    pub kind: BackendSpanKind,
    /// The backend concerned (`BackendKind` value), if the call names one.
    pub backend_kind: Option<u32>,
    /// Calling thread.
    pub tid: u32,
    /// The decode call it ran in, if any.
    pub token: Option<u32>,
    /// Entry, ns.
    pub start_ns: u64,
    /// Return, ns.
    pub end_ns: u64,
    /// Bytes moved (transfers) or items handed over (submits, fences).
    pub bytes: u64,
}

fn kind_name<S: serde::Serializer>(k: &BackendSpanKind, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_str(k.name())
}

impl BackendCall {
    /// The call of a record, in decode call `token`; `None` for an unknown kind.
    pub fn from_event(e: &BackendSpanEvent, token: Option<u32>) -> Option<BackendCall> {
        Some(BackendCall {
            kind: e.kind()?,
            backend_kind: (e.backend_kind != BACKEND_UNKNOWN).then_some(e.backend_kind),
            tid: e.header.tid,
            token,
            start_ns: e.start_ns.min(e.header.ts_ns),
            end_ns: e.header.ts_ns,
            bytes: e.bytes,
        })
    }

    /// Duration, ns.
    pub fn dur_ns(&self) -> u64 {
        self.end_ns - self.start_ns
    }

    /// A label for timelines: `vk_fence_wait`, `sync vulkan`, `copy → vulkan 1.2 MB`.
    pub fn label(&self) -> String {
        let mut s = self.kind.name().to_owned();
        if let Some(k) = self.backend_kind {
            s.push(' ');
            s.push_str(&backend_name(k));
        }
        if self.kind.is_transfer() {
            s.push_str(&format!(" {} B", self.bytes));
        }
        s
    }
}
