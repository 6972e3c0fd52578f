//! The offsets table: every field's offset with where it came from (the build's code,
//! the version's table, the layout every build shares, the user), the user's
//! `--ggml-offset`, and how derived offsets are combined with the table and checked
//! against each other into the layout the probes read ([`from_found`]).

use common::ggml_abi::GgmlLayout;

use super::rules::{Field, RULES};

/// Where one offset came from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum OffsetSource {
    /// Read from this function's machine code.
    Derived(&'static str),
    /// From the known-layout table for this ggml version.
    Table(String),
    /// The layout of every build tested, Nov 2024 to 2026 (no accessor reads the field
    /// and the build's version has no table entry).
    Shared,
    /// Given by the user (`--ggml-offset`).
    Given,
}

impl std::fmt::Display for OffsetSource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            OffsetSource::Derived(function) => write!(f, "derived from {function}"),
            OffsetSource::Table(version) => write!(f, "table (ggml {version})"),
            OffsetSource::Shared => f.write_str("as in every build tested (2024-2026)"),
            OffsetSource::Given => f.write_str("given (--ggml-offset)"),
        }
    }
}

/// One field's offset and its source.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FieldOffset {
    /// `struct.field`, as in ggml's headers.
    pub field: &'static str,
    /// Bytes from the struct's start.
    pub offset: u32,
    /// Where the offset came from.
    pub source: OffsetSource,
}

/// An offset the user gives for a build whose code does not name it
/// (`--ggml-offset ggml_tensor.name=256`, from `offsetof` against the build's headers).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GivenOffset {
    pub(super) field: Field,
    pub(super) offset: u32,
}

impl std::str::FromStr for GivenOffset {
    type Err = String;

    fn from_str(s: &str) -> Result<GivenOffset, String> {
        let (name, offset) = s
            .split_once('=')
            .ok_or_else(|| format!("`{s}`: expected FIELD=BYTES"))?;
        let field = RULES
            .iter()
            .map(|(f, ..)| *f)
            .find(|f| f.name() == name)
            .ok_or_else(|| {
                let known: Vec<&str> = RULES.iter().map(|(f, ..)| f.name()).collect();
                format!(
                    "`{name}` is not a field profinfer reads (fields: {})",
                    known.join(", ")
                )
            })?;
        let offset = offset
            .trim()
            .parse()
            .map_err(|_| format!("`{offset}`: expected a byte offset"))?;
        Ok(GivenOffset { field, offset })
    }
}

/// Why a layout could not be established.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LayoutError {
    /// Fields neither derivable nor in a table.
    #[error(
        "cannot derive ggml's struct layout: {} not readable from this build's code ({}) and its ggml version has no table entry; give it with --ggml-offset FIELD=BYTES (offsetof in the build's ggml.h)",
        missing.join(", "),
        why.join("; ")
    )]
    Underived {
        /// The fields.
        missing: Vec<&'static str>,
        /// Per field, what was looked for.
        why: Vec<String>,
    },
    /// Derived offsets that contradict each other.
    #[error("ggml's struct layout read from this build's code does not hold together: {0}")]
    Inconsistent(String),
}

/// A build's layout and, per field, where its offset came from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DerivedLayout {
    /// What the probes read.
    pub layout: GgmlLayout,
    /// Every field the probes use, with its source.
    pub fields: Vec<FieldOffset>,
    /// `ggml_cgraph.nodes`, when derived (the attach-time check reads the first node).
    pub cgraph_nodes: Option<u32>,
}

impl DerivedLayout {
    /// How many fields were read from the build's code.
    pub fn derived_count(&self) -> usize {
        self.fields
            .iter()
            .filter(|f| matches!(f.source, OffsetSource::Derived(_)))
            .count()
    }
}

