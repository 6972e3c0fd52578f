//! The part of C++ `std::regex` that llama.cpp's pre-tokenizer regexes use.
//!
//! llama.cpp runs each pre-tokenizer regex it has no hand-written splitter
//! for through libstdc++'s `std::regex` (on a byte string) or `std::wregex`
//! (on 32-bit code points), ECMAScript grammar, flags `optimize | nosubs`,
//! classic "C" locale, and walks the matches with `std::regex_iterator`
//! (`unicode_regex_split_stl`). This module is a backtracking matcher with the
//! same semantics for the constructs those regexes contain:
//!
//! * alternation, tried left to right (the first alternative that lets the
//!   whole pattern match wins, not the longest);
//! * groups `(..)` and `(?:..)` (`nosubs`: nothing is captured);
//! * greedy `*`, `+`, `?`, `{n}`, `{n,}`, `{n,m}`;
//! * lookahead `(?=..)`, `(?!..)` and the end anchor `$`;
//! * bracket expressions with ranges, negation and `\s \S \d \D \w \W`;
//! * escapes `\r \n \t \v \f \0 \xHH \uHHHH` and identity escapes.
//!
//! Classes follow the "C" locale, which is ASCII-only for `char` and
//! `wchar_t` alike (glibc's `iswspace` is false above U+007F there). In byte
//! mode `char` is signed, which orders bracket ranges as libstdc++ does.
//! Anything else (`^`, `.`, `\b`, back-references, lazy quantifiers, POSIX
//! classes, repeating a sub-pattern that can match empty) is refused when the
//! pattern is compiled, so an unported construct cannot match differently.

/// Longest `{n,m}` bound accepted (llama.cpp's regexes use up to 512).
const MAX_REPEAT: u32 = 1024;

/// What the pattern and text units are.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Units {
    /// `std::regex`: bytes, compared as signed `char` in bracket ranges.
    Bytes,
    /// `std::wregex`: code points.
    Wide,
}

impl Units {
    /// The order bracket ranges compare units in.
    fn order(self, unit: u32) -> i64 {
        match self {
            // `char` is signed on the platforms llama.cpp's oracle runs on.
            Units::Bytes => i64::from((unit & 0xFF) as u8 as i8),
            Units::Wide => i64::from(unit),
        }
    }
}

/// Why a pattern cannot be compiled.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{why} at pattern unit {at}")]
pub(crate) struct RegexError {
    /// What is wrong or unsupported.
    why: &'static str,
    /// Index of the pattern unit where it was found.
    at: usize,
}

/// A character class of the "C" locale (`\s`, `\d`, `\w`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Ctype {
    Space,
    Digit,
    Word,
}

impl Ctype {
    fn contains(self, unit: u32) -> bool {
        match self {
            Ctype::Space => matches!(unit, 0x09..=0x0D | 0x20),
            Ctype::Digit => matches!(unit, 0x30..=0x39),
            Ctype::Word => {
                unit == u32::from(b'_')
                    || char::from_u32(unit).is_some_and(|c| c.is_ascii_alphanumeric())
            }
        }
    }
}

/// A bracket expression (or a single-unit class such as `\s` outside one),
/// matched like libstdc++'s `_BracketMatcher::_M_apply`.
#[derive(Debug, Clone)]
struct Bracket {
    /// `[^...]`.
    negated: bool,
    chars: Vec<u32>,
    /// Inclusive ranges, as [`Units::order`] values.
    ranges: Vec<(i64, i64)>,
    classes: Vec<Ctype>,
    /// `\S`, `\D`, `\W` inside brackets: a unit outside the class matches.
    negated_classes: Vec<Ctype>,
    units: Units,
}

impl Bracket {
    fn new(units: Units) -> Self {
        Bracket {
            negated: false,
            chars: Vec::new(),
            ranges: Vec::new(),
            classes: Vec::new(),
            negated_classes: Vec::new(),
            units,
        }
    }

    fn add_class(&mut self, class: Ctype, negated: bool) {
        if negated {
            self.negated_classes.push(class);
        } else {
            self.classes.push(class);
        }
    }

    fn matches(&self, unit: u32) -> bool {
        let key = self.units.order(unit);
        let hit = self.chars.contains(&unit)
            || self.ranges.iter().any(|&(lo, hi)| lo <= key && key <= hi)
            || self.classes.iter().any(|c| c.contains(unit))
            || self.negated_classes.iter().any(|c| !c.contains(unit));
        hit != self.negated
    }
}

