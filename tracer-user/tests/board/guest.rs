//! The board tests' kit (what `cargo xtask test` prepared) and the emulated board they
//! boot (the `board-guest` crate).

use std::path::PathBuf;

pub use board_guest::{GuestRun, GuestStep, Machine, boot, initramfs};

/// What `cargo xtask test` prepared for the board tests (`PROFINFER_BOARD_*`).
pub struct BoardKit {
    /// The aarch64 `engine` and `profinfer` (static musl builds).
    pub engine: PathBuf,
    /// See `engine`.
    pub profinfer: PathBuf,
    /// busybox-static for arm64.
    pub busybox: PathBuf,
    /// Kernel images (`vmlinuz-*`), one boot each.
    pub kernels: Vec<PathBuf>,
    /// llama.cpp's `llama-bench` for aarch64 and its libraries (one directory), and the
    /// aarch64 glibc/libstdc++ directory it runs with.
    pub llama: Option<(PathBuf, PathBuf)>,
}

impl BoardKit {
    /// The kit from the environment, or `None` after a loud banner (fatal with
    /// `PROFINFER_REQUIRE_BOARD=1`, which `cargo xtask test` sets).
    pub fn from_env() -> Option<BoardKit> {
        let var = |name: &str| std::env::var_os(name).filter(|v| !v.is_empty());
        let (Some(bin), Some(busybox), Some(kernels)) = (
            var("PROFINFER_BOARD_BIN"),
            var("PROFINFER_BOARD_BUSYBOX"),
            var("PROFINFER_BOARD_KERNELS"),
        ) else {
            crate::support::skip_unless_required(
                "PROFINFER_REQUIRE_BOARD",
                "the arm64 board kit is not prepared (PROFINFER_BOARD_BIN/_BUSYBOX/_KERNELS)",
                "run `cargo xtask test` or `cargo xtask board`, which prepare it",
            );
            return None;
        };
        let bin = PathBuf::from(bin);
        let llama = var("PROFINFER_BOARD_LLAMA")
            .zip(var("PROFINFER_BOARD_SYSROOT"))
            .map(|(l, s)| (PathBuf::from(l), PathBuf::from(s)));
        Some(BoardKit {
            engine: bin.join("engine"),
            profinfer: bin.join("profinfer"),
            busybox: PathBuf::from(busybox),
            kernels: std::env::split_paths(&kernels).collect(),
            llama,
        })
    }
}
