//! Fuzzes the GGUF reader: arbitrary bytes must never panic, and every file the reader
//! accepts must have readable tensor data and metadata and survive a write/read round
//! trip through the writer.

#![no_main]

#[path = "../../tests/support/exercise.rs"]
mod exercise;

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    exercise::exercise(data);
});
