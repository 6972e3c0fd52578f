//! A context runs a model: it owns the KV cache, the CPU backend and the reusable graph,
//! and decodes batches of tokens through the `engine_decode` probe point.

use core::ffi::c_void;
use std::sync::Arc;

use crate::backend::accel::{self, AccelBackend, AccelConfig};
use crate::backend::cpu::CpuBackend;
use crate::backend::engine_graph_compute;
use crate::error::EngineError;
use crate::graph::{Graph, Placement};
use crate::kv_cache::{KvCache, KvSwapConfig};
use crate::model::Model;
use crate::model::build::{MAX_LEAFS_PER_LAYER, MAX_NODES_PER_LAYER, build_graph};
use crate::probe::probe_entry;
use crate::sampler;
use crate::self_profile::Span;
use crate::sync::WaitMode;

/// Default largest batch processed in one graph (llama.cpp's default micro-batch).
pub const DEFAULT_BATCH: usize = 512;
/// Default context size when the model's trained context is larger (llama.cpp's default).
pub const DEFAULT_CTX: usize = 4096;

/// How to set up a context.
#[derive(Clone, Debug)]
pub struct ContextParams {
    /// Context size in tokens; `None` takes the model's trained length, capped at
    /// [`DEFAULT_CTX`].
    pub n_ctx: Option<usize>,
    /// Threads of the CPU backend.
    pub n_threads: u32,
    /// Largest batch per graph; longer prompts are prefilled in chunks.
    pub n_batch: usize,
    /// Work for the accel backend (`None`: everything on the CPU).
    pub offload: Option<OffloadParams>,
    /// A memory budget for the KV cache (`None`: all of it in memory).
    pub kv_swap: Option<KvSwapConfig>,
}

/// How the graph is split between the CPU and the accel backend.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct OffloadParams {
    /// The accel backend's threads, pinning and speed.
    pub accel: AccelConfig,
    /// Layers whose supported nodes run on the accel (a layer split).
    pub layers: Option<std::ops::Range<i32>>,
    /// Fraction of each large matrix product's rows the accel computes (a tensor split).
    pub split_matmul: Option<f32>,
    /// How the CPU waits for the accel.
    pub sync: WaitMode,
}

impl OffloadParams {
    /// Whether any work goes to the accel.
    pub fn is_active(&self) -> bool {
        self.layers.as_ref().is_some_and(|l| !l.is_empty()) || self.split_matmul.is_some()
    }

    fn placement(&self) -> Placement {
        Placement {
            offload_layers: self.layers.clone().unwrap_or(0..0),
            split_matmul: self.split_matmul,
            sync: self.sync,
            accel_supports: accel::supports,
        }
    }
}

impl Default for ContextParams {
    fn default() -> Self {
        ContextParams {
            n_ctx: None,
            n_threads: 1,
            n_batch: DEFAULT_BATCH,
            offload: None,
            kv_swap: None,
        }
    }
}

/// A running inference context.
pub struct Context {
    model: Arc<Model>,
    kv: KvCache,
    backend: CpuBackend,
    accel: Option<AccelBackend>,
    sync: WaitMode,
    graph: Graph,
    /// Logits of the last decoded batch: its last row, or (with `all_logits`) every row,
    /// `[n_vocab, rows]`.
    logits: Vec<f32>,
    /// Whether every row of a batch gets logits (llama.cpp's `logits_all`).
    all_logits: bool,
    n_past: usize,
    n_batch: usize,
    next_graph_id: u64,
    error: Option<EngineError>,
}

impl std::fmt::Debug for Context {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Context")
            .field("n_past", &self.n_past)
            .field("kv", &self.kv)
            .finish()
    }
}

impl Context {
    /// A context for `model`.
    pub fn new(model: Arc<Model>, params: &ContextParams) -> Result<Context, EngineError> {
        let cfg = &model.config;
        let n_ctx = params
            .n_ctx
            .unwrap_or(cfg.n_ctx_train.min(DEFAULT_CTX))
            .max(1);
        let kv = KvCache::new(cfg.n_layer, n_ctx, cfg.n_embd_kv(), params.kv_swap.as_ref())?;
        let mut backend =
            CpuBackend::new(0, params.n_threads, engine_graph_compute).map_err(|source| {
                EngineError::Io {
                    what: "starting the CPU backend's threads".into(),
                    source,
                }
            })?;
        let offload = params.offload.as_ref().filter(|o| o.is_active());
        let accel = offload
            .map(|o| AccelBackend::new(1, &o.accel, engine_graph_compute))
            .transpose()
            .map_err(|source| EngineError::Io {
                what: "starting the accel backend's threads".into(),
                source,
            })?;
        backend.set_fence(accel.as_ref().map(AccelBackend::fence));
        // Splits add copies and syncs: up to three nodes per split product and a copy
        // and a sync per backend boundary.
        let node_factor = if offload.is_some() { 3 } else { 1 };
        let mut graph = Graph::with_capacity(
            node_factor * cfg.n_layer * MAX_NODES_PER_LAYER + 16,
            cfg.n_layer * MAX_LEAFS_PER_LAYER + 8,
        );
        graph.set_placement(offload.map(OffloadParams::placement));
        let logits = vec![0.0; cfg.n_vocab];
        Ok(Context {
            kv,
            backend,
            sync: offload.map_or(WaitMode::Spin, |o| o.sync),
            accel,
            graph,
            logits,
            all_logits: false,
            n_past: 0,
            n_batch: params.n_batch.max(1),
            next_graph_id: 0,
            error: None,
            model,
        })
    }

