//! The KV cache: per layer, K rows `[n_embd_kv]` per position and V stored transposed
//! (`[n_ctx]` per K/V dimension), both f16 — llama.cpp's layout without flash
//! attention, so attention is two matrix products over contiguous rows.
//!
//! Buffers are zero-initialised allocations, which the OS backs lazily: a model's full
//! trained context can be reserved while only the positions used cost memory.

use half::f16;

/// KV cache of one layer.
struct LayerKv {
    /// K: `n_ctx` rows of `n_embd_kv` (position-major).
    k: Vec<u16>,
    /// Vᵀ: `n_embd_kv` rows of `n_ctx` (dimension-major).
    v: Vec<u16>,
}

/// The KV cache of a context.
pub struct KvCache {
    layers: Vec<LayerKv>,
    n_ctx: usize,
    n_embd_kv: usize,
}

impl std::fmt::Debug for KvCache {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("KvCache")
            .field("n_ctx", &self.n_ctx)
            .field("n_layers", &self.layers.len())
            .finish()
    }
}

impl KvCache {
    /// A cache of `n_ctx` positions for `n_layer` layers of `n_embd_kv` wide K/V rows.
    pub fn new(n_layer: usize, n_ctx: usize, n_embd_kv: usize) -> KvCache {
        let layers = (0..n_layer)
            .map(|_| LayerKv {
                k: vec![0u16; n_ctx * n_embd_kv],
                v: vec![0u16; n_ctx * n_embd_kv],
            })
            .collect();
        KvCache {
            layers,
            n_ctx,
            n_embd_kv,
        }
    }

    /// Positions the cache holds.
    pub fn n_ctx(&self) -> usize {
        self.n_ctx
    }

    /// Base of layer `il`'s K buffer.
    pub fn k_ptr(&mut self, il: usize) -> *mut u8 {
        self.layers[il].k.as_mut_ptr() as *mut u8
    }

    /// Base of layer `il`'s Vᵀ buffer.
    pub fn v_ptr(&mut self, il: usize) -> *mut u8 {
        self.layers[il].v.as_mut_ptr() as *mut u8
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
}
