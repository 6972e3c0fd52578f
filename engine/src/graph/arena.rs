//! Offsets of activation buffers in one arena: a first-fit free list, so a buffer freed
//! after its last consumer is reused by later nodes (ggml-alloc's idea).

/// Alignment of every arena buffer.
pub(super) const ARENA_ALIGN: usize = 64;

/// First-fit free-list planner of arena offsets.
#[derive(Default)]
pub(super) struct ArenaPlan {
    free: Vec<(usize, usize)>,
    /// End of the highest block in use.
    top: usize,
    /// Highest `top` ever reached: the arena size needed.
    pub(super) high_water: usize,
}

impl ArenaPlan {
    pub(super) fn alloc(&mut self, bytes: usize) -> usize {
        let bytes = bytes.div_ceil(ARENA_ALIGN) * ARENA_ALIGN;
        // Best fit among free blocks.
        let best = self
            .free
            .iter()
            .enumerate()
            .filter(|(_, (_, size))| *size >= bytes)
            .min_by_key(|(_, (_, size))| *size)
            .map(|(i, _)| i);
        if let Some(i) = best {
            let (off, size) = self.free[i];
            if size == bytes {
                self.free.remove(i);
            } else {
                self.free[i] = (off + bytes, size - bytes);
            }
            return off;
        }
        let off = self.top;
        self.top += bytes;
        self.high_water = self.high_water.max(self.top);
        off
    }

    pub(super) fn free(&mut self, off: usize, bytes: usize) {
        let bytes = bytes.div_ceil(ARENA_ALIGN) * ARENA_ALIGN;
        self.free.push((off, bytes));
        self.free.sort_unstable();
        // Merge neighbours.
        let mut merged: Vec<(usize, usize)> = Vec::with_capacity(self.free.len());
        for (o, s) in self.free.drain(..) {
            if let Some(last) = merged.last_mut()
                && last.0 + last.1 == o
            {
                last.1 += s;
                continue;
            }
            merged.push((o, s));
        }
        // A free block at the top shrinks the arena.
        if let Some(&(o, s)) = merged.last()
            && o + s == self.top
        {
            self.top = o;
            merged.pop();
        }
        self.free = merged;
    }
}