/// Combines derived offsets with the table.
pub(super) fn from_found(
    found: &[(Field, i64, OffsetSource)],
    why: Vec<String>,
    table: Option<(&str, GgmlLayout)>,
) -> Result<DerivedLayout, LayoutError> {
    let get = |f: Field| {
        found
            .iter()
            .find(|(g, ..)| *g == f)
            .map(|(_, o, source)| (*o, source.clone()))
    };
    let table_of = |f: Field, l: &GgmlLayout| -> Option<u32> {
        Some(match f {
            Field::Type => l.tensor_type,
            Field::Ne => l.tensor_ne,
            Field::Nb => l.tensor_nb,
            Field::Op => l.tensor_op,
            Field::OpParams => l.tensor_op_params,
            Field::Src => l.tensor_src,
            Field::ViewSrc => l.tensor_view_src,
            Field::Name => l.tensor_name,
            Field::CgraphNNodes => l.cgraph_n_nodes,
            // The buffer word follows the type in the table layout.
            Field::Data => l.tensor_data,
            Field::Buffer => 8,
            Field::CgraphNodes => return None,
        })
    };
    let mut fields = Vec::new();
    let mut missing = Vec::new();
    let mut off = |f: Field| -> Option<u32> {
        if let Some((o, source)) = get(f)
            && let Ok(o) = u32::try_from(o)
        {
            fields.push(FieldOffset {
                field: f.name(),
                offset: o,
                source,
            });
            return Some(o);
        }
        if let Some((version, l)) = &table
            && let Some(o) = table_of(f, l)
        {
            fields.push(FieldOffset {
                field: f.name(),
                offset: o,
                source: OffsetSource::Table(version.to_string()),
            });
            return Some(o);
        }
        if f != Field::CgraphNodes {
            missing.push(f.name());
        }
        None
    };
    let ty = off(Field::Type);
    let buffer = off(Field::Buffer);
    let ne = off(Field::Ne);
    let nb = off(Field::Nb);
    let op = off(Field::Op);
    let op_params = off(Field::OpParams);
    let src = off(Field::Src);
    let view_src = off(Field::ViewSrc);
    let data = off(Field::Data);
    let name = off(Field::Name);
    let n_nodes = off(Field::CgraphNNodes);
    let nodes = off(Field::CgraphNodes);
    let (
        Some(ty),
        Some(buffer),
        Some(ne),
        Some(nb),
        Some(op),
        Some(op_params),
        Some(src),
        Some(view_src),
        Some(data),
        Some(name),
        Some(n_nodes),
    ) = (
        ty, buffer, ne, nb, op, op_params, src, view_src, data, name, n_nodes,
    )
    else {
        let why = why
            .into_iter()
            .filter(|w| missing.iter().any(|m| w.starts_with(m)))
            .collect();
        return Err(LayoutError::Underived { missing, why });
    };
    check_consistent(&[
        ("type < buffer", ty < buffer),
        ("buffer < ne", buffer < ne),
        ("nb = ne + 4 words", nb == ne + 32),
        ("op after nb", op >= nb + 32),
        ("op_params right after op", op_params == op + 4),
        ("src after op_params", src > op_params),
        ("view_src after 1 to 16 src pointers", {
            view_src > src && view_src - src <= 128 && (view_src - src) % 8 == 0
        }),
        ("data = view_src + 2 words", data == view_src + 16),
        ("name after data", name >= data + 8),
        ("n_nodes within the graph's header", n_nodes < 64),
        (
            "nodes after n_nodes",
            nodes.is_none_or(|n| n > n_nodes && n % 8 == 0),
        ),
    ])?;
    // The fields no accessor reads: the version's table, or what every build shares.
    let base = table.map(|(_, l)| l).unwrap_or(GgmlLayout::GGML_0_25_64BIT);
    let shared_source = match &table {
        Some((v, _)) => OffsetSource::Table(v.to_string()),
        None => OffsetSource::Shared,
    };
    for (field, offset) in [
        ("ggml_compute_params.ith", base.params_ith),
        ("llama_batch.n_tokens", base.batch_n_tokens),
        ("llama_batch.pos", base.batch_pos),
    ] {
        fields.push(FieldOffset {
            field,
            offset,
            source: shared_source.clone(),
        });
    }
    let words = |o: u32| 1u64 << (o / 8);
    let skip = words(buffer) | words(view_src) | words(view_src + 8) | words(data);
    let layout = GgmlLayout {
        tensor_type: ty,
        tensor_ne: ne,
        tensor_nb: nb,
        tensor_op: op,
        tensor_op_params: op_params,
        tensor_src: src,
        tensor_name: name,
        cgraph_n_nodes: n_nodes,
        tensor_view_src: view_src,
        tensor_read_len: name + 64,
        tensor_skip_lo: skip as u32,
        tensor_skip_hi: (skip >> 32) as u32,
        tensor_data: data,
        ..base
    };
    Ok(DerivedLayout {
        layout,
        fields,
        cgraph_nodes: nodes,
    })
}