    /// The model.
    pub fn model(&self) -> &Arc<Model> {
        &self.model
    }

    /// Context size in tokens.
    pub fn n_ctx(&self) -> usize {
        self.kv.n_ctx()
    }

    /// Largest batch per graph.
    pub fn n_batch(&self) -> usize {
        self.n_batch
    }

    /// Sets the largest batch per graph (the prefill chunk size) from now on.
    pub fn set_n_batch(&mut self, n_batch: usize) {
        self.n_batch = n_batch.max(1);
    }

    /// What the KV budget did so far (`None` without one).
    pub fn kv_swap_stats(&self) -> Option<crate::kv_cache::swap::SwapStats> {
        self.kv.swap_stats()
    }

    /// Tokens in the KV cache.
    pub fn n_past(&self) -> usize {
        self.n_past
    }

    /// Threads of the backend.
    pub fn n_threads(&self) -> u32 {
        self.backend.n_threads()
    }

    /// Forgets the cached tokens (the next decode starts at position 0).
    pub fn clear(&mut self) {
        self.n_past = 0;
    }

    /// Forgets the cached tokens from position `n_past` on; the ones before it keep their
    /// K/V and the next decode continues after them (a chat turn reusing the prefix it
    /// shares with the previous one). Larger values change nothing.
    pub fn truncate(&mut self, n_past: usize) {
        self.n_past = self.n_past.min(n_past);
    }

    /// Logits of the last token of the last decoded batch.
    pub fn logits(&self) -> &[f32] {
        let n_vocab = self.model.config.n_vocab;
        &self.logits[self.logits.len() - n_vocab..]
    }

    /// Computes the logits of every token of a batch from now on (`true`), or of its last
    /// token only (`false`, the default), as llama.cpp's `logits_all` does: the last
    /// layer's FFN and the output product then see every row of the batch, so they take
    /// the paths (and round as) llama.cpp does for a batch of that size.
    pub fn set_all_logits(&mut self, on: bool) {
        self.all_logits = on;
    }

    /// Logits of every token of the last decoded batch, `n_vocab` per token, in order
    /// (only the last token's without [`Context::set_all_logits`]).
    pub fn batch_logits(&self) -> &[f32] {
        &self.logits
    }

    /// Checks that `n_tokens` more tokens fit in the context.
    pub fn check_fits(&self, n_tokens: usize) -> Result<(), EngineError> {
        if self.n_past + n_tokens > self.n_ctx() {
            return Err(EngineError::ContextFull {
                n_tokens: self.n_past + n_tokens,
                n_ctx: self.n_ctx(),
                n_ctx_train: self.model.config.n_ctx_train,
            });
        }
        Ok(())
    }

    /// Decodes `tokens` (at most `n_batch`) at the next positions through the
    /// `engine_decode` probe point; afterwards [`Context::logits`] holds the logits of
    /// the last one.
    pub fn decode(&mut self, tokens: &[i32]) -> Result<(), EngineError> {
        if tokens.is_empty() {
            return Err(EngineError::EmptyPrompt);
        }
        let n_vocab = self.model.config.n_vocab;
        if let Some(&bad) = tokens.iter().find(|&&t| t < 0 || t as usize >= n_vocab) {
            return Err(EngineError::TokenOutOfRange {
                id: i64::from(bad),
                n_vocab,
            });
        }
        self.check_fits(tokens.len())?;
        assert!(
            tokens.len() <= self.n_batch,
            "decode takes at most n_batch tokens; callers split longer prompts"
        );
        // SAFETY: `self` is a live context and `tokens` holds `len` ids for the call.
        let code = unsafe {
            engine_decode(
                self as *mut Context as *mut c_void,
                tokens.len() as u32,
                self.n_past as u32,
                tokens.as_ptr(),
            )
        };
        match (code, self.error.take()) {
            (0, _) => Ok(()),
            (_, Some(e)) => Err(e),
            (code, None) => Err(EngineError::Decode { code }),
        }
    }