/// Parsed pattern.
#[derive(Debug, Clone)]
enum Node {
    Char(u32),
    Class(Bracket),
    AtEnd,
    Look {
        negate: bool,
        body: Box<Node>,
    },
    Concat(Vec<Node>),
    Alt(Vec<Node>),
    Repeat {
        body: Box<Node>,
        min: u32,
        max: Option<u32>,
    },
}

impl Node {
    /// Whether the node can match without consuming a unit.
    fn nullable(&self) -> bool {
        match self {
            Node::Char(_) | Node::Class(_) => false,
            Node::AtEnd | Node::Look { .. } => true,
            Node::Concat(items) => items.iter().all(Node::nullable),
            Node::Alt(alts) => alts.iter().any(Node::nullable),
            Node::Repeat { body, min, .. } => *min == 0 || body.nullable(),
        }
    }
}

/// One token of a bracket expression (libstdc++ `_M_scan_in_bracket`).
enum BracketToken {
    End,
    Dash,
    Char(u32),
    Class(Ctype, bool),
}

struct Parser<'a> {
    pattern: &'a [u32],
    pos: usize,
    units: Units,
}

impl Parser<'_> {
    fn error(&self, why: &'static str) -> RegexError {
        RegexError { why, at: self.pos }
    }

    fn peek(&self) -> Option<u32> {
        self.pattern.get(self.pos).copied()
    }

    fn next(&mut self) -> Result<u32, RegexError> {
        let unit = self
            .peek()
            .ok_or_else(|| self.error("unexpected end of pattern"))?;
        self.pos += 1;
        Ok(unit)
    }

    fn eat(&mut self, c: char) -> bool {
        if self.peek() == Some(u32::from(c)) {
            self.pos += 1;
            true
        } else {
            false
        }
    }

    fn disjunction(&mut self) -> Result<Node, RegexError> {
        let mut alts = vec![self.alternative()?];
        while self.eat('|') {
            alts.push(self.alternative()?);
        }
        Ok(if alts.len() == 1 {
            alts.swap_remove(0)
        } else {
            Node::Alt(alts)
        })
    }

    fn alternative(&mut self) -> Result<Node, RegexError> {
        let mut items = Vec::new();
        while let Some(unit) = self.peek() {
            if unit == u32::from('|') || unit == u32::from(')') {
                break;
            }
            items.push(self.term()?);
        }
        Ok(Node::Concat(items))
    }

    fn group_body(&mut self) -> Result<Node, RegexError> {
        let body = self.disjunction()?;
        if !self.eat(')') {
            return Err(self.error("unclosed group"));
        }
        Ok(body)
    }

    fn term(&mut self) -> Result<Node, RegexError> {
        let unit = self.next()?;
        let atom = match char::from_u32(unit).filter(char::is_ascii) {
            Some('$') => return Ok(Node::AtEnd),
            Some('(') if self.eat('?') => {
                if self.eat(':') {
                    self.group_body()?
                } else if self.eat('=') {
                    let body = Box::new(self.group_body()?);
                    // libstdc++ takes no quantifier after an assertion.
                    return Ok(Node::Look {
                        negate: false,
                        body,
                    });
                } else if self.eat('!') {
                    let body = Box::new(self.group_body()?);
                    return Ok(Node::Look { negate: true, body });
                } else {
                    return Err(self.error("unsupported group kind"));
                }
            }
            Some('(') => self.group_body()?,
            Some('[') => self.bracket()?,
            Some('\\') => self.atom_escape()?,
            Some('^') => return Err(self.error("`^` is not supported")),
            Some('.') => return Err(self.error("`.` is not supported")),
            Some('*' | '+' | '?' | '{') => return Err(self.error("nothing to repeat")),
            // `)` and `|` end an alternative before reaching here; `]` and `}`
            // are ordinary characters in libstdc++'s ECMAScript scanner.
            _ => Node::Char(unit),
        };
        self.quantifiers(atom)
    }

    fn quantifiers(&mut self, mut node: Node) -> Result<Node, RegexError> {
        loop {
            let (min, max) = if self.eat('*') {
                (0, None)
            } else if self.eat('+') {
                (1, None)
            } else if self.eat('?') {
                (0, Some(1))
            } else if self.eat('{') {
                self.interval()?
            } else {
                return Ok(node);
            };
            if self.eat('?') {
                return Err(self.error("lazy quantifiers are not supported"));
            }
            if node.nullable() {
                return Err(self.error("repeating a sub-pattern that can match empty"));
            }
            node = Node::Repeat {
                body: Box::new(node),
                min,
                max,
            };
        }
    }

    /// `{n}`, `{n,}`, `{n,m}` after the `{`.
    fn interval(&mut self) -> Result<(u32, Option<u32>), RegexError> {
        let min = self.number()?;
        let max = if self.eat(',') {
            if self.peek() == Some(u32::from('}')) {
                None
            } else {
                Some(self.number()?)
            }
        } else {
            Some(min)
        };
        if !self.eat('}') {
            return Err(self.error("bad interval"));
        }
        if max.is_some_and(|m| m < min) {
            return Err(self.error("interval with max < min"));
        }
        Ok((min, max))
    }

    fn number(&mut self) -> Result<u32, RegexError> {
        let mut value: Option<u32> = None;
        while let Some(d) = self.peek().and_then(|u| char::from_u32(u)?.to_digit(10)) {
            self.pos += 1;
            value = Some(value.unwrap_or(0) * 10 + d);
            if value.is_some_and(|v| v > MAX_REPEAT) {
                return Err(self.error("repetition count too large"));
            }
        }
        value.ok_or_else(|| self.error("bad interval"))
    }

    /// An escape outside brackets, after the `\`.
    fn atom_escape(&mut self) -> Result<Node, RegexError> {
        match self.escape(false)? {
            BracketToken::Char(c) => Ok(Node::Char(c)),
            BracketToken::Class(class, negated) => {
                // libstdc++: a bracket matcher, non-matching for `\S \D \W`.
                let mut b = Bracket::new(self.units);
                b.add_class(class, false);
                b.negated = negated;
                Ok(Node::Class(b))
            }
            BracketToken::End | BracketToken::Dash => Err(self.error("bad escape")),
        }
    }

    /// libstdc++ `_M_eat_escape_ecma`, after the `\`.
    fn escape(&mut self, in_bracket: bool) -> Result<BracketToken, RegexError> {
        let unit = self.next()?;
        let Some(c) = char::from_u32(unit).filter(char::is_ascii) else {
            return Ok(BracketToken::Char(unit));
        };
        let plain = |v: u8| Ok(BracketToken::Char(u32::from(v)));
        match c {
            '0' => plain(0),
            'f' => plain(0x0C),
            'n' => plain(b'\n'),
            'r' => plain(b'\r'),
            't' => plain(b'\t'),
            'v' => plain(0x0B),
            'b' if in_bracket => plain(0x08),
            'b' | 'B' => Err(self.error("word boundaries are not supported")),
            'd' | 'D' => Ok(BracketToken::Class(Ctype::Digit, c == 'D')),
            's' | 'S' => Ok(BracketToken::Class(Ctype::Space, c == 'S')),
            'w' | 'W' => Ok(BracketToken::Class(Ctype::Word, c == 'W')),
            'x' | 'u' => {
                let n = if c == 'x' { 2 } else { 4 };
                let mut value = 0u32;
                for _ in 0..n {
                    let digit = self
                        .peek()
                        .and_then(|u| char::from_u32(u)?.to_digit(16))
                        .ok_or_else(|| self.error("bad hex escape"))?;
                    self.pos += 1;
                    value = value * 16 + digit;
                }
                Ok(BracketToken::Char(value))
            }
            'c' => Err(self.error("control escapes are not supported")),
            '1'..='9' => Err(self.error("back-references are not supported")),
            _ => Ok(BracketToken::Char(unit)),
        }
    }

    fn bracket_token(&mut self) -> Result<BracketToken, RegexError> {
        let unit = self.next().map_err(|_| self.error("unclosed bracket"))?;
        Ok(match char::from_u32(unit).filter(char::is_ascii) {
            Some(']') => BracketToken::End,
            Some('-') => BracketToken::Dash,
            Some('\\') => self.escape(true)?,
            Some('[') if matches!(self.peek().and_then(char::from_u32), Some('.' | ':' | '=')) => {
                return Err(self.error("POSIX bracket classes are not supported"));
            }
            _ => BracketToken::Char(unit),
        })
    }

    /// A bracket expression after the `[` (libstdc++ `_M_expression_term`,
    /// ECMAScript rules for `-`).
    fn bracket(&mut self) -> Result<Node, RegexError> {
        enum Last {
            None,
            Char(u32),
            Class,
        }
        let mut b = Bracket::new(self.units);
        b.negated = self.eat('^');
        let mut last = Last::None;
        loop {
            match self.bracket_token()? {
                BracketToken::End => break,
                BracketToken::Char(c) => {
                    if let Last::Char(prev) = last {
                        b.chars.push(prev);
                    }
                    last = Last::Char(c);
                }
                BracketToken::Class(class, negated) => {
                    if let Last::Char(prev) = last {
                        b.chars.push(prev);
                    }
                    b.add_class(class, negated);
                    last = Last::Class;
                }
                BracketToken::Dash => match last {
                    Last::Class => return Err(self.error("range starting at a class")),
                    Last::Char(lo) => {
                        let hi = match self.bracket_token()? {
                            BracketToken::End => {
                                // "x-]": both are literal.
                                b.chars.extend([lo, u32::from('-')]);
                                last = Last::None;
                                break;
                            }
                            BracketToken::Char(hi) => hi,
                            BracketToken::Dash => u32::from('-'),
                            BracketToken::Class(..) => {
                                return Err(self.error("range ending at a class"));
                            }
                        };
                        let (lo, hi) = (self.units.order(lo), self.units.order(hi));
                        if lo > hi {
                            return Err(self.error("range out of order"));
                        }
                        b.ranges.push((lo, hi));
                        last = Last::None;
                    }
                    // A dash after a range (or first) is a literal in ECMAScript.
                    Last::None => last = Last::Char(u32::from('-')),
                },
            }
        }
        if let Last::Char(prev) = last {
            b.chars.push(prev);
        }
        Ok(Node::Class(b))
    }
}

