//! Synthetic vocabularies.