    fn decode_batch(&mut self, tokens: &[i32], pos: usize) -> Result<(), EngineError> {
        let n = tokens.len();
        self.graph.reset();
        let nodes = build_graph(
            &mut self.graph,
            &self.model,
            &mut self.kv,
            n,
            pos,
            self.all_logits,
        )?;
        let first_id = self.next_graph_id + 1;
        self.next_graph_id += self.graph.finish(first_id, n as u32, pos as u32);

        let embd = self.graph.input_mut::<f32>(nodes.inp_embd).as_mut_ptr();
        // SAFETY: the model outlives the call; `embd` has room for n rows of n_embd.
        unsafe {
            engine_phase_embed(
                Arc::as_ptr(&self.model) as *const c_void,
                tokens.as_ptr(),
                n as u32,
                embd,
            )
        };
        for (i, p) in self
            .graph
            .input_mut::<i32>(nodes.inp_pos)
            .iter_mut()
            .enumerate()
        {
            *p = (pos + i) as i32;
        }
        self.graph.input_mut::<i32>(nodes.inp_out_ids)[0] = n as i32 - 1;

        self.compute_splits()?;
        if let Some(e) = self.kv.take_swap_error() {
            return Err(e);
        }
        let out = self.graph.get(nodes.logits).map_or(0, |n| n.data) as *const f32;
        self.logits
            .resize(nodes.n_out * self.model.config.n_vocab, 0.0);
        // SAFETY: the output node holds n_out × n_vocab f32s, `self.logits` as many.
        unsafe {
            sampler::engine_phase_copy_logits(
                self.logits.as_mut_ptr(),
                out,
                self.logits.len() as u32,
            )
        };
        self.n_past = pos + n;
        Ok(())
    }
}

impl Context {
    /// Computes the finished graph split by split: CPU splits on this thread and the
    /// pool, accel splits submitted to the accel backend (which runs them while the CPU
    /// goes on until a `BACKEND_SYNC` node); waits for the accel at the end.
    fn compute_splits(&mut self) -> Result<(), EngineError> {
        let work_bytes = self
            .graph
            .nodes()
            .iter()
            .map(crate::ops::work_size)
            .max()
            .unwrap_or(0);
        let Some(accel) = self.accel.as_mut() else {
            let code = self.backend.compute(self.graph.header(), work_bytes);
            return if code == 0 {
                Ok(())
            } else {
                Err(EngineError::Decode { code })
            };
        };
        accel.reserve(work_bytes);
        let mut result = Ok(());
        for split in self.graph.splits() {
            match split.backend {
                common::BackendKind::Accel => {
                    // SAFETY: the graph is not touched until the wait below.
                    unsafe { accel.submit(&split.header) }
                }
                _ => {
                    let code = self.backend.compute(&split.header, work_bytes);
                    if code != 0 {
                        result = Err(EngineError::Decode { code });
                        break;
                    }
                }
            }
        }
        // Normally a no-op (the last split is the CPU's, after a sync).
        accel.wait(self.sync);
        result
    }
}

probe_entry! {
    /// Token level: decode one batch of `n_tokens` tokens starting at position `pos`.
    /// `ctx` is the engine's `Context`. Returns 0 on success, a negative code on error.
    fn engine_decode(ctx: *mut c_void, n_tokens: u32, pos: u32, tokens: *const i32) -> i32
        => decode_entry
}

/// Body of `engine_decode`.
pub(crate) extern "C" fn decode_entry(
    ctx: *mut c_void,
    n_tokens: u32,
    pos: u32,
    tokens: *const i32,
) -> i32 {
    if ctx.is_null() || tokens.is_null() {
        return -1;
    }
    let _span = Span::token(n_tokens, pos);
    // SAFETY: `Context::decode` passes itself and a live token slice.
    let (ctx, tokens) = unsafe {
        (
            &mut *(ctx as *mut Context),
            std::slice::from_raw_parts(tokens, n_tokens as usize),
        )
    };
    match ctx.decode_batch(tokens, pos as usize) {
        Ok(()) => 0,
        Err(e) => {
            ctx.error = Some(e);
            -2
        }
    }
}

probe_entry! {
    /// Phase: look up the embeddings of `n_tokens` tokens into `out` (`n_embd` floats each).
    fn engine_phase_embed(ctx: *const c_void, tokens: *const i32, n_tokens: u32, out: *mut f32)
        => embed_entry
}

/// Body of `engine_phase_embed`: dequantizes the embedding rows of `tokens`.
pub(crate) extern "C" fn embed_entry(
    model: *const c_void,
    tokens: *const i32,
    n_tokens: u32,
    out: *mut f32,
) {
    let _span = Span::phase("embed");
    if model.is_null() || n_tokens == 0 {
        return;
    }
    // SAFETY: the context passes its live model, the batch's (validated) token ids and a
    // buffer of n_tokens * n_embd floats.
    let (model, tokens) = unsafe {
        (
            &*(model as *const Model),
            std::slice::from_raw_parts(tokens, n_tokens as usize),
        )
    };
    let e = model.config.n_embd;
    // SAFETY: as above.
    let out = unsafe { std::slice::from_raw_parts_mut(out, n_tokens as usize * e) };
    let table = model.weights.node(model.weights.token_embd);
    let dtype = table.dtype().expect("weights are validated at load");
    let row_bytes = dtype.row_bytes(e).expect("weights are validated at load");
    for (i, &t) in tokens.iter().enumerate() {
        // SAFETY: token ids were checked against n_vocab, the table's row count.
        let row = unsafe {
            std::slice::from_raw_parts(
                (table.data + t as u64 * table.nb[1]) as *const u8,
                row_bytes,
            )
        };
        engine_kernels::quant::dequantize_row(dtype, row, &mut out[i * e..(i + 1) * e])
            .expect("row sizes match by construction");
    }
}
