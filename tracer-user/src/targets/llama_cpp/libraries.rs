//! The files a llama.cpp program is made of: the executable and the `libggml*` and
//! `libllama*` libraries the loader will open for a command (its `DT_NEEDED` search) or
//! that a running process has mapped, plus the libraries the user names.

use std::path::{Path, PathBuf};

use super::backend_points::GGML_VULKAN_LIB;

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
    for m in crate::proc_maps::read(pid) {
        let path = m.path;
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
