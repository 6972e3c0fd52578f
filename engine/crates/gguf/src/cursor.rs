//! A bounds-checked little-endian reader over a byte slice.

use crate::error::GgufError;

/// Reads little-endian fields from a byte slice; every read is bounds-checked and
/// reports the offset and what was being read when the slice is too short.
pub(crate) struct Cursor<'a> {
    bytes: &'a [u8],
    pos: usize,
}

impl<'a> Cursor<'a> {
    /// A cursor at the start of `bytes`.
    pub(crate) fn new(bytes: &'a [u8]) -> Self {
        Self { bytes, pos: 0 }
    }

    /// Current offset from the start of the slice.
    pub(crate) fn offset(&self) -> u64 {
        self.pos as u64
    }

    /// Bytes left after the current offset.
    pub(crate) fn remaining(&self) -> u64 {
        (self.bytes.len() - self.pos) as u64
    }

    /// The next `n` bytes.
    pub(crate) fn take(&mut self, n: u64, what: &'static str) -> Result<&'a [u8], GgufError> {
        let available = self.remaining();
        if n > available {
            return Err(GgufError::Truncated {
                offset: self.offset(),
                needed: n,
                available,
                what,
            });
        }
        // `n <= available <= usize::MAX`, so the cast is lossless and the range in bounds.
        let n = n as usize;
        let out = &self.bytes[self.pos..self.pos + n];
        self.pos += n;
        Ok(out)
    }

    /// The next `N` bytes as an array.
    pub(crate) fn array<const N: usize>(
        &mut self,
        what: &'static str,
    ) -> Result<[u8; N], GgufError> {
        let mut out = [0u8; N];
        out.copy_from_slice(self.take(N as u64, what)?);
        Ok(out)
    }

    /// A little-endian `u8`.
    pub(crate) fn u8(&mut self, what: &'static str) -> Result<u8, GgufError> {
        Ok(self.array::<1>(what)?[0])
    }

    /// A little-endian `u32`.
    pub(crate) fn u32(&mut self, what: &'static str) -> Result<u32, GgufError> {
        self.array(what).map(u32::from_le_bytes)
    }

    /// A little-endian `u64`.
    pub(crate) fn u64(&mut self, what: &'static str) -> Result<u64, GgufError> {
        self.array(what).map(u64::from_le_bytes)
    }

    /// A GGUF string: u64 length, then that many UTF-8 bytes (at most `max`).
    pub(crate) fn string(&mut self, max: u64, what: &'static str) -> Result<&'a str, GgufError> {
        let offset = self.offset();
        let len = self.u64(what)?;
        if len > max {
            return Err(GgufError::StringTooLong {
                offset,
                len,
                max,
                what,
            });
        }
        let start = self.offset();
        let bytes = self.take(len, what)?;
        core::str::from_utf8(bytes).map_err(|_| GgufError::InvalidUtf8 {
            offset: start,
            what,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_little_endian_and_reports_truncation() {
        let bytes = [1, 0, 0, 0, 2, 0, 0, 0, 0, 0, 0, 0, 9];
        let mut c = Cursor::new(&bytes);
        assert_eq!(c.u32("a").expect("4 bytes"), 1);
        assert_eq!(c.u64("b").expect("8 bytes"), 2);
        let err = c.u32("c").expect_err("only one byte left");
        assert!(matches!(
            err,
            GgufError::Truncated {
                offset: 12,
                needed: 4,
                available: 1,
                what: "c"
            }
        ));
        assert_eq!(c.u8("d").expect("one byte"), 9);
    }

    #[test]
    fn strings_check_length_limit_and_utf8() {
        let mut good = 3u64.to_le_bytes().to_vec();
        good.extend_from_slice(b"abc");
        assert_eq!(Cursor::new(&good).string(3, "s").expect("valid"), "abc");
        assert!(matches!(
            Cursor::new(&good).string(2, "s"),
            Err(GgufError::StringTooLong { len: 3, max: 2, .. })
        ));
        let mut bad = 1u64.to_le_bytes().to_vec();
        bad.push(0xff);
        assert!(matches!(
            Cursor::new(&bad).string(9, "s"),
            Err(GgufError::InvalidUtf8 { offset: 8, .. })
        ));
        let huge = u64::MAX.to_le_bytes();
        assert!(matches!(
            Cursor::new(&huge).string(u64::MAX, "s"),
            Err(GgufError::Truncated { .. })
        ));
    }
}
