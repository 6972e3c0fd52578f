//! GGUF v3 reader and writer.
