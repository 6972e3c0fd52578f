//! Where llama.cpp's CPU works for its other backends: the `ggml-backend` functions
//! `libggml-base` exports (a split's compute, waits, copies) and, under a Vulkan backend,
//! the loader's `vkQueueSubmit` and `vkWaitForFences`. A table: symbol, the argument
//! registers its entry program reads, and its programs (`tracer-ebpf/src/probes/
//! ggml_backend.rs`). Graph level.

use std::path::{Path, PathBuf};

use crate::probe_points::{self, ArgUse, ProbePoint};

/// One probed function.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BackendProbe {
    /// The exported function.
    pub symbol: &'static str,
    /// Integer argument registers its entry program reads.
    pub args: usize,
    /// The entry program.
    pub enter: &'static str,
    /// The return program (empty: none).
    pub exit: &'static str,
}

/// `libggml-base`'s functions (exported in every build with backends, 2024 on).
pub const GGML_BACKEND_PROBES: [BackendProbe; 7] = [
    BackendProbe {
        symbol: "ggml_backend_graph_compute_async",
        args: 2,
        enter: "ggml_backend_compute",
        exit: "ggml_backend_compute_ret",
    },
    BackendProbe {
        symbol: "ggml_backend_synchronize",
        args: 1,
        enter: "ggml_backend_sync",
        exit: "ggml_backend_call_ret",
    },
    BackendProbe {
        symbol: "ggml_backend_event_synchronize",
        args: 1,
        enter: "ggml_backend_event_sync",
        exit: "ggml_backend_call_ret",
    },
    BackendProbe {
        symbol: "ggml_backend_tensor_copy",
        args: 1,
        enter: "ggml_backend_copy",
        exit: "ggml_backend_call_ret",
    },
    BackendProbe {
        symbol: "ggml_backend_tensor_set",
        args: 4,
        enter: "ggml_backend_upload",
        exit: "ggml_backend_call_ret",
    },
    BackendProbe {
        symbol: "ggml_backend_tensor_get",
        args: 4,
        enter: "ggml_backend_download",
        exit: "ggml_backend_call_ret",
    },
    BackendProbe {
        symbol: "ggml_backend_tensor_get_async",
        args: 5,
        enter: "ggml_backend_download_async",
        exit: "ggml_backend_call_ret",
    },
];

/// The Vulkan loader's entry points ggml-vulkan calls (through vulkan.hpp's static
/// dispatch, i.e. the loader's exports).
pub const VULKAN_PROBES: [BackendProbe; 2] = [
    BackendProbe {
        symbol: "vkQueueSubmit",
        args: 2,
        enter: "vk_queue_submit",
        exit: "vk_call_ret",
    },
    BackendProbe {
        symbol: "vkWaitForFences",
        args: 2,
        enter: "vk_wait_for_fences",
        exit: "vk_call_ret",
    },
];

/// Operator level under a Vulkan backend (`tracer-ebpf/src/probes/gpu_node.rs`):
/// ggml-vulkan's `ggml_vk_build_graph` (a static function, in the library's symbol table;
/// matched with its full signature, whose argument registers the program reads: a build
/// that changed it is not probed) and the loader's `vkGetQueryPoolResults` (the GPU
/// timestamps ggml-vulkan reads with `GGML_VK_PERF_LOGGER`).
pub const VULKAN_NODE_PROBES: [BackendProbe; 2] = [
    BackendProbe {
        symbol: VK_BUILD_GRAPH,
        args: 6,
        enter: "ggml_vk_node",
        exit: "",
    },
    BackendProbe {
        symbol: "vkGetQueryPoolResults",
        args: 6,
        enter: "vk_query_results",
        exit: "vk_query_results_ret",
    },
];

/// `static bool ggml_vk_build_graph(ggml_backend_vk_context *, ggml_cgraph *, int node_idx,
/// ggml_tensor *, int, bool dryrun, bool last_node, bool almost_ready, bool submit)`, as
/// g++ names it (llama.cpp of mid 2025, llama-cpp-python 0.3.16).
pub const VK_BUILD_GRAPH: &str =
    "_ZL19ggml_vk_build_graphP23ggml_backend_vk_contextP11ggml_cgraphiP11ggml_tensoribbbb";

/// The library file name of ggml's Vulkan backend (`libggml-vulkan.so`).
pub const GGML_VULKAN_LIB: &str = "libggml-vulkan";

/// Whether `file_name` is the library of a ggml backend other than the CPU
/// (`libggml-vulkan.so`, `libggml-cuda.so`; not `libggml-base`, `libggml-cpu*` or
/// `libggml.so`): only a build that has one gets the backend probes, so a CPU-only
/// llama.cpp pays nothing for them.
pub fn is_other_backend_lib(file_name: &str) -> bool {
    file_name
        .strip_prefix("libggml-")
        .is_some_and(|rest| !rest.starts_with("base") && !rest.starts_with("cpu"))
}

/// A probe found in a file.
#[derive(Clone, Debug)]
pub struct BackendPoint {
    /// The file.
    pub file: PathBuf,
    /// Where to attach.
    pub point: ProbePoint,
    /// What it is.
    pub probe: BackendProbe,
}

/// The points of `table` that `file` (at `path`) defines.
pub fn points_in(
    path: &Path,
    file: &object::File<'_>,
    table: &[BackendProbe],
) -> Vec<BackendPoint> {
    probe_points::points_matching(file, |n| {
        table
            .iter()
            .find(|p| p.symbol == n)
            .map(|p| ArgUse::Registers(p.args))
    })
    .into_iter()
    .filter(|p| p.attach_cost != probe_points::CostClass::Unsupported)
    .filter_map(|point| {
        let probe = *table.iter().find(|p| p.symbol == point.symbol)?;
        Some(BackendPoint {
            file: path.to_path_buf(),
            point,
            probe,
        })
    })
    .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backend_libraries_are_told_from_the_cpu_and_core() {
        for name in [
            "libggml-vulkan.so",
            "libggml-cuda.so.0",
            "libggml-opencl.so",
        ] {
            assert!(is_other_backend_lib(name), "{name}");
        }
        for name in [
            "libggml.so",
            "libggml-base.so",
            "libggml-cpu.so",
            "libggml-cpu-haswell.so",
            "libllama.so",
        ] {
            assert!(!is_other_backend_lib(name), "{name}");
        }
    }

    #[test]
    fn every_probe_names_a_distinct_function() {
        let all: Vec<&BackendProbe> = GGML_BACKEND_PROBES
            .iter()
            .chain(&VULKAN_PROBES)
            .chain(&VULKAN_NODE_PROBES)
            .collect();
        for (i, a) in all.iter().enumerate() {
            assert!(a.args >= 1 && a.args <= 6, "{a:?}");
            for b in &all[i + 1..] {
                assert_ne!(a.symbol, b.symbol);
            }
        }
    }
}
