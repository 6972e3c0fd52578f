//! Token pieces to text while streaming: a character split over several tokens (byte
//! tokens, or BPE pieces that end mid-character) is held back until it is complete, so
//! every chunk written to the terminal is valid UTF-8.

/// Turns a stream of byte pieces into valid UTF-8 text.
#[derive(Debug, Default)]
pub struct Utf8Stream {
    /// Bytes of an incomplete character at the end of the last piece (at most 3).
    pending: Vec<u8>,
}

impl Utf8Stream {
    /// An empty stream.
    pub fn new() -> Utf8Stream {
        Utf8Stream::default()
    }

    /// Appends `piece` and returns the text that is complete so far. Invalid bytes become
    /// U+FFFD, as `String::from_utf8_lossy` would render them.
    pub fn push(&mut self, piece: &[u8]) -> String {
        self.pending.extend_from_slice(piece);
        let mut out = String::new();
        let mut rest: &[u8] = &self.pending;
        loop {
            match std::str::from_utf8(rest) {
                Ok(text) => {
                    out.push_str(text);
                    rest = &[];
                    break;
                }
                Err(e) => {
                    let (valid, after) = rest.split_at(e.valid_up_to());
                    out.push_str(std::str::from_utf8(valid).expect("checked prefix"));
                    match e.error_len() {
                        // An incomplete character at the end: wait for the next piece.
                        None => {
                            rest = after;
                            break;
                        }
                        Some(n) => {
                            out.push(char::REPLACEMENT_CHARACTER);
                            rest = &after[n..];
                        }
                    }
                }
            }
        }
        let keep = rest.len();
        let start = self.pending.len() - keep;
        self.pending.drain(..start);
        out
    }

    /// Ends the stream: the text of any incomplete character left over (U+FFFD).
    pub fn finish(&mut self) -> String {
        let text = String::from_utf8_lossy(&self.pending).into_owned();
        self.pending.clear();
        text
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn characters_split_over_pieces_are_held_back_until_complete() {
        let mut s = Utf8Stream::new();
        let euro = "€".as_bytes();
        assert_eq!(s.push(b"a"), "a");
        assert_eq!(s.push(&euro[..1]), "");
        assert_eq!(s.push(&euro[1..2]), "");
        assert_eq!(s.push(&[euro[2], b'b']), "€b");
        assert_eq!(s.finish(), "");
    }

    #[test]
    fn every_split_of_a_text_streams_back_to_the_text() {
        let text = "héllo wörld — 日本語 🦀!";
        let bytes = text.as_bytes();
        for cut in 0..=bytes.len() {
            let mut s = Utf8Stream::new();
            let mut out = s.push(&bytes[..cut]);
            out.push_str(&s.push(&bytes[cut..]));
            out.push_str(&s.finish());
            assert_eq!(out, text, "cut at {cut}");
        }
    }

    #[test]
    fn invalid_bytes_become_replacement_characters() {
        let mut s = Utf8Stream::new();
        assert_eq!(s.push(b"a\xffb"), "a\u{fffd}b");
        assert_eq!(s.push(&[0xe2, 0x82]), "");
        assert_eq!(s.push(b"c"), "\u{fffd}c");
        assert_eq!(s.push(&[0xf0, 0x9f]), "");
        assert_eq!(s.finish(), "\u{fffd}");
    }
}
