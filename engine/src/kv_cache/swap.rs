//! A KV cache under a memory budget (seed 004, LLMS): the cache is managed in chunks of
//! [`CHUNK_TOKENS`] positions per layer (K rows and the same positions of every Vᵀ
//! row). Before a layer's attention, a `KV_FETCH` node makes the chunks it reads
//! resident: chunks of other layers are swapped out to a file per layer (optionally
//! quantized to 8 or 4 bits) until the layer's chunks fit the budget, then its swapped
//! chunks are read back. Layers are visited in a cycle, so the victim is the layer used
//! most recently (the one needed last again).
//!
//! Each step is a phase probe point with the bytes it moves: `engine_phase_kv_compress`,
//! `engine_phase_kv_swap_out`, `engine_phase_kv_swap_in`, `engine_phase_kv_decompress`.
//! Without compression a chunk comes back bit for bit, so results equal the
//! unbudgeted run's; with it, K and V are rounded like q8_0/q4_0 weights.
//!
//! Memory really is released: an evicted chunk's K pages are dropped at once
//! (`MADV_DONTNEED`; a chunk's K rows are whole pages when `64 · n_embd_kv · 2` is a
//! multiple of the page size); Vᵀ rows hold every position, so a layer's Vᵀ pages are
//! dropped when its last chunk leaves.

use core::ffi::c_void;
use std::fs::File;
use std::os::unix::fs::FileExt;
use std::path::PathBuf;
use std::sync::Mutex;

use common::DType;
use half::f16;
use serde::Serialize;

use crate::error::EngineError;
use crate::probe::probe_entry;

/// Positions per chunk.
pub const CHUNK_TOKENS: usize = 64;

/// How swapped chunks are stored.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum KvCompress {
    /// q8_0 blocks (8.5 bits per value).
    Q8,
    /// q4_0 blocks (4.5 bits per value).
    Q4,
}

impl KvCompress {
    fn dtype(self) -> DType {
        match self {
            KvCompress::Q8 => DType::Q8_0,
            KvCompress::Q4 => DType::Q4_0,
        }
    }
}

impl std::str::FromStr for KvCompress {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "8" => Ok(KvCompress::Q8),
            "4" => Ok(KvCompress::Q4),
            other => Err(format!("`{other}`: KV compression is 8 or 4 (bits)")),
        }
    }
}

/// A KV budget: `--kv-budget BYTES --kv-swap DIR [--kv-compress 8|4]`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct KvSwapConfig {
    /// Bytes of K and V data allowed in memory.
    pub budget: u64,
    /// Directory of the swap files (one per layer, removed at exit).
    pub dir: PathBuf,
    /// Store swapped chunks quantized.
    pub compress: Option<KvCompress>,
}

/// What the budget did so far.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct SwapStats {
    /// Chunks written out.
    pub chunks_out: u64,
    /// Chunks read back.
    pub chunks_in: u64,
    /// Bytes written to the swap files.
    pub bytes_out: u64,
    /// Bytes read from the swap files.
    pub bytes_in: u64,
    /// Largest resident K/V data, bytes.
    pub peak_resident: u64,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Chunk {
    /// Never written.
    Empty,
    /// In memory.
    Resident,
    /// In the layer's swap file (this many bytes at the chunk's slot).
    Swapped(u32),
}

/// The mutable state (locked by the one thread that runs a `KV_FETCH`).
struct SwapState {
    /// K and Vᵀ bases per layer.
    bases: Vec<(usize, usize)>,
    files: Vec<File>,
    paths: Vec<PathBuf>,
    chunks: Vec<Vec<Chunk>>,
    n_embd_kv: usize,
    n_ctx: usize,
    budget: u64,
    resident: u64,
    compress: Option<KvCompress>,
    last_layer: Option<usize>,
    /// Raw chunk bytes (K rows then V segments), and its compressed form.
    raw: Vec<u8>,
    packed: Vec<u8>,
    stats: SwapStats,
    error: Option<EngineError>,
}

/// The budget's state, shared with the `KV_FETCH` nodes of the graphs.
pub struct KvSwap {
    state: Mutex<SwapState>,
}

