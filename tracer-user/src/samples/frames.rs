//! Function names of a target's instruction addresses: the mapping that holds the
//! address (`/proc/PID/maps`), its ELF file's load segments (object) to turn the address
//! into the file's own, and the file's DWARF (addr2line) for the function and every
//! function inlined at that address, innermost first, or its symbol table where it has
//! no debug information (llama.cpp's release builds).

use std::{
    collections::HashMap,
    path::PathBuf,
    time::{Duration, Instant},
};

use crate::proc_maps::{self, Mapping};

/// Least time between two readings of the mappings: a sampled instruction in no mapping
/// (the vDSO, code generated at run time) must not cost a reading each time.
const MAPS_REREAD: Duration = Duration::from_secs(1);

/// A mapped ELF file, loaded for symbolization.
struct Image {
    loader: addr2line::Loader,
    /// Load segments: (file offset, file size, virtual address).
    segments: Vec<(u64, u64, u64)>,
}

/// One function at an address: its name (without the namespace where the DWARF has
/// line tables only, as the engine's release build), its source file (empty without
/// DWARF) and the mapped file it is in.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Frame {
    /// Function name (empty when the file names no function there: a stripped static
    /// function of a system library).
    pub function: String,
    /// Source file of the function's code at the address.
    pub file: String,
    /// File name of the mapped ELF file (`libgomp.so.1`).
    pub object: String,
}

/// Function names by instruction address in one process, cached per file.
pub struct FrameNames {
    pid: u32,
    mappings: Vec<Mapping>,
    maps_read: Option<Instant>,
    /// `None`: the file could not be read (deleted, no permission, not ELF).
    images: HashMap<PathBuf, Option<Image>>,
}

impl FrameNames {
    /// Names for the process `pid` (its mappings are read at the first sampled
    /// instruction, and again when one falls outside them, at most once a second: a
    /// library loaded later).
    pub fn new(pid: u32) -> FrameNames {
        FrameNames {
            pid,
            mappings: Vec::new(),
            maps_read: None,
            images: HashMap::new(),
        }
    }

    /// The functions at `ip`, innermost (inlined) first; empty when the address is in
    /// no file-backed executable mapping; one frame with no function when the file names
    /// nothing there. `surely_code`: the address is an instruction the thread was at (a
    /// library loaded since the mappings were read is looked for at once).
    pub fn functions(&mut self, ip: u64, surely_code: bool) -> Vec<Frame> {
        if !self.in_code(ip, surely_code) {
            return Vec::new();
        }
        let Some(m) = self.mapping(ip) else {
            return Vec::new();
        };
        let (file_off, path) = (ip - m.start + m.offset, m.path.clone());
        let object = path
            .file_name()
            .map_or_else(String::new, |n| n.to_string_lossy().into_owned());
        let image = self
            .images
            .entry(path.clone())
            .or_insert_with(|| Image::open(&path));
        let mut frames = image
            .as_ref()
            .map_or_else(Vec::new, |img| img.functions(file_off));
        if frames.is_empty() {
            frames.push(Frame::default());
        }
        for f in &mut frames {
            f.object.clone_from(&object);
        }
        frames
    }

    /// Whether `ip` is in an executable file mapping: a binary search, for the many
    /// stack words the sampler tries that point at no code. The mappings are read again
    /// when a `surely_code` address (an instruction a thread was at: a library loaded
    /// since) is in none, at most once a second.
    pub fn in_code(&mut self, ip: u64, surely_code: bool) -> bool {
        if self.mapping(ip).is_some() {
            return true;
        }
        if !surely_code {
            return false;
        }
        if self.maps_read.is_none_or(|t| t.elapsed() >= MAPS_REREAD) {
            self.mappings = proc_maps::read(self.pid)
                .into_iter()
                .filter(|m| m.executable)
                .collect();
            self.mappings.sort_by_key(|m| m.start);
            self.maps_read = Some(Instant::now());
        }
        self.mapping(ip).is_some()
    }

    /// The mapping holding `ip` (the mappings are sorted by start and do not overlap).
    fn mapping(&self, ip: u64) -> Option<&Mapping> {
        let i = self.mappings.partition_point(|m| m.start <= ip);
        self.mappings[..i].last().filter(|m| ip < m.end)
    }
}

impl Image {
    fn open(path: &std::path::Path) -> Option<Image> {
        let data = std::fs::read(path).ok()?;
        let file = object::File::parse(&*data).ok()?;
        use object::{Object, ObjectSegment};
        let segments = file
            .segments()
            .map(|s| {
                let (off, size) = s.file_range();
                (off, size, s.address())
            })
            .collect();
        let loader = addr2line::Loader::new(path).ok()?;
        Some(Image { loader, segments })
    }

    fn functions(&self, file_off: u64) -> Vec<Frame> {
        let Some(&(off, _, vaddr)) = self
            .segments
            .iter()
            .find(|&&(off, size, _)| (off..off + size).contains(&file_off))
        else {
            return Vec::new();
        };
        let probe = file_off - off + vaddr;
        let mut names = Vec::new();
        if let Ok(mut frames) = self.loader.find_frames(probe) {
            while let Ok(Some(f)) = frames.next() {
                if let Some(name) = f.function.as_ref().and_then(|n| n.demangle().ok()) {
                    names.push(Frame {
                        function: without_hash(&name).to_owned(),
                        file: f
                            .location
                            .and_then(|l| l.file)
                            .unwrap_or_default()
                            .to_owned(),
                        object: String::new(),
                    });
                }
            }
        }
        // The symbol table names the physical function with its whole path
        // (`engine_kernels::matmul::x86::tile_block`), which line-tables-only DWARF
        // does not: it goes last, as the outermost name.
        if let Some(sym) = self.loader.find_symbol(probe) {
            let name = addr2line::demangle_auto(sym.into(), None);
            names.push(Frame {
                function: without_hash(&name).to_owned(),
                file: String::new(),
                object: String::new(),
            });
        }
        names
    }
}

/// A Rust symbol without its `::h0123456789abcdef` hash.
fn without_hash(name: &str) -> &str {
    match name.rsplit_once("::h") {
        Some((head, hash)) if hash.len() == 16 && hash.bytes().all(|b| b.is_ascii_hexdigit()) => {
            head
        }
        _ => name,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rust_symbols_lose_their_hash() {
        assert_eq!(
            without_hash("engine::ops::compute::h0123456789abcdef"),
            "engine::ops::compute"
        );
        assert_eq!(without_hash("ggml_barrier"), "ggml_barrier");
    }

    #[test]
    fn names_this_test_function() {
        // This process's own code: a real mapping, a real ELF file with DWARF.
        let ip = names_this_test_function as *const () as usize as u64;
        let mut names = FrameNames::new(std::process::id());
        let functions = names.functions(ip, true);
        assert!(
            functions
                .iter()
                .any(|f| f.function.ends_with("names_this_test_function")
                    && f.file.ends_with("frames.rs")
                    && !f.object.is_empty()),
            "{functions:?}"
        );
    }
}
