//! llama.cpp's backends by their GUID: every `ggml_backend` starts with a pointer to its
//! backend's 16-byte GUID (`struct ggml_backend { ggml_guid_t guid; ... }`, ggml-backend-impl.h),
//! a constant each backend defines once (`ggml_backend_<name>_guid()`) and that has not
//! changed since backends got GUIDs (2024). The probes compare the 16 bytes to tell which
//! backend a split, a copy or a wait belongs to (`GGML_BACKEND_GUIDS`).
//!
//! One row per backend, from ggml's sources (ggml 0.26). `ggml-blas` and `ggml-openvino`
//! share a GUID; the row names BLAS.

use crate::engine_abi::BackendKind;

/// A ggml backend's GUID and what profinfer calls it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct GgmlBackendGuid {
    /// ggml's name for it (`ggml_backend_name` gives `Vulkan0`, `CPU`, ...).
    pub name: &'static str,
    /// The 16 bytes.
    pub guid: [u8; 16],
    /// The backend kind its splits are recorded as.
    pub kind: BackendKind,
}

/// Every backend profinfer names. A backend not listed is recorded as [`BackendKind::Gpu`].
pub const GGML_BACKEND_GUIDS: [GgmlBackendGuid; 9] = [
    GgmlBackendGuid {
        name: "CPU",
        guid: [
            0xaa, 0x67, 0xc7, 0x43, 0x96, 0xe6, 0xa3, 0x8a, 0xe3, 0xaf, 0xea, 0x92, 0x36, 0xbc,
            0xfc, 0x89,
        ],
        kind: BackendKind::Cpu,
    },
    GgmlBackendGuid {
        name: "Vulkan",
        guid: [
            0xb8, 0xf7, 0x4f, 0x86, 0x40, 0x3c, 0xe1, 0x02, 0x91, 0xc8, 0xdd, 0xe9, 0x02, 0x3f,
            0xc0, 0x2b,
        ],
        kind: BackendKind::Vulkan,
    },
    GgmlBackendGuid {
        name: "OpenCL",
        guid: [
            0xde, 0xe0, 0x70, 0xa2, 0x73, 0x4e, 0x4d, 0xbc, 0xb0, 0xc7, 0x4f, 0xd4, 0x6d, 0x4e,
            0x90, 0xfe,
        ],
        kind: BackendKind::OpenCl,
    },
    GgmlBackendGuid {
        name: "CUDA",
        guid: [
            0x2c, 0xdd, 0xe8, 0x1c, 0x65, 0xb3, 0x65, 0x73, 0x6a, 0x12, 0x88, 0x61, 0x1c, 0xc9,
            0xdc, 0x25,
        ],
        kind: BackendKind::Cuda,
    },
    GgmlBackendGuid {
        name: "Metal",
        guid: [
            0x81, 0xa1, 0x8b, 0x1e, 0x71, 0xec, 0x79, 0xed, 0x2b, 0x85, 0xdc, 0x8a, 0x61, 0x98,
            0x30, 0xe6,
        ],
        kind: BackendKind::Metal,
    },
    GgmlBackendGuid {
        name: "BLAS",
        guid: [
            0x12, 0xa8, 0xae, 0xf4, 0xc0, 0x1e, 0x61, 0x97, 0x8f, 0xeb, 0x33, 0x04, 0xa1, 0x33,
            0x51, 0x2d,
        ],
        kind: BackendKind::Blas,
    },
    GgmlBackendGuid {
        name: "RPC",
        guid: [
            0x99, 0x68, 0x5b, 0x6c, 0xd2, 0x83, 0x3d, 0x24, 0x25, 0x36, 0x72, 0xe1, 0x5b, 0x0e,
            0x14, 0x03,
        ],
        kind: BackendKind::Rpc,
    },
    GgmlBackendGuid {
        name: "SYCL",
        guid: [
            0x58, 0x05, 0x13, 0x8f, 0xcd, 0x3a, 0x61, 0x9d, 0xe7, 0xcd, 0x98, 0xa9, 0x03, 0xfd,
            0x7c, 0x53,
        ],
        kind: BackendKind::Gpu,
    },
    GgmlBackendGuid {
        name: "CANN",
        guid: [
            0xa1, 0x94, 0xaf, 0xac, 0xbd, 0x4f, 0x47, 0x34, 0xbe, 0x1a, 0x9e, 0x71, 0x1f, 0x9e,
            0xed, 0x64,
        ],
        kind: BackendKind::Npu,
    },
];

/// The map key of a GUID: its 16 bytes as two little-endian words (how the probe reads them).
pub const fn guid_key(guid: &[u8; 16]) -> [u64; 2] {
    let mut lo = 0u64;
    let mut hi = 0u64;
    let mut i = 0;
    while i < 8 {
        lo |= (guid[i] as u64) << (8 * i);
        hi |= (guid[i + 8] as u64) << (8 * i);
        i += 1;
    }
    [lo, hi]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn guids_are_distinct_and_keys_round_trip() {
        for (i, a) in GGML_BACKEND_GUIDS.iter().enumerate() {
            for b in &GGML_BACKEND_GUIDS[i + 1..] {
                assert_ne!(a.guid, b.guid, "{} and {}", a.name, b.name);
            }
            let [lo, hi] = guid_key(&a.guid);
            let mut back = [0u8; 16];
            back[..8].copy_from_slice(&lo.to_le_bytes());
            back[8..].copy_from_slice(&hi.to_le_bytes());
            assert_eq!(back, a.guid);
        }
    }
}