impl std::fmt::Debug for KvSwap {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("KvSwap").finish_non_exhaustive()
    }
}

impl SwapState {
    /// Uncompressed bytes of one chunk: K rows plus the Vᵀ segments.
    fn chunk_bytes(&self) -> usize {
        2 * CHUNK_TOKENS * self.n_embd_kv * size_of::<f16>()
    }

    fn k_bytes(&self) -> usize {
        CHUNK_TOKENS * self.n_embd_kv * size_of::<f16>()
    }

    /// Copies chunk `c` of layer `l` out of the cache into `raw`.
    fn gather(&mut self, l: usize, c: usize) {
        let (k, v) = self.bases[l];
        let kb = self.k_bytes();
        let seg = CHUNK_TOKENS * size_of::<f16>();
        let v_row = self.n_ctx * size_of::<f16>();
        self.raw.resize(self.chunk_bytes(), 0);
        // SAFETY: chunk `c` lies inside the layer's K and Vᵀ mappings (c < n_ctx /
        // CHUNK_TOKENS, checked by the caller), which live as long as the cache; no
        // other thread touches the cache while a KV_FETCH runs (the others wait at the
        // barrier after it).
        unsafe {
            let src = std::slice::from_raw_parts((k + c * kb) as *const u8, kb);
            self.raw[..kb].copy_from_slice(src);
            for row in 0..self.n_embd_kv {
                let at = (v + row * v_row + c * seg) as *const u8;
                self.raw[kb + row * seg..kb + (row + 1) * seg]
                    .copy_from_slice(std::slice::from_raw_parts(at, seg));
            }
        }
    }

    /// Copies `raw` back into chunk `c` of layer `l`.
    fn scatter(&self, l: usize, c: usize) {
        let (k, v) = self.bases[l];
        let kb = self.k_bytes();
        let seg = CHUNK_TOKENS * size_of::<f16>();
        let v_row = self.n_ctx * size_of::<f16>();
        // SAFETY: as in `gather`.
        unsafe {
            std::slice::from_raw_parts_mut((k + c * kb) as *mut u8, kb)
                .copy_from_slice(&self.raw[..kb]);
            for row in 0..self.n_embd_kv {
                let at = (v + row * v_row + c * seg) as *mut u8;
                std::slice::from_raw_parts_mut(at, seg)
                    .copy_from_slice(&self.raw[kb + row * seg..kb + (row + 1) * seg]);
            }
        }
    }

    /// Drops the pages of chunk `c`'s K rows, and the layer's Vᵀ pages when no chunk of
    /// it is resident any more.
    fn release(&self, l: usize, c: usize) {
        let page = page_size();
        let (k, v) = self.bases[l];
        let kb = self.k_bytes();
        if kb.is_multiple_of(page) {
            dont_need(k + c * kb, kb);
        }
        if !self.chunks[l].contains(&Chunk::Resident) {
            dont_need(v, self.n_ctx * self.n_embd_kv * size_of::<f16>());
        }
    }

    /// Writes chunk `c` of layer `l` out and marks it swapped.
    fn swap_out(&mut self, l: usize, c: usize) -> Result<(), EngineError> {
        let this = self as *mut SwapState as *mut c_void;
        let bytes = match self.compress {
            Some(q) => {
                let n = q
                    .dtype()
                    .row_bytes(self.chunk_bytes() / 2)
                    .unwrap_or(self.chunk_bytes());
                // SAFETY: `this` is this state, exclusively borrowed for the call.
                unsafe { engine_phase_kv_compress(this, l as u32, c as u32, n as u32) };
                n
            }
            None => self.chunk_bytes(),
        };
        // SAFETY: as above.
        let code = unsafe { engine_phase_kv_swap_out(this, l as u32, c as u32, bytes as u32) };
        self.check(code, l, "writing")?;
        self.chunks[l][c] = Chunk::Swapped(bytes as u32);
        self.resident -= self.chunk_bytes() as u64;
        self.stats.chunks_out += 1;
        self.stats.bytes_out += bytes as u64;
        self.release(l, c);
        Ok(())
    }