/// One instruction of the backtracking program.
#[derive(Debug, Clone)]
enum Inst {
    /// Consume this unit.
    Char(u32),
    /// Consume a unit of the class.
    Class(Bracket),
    /// Try the first target, on failure the second.
    Split(usize, usize),
    Jump(usize),
    /// Run the sub-program at `body` from here; continue if it matches
    /// (does not match, when `negate`) without consuming anything.
    Look {
        negate: bool,
        body: usize,
    },
    /// `$`: the end of the searched range.
    AtEnd,
    Match,
}

/// A compiled regex.
#[derive(Debug, Clone)]
pub(crate) struct Regex {
    insts: Vec<Inst>,
}

/// A choice point: resume at instruction `pc` with the text at `pos`.
type Choice = (usize, usize);

impl Regex {
    /// Compile `pattern` (units as [`Units`] says).
    pub fn new(pattern: &[u32], units: Units) -> Result<Regex, RegexError> {
        let mut parser = Parser {
            pattern,
            pos: 0,
            units,
        };
        let node = parser.disjunction()?;
        if parser.pos != pattern.len() {
            return Err(parser.error("unbalanced `)`"));
        }
        let mut insts = Vec::new();
        emit(&node, &mut insts);
        insts.push(Inst::Match);
        Ok(Regex { insts })
    }

