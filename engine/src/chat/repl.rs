//! The loop of `engine chat`: one line of input is one user message, the reply streams to
//! the output, notes and errors go to a second stream. Works the same on a terminal and
//! on pipes (`printf 'Hi\n/exit\n' | engine chat -m F`), which is how it is tested.
//!
//! Commands: `/exit` (or `/quit`, or end of input) leaves, `/reset` starts the
//! conversation over (keeping the system message), `/help` lists them.

use std::io::{self, BufRead, Write};

use super::session::{ChatSession, StopReason};
use crate::error::error_chain;
use crate::sampler::Sampler;

/// Text of `/help`.
const HELP: &str =
    "commands: /reset starts a new conversation, /exit (or end of input) leaves, /help shows this";

/// How the loop behaves.
#[derive(Clone, Debug, Default)]
pub struct ReplOptions {
    /// Largest reply in tokens (`None`: until the end of the turn or of the context).
    pub max_tokens: Option<usize>,
    /// Print `> ` before reading each line (for terminals).
    pub show_prompt: bool,
    /// Print each turn's token counts and speeds to the notes stream.
    pub stats: bool,
    /// Instead of streaming each reply, print one JSON object per turn: `text`,
    /// `prompt_tokens` (the whole rendered conversation), `n_reused` (of those, the ones
    /// whose K/V were cached), `generated_tokens`, `stop` and `timings`.
    pub json: bool,
}

/// What a line of input asks for.
#[derive(Debug, PartialEq, Eq)]
enum Line<'a> {
    /// Nothing (an empty line).
    Empty,
    /// `/exit` or `/quit`.
    Exit,
    /// `/reset`.
    Reset,
    /// `/help`.
    Help,
    /// A message to the model.
    Message(&'a str),
}

fn parse_line(line: &str) -> Line<'_> {
    let line = line.trim_end_matches(['\n', '\r']);
    match line.trim() {
        "" => Line::Empty,
        "/exit" | "/quit" => Line::Exit,
        "/reset" => Line::Reset,
        "/help" => Line::Help,
        _ => Line::Message(line),
    }
}

/// Runs the conversation until `/exit` or the end of `input`. Replies go to `out`, one
/// per turn followed by a newline; notes (context full, reply cut, statistics) and the
/// errors of a turn go to `notes`, and the loop goes on.
///
/// # Errors
///
/// Only I/O errors of the three streams.
pub fn run(
    session: &mut ChatSession,
    sampler: &mut Sampler,
    mut input: impl BufRead,
    out: &mut impl Write,
    notes: &mut impl Write,
    options: &ReplOptions,
) -> io::Result<()> {
    let mut line = String::new();
    loop {
        if options.show_prompt {
            write!(out, "> ")?;
            out.flush()?;
        }
        line.clear();
        if input.read_line(&mut line)? == 0 {
            if options.show_prompt {
                writeln!(out)?;
            }
            return Ok(());
        }
        let message = match parse_line(&line) {
            Line::Empty => continue,
            Line::Exit => return Ok(()),
            Line::Help => {
                writeln!(notes, "{HELP}")?;
                continue;
            }
            Line::Reset => {
                session.reset();
                writeln!(notes, "[conversation reset]")?;
                continue;
            }
            Line::Message(m) => m,
        };
        let mut write_error = None;
        let result = session.turn(message, sampler, options.max_tokens, |text| {
            if !options.json
                && write_error.is_none()
                && let Err(e) = out.write_all(text.as_bytes()).and_then(|()| out.flush())
            {
                write_error = Some(e);
            }
        });
        if let Some(e) = write_error {
            return Err(e);
        }
        match result {
            Ok(reply) => {
                if options.json {
                    let line = serde_json::json!({
                        "text": reply.text,
                        "prompt_tokens": reply.prompt_tokens,
                        "n_reused": reply.n_reused,
                        "generated_tokens": reply.generation.generated_tokens,
                        "stop": reply.stop.as_str(),
                        "timings": reply.generation.timings,
                    });
                    writeln!(out, "{line}")?;
                } else {
                    writeln!(out)?;
                }
                out.flush()?;
                let n = reply.generation.generated_tokens.len();
                match reply.stop {
                    StopReason::EndOfTurn => {}
                    StopReason::MaxTokens => {
                        writeln!(notes, "[reply cut at {n} tokens by -n]")?;
                    }
                    StopReason::ContextFull => writeln!(
                        notes,
                        "[context full ({} tokens): reply cut at {n} tokens; /reset starts a new conversation, -c enlarges the context]",
                        session.context().n_ctx()
                    )?,
                }
                if options.stats {
                    let t = &reply.generation.timings;
                    writeln!(
                        notes,
                        "[prompt {} tokens ({} cached, {} prefilled) | generated {n} | prefill {:.1} tok/s | decode {:.1} tok/s | context {}/{}]",
                        reply.prompt_tokens.len(),
                        reply.n_reused,
                        reply.prompt_tokens.len() - reply.n_reused,
                        t.prefill_tokens_per_s,
                        t.decode_tokens_per_s,
                        session.n_cached(),
                        session.context().n_ctx()
                    )?;
                }
            }
            Err(e) => writeln!(notes, "error: {}", error_chain(&e))?,
        }
        notes.flush()?;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_are_commands_or_messages() {
        assert_eq!(parse_line("\n"), Line::Empty);
        assert_eq!(parse_line("  \r\n"), Line::Empty);
        assert_eq!(parse_line("/exit\n"), Line::Exit);
        assert_eq!(parse_line("/quit"), Line::Exit);
        assert_eq!(parse_line(" /reset \r\n"), Line::Reset);
        assert_eq!(parse_line("/help\n"), Line::Help);
        assert_eq!(parse_line("Hi there\n"), Line::Message("Hi there"));
        assert_eq!(parse_line("/etc/passwd?\n"), Line::Message("/etc/passwd?"));
    }
}
