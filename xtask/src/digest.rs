//! SHA-256 digests in hex, of bytes and of files (cache keys, pinned downloads).

use std::io::Read as _;
use std::path::Path;

use anyhow::{Context, Result};
use sha2::{Digest as _, Sha256};

/// Hex SHA-256 of `data`.
pub fn sha256_hex(data: &[u8]) -> String {
    hex(&Sha256::digest(data))
}

/// Hex SHA-256 of a file, read in 1 MiB pieces.
pub fn sha256_file(path: &Path) -> Result<String> {
    let mut file =
        std::fs::File::open(path).with_context(|| format!("cannot open {}", path.display()))?;
    let mut hasher = Sha256::new();
    let mut buf = vec![0u8; 1 << 20];
    loop {
        let n = file
            .read(&mut buf)
            .with_context(|| format!("cannot read {}", path.display()))?;
        if n == 0 {
            break;
        }
        hasher.update(&buf[..n]);
    }
    Ok(hex(&hasher.finalize()))
}

/// Lower-case hex of a digest.
fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// FIPS 180-2 example: SHA-256("abc").
    const ABC: &str = "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad";

    #[test]
    fn bytes_and_file_match_the_standard_test_vector() {
        assert_eq!(sha256_hex(b"abc"), ABC);
        let file = std::env::temp_dir().join(format!("xtask-digest-{}", std::process::id()));
        std::fs::write(&file, b"abc").expect("write");
        assert_eq!(sha256_file(&file).expect("hash"), ABC);
        let _ = std::fs::remove_file(&file);
    }
}
