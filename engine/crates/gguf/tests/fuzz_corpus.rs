//! Runs the fuzz target's check on every checked-in seed (valid files, corrupted files
//! and inputs that once crashed), so regressions show up in `cargo test`.

#[path = "support/exercise.rs"]
mod exercise;

use std::path::Path;

#[test]
fn every_seed_is_handled_and_valid_seeds_round_trip() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("fuzz/corpus/gguf_parse");
    let mut seeds = 0;
    let mut valid = 0;
    for entry in std::fs::read_dir(&dir).expect("corpus directory exists") {
        let path = entry.expect("readable entry").path();
        let bytes = std::fs::read(&path).expect("readable seed");
        seeds += 1;
        let parsed = exercise::exercise(&bytes);
        let expect_valid = path
            .file_name()
            .and_then(|n| n.to_str())
            .is_some_and(|n| n.starts_with("valid-"));
        assert_eq!(parsed, expect_valid, "{}", path.display());
        valid += usize::from(parsed);
    }
    assert!(seeds >= 6 && valid >= 3, "{seeds} seeds, {valid} valid");
}