    /// Reads chunk `c` of layer `l` back and marks it resident.
    fn swap_in(&mut self, l: usize, c: usize, bytes: u32) -> Result<(), EngineError> {
        let this = self as *mut SwapState as *mut c_void;
        // SAFETY: `this` is this state, exclusively borrowed for the call.
        let code = unsafe { engine_phase_kv_swap_in(this, l as u32, c as u32, bytes) };
        self.check(code, l, "reading")?;
        if self.compress.is_some() {
            let raw = self.chunk_bytes() as u32;
            // SAFETY: as above.
            unsafe { engine_phase_kv_decompress(this, l as u32, c as u32, raw) };
        }
        self.chunks[l][c] = Chunk::Resident;
        self.resident += self.chunk_bytes() as u64;
        self.stats.chunks_in += 1;
        self.stats.bytes_in += u64::from(bytes);
        Ok(())
    }

    fn check(&self, code: i32, l: usize, what: &str) -> Result<(), EngineError> {
        if code == 0 {
            return Ok(());
        }
        Err(EngineError::Io {
            what: format!("{what} KV swap file {}", self.paths[l].display()),
            source: std::io::Error::from_raw_os_error(-code),
        })
    }

    /// Makes the chunks layer `l` reads at `n_kv` positions resident within the budget.
    fn fetch(&mut self, l: usize, n_kv: usize) -> Result<(), EngineError> {
        let need = n_kv.div_ceil(CHUNK_TOKENS).min(self.chunks[l].len());
        let chunk = self.chunk_bytes() as u64;
        let needed = need as u64 * chunk;
        if needed > self.budget {
            return Err(EngineError::KvBudget {
                budget: self.budget,
                layer: l,
                n_kv,
                needed,
            });
        }
        let missing = self.chunks[l][..need]
            .iter()
            .filter(|&&s| s != Chunk::Resident)
            .count() as u64
            * chunk;
        // Victims: the most recently used layers first (cyclic order backwards from l).
        let n_layer = self.chunks.len();
        let mut victim = l;
        while self.resident + missing > self.budget {
            victim = (victim + n_layer - 1) % n_layer;
            if victim == l {
                break; // only this layer's own chunks are left; they fit (checked above)
            }
            for c in (0..self.chunks[victim].len()).rev() {
                if self.resident + missing <= self.budget {
                    break;
                }
                if self.chunks[victim][c] == Chunk::Resident {
                    self.swap_out(victim, c)?;
                }
            }
        }
        for c in 0..need {
            match self.chunks[l][c] {
                Chunk::Resident => {}
                Chunk::Empty => {
                    self.chunks[l][c] = Chunk::Resident;
                    self.resident += chunk;
                }
                Chunk::Swapped(bytes) => self.swap_in(l, c, bytes)?,
            }
        }
        self.stats.peak_resident = self.stats.peak_resident.max(self.resident);
        self.last_layer = Some(l);
        Ok(())
    }
}