fn check_consistent(checks: &[(&str, bool)]) -> Result<(), LayoutError> {
    match checks.iter().find(|(_, ok)| !ok) {
        Some((what, _)) => Err(LayoutError::Inconsistent(format!("expected {what}"))),
        None => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::targets::llama_cpp::layout::rules::Field;

    fn found_0_25() -> Vec<(Field, i64, OffsetSource)> {
        [
            (Field::Type, 0, "ggml_element_size"),
            (Field::Buffer, 8, "ggml_backend_tensor_set"),
            (Field::Ne, 16, "ggml_nelements"),
            (Field::Nb, 48, "ggml_is_transposed"),
            (Field::Op, 80, "ggml_get_unary_op"),
            (Field::OpParams, 84, "ggml_get_unary_op"),
            (Field::Src, 152, "ggml_dup"),
            (Field::ViewSrc, 232, "ggml_backend_tensor_set"),
            (Field::Data, 248, "ggml_get_data"),
            (Field::Name, 256, "ggml_get_name"),
            (Field::CgraphNNodes, 4, "ggml_graph_n_nodes"),
            (Field::CgraphNodes, 16, "ggml_graph_node"),
        ]
        .into_iter()
        .map(|(f, o, func)| (f, o, OffsetSource::Derived(func)))
        .collect()
    }

    #[test]
    fn given_offsets_name_a_known_field() {
        let g: GivenOffset = "ggml_tensor.name=264".parse().expect("valid");
        assert_eq!((g.field, g.offset), (Field::Name, 264));
        let e = "ggml_tensor.nmae=264".parse::<GivenOffset>().unwrap_err();
        assert!(e.contains("ggml_tensor.name") && e.contains("nmae"), "{e}");
        assert!("ggml_tensor.name".parse::<GivenOffset>().is_err());
        assert!("ggml_tensor.name=-1".parse::<GivenOffset>().is_err());
    }

    #[test]
    fn derived_offsets_of_ggml_0_25_give_the_table_layout() {
        let d = from_found(&found_0_25(), Vec::new(), None).expect("consistent");
        assert_eq!(d.layout, GgmlLayout::GGML_0_25_64BIT);
        assert_eq!(d.derived_count(), 12);
        assert_eq!(d.cgraph_nodes, Some(16));
    }

    #[test]
    fn contradicting_offsets_are_refused() {
        let mut found = found_0_25();
        found[3].1 = 56; // nb not four words after ne
        let e = from_found(&found, Vec::new(), None).expect_err("inconsistent");
        assert!(e.to_string().contains("nb = ne + 4 words"), "{e}");
    }

    #[test]
    fn a_missing_field_falls_back_to_the_table_or_is_named() {
        let found: Vec<_> = found_0_25()
            .into_iter()
            .filter(|(f, ..)| *f != Field::Src)
            .collect();
        let why = vec!["ggml_tensor.src: no ggml_dup".to_owned()];
        let d = from_found(
            &found,
            why.clone(),
            Some(("0.25.3", GgmlLayout::GGML_0_25_64BIT)),
        )
        .expect("table");
        let src = d
            .fields
            .iter()
            .find(|f| f.field == "ggml_tensor.src")
            .unwrap();
        assert_eq!(src.source, OffsetSource::Table("0.25.3".into()));
        let e = from_found(&found, why, None).expect_err("no table");
        let line = e.to_string();
        assert!(
            line.contains("ggml_tensor.src") && line.contains("no ggml_dup"),
            "{line}"
        );
        assert!(!line.contains('\n'));
    }
}
