//! profinfer's own engine as a traced program: its probe points are exported C-ABI
//! symbols (`common::engine_abi::symbols`, found by [`points`]), attached by the table in
//! [`uprobes`]; its plan is [`plan::EnginePlan`].

pub mod plan;
pub mod points;
pub mod sample_ops;
pub mod uprobes;
