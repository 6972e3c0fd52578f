//! The graph `build_graph` makes, node for node, against checked-in snapshots
//! (`tests/data/graphs/`): for every architecture's tiny preset, a prefill, a decode step,
//! a prefill with every row's logits, and for some of them the graph placed on the accel
//! backend and the graph under a KV budget. Each snapshot also holds the model's
//! hyper-parameters and the weights the graph reads. A regression pin for refactors of
//! the graph builder, the model config and the weight loader; regenerate deliberately
//! with `UPDATE_GRAPHS=1`.

use std::collections::HashMap;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use common::DType;
use common::engine_abi::{EngineNode, NODE_FLAG_KV_CACHE};
use engine::Model;
use engine::backend::accel;
use engine::graph::{Graph, NodeAddr, Placement};
use engine::kv_cache::{KvCache, KvSwapConfig};
use engine::model::build::{MAX_LEAFS_PER_LAYER, MAX_NODES_PER_LAYER, build_graph};
use engine::presets::{self, WeightFormat};
use engine::sync::WaitMode;

/// Seed of the snapshot models' weights (the values do not enter the graph).
const SEED: u64 = 42;

/// Every tiny preset, each in a type whose layout (repacked or not) is the same on
/// x86-64 and AArch64 (not Q8_0).
const MODELS: [(&str, DType); 8] = [
    ("tiny-llama", DType::F32),
    ("tiny-llama3", DType::Q4_0),
    ("tiny-qwen2", DType::Q4_0),
    ("tiny-kq", DType::Q4_K),
    ("tiny-kq-tied", DType::Q4_K),
    ("tiny-moe", DType::Q4_0),
    ("tiny-mixtral", DType::Q4_0),
    ("tiny-gemma2", DType::F32),
];

/// Presets whose snapshot adds the placed and the KV-budget graphs.
const WITH_PLACEMENT_AND_SWAP: [&str; 3] = ["tiny-llama", "tiny-moe", "tiny-gemma2"];

/// Whether to rewrite the snapshots instead of comparing: only `UPDATE_GRAPHS=1`. Any
/// other value (`0`, `false`, empty) is a mistake that must not silently rewrite them.
fn update_graphs() -> bool {
    match std::env::var_os("UPDATE_GRAPHS") {
        None => false,
        Some(v) if v == "1" => true,
        Some(v) => panic!(
            "UPDATE_GRAPHS={}: use UPDATE_GRAPHS=1 to rewrite the graph snapshots, \
             or unset it to compare with them",
            v.to_string_lossy()
        ),
    }
}

fn snapshot_path(preset: &str, dtype: DType) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data/graphs")
        .join(format!("{preset}-{}.txt", dtype.name()))
}

/// `preset` in `dtype`, written once into the test's scratch directory.
fn model(preset: &str, dtype: DType) -> Model {
    let p = presets::preset(preset).expect("a known preset");
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("graph-snapshot");
    std::fs::create_dir_all(&dir).expect("create the model directory");
    let path = dir.join(format!("{preset}-{}-seed{SEED}.gguf", dtype.name()));
    presets::write_model(p, WeightFormat::Pure(dtype), SEED, &path, false).expect("write");
    Model::load(&path).expect("load the written model")
}

/// One graph to build.
struct Case {
    name: &'static str,
    n_tokens: usize,
    pos: usize,
    all_outputs: bool,
    placement: Option<Placement>,
    kv_budget: bool,
}

fn cases(extra: bool) -> Vec<Case> {
    let plain = |name, n_tokens, pos, all_outputs| Case {
        name,
        n_tokens,
        pos,
        all_outputs,
        placement: None,
        kv_budget: false,
    };
    let mut cases = vec![
        plain("prefill 5 at 0", 5, 0, false),
        plain("decode 1 at 5", 1, 5, false),
        plain("prefill 3 at 0, every row's logits", 3, 0, true),
    ];
    if extra {
        let placement = |layers, split_matmul| Placement {
            offload_layers: layers,
            split_matmul,
            sync: WaitMode::Spin,
            accel_supports: accel::supports,
        };
        cases.extend([
            Case {
                placement: Some(placement(0..1, None)),
                ..plain("prefill 4 at 0, layer 0 on the accel", 4, 0, false)
            },
            Case {
                placement: Some(placement(0..0, Some(0.5))),
                ..plain(
                    "decode 1 at 4, half of each product on the accel",
                    1,
                    4,
                    false,
                )
            },
            Case {
                kv_budget: true,
                ..plain("decode 1 at 70, under a KV budget", 1, 70, false)
            },
        ]);
    }
    cases
}

