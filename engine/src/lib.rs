//! The engine library.
