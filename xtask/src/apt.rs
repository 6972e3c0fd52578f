//! Debian packages: installed with apt-get (through sudo when not root) when missing.

use std::process::Command;

use anyhow::{Result, bail};

use crate::process;

/// Installs the missing `packages` (one `apt-get update` first).
pub fn install(packages: &[&str]) -> Result<()> {
    let missing: Vec<&str> = packages
        .iter()
        .copied()
        .filter(|p| !dpkg_installed(p))
        .collect();
    if missing.is_empty() {
        eprintln!("    already installed: {}", packages.join(" "));
        return Ok(());
    }
    if !process::succeeds(Command::new("apt-get").arg("--version")) {
        bail!(
            "apt-get not found; install these packages by hand: {}",
            missing.join(" ")
        );
    }
    let sudo = !process::is_root();
    let apt = |args: &[&str]| {
        let mut cmd = if sudo {
            Command::new("sudo")
        } else {
            Command::new("apt-get")
        };
        if sudo {
            cmd.arg("apt-get");
        }
        cmd.args(args).env("DEBIAN_FRONTEND", "noninteractive");
        cmd
    };
    process::run(&mut apt(&["update", "-q"]))?;
    let mut install = apt(&["install", "-y", "-q", "--no-install-recommends"]);
    install.args(&missing);
    process::run(&mut install)
}

/// Whether `dpkg -s` reports `package` as installed.
fn dpkg_installed(package: &str) -> bool {
    Command::new("dpkg-query")
        .args(["-W", "-f=${Status}", package])
        .output()
        .is_ok_and(|o| {
            o.status.success()
                && String::from_utf8_lossy(&o.stdout).contains("install ok installed")
        })
}
