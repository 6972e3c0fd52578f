//! Unmodified llama.cpp as a traced program (any program on ggml's CPU backend, with
//! libllama or without). Its files are found by [`libraries`]; the build is detected by
//! [`build`] (version strings and op table read by [`image`], the struct layout derived
//! from its code by [`layout`]); [`backend_points`] lists where the CPU works for other
//! backends (ggml-backend, the Vulkan loader, ggml-vulkan's node recording); the probe
//! plan is [`plan::LlamaCppPlan`], and [`layout_check`] holds the first records against
//! the layout.

pub mod backend_points;
pub mod build;
pub mod image;
pub mod layout;
pub mod layout_check;
pub mod libraries;
pub mod plan;
pub mod sample_ops;
