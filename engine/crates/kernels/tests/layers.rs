//! The crate's files import downward only: the graph of `crate::…`, `super::…` and
//! parent-to-child (`child::…`) paths between the files of `src/` (test modules and
//! comments left out) has no cycle. See the layer list in `src/lib.rs`.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// Every `.rs` file under `dir`, relative to `root`, with its text.
fn sources(root: &Path, dir: &Path, out: &mut BTreeMap<String, String>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            sources(root, &path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            let rel = path
                .strip_prefix(root)
                .unwrap()
                .to_string_lossy()
                .into_owned();
            out.insert(rel, std::fs::read_to_string(&path).unwrap());
        }
    }
}

/// The text without line comments and without the trailing `#[cfg(test)] mod tests`.
fn code(text: &str) -> String {
    let text = text.split("#[cfg(test)]\nmod tests").next().unwrap_or(text);
    text.lines()
        .map(|l| l.split("//").next().unwrap_or(""))
        .collect::<Vec<_>>()
        .join("\n")
}

/// The module path of a file (`dot/mod.rs` → `["dot"]`, `dot/x86.rs` → `["dot", "x86"]`).
fn module_of(file: &str) -> Vec<String> {
    let mut parts: Vec<String> = file
        .trim_end_matches(".rs")
        .split('/')
        .map(String::from)
        .collect();
    if matches!(parts.last().map(String::as_str), Some("mod" | "lib")) {
        parts.pop();
    }
    parts
}

/// The file holding the longest prefix of `path` that is a module.
fn resolve(files: &BTreeMap<String, String>, path: &[String]) -> String {
    for n in (1..=path.len()).rev() {
        let p = path[..n].join("/");
        for cand in [format!("{p}.rs"), format!("{p}/mod.rs")] {
            if files.contains_key(&cand) {
                return cand;
            }
        }
    }
    "lib.rs".to_string()
}

/// Identifier-or-`::` paths starting at each occurrence of `head::` in `code`, with one
/// level of `{a, b::c}` expanded.
fn paths_after(code: &str, head: &str) -> Vec<Vec<String>> {
    let mut out = Vec::new();
    let pat = format!("{head}::");
    let mut from = 0;
    while let Some(at) = code[from..].find(&pat) {
        let start = from + at;
        from = start + pat.len();
        let before = code[..start].chars().last();
        if before.is_some_and(|c| c.is_alphanumeric() || c == '_' || c == ':') {
            continue;
        }
        let rest = &code[from..];
        let plain: String = rest
            .chars()
            .take_while(|c| c.is_alphanumeric() || *c == '_' || *c == ':')
            .collect();
        let base: Vec<String> = plain
            .split("::")
            .filter(|s| !s.is_empty())
            .map(String::from)
            .collect();
        if rest[plain.len()..].starts_with('{') {
            let inner = &rest[plain.len() + 1..rest.find('}').unwrap_or(rest.len())];
            for item in inner.split(',') {
                let mut p = base.clone();
                p.extend(
                    item.trim()
                        .split("::")
                        .filter(|s| !s.is_empty() && *s != "self")
                        .map(String::from),
                );
                out.push(p);
            }
        } else {
            out.push(base);
        }
    }
    out
}

#[test]
fn modules_import_downward_only() {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = BTreeMap::new();
    sources(&root, &root, &mut files);
    let mut edges: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for (file, text) in &files {
        let code = code(text);
        let me = module_of(file);
        let parent = me[..me.len().saturating_sub(1)].to_vec();
        let mut targets = Vec::new();
        for p in paths_after(&code, "crate") {
            targets.push(resolve(&files, &p));
        }
        for p in paths_after(&code, "super") {
            let mut full = parent.clone();
            full.extend(p);
            targets.push(resolve(&files, &full));
        }
        for line in code.lines() {
            let l = line.trim_start();
            let l = l
                .strip_prefix("pub(crate) ")
                .or(l.strip_prefix("pub "))
                .unwrap_or(l);
            if let Some(child) = l.strip_prefix("mod ").and_then(|r| r.strip_suffix(';'))
                && !paths_after(&code, child).is_empty()
            {
                let mut full = me.clone();
                full.push(child.to_string());
                targets.push(resolve(&files, &full));
            }
        }
        let set = edges.entry(file.clone()).or_default();
        set.extend(targets.into_iter().filter(|t| t != file));
    }
    // Depth-first search for a back edge.
    fn visit(
        f: &str,
        edges: &BTreeMap<String, BTreeSet<String>>,
        state: &mut BTreeMap<String, u8>,
        stack: &mut Vec<String>,
    ) -> Option<Vec<String>> {
        state.insert(f.to_string(), 1);
        stack.push(f.to_string());
        for t in edges.get(f).into_iter().flatten() {
            match state.get(t) {
                Some(1) => {
                    let at = stack.iter().position(|s| s == t).unwrap();
                    let mut cycle = stack[at..].to_vec();
                    cycle.push(t.clone());
                    return Some(cycle);
                }
                Some(_) => {}
                None => {
                    if let Some(c) = visit(t, edges, state, stack) {
                        return Some(c);
                    }
                }
            }
        }
        stack.pop();
        state.insert(f.to_string(), 2);
        None
    }
    let mut state = BTreeMap::new();
    for f in files.keys() {
        if !state.contains_key(f) {
            let cycle = visit(f, &edges, &mut state, &mut Vec::new());
            assert!(
                cycle.is_none(),
                "import cycle: {}",
                cycle.unwrap().join(" -> ")
            );
        }
    }
    assert!(edges.len() > 30, "found only {} files", edges.len());
}
