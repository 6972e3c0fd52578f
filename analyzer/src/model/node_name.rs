//! What a node's name tells: its class (the name without its layer, the key every layer
//! shares) and its layer.
//!
//! The engine and llama.cpp's graph callback name nodes `<class>-<layer>` (`ffn_up-3`).
//! Where llama.cpp names nothing, ggml does:
//! - a tensor derived from a named one gets its name plus a suffix (`Kcur-0 (view)`,
//!   `(copy)`, `(reshaped)`, `(permuted)`, `(transposed)`, `(cont)`);
//! - a node still unnamed when the graph is built becomes `node_<graph index>`, which
//!   says nothing (the model takes its layer from its sources and its class from its
//!   op: [`NameParts::unnamed`]);
//!
//! and llama.cpp names its KV cache tensors `cache_k_l<layer>` / `cache_v_l<layer>`;
//! a copy into a named tensor (the KV-cache store of builds before `SET_ROWS`) is
//! `<destination> (copy of <source>)`, both names taken apart alike.

use std::borrow::Cow;

/// ggml's suffixes of derived tensors' names (`ggml_format_name(.., "%s (view)", ..)`).
const DERIVED_SUFFIXES: [&str; 6] = [
    " (view)",
    " (copy)",
    " (reshaped)",
    " (permuted)",
    " (transposed)",
    " (cont)",
];

/// Name prefixes followed directly by the layer (llama.cpp's KV cache: `cache_k_l12`).
const LAYER_PREFIXES: [&str; 2] = ["cache_k_l", "cache_v_l"];

/// ggml's name for a node nobody named: `node_<graph index>`.
const UNNAMED_PREFIX: &str = "node_";

/// ggml's name of a copy into a named tensor: `<b> (copy of <a>)` (`ggml_cpy(a, b)`).
const COPY_OF: &str = " (copy of ";

/// A node name taken apart.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NameParts<'a> {
    /// The name without its layer: `ffn_up` for `ffn_up-3`, `Kcur (view)` for
    /// `Kcur-0 (view)`, `cache_k (view)` for `cache_k_l0 (view)`; the whole name if it
    /// holds no layer.
    pub class: Cow<'a, str>,
    /// The layer the name holds.
    pub layer: Option<i32>,
    /// ggml's `node_<n>` (no class, no layer in the name).
    pub unnamed: bool,
}

/// Takes `name` apart (see the module docs).
pub fn parse(name: &str) -> NameParts<'_> {
    if let Some((dst, src)) = name.strip_suffix(')').and_then(|n| n.split_once(COPY_OF)) {
        let (dst, src) = (parse(dst), parse(src));
        return NameParts {
            class: Cow::Owned(format!("{}{COPY_OF}{})", dst.class, src.class)),
            layer: dst.layer.or(src.layer),
            unnamed: false,
        };
    }
    let mut base = name;
    while let Some(s) = DERIVED_SUFFIXES.iter().find(|s| base.ends_with(*s)) {
        base = &base[..base.len() - s.len()];
    }
    let suffix = &name[base.len()..];
    let unnamed = suffix.is_empty()
        && base
            .strip_prefix(UNNAMED_PREFIX)
            .is_some_and(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()));
    let split = layer_suffix(base).or_else(|| {
        LAYER_PREFIXES.iter().find_map(|p| {
            let n = base.strip_prefix(p)?;
            let layer = digits(n)?;
            // `cache_k_l` → `cache_k`.
            Some((&p[..p.len() - 2], layer))
        })
    });
    match split {
        Some((class, layer)) if suffix.is_empty() => NameParts {
            class: Cow::Borrowed(class),
            layer: Some(layer),
            unnamed,
        },
        Some((class, layer)) => NameParts {
            class: Cow::Owned(format!("{class}{suffix}")),
            layer: Some(layer),
            unnamed,
        },
        None => NameParts {
            class: Cow::Borrowed(name),
            layer: None,
            unnamed,
        },
    }
}

/// The class of a node name ([`parse`]'s `class`).
pub fn class_of(name: &str) -> Cow<'_, str> {
    parse(name).class
}

/// `<base>-<digits>` → (base, layer).
fn layer_suffix(name: &str) -> Option<(&str, i32)> {
    let (base, layer) = name.rsplit_once('-')?;
    if base.is_empty() {
        return None;
    }
    Some((base, digits(layer)?))
}

/// A layer number: ASCII digits only, at most `u16`.
fn digits(s: &str) -> Option<i32> {
    if s.is_empty() || !s.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    s.parse::<u16>().ok().map(i32::from)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parts(name: &str) -> (String, Option<i32>, bool) {
        let p = parse(name);
        (p.class.into_owned(), p.layer, p.unnamed)
    }

    #[test]
    fn a_numeric_layer_suffix_is_the_layer() {
        assert_eq!(parts("ffn_up-3"), ("ffn_up".into(), Some(3), false));
        assert_eq!(
            parts("kq_soft_max-12"),
            ("kq_soft_max".into(), Some(12), false)
        );
        assert_eq!(
            parts("result_output"),
            ("result_output".into(), None, false)
        );
        assert_eq!(parts("a-b"), ("a-b".into(), None, false));
        assert_eq!(parts("-3"), ("-3".into(), None, false));
        assert_eq!(parts("x-"), ("x-".into(), None, false));
        assert_eq!(parts("x-99999"), ("x-99999".into(), None, false));
    }

    #[test]
    fn ggml_derived_names_keep_their_suffix_in_the_class() {
        assert_eq!(
            parts("Kcur-0 (view)"),
            ("Kcur (view)".into(), Some(0), false)
        );
        assert_eq!(
            parts("kqv-7 (permuted) (cont)"),
            ("kqv (permuted) (cont)".into(), Some(7), false)
        );
        assert_eq!(
            parts("inp_embd (view)"),
            ("inp_embd (view)".into(), None, false)
        );
    }

    #[test]
    fn llama_cpp_cache_tensors_hold_their_layer() {
        assert_eq!(
            parts("cache_k_l12 (view)"),
            ("cache_k (view)".into(), Some(12), false)
        );
        assert_eq!(parts("cache_v_l0"), ("cache_v".into(), Some(0), false));
        assert_eq!(parts("cache_k_lx"), ("cache_k_lx".into(), None, false));
    }

    #[test]
    fn a_copy_into_a_named_tensor_is_both_names_without_their_layer() {
        assert_eq!(
            parts("cache_k_l3 (view) (copy of Kcur-3)"),
            ("cache_k (view) (copy of Kcur)".into(), Some(3), false)
        );
        assert_eq!(
            parts("cache_v_l0 (view) (copy of Vcur-0 (reshaped) (transposed))"),
            (
                "cache_v (view) (copy of Vcur (reshaped) (transposed))".into(),
                Some(0),
                false
            )
        );
        assert_eq!(
            parts("x (copy of y)"),
            ("x (copy of y)".into(), None, false)
        );
    }

    #[test]
    fn ggml_default_names_are_unnamed() {
        assert_eq!(parts("node_21"), ("node_21".into(), None, true));
        assert_eq!(parts("node_"), ("node_".into(), None, false));
        assert_eq!(
            parts("node_2 (view)"),
            ("node_2 (view)".into(), None, false)
        );
        assert_eq!(parts("node_x"), ("node_x".into(), None, false));
    }
}