/// Where a node's data is, when it is the KV cache's: `k1+640` (layer 1's K buffer at
/// byte 640), `v0+10`, `swap` (the budget's state, a `KV_FETCH` node's).
struct KvPlaces {
    /// Each layer's K and V buffer and their size in bytes.
    layers: Vec<(u64, u64)>,
    bytes: u64,
    swap: Option<u64>,
}

impl KvPlaces {
    fn new(kv: &mut KvCache, n_layer: usize) -> KvPlaces {
        KvPlaces {
            layers: (0..n_layer)
                .map(|il| (kv.k_ptr(il) as u64, kv.v_ptr(il) as u64))
                .collect(),
            bytes: kv.n_ctx() as u64 * kv.k_row_bytes(),
            swap: kv.swap_state().map(|p| p as u64),
        }
    }

    fn of(&self, data: u64) -> String {
        if Some(data) == self.swap {
            return "swap".to_owned();
        }
        for (il, &(k, v)) in self.layers.iter().enumerate() {
            for (side, base) in [("k", k), ("v", v)] {
                if (base..base + self.bytes).contains(&data) {
                    return format!("{side}{il}+{}", data - base);
                }
            }
        }
        format!("outside the KV cache ({data:#x})")
    }
}

/// How a source is shown: `#i` for the graph's i-th node, `leaf:NAME`, `w:NAME`.
struct Names<'a> {
    graph: &'a Graph,
    model: &'a Model,
    nodes: HashMap<NodeAddr, usize>,
    leaves: Vec<NodeAddr>,
    weights: Vec<NodeAddr>,
}

impl Names<'_> {
    fn of(&mut self, addr: NodeAddr) -> String {
        if let Some(i) = self.nodes.get(&addr) {
            return format!("#{i}");
        }
        if let Some(leaf) = self.graph.get(addr) {
            if !self.leaves.contains(&addr) {
                self.leaves.push(addr);
            }
            return format!("leaf:{}", leaf.name_str());
        }
        if !self.weights.contains(&addr) {
            self.weights.push(addr);
        }
        format!("w:{}", self.model.weights.node(addr).name_str())
    }
}

/// A node's shape, type, parameters and flags, and where its data is if that is the KV
/// cache (other addresses differ from run to run).
fn describe(out: &mut String, n: &EngineNode, kv: &KvPlaces) {
    let op = n
        .op_type()
        .map_or_else(|| format!("op{}", n.op), |o| format!("{o:?}"));
    let dtype = n
        .dtype()
        .map_or_else(|| format!("type{}", n.dtype), |t| t.name().to_owned());
    write!(
        out,
        "{op} {:?} layer={} {dtype} ne={:?} nb={:?} params={:?} flags={:#x}",
        n.name_str(),
        n.layer,
        n.ne,
        n.nb,
        n.op_params,
        n.flags
    )
    .expect("write to a string");
    if n.flags & NODE_FLAG_KV_CACHE != 0 {
        write!(out, " data={}", kv.of(n.data)).expect("write to a string");
    }
}

