//! `engine` command line.
fn main() {}