    /// Where a match starting at `begin` ends, searching `text[..end]`, or
    /// `None`. With `not_null`, an empty match is no match (libstdc++
    /// `match_not_null`, which also applies inside lookaheads).
    fn match_at(
        &self,
        text: &[u32],
        begin: usize,
        end: usize,
        pc: usize,
        not_null: bool,
        stack: &mut Vec<Choice>,
    ) -> Option<usize> {
        let base = stack.len();
        stack.push((pc, begin));
        let mut result = None;
        'choices: while stack.len() > base {
            let Some((mut pc, mut pos)) = stack.pop() else {
                break;
            };
            loop {
                match &self.insts[pc] {
                    Inst::Char(c) => {
                        if pos < end && text[pos] == *c {
                            pos += 1;
                            pc += 1;
                        } else {
                            continue 'choices;
                        }
                    }
                    Inst::Class(b) => {
                        if pos < end && b.matches(text[pos]) {
                            pos += 1;
                            pc += 1;
                        } else {
                            continue 'choices;
                        }
                    }
                    Inst::Split(first, second) => {
                        stack.push((*second, pos));
                        pc = *first;
                    }
                    Inst::Jump(target) => pc = *target,
                    Inst::Look { negate, body } => {
                        let hit = self
                            .match_at(text, pos, end, *body, not_null, stack)
                            .is_some();
                        if hit == *negate {
                            continue 'choices;
                        }
                        pc += 1;
                    }
                    Inst::AtEnd => {
                        if pos != end {
                            continue 'choices;
                        }
                        pc += 1;
                    }
                    Inst::Match => {
                        if not_null && pos == begin {
                            continue 'choices;
                        }
                        result = Some(pos);
                        break 'choices;
                    }
                }
            }
        }
        stack.truncate(base);
        result
    }

    /// libstdc++ `regex_search` in `text[from..end]`: the first start
    /// position with a match, and the match's end. `continuous` only tries
    /// `from`.
    fn search(
        &self,
        text: &[u32],
        from: usize,
        end: usize,
        continuous: bool,
        not_null: bool,
        stack: &mut Vec<Choice>,
    ) -> Option<(usize, usize)> {
        let last = if continuous { from } else { end };
        (from..=last).find_map(|start| {
            self.match_at(text, start, end, 0, not_null, stack)
                .map(|stop| (start, stop))
        })
    }

    /// llama.cpp `unicode_regex_split_stl`: walk each fragment's matches with
    /// `std::regex_iterator` and cut it into the gaps and the matches (empty
    /// matches give empty pieces, as there). Returns the new fragment lengths.
    pub fn split(&self, text: &[u32], offsets: &[usize]) -> Vec<usize> {
        let mut out = Vec::with_capacity(offsets.len());
        let mut stack = Vec::new();
        let mut start = 0;
        for &len in offsets {
            let end = start + len;
            let mut emitted = start;
            let mut found = self.search(text, start, end, false, false, &mut stack);
            while let Some((m_start, m_end)) = found {
                if m_start > emitted {
                    out.push(m_start - emitted);
                }
                out.push(m_end - m_start);
                emitted = m_end;
                // regex_iterator::operator++
                let mut from = m_end;
                if m_start == m_end {
                    if m_end == end {
                        break;
                    }
                    found = self.search(text, m_end, end, true, true, &mut stack);
                    if found.is_some() {
                        continue;
                    }
                    from += 1;
                }
                found = self.search(text, from, end, false, false, &mut stack);
            }
            if emitted < end {
                out.push(end - emitted);
            }
            start = end;
        }
        out
    }
}