impl KvSwap {
    /// The budget over layers whose (K, Vᵀ) buffers start at `bases`.
    pub(super) fn new(
        cfg: &KvSwapConfig,
        bases: Vec<(*mut u8, *mut u8)>,
        n_ctx: usize,
        n_embd_kv: usize,
    ) -> Result<KvSwap, EngineError> {
        std::fs::create_dir_all(&cfg.dir).map_err(|source| EngineError::Io {
            what: format!("creating the KV swap directory {}", cfg.dir.display()),
            source,
        })?;
        let n_chunks = n_ctx.div_ceil(CHUNK_TOKENS);
        let mut files = Vec::new();
        let mut paths = Vec::new();
        for il in 0..bases.len() {
            let path = cfg
                .dir
                .join(format!("profinfer-kv-{}-l{il}.swap", std::process::id()));
            let file = std::fs::OpenOptions::new()
                .read(true)
                .write(true)
                .create(true)
                .truncate(true)
                .open(&path)
                .map_err(|source| EngineError::Io {
                    what: format!("creating KV swap file {}", path.display()),
                    source,
                })?;
            files.push(file);
            paths.push(path);
        }
        Ok(KvSwap {
            state: Mutex::new(SwapState {
                bases: bases
                    .into_iter()
                    .map(|(k, v)| (k as usize, v as usize))
                    .collect(),
                chunks: vec![vec![Chunk::Empty; n_chunks]; files.len()],
                files,
                paths,
                n_embd_kv,
                n_ctx,
                budget: cfg.budget,
                resident: 0,
                compress: cfg.compress,
                last_layer: None,
                raw: Vec::new(),
                packed: Vec::new(),
                stats: SwapStats::default(),
                error: None,
            }),
        })
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, SwapState> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Makes layer `l`'s chunks up to `n_kv` positions resident (the `KV_FETCH` op).
    /// An error is kept for the context to report after the graph.
    pub fn fetch(&self, l: usize, n_kv: usize) {
        let mut s = self.lock();
        if s.error.is_some() {
            return;
        }
        if let Err(e) = s.fetch(l, n_kv) {
            s.error = Some(e);
        }
    }

    /// What the budget did so far.
    pub fn stats(&self) -> SwapStats {
        self.lock().stats
    }

    /// The error of the last fetch, if any.
    pub fn take_error(&self) -> Option<EngineError> {
        self.lock().error.take()
    }
}

impl Drop for KvSwap {
    fn drop(&mut self) {
        for p in &self.lock().paths {
            let _ = std::fs::remove_file(p);
        }
    }
}

fn page_size() -> usize {
    // SAFETY: sysconf has no preconditions.
    let p = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    usize::try_from(p).unwrap_or(4096).max(1)
}

/// Drops the pages of `[addr, addr + len)` (they read as zeros afterwards).
fn dont_need(addr: usize, len: usize) {
    // SAFETY: the range lies in an anonymous private mapping of the cache; its data is
    // saved in the swap file or no longer needed, and nobody reads it until it is
    // restored.
    unsafe {
        libc::madvise(addr as *mut c_void, len, libc::MADV_DONTNEED);
    }
}

/// The state behind a phase probe's `swap` argument.
///
/// # Safety
/// `swap` must be the `SwapState` that called the probe, borrowed exclusively.
unsafe fn state<'a>(swap: *mut c_void) -> &'a mut SwapState {
    // SAFETY: the caller's contract.
    unsafe { &mut *(swap as *mut SwapState) }
}

probe_entry! {
    /// Phase: quantize chunk `chunk` of layer `layer`'s KV cache into `bytes` bytes
    /// before it is swapped out (`--kv-compress`). `swap` is the cache's swap state.
    fn engine_phase_kv_compress(swap: *mut c_void, layer: u32, chunk: u32, bytes: u32)
        => compress_entry
}

/// Body of `engine_phase_kv_compress`: gathers chunk `chunk` of `layer` and quantizes it
/// into `bytes` bytes.
pub(crate) extern "C" fn compress_entry(swap: *mut c_void, layer: u32, chunk: u32, bytes: u32) {
    // SAFETY: `swap_out` passes its own state.
    let s = unsafe { state(swap) };
    s.gather(layer as usize, chunk as usize);
    let Some(q) = s.compress else { return };
    let values: Vec<f32> = s
        .raw
        .chunks_exact(2)
        .map(|b| f16::from_le_bytes([b[0], b[1]]).to_f32())
        .collect();
    s.packed.resize(bytes as usize, 0);
    engine_kernels::quant::quantize_row(q.dtype(), &values, &mut s.packed)
        .expect("chunks are whole q8_0/q4_0 blocks");
}

probe_entry! {
    /// Phase: dequantize a chunk read back into `bytes` bytes of f16 K/V.
    fn engine_phase_kv_decompress(swap: *mut c_void, layer: u32, chunk: u32, bytes: u32)
        => decompress_entry
}

/// Body of `engine_phase_kv_decompress`: dequantizes the chunk read back into `bytes`
/// raw bytes and scatters it into the cache.
pub(crate) extern "C" fn decompress_entry(swap: *mut c_void, layer: u32, chunk: u32, bytes: u32) {
    // SAFETY: `swap_in` passes its own state.
    let s = unsafe { state(swap) };
    let Some(q) = s.compress else { return };
    let mut values = vec![0f32; bytes as usize / 2];
    engine_kernels::quant::dequantize_row(q.dtype(), &s.packed, &mut values)
        .expect("chunks are whole q8_0/q4_0 blocks");
    s.raw.resize(bytes as usize, 0);
    for (o, v) in s.raw.chunks_exact_mut(2).zip(values) {
        o.copy_from_slice(&f16::from_f32(v).to_le_bytes());
    }
    s.scatter(layer as usize, chunk as usize);
}

probe_entry! {
    /// Phase: write `bytes` bytes of chunk `chunk` of layer `layer`'s KV cache to its
    /// swap file. Returns 0 or `-errno`.
    fn engine_phase_kv_swap_out(swap: *mut c_void, layer: u32, chunk: u32, bytes: u32) -> i32
        => swap_out_entry
}

/// Body of `engine_phase_kv_swap_out`: writes `bytes` bytes of chunk `chunk` of `layer`
/// (raw, or as compressed) to the layer's swap file. Returns 0 or `-errno`.
pub(crate) extern "C" fn swap_out_entry(
    swap: *mut c_void,
    layer: u32,
    chunk: u32,
    bytes: u32,
) -> i32 {
    // SAFETY: `swap_out` passes its own state.
    let s = unsafe { state(swap) };
    let (l, c) = (layer as usize, chunk as usize);
    if s.compress.is_none() {
        s.gather(l, c);
    }
    let data = if s.compress.is_some() {
        &s.packed
    } else {
        &s.raw
    };
    let slot = (c * s.chunk_bytes()) as u64;
    match s.files[l].write_all_at(&data[..bytes as usize], slot) {
        Ok(()) => 0,
        Err(e) => -e.raw_os_error().unwrap_or(libc::EIO),
    }
}

probe_entry! {
    /// Phase: read `bytes` bytes of chunk `chunk` of layer `layer`'s KV cache back from
    /// its swap file. Returns 0 or `-errno`.
    fn engine_phase_kv_swap_in(swap: *mut c_void, layer: u32, chunk: u32, bytes: u32) -> i32
        => swap_in_entry
}

/// Body of `engine_phase_kv_swap_in`: reads `bytes` bytes of chunk `chunk` of `layer`
/// back (and, uncompressed, into the cache). Returns 0 or `-errno`.
pub(crate) extern "C" fn swap_in_entry(
    swap: *mut c_void,
    layer: u32,
    chunk: u32,
    bytes: u32,
) -> i32 {
    // SAFETY: `swap_in` passes its own state.
    let s = unsafe { state(swap) };
    let (l, c) = (layer as usize, chunk as usize);
    let slot = (c * s.chunk_bytes()) as u64;
    let compressed = s.compress.is_some();
    let mut buf = std::mem::take(if compressed {
        &mut s.packed
    } else {
        &mut s.raw
    });
    buf.resize(bytes as usize, 0);
    let r = s.files[l].read_exact_at(&mut buf, slot);
    if compressed {
        s.packed = buf;
    } else {
        s.raw = buf;
    }
    match r {
        Ok(()) => {
            if !compressed {
                s.scatter(l, c);
            }
            0
        }
        Err(e) => -e.raw_os_error().unwrap_or(libc::EIO),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A cache of 3 layers under a budget of two layers' chunks: fetching layers in a
    /// cycle swaps chunks out and back bit for bit, never holds more than the budget,
    /// and counts every byte moved.
    #[test]
    fn chunks_come_back_bit_for_bit_within_the_budget() {
        let (n_layer, n_ctx, ekv) = (3, 2 * CHUNK_TOKENS, 64);
        let dir = std::env::temp_dir().join(format!("kvswap-test-{}", std::process::id()));
        let one_layer = 2 * 2 * CHUNK_TOKENS * ekv * 2; // two chunks of K+V
        let cfg = KvSwapConfig {
            budget: 2 * one_layer as u64,
            dir: dir.clone(),
            compress: None,
        };
        let mut cache =
            crate::kv_cache::KvCache::new(n_layer, n_ctx, ekv, Some(&cfg)).expect("cache");
        let swap = cache.swap.take().expect("budgeted");
        // Fill every layer with a pattern, one layer at a time as a forward pass would.
        let pattern = |l: usize, i: usize| (l * 1_000_003 + i * 7919) as u16;
        let bytes = n_ctx * ekv * 2;
        for l in 0..n_layer {
            swap.fetch(l, n_ctx);
            let (k, v) = (cache.k_ptr(l), cache.v_ptr(l));
            for i in 0..bytes / 2 {
                // SAFETY: inside the layer's mappings.
                unsafe {
                    (k as *mut u16).add(i).write(pattern(l, i));
                    (v as *mut u16).add(i).write(pattern(l, i) ^ 0x5555);
                }
            }
        }
        for round in 0..3 {
            for l in 0..n_layer {
                swap.fetch(l, n_ctx);
                assert!(swap.take_error().is_none());
                let (k, v) = (cache.k_ptr(l), cache.v_ptr(l));
                for i in 0..bytes / 2 {
                    // SAFETY: inside the layer's mappings.
                    let (a, b) = unsafe {
                        (
                            (k as *const u16).add(i).read(),
                            (v as *const u16).add(i).read(),
                        )
                    };
                    assert_eq!(
                        (a, b),
                        (pattern(l, i), pattern(l, i) ^ 0x5555),
                        "round {round} layer {l} value {i}"
                    );
                }
            }
        }
        let st = swap.stats();
        assert!(st.peak_resident <= cfg.budget);
        assert!(st.chunks_out > 0 && st.chunks_in > 0);
        let chunk = (2 * CHUNK_TOKENS * ekv * 2) as u64;
        assert_eq!(st.bytes_out, st.chunks_out * chunk);
        assert_eq!(st.bytes_in, st.chunks_in * chunk);
        // A budget below one layer's needs is an error, not a wrong answer.
        let small = KvSwapConfig {
            budget: one_layer as u64 / 2,
            ..cfg
        };
        let cache = crate::kv_cache::KvCache::new(1, n_ctx, ekv, Some(&small)).expect("cache");
        cache.swap.as_deref().expect("budgeted").fetch(0, n_ctx);
        assert!(matches!(
            cache.take_swap_error(),
            Some(EngineError::KvBudget { .. })
        ));
        drop(swap);
        let _ = std::fs::remove_dir_all(dir);
    }

    /// Compressed chunks come back close (q8_0 error), and move fewer bytes.
    #[test]
    fn compressed_chunks_come_back_close() {
        let (n_ctx, ekv) = (2 * CHUNK_TOKENS, 64);
        let dir = std::env::temp_dir().join(format!("kvswap-q-test-{}", std::process::id()));
        let chunk = 2 * CHUNK_TOKENS * ekv * 2;
        let cfg = KvSwapConfig {
            budget: 2 * chunk as u64,
            dir: dir.clone(),
            compress: Some(KvCompress::Q8),
        };
        let mut cache = crate::kv_cache::KvCache::new(2, n_ctx, ekv, Some(&cfg)).expect("cache");
        let swap = cache.swap.take().expect("budgeted");
        let value = |i: usize| ((i % 97) as f32 - 48.0) / 16.0;
        swap.fetch(0, n_ctx);
        let k = cache.k_ptr(0) as *mut f16;
        for i in 0..n_ctx * ekv {
            // SAFETY: inside layer 0's K mapping.
            unsafe { k.add(i).write(f16::from_f32(value(i))) };
        }
        swap.fetch(1, n_ctx); // evicts layer 0
        swap.fetch(0, n_ctx); // brings it back
        assert!(swap.take_error().is_none());
        for i in 0..n_ctx * ekv {
            // SAFETY: as above.
            let got = unsafe { k.add(i).read() }.to_f32();
            assert!(
                (got - value(i)).abs() <= 3.0 / 127.0 * 1.01 + 1e-3,
                "value {i}: {got}"
            );
        }
        let st = swap.stats();
        let packed = DType::Q8_0.row_bytes(chunk / 2).expect("whole blocks") as u64;
        assert_eq!(st.bytes_out, st.chunks_out * packed);
        assert!(packed * 10 < chunk as u64 * 6, "q8_0 stores 8.5 of 16 bits");
        drop(swap);
        let _ = std::fs::remove_dir_all(dir);
    }
}
