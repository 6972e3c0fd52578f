//! profinfer's analyzer: a pure model built from trace events, and exporters over it.
//! Filled by the analyzer issue.

pub use common::engine_abi::OpType;