/// The graph of `case`, node by node, then its leaves and the weights it reads.
fn dump_case(model: &Model, case: &Case, scratch: &Path) -> String {
    let cfg = &model.config;
    let n_ctx = cfg.n_ctx_train.min(engine::context::DEFAULT_CTX);
    let swap = case.kv_budget.then(|| KvSwapConfig {
        budget: 4 * 64 * cfg.n_embd_kv() as u64 * 2,
        dir: scratch.to_owned(),
        compress: None,
    });
    let mut kv =
        KvCache::new(cfg.n_layer, n_ctx, cfg.n_embd_kv(), swap.as_ref()).expect("a KV cache");
    let node_factor = if case.placement.is_some() { 3 } else { 1 };
    let mut g = Graph::with_capacity(
        node_factor * cfg.n_layer * MAX_NODES_PER_LAYER + 16,
        cfg.n_layer * MAX_LEAFS_PER_LAYER + 8,
    );
    g.set_placement(case.placement.clone());
    let places = KvPlaces::new(&mut kv, cfg.n_layer);
    let batch = build_graph(
        &mut g,
        model,
        &mut kv,
        case.n_tokens,
        case.pos,
        case.all_outputs,
    )
    .expect("the graph fits");
    let n_splits = g.finish(1, case.n_tokens as u32, case.pos as u32);

    let nodes: HashMap<NodeAddr, usize> = g
        .nodes()
        .iter()
        .enumerate()
        .map(|(i, n)| (n as *const EngineNode as NodeAddr, i))
        .collect();
    let mut names = Names {
        graph: &g,
        model,
        nodes,
        leaves: Vec::new(),
        weights: Vec::new(),
    };
    let mut out = String::new();
    let w = &mut out;
    writeln!(w, "## {}", case.name).expect("write");
    writeln!(
        w,
        "inp_embd={} inp_pos={} inp_out_ids={} logits={} n_out={}",
        names.of(batch.inp_embd),
        names.of(batch.inp_pos),
        names.of(batch.inp_out_ids),
        names.of(batch.logits),
        batch.n_out
    )
    .expect("write");
    let splits: Vec<String> = g
        .splits()
        .iter()
        .map(|s| format!("{:?}×{}", s.backend, s.header.n_nodes))
        .collect();
    writeln!(w, "splits={n_splits} [{}]", splits.join(", ")).expect("write");
    for (i, n) in g.nodes().iter().enumerate() {
        let srcs: Vec<String> = n
            .src
            .iter()
            .take_while(|&&s| s != 0)
            .map(|&s| names.of(s))
            .collect();
        let backend = g.backend(n as *const EngineNode as NodeAddr);
        write!(w, "#{i} {backend:?} ").expect("write");
        describe(w, n, &places);
        writeln!(w, " src=[{}]", srcs.join(", ")).expect("write");
    }
    for &addr in &names.leaves.clone() {
        let leaf = g.get(addr).expect("a leaf of the graph");
        write!(w, "leaf ").expect("write");
        describe(w, leaf, &places);
        writeln!(w).expect("write");
    }
    for &addr in &names.weights {
        write!(w, "weight ").expect("write");
        describe(w, model.weights.node(addr), &places);
        writeln!(w).expect("write");
    }
    out
}

/// The whole snapshot of one model.
fn dump(preset: &str, dtype: DType) -> String {
    let model = model(preset, dtype);
    let mut out = format!("# {preset} {}\n{:#?}\n", dtype.name(), model.config);
    for case in cases(WITH_PLACEMENT_AND_SWAP.contains(&preset)) {
        let scratch = tempdir(preset);
        out.push_str(&dump_case(&model, &case, &scratch));
        let _ = std::fs::remove_dir_all(&scratch);
    }
    out
}

/// An empty directory for a case's KV swap files.
fn tempdir(preset: &str) -> PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR"))
        .join("graph-snapshot")
        .join(format!("swap-{preset}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("create the swap directory");
    dir
}

/// The first line where `actual` departs from `expected`, with its neighbours.
fn first_difference(expected: &str, actual: &str) -> String {
    let (e, a): (Vec<&str>, Vec<&str>) = (expected.lines().collect(), actual.lines().collect());
    let at = (0..e.len().max(a.len()))
        .find(|&i| e.get(i) != a.get(i))
        .unwrap_or(0);
    let from = at.saturating_sub(3);
    let show = |lines: &[&str]| {
        lines
            .iter()
            .enumerate()
            .skip(from)
            .take(at + 4 - from)
            .map(|(i, l)| format!("{:6} {l}", i + 1))
            .collect::<Vec<_>>()
            .join("\n")
    };
    format!(
        "first difference at line {}:\n--- expected\n{}\n--- actual\n{}",
        at + 1,
        show(&e),
        show(&a)
    )
}

#[test]
fn graphs_match_their_snapshots_node_for_node() {
    let update = update_graphs();
    let mut failed = Vec::new();
    for (preset, dtype) in MODELS {
        let actual = dump(preset, dtype);
        let path = snapshot_path(preset, dtype);
        if update {
            std::fs::create_dir_all(path.parent().expect("a directory")).expect("mkdir");
            std::fs::write(&path, &actual).expect("write the snapshot");
            continue;
        }
        let expected = std::fs::read_to_string(&path).unwrap_or_else(|e| {
            panic!(
                "{}: {e} (UPDATE_GRAPHS=1 writes the snapshots)",
                path.display()
            )
        });
        if expected != actual {
            failed.push(format!(
                "{}: {}",
                path.display(),
                first_difference(&expected, &actual)
            ));
        }
    }
    assert!(failed.is_empty(), "{}", failed.join("\n\n"));
}
