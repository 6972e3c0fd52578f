//! The engine's probe points: where each symbol of the engine probe ABI
//! (`common::engine_abi::symbols`) is in a binary, with its first instruction and
//! attach cost (`crate::probe_points`). A binary without any is not the engine.

use std::path::{Path, PathBuf};

use common::engine_abi::symbols;
use object::{Object, ObjectSymbol};

use crate::probe_points::{self, ARG_REGISTERS, ArgUse, ProbePoint, ProbePointError};

/// Why the engine's probe points could not be resolved.
#[derive(Debug, thiserror::Error)]
pub enum EngineError {
    /// The binary could not be read or parsed.
    #[error(transparent)]
    Binary(#[from] ProbePointError),
    /// None of the engine's probe symbols are exported.
    #[error(
        "target binary `{path}` has no engine probe symbols (engine_decode, engine_op_compute, ...): is it the profinfer engine?"
    )]
    NoProbeSymbols {
        /// The binary.
        path: PathBuf,
    },
}

/// The resolved probe points of one binary.
#[derive(Clone, Debug)]
pub struct ProbePoints {
    /// The binary.
    pub path: PathBuf,
    /// GNU build-id (hex), if present.
    pub build_id: Option<String>,
    /// The engine probe symbols found, in `symbols::ALL` order.
    pub points: Vec<ProbePoint>,
}

impl ProbePoints {
    /// The point for `symbol`, if resolved.
    pub fn get(&self, symbol: &str) -> Option<&ProbePoint> {
        self.points.iter().find(|p| p.symbol == symbol)
    }
}

/// Resolves the engine's probe points in the ELF file at `path`.
///
/// # Errors
/// [`EngineError`]: the binary cannot be read, or has no probe symbols.
pub fn resolve(path: &Path) -> Result<ProbePoints, EngineError> {
    let data = probe_points::read_binary(path)?;
    resolve_bytes(path, &data)
}

/// Resolves the engine's probe points from an ELF image already in memory.
///
/// # Errors
/// [`EngineError`]: the image is not ELF, or has no probe symbols.
pub fn resolve_bytes(path: &Path, data: &[u8]) -> Result<ProbePoints, EngineError> {
    let file = probe_points::parse(path, data)?;
    let points: Vec<ProbePoint> = symbols::ALL
        .iter()
        .filter_map(|name| {
            file.dynamic_symbols()
                .chain(file.symbols())
                .find(|s| s.name() == Ok(name) && s.is_definition())
                .map(|sym| {
                    probe_points::point_of(
                        &file,
                        name,
                        &sym,
                        ArgUse::Registers(ARG_REGISTERS.len()),
                    )
                })
        })
        .collect();
    if points.is_empty() {
        return Err(EngineError::NoProbeSymbols {
            path: path.to_path_buf(),
        });
    }
    Ok(ProbePoints {
        path: path.to_path_buf(),
        build_id: probe_points::build_id(&file),
        points,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::probe_points::CostClass;
    use object::write::{Object as WObject, StandardSection, Symbol, SymbolSection};
    use object::{Architecture, BinaryFormat, Endianness, SymbolFlags, SymbolKind, SymbolScope};

    /// An ELF with the given functions (name, machine code) in `.text`.
    fn elf(funcs: &[(&str, &[u8])]) -> Vec<u8> {
        let mut obj = WObject::new(BinaryFormat::Elf, Architecture::X86_64, Endianness::Little);
        let text = obj.section_id(StandardSection::Text);
        for (name, code) in funcs {
            let off = obj.append_section_data(text, code, 16);
            obj.add_symbol(Symbol {
                name: name.as_bytes().to_vec(),
                value: off,
                size: code.len() as u64,
                kind: SymbolKind::Text,
                scope: SymbolScope::Dynamic,
                weak: false,
                section: SymbolSection::Section(text),
                flags: SymbolFlags::None,
            });
        }
        obj.write().expect("write elf")
    }

    #[test]
    fn classifies_nop_push_endbr_and_single_step() {
        let nop5: &[u8] = &[0x0f, 0x1f, 0x44, 0x00, 0x00, 0xc3];
        let endbr_push: &[u8] = &[0xf3, 0x0f, 0x1e, 0xfa, 0x55, 0xc3]; // endbr64; push rbp
        let endbr_lea: &[u8] = &[0xf3, 0x0f, 0x1e, 0xfa, 0x48, 0x8d, 0x05, 0, 0, 0, 0, 0xc3];
        let push: &[u8] = &[0x55, 0xc3];
        let vex: &[u8] = &[0xc5, 0xfa, 0x6f, 0x46, 0x54, 0xc3]; // vmovdqu xmm0,[rsi+54h]
        let data = elf(&[
            ("engine_phase_sample", vex),
            ("engine_decode", nop5),
            ("engine_graph_compute", endbr_push),
            ("engine_op_compute", endbr_lea),
            ("engine_phase_embed", push),
        ]);
        let pts = resolve_bytes(Path::new("t"), &data).expect("resolves");
        let p = pts.get("engine_decode").expect("decode");
        assert_eq!((p.entry_cost, p.attach_offset), (CostClass::Nop, 0));
        let p = pts.get("engine_graph_compute").expect("graph");
        assert_eq!(p.entry_cost, CostClass::SingleStep);
        assert_eq!((p.attach_offset, p.attach_cost), (4, CostClass::Emulated));
        assert!(p.first_insn.contains("endbr64"), "{}", p.first_insn);
        let p = pts.get("engine_op_compute").expect("op");
        assert_eq!((p.attach_offset, p.attach_cost), (0, CostClass::SingleStep));
        let p = pts.get("engine_phase_embed").expect("embed");
        assert_eq!(p.entry_cost, CostClass::Emulated);
        let p = pts.get("engine_phase_sample").expect("sample");
        assert_eq!(p.attach_cost, CostClass::Unsupported, "{}", p.first_insn);
    }

    #[test]
    fn binary_without_symbols_is_refused() {
        let data = elf(&[("main", &[0xc3])]);
        assert!(matches!(
            resolve_bytes(Path::new("t"), &data),
            Err(EngineError::NoProbeSymbols { .. })
        ));
    }
}
