//! The KV cache: per layer, K rows `[n_embd_kv]` per position and V stored transposed
//! (`[n_ctx]` per K/V dimension), both f16 — llama.cpp's layout without flash
//! attention, so attention is two matrix products over contiguous rows.
//!
//! Buffers are zero-initialised anonymous mappings (page-aligned), which the OS backs
//! lazily: a model's full trained context can be reserved while only the positions used
//! cost memory. Under a KV budget ([`KvSwapConfig`], seed 004), the cache is managed in
//! fixed-size chunks of positions that are swapped to files and back ([`swap`]).

pub mod swap;

use half::f16;
use memmap2::MmapMut;

use crate::error::EngineError;
use swap::KvSwap;
pub use swap::{KvCompress, KvSwapConfig};

/// KV cache of one layer.
struct LayerKv {
    /// K: `n_ctx` rows of `n_embd_kv` (position-major).
    k: MmapMut,
    /// Vᵀ: `n_embd_kv` rows of `n_ctx` (dimension-major).
    v: MmapMut,
}

/// The KV cache of a context.
pub struct KvCache {
    layers: Vec<LayerKv>,
    n_ctx: usize,
    n_embd_kv: usize,
    swap: Option<Box<KvSwap>>,
}

impl std::fmt::Debug for KvCache {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("KvCache")
            .field("n_ctx", &self.n_ctx)
            .field("n_layers", &self.layers.len())
            .field("swap", &self.swap.is_some())
            .finish()
    }
}

impl KvCache {
    /// A cache of `n_ctx` positions for `n_layer` layers of `n_embd_kv` wide K/V rows,
    /// under a budget if `swap` is given.
    pub fn new(
        n_layer: usize,
        n_ctx: usize,
        n_embd_kv: usize,
        swap: Option<&KvSwapConfig>,
    ) -> Result<KvCache, EngineError> {
        let bytes = (n_ctx * n_embd_kv * size_of::<f16>()).max(1);
        let map = || {
            MmapMut::map_anon(bytes).map_err(|source| EngineError::Io {
                what: format!("reserving {bytes} bytes of KV cache"),
                source,
            })
        };
        let layers = (0..n_layer)
            .map(|_| {
                Ok(LayerKv {
                    k: map()?,
                    v: map()?,
                })
            })
            .collect::<Result<Vec<_>, EngineError>>()?;
        let mut cache = KvCache {
            layers,
            n_ctx,
            n_embd_kv,
            swap: None,
        };
        if let Some(cfg) = swap {
            let bases = (0..n_layer)
                .map(|il| (cache.k_ptr(il), cache.v_ptr(il)))
                .collect();
            cache.swap = Some(Box::new(KvSwap::new(cfg, bases, n_ctx, n_embd_kv)?));
        }
        Ok(cache)
    }

    /// Positions the cache holds.
    pub fn n_ctx(&self) -> usize {
        self.n_ctx
    }

    /// Base of layer `il`'s K buffer.
    pub fn k_ptr(&mut self, il: usize) -> *mut u8 {
        self.layers[il].k.as_mut_ptr()
    }

    /// Base of layer `il`'s Vᵀ buffer.
    pub fn v_ptr(&mut self, il: usize) -> *mut u8 {
        self.layers[il].v.as_mut_ptr()
    }

    /// Bytes between consecutive positions of K.
    pub fn k_row_bytes(&self) -> u64 {
        (self.n_embd_kv * size_of::<f16>()) as u64
    }

    /// Bytes between consecutive dimensions of Vᵀ.
    pub fn v_row_bytes(&self) -> u64 {
        (self.n_ctx * size_of::<f16>()) as u64
    }

    /// Reserved bytes (virtual; pages are touched as positions are used).
    pub fn reserved_bytes(&self) -> u64 {
        (self.layers.len() * 2 * self.n_ctx * self.n_embd_kv * size_of::<f16>()) as u64
    }

    /// The swap state a `KV_FETCH` node works on (its `data`), if the cache is budgeted.
    pub fn swap_state(&self) -> Option<*const u8> {
        self.swap
            .as_deref()
            .map(|s| s as *const KvSwap as *const u8)
    }

    /// What the budget did so far (`None` without a budget).
    pub fn swap_stats(&self) -> Option<swap::SwapStats> {
        self.swap.as_deref().map(KvSwap::stats)
    }

    /// An error a `KV_FETCH` node hit during the last graph, if any.
    pub fn take_swap_error(&self) -> Option<EngineError> {
        self.swap.as_deref().and_then(KvSwap::take_error)
    }
}