/// Append the instructions of `node` (libstdc++'s automaton, flattened).
fn emit(node: &Node, insts: &mut Vec<Inst>) {
    match node {
        Node::Char(c) => insts.push(Inst::Char(*c)),
        Node::Class(b) => insts.push(Inst::Class(b.clone())),
        Node::AtEnd => insts.push(Inst::AtEnd),
        Node::Look { negate, body } => {
            let at = insts.len();
            insts.push(Inst::Look {
                negate: *negate,
                body: at + 2,
            });
            insts.push(Inst::Jump(0));
            emit(body, insts);
            insts.push(Inst::Match);
            insts[at + 1] = Inst::Jump(insts.len());
        }
        Node::Concat(items) => {
            for item in items {
                emit(item, insts);
            }
        }
        Node::Alt(alts) => {
            let mut jumps = Vec::with_capacity(alts.len());
            for (i, alt) in alts.iter().enumerate() {
                let is_last = i + 1 == alts.len();
                let split = insts.len();
                if !is_last {
                    insts.push(Inst::Split(split + 1, 0));
                }
                emit(alt, insts);
                if !is_last {
                    jumps.push(insts.len());
                    insts.push(Inst::Jump(0));
                    let next = insts.len();
                    insts[split] = Inst::Split(split + 1, next);
                }
            }
            let end = insts.len();
            for j in jumps {
                insts[j] = Inst::Jump(end);
            }
        }
        Node::Repeat { body, min, max } => {
            for _ in 0..*min {
                emit(body, insts);
            }
            match max {
                None => {
                    // Greedy loop: try another iteration first.
                    let split = insts.len();
                    insts.push(Inst::Split(split + 1, 0));
                    emit(body, insts);
                    insts.push(Inst::Jump(split));
                    let end = insts.len();
                    insts[split] = Inst::Split(split + 1, end);
                }
                Some(max) => {
                    // Nested optional copies, each greedy: (e(e(e)?)?)?.
                    let mut splits = Vec::new();
                    for _ in *min..*max {
                        splits.push(insts.len());
                        insts.push(Inst::Split(0, 0));
                        emit(body, insts);
                    }
                    let end = insts.len();
                    for s in splits {
                        insts[s] = Inst::Split(s + 1, end);
                    }
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn wide(s: &str) -> Vec<u32> {
        s.chars().map(u32::from).collect()
    }

    /// The pieces `pattern` cuts `text` into (one fragment).
    fn pieces(pattern: &str, text: &str) -> Vec<String> {
        let re = Regex::new(&wide(pattern), Units::Wide).expect("pattern compiles");
        let units = wide(text);
        let cpts: Vec<char> = text.chars().collect();
        let mut start = 0;
        re.split(&units, &[units.len()])
            .into_iter()
            .map(|len| {
                let s: String = cpts[start..start + len].iter().collect();
                start += len;
                s
            })
            .collect()
    }

    #[test]
    fn alternation_is_ordered_not_longest() {
        // ECMAScript takes the first alternative that matches: "a" before "ab".
        assert_eq!(pieces("a|ab", "ab"), ["a", "b"]);
        assert_eq!(pieces("ab|a", "ab"), ["ab"]);
    }

    #[test]
    fn greedy_quantifiers_backtrack() {
        assert_eq!(pieces("\\s+(?!\\S)", "a   b"), ["a", "  ", " b"]);
        assert_eq!(pieces("x{2,3}", "xxxxx"), ["xxx", "xx"]);
        assert_eq!(pieces("[0-9]{1,3}", "12345"), ["123", "45"]);
        assert_eq!(pieces("\\s+$", "a  b  "), ["a  b", "  "]);
    }

    #[test]
    fn brackets_follow_libstdcxx() {
        // Escaped dash is a literal; a dash after a range is a literal.
        assert_eq!(pieces("[+\\-.]+", "a+-.b"), ["a", "+-.", "b"]);
        assert_eq!(pieces("[a-c-e]+", "bd-eq"), ["b", "d", "-e", "q"]);
        // Escaped brackets as range ends: [\[-\]] is '[', '\', ']'.
        assert_eq!(pieces("[\\[-\\]]+", "x[\\]y"), ["x", "[\\]", "y"]);
        // Negated, with classes and characters.
        assert_eq!(
            pieces("[^(\\s|.,)]+", "ab, c|d"),
            ["ab", ", ", "c", "|", "d"]
        );
    }

    #[test]
    fn lookahead_and_empty_matches() {
        // An empty match at 1 and 4 (llama.cpp keeps the empty pieces).
        assert_eq!(
            pieces("(?=(\\d{3})+(?!\\d))", "1234567"),
            ["1", "", "234", "", "567"]
        );
        assert_eq!(pieces("(?=[a-z])([^A-Z])", "aB1"), ["a", "B1"]);
    }

    #[test]
    fn classes_are_ascii_only() {
        // \s and \d of the "C" locale: no-break space and Arabic digits are neither.
        assert_eq!(pieces("\\s+", "a\u{a0}b c"), ["a\u{a0}b", " ", "c"]);
        assert_eq!(pieces("\\d+", "\u{661}\u{662}7"), ["\u{661}\u{662}", "7"]);
    }

    #[test]
    fn signed_char_orders_byte_ranges() {
        // In byte mode units above 0x7F are negative `char`s: [\x80-\x7F] is a valid
        // range, [\x7F-\x80] is out of order, and 0xD1 is not in [0-9].
        assert!(
            Regex::new(
                &[u32::from('['), 0x80, u32::from('-'), 0x7F, u32::from(']')],
                Units::Bytes
            )
            .is_ok()
        );
        assert!(
            Regex::new(
                &[u32::from('['), 0x7F, u32::from('-'), 0x80, u32::from(']')],
                Units::Bytes
            )
            .is_err()
        );
        let re = Regex::new(&wide("[0-9]"), Units::Bytes).expect("compiles");
        assert_eq!(re.split(&[0xD1, 0x31], &[2]), [1, 1]);
    }

    #[test]
    fn unsupported_constructs_are_refused() {
        for pattern in [
            "^a",
            "a.b",
            "\\bx",
            "(a)\\1",
            "a*?",
            "[[:alpha:]]",
            "(a*)*",
            "(?<=a)b",
            "a{2000}",
        ] {
            assert!(
                Regex::new(&wide(pattern), Units::Wide).is_err(),
                "{pattern} must be refused"
            );
        }
    }
}
