//! Chat templates: the Jinja program a model file carries in `tokenizer.chat_template`,
//! rendered with [minijinja] the way Hugging Face's `apply_chat_template` renders it.
//!
//! The environment matches Transformers' (and llama-cpp-python's `Jinja2ChatFormatter`):
//! `trim_blocks` and `lstrip_blocks` on, `{% break %}`/`{% continue %}` allowed, and the
//! Python string, dict and list methods templates call (`.strip()`, `.startswith()`,
//! `.items()`, ...) through `minijinja-contrib`'s pycompat. A template sees:
//!
//! | name | value |
//! |---|---|
//! | `messages` | list of `{role, content}` maps |
//! | `add_generation_prompt` | whether to open the assistant's turn |
//! | `bos_token`, `eos_token` | text of the vocabulary's BOS/EOS tokens (`""` if absent) |
//! | `raise_exception(msg)` | fails the render with `msg` |
//! | `strftime_now(fmt)` | local time formatted by the C library's `strftime` |
//!
//! Not supported: the `{% generation %}` tag of training templates, tool definitions
//! (`tools` is undefined), and Python's exact `tojson` spacing (minijinja's own `tojson`
//! is used).
//!
//! **A file without a template** is rendered as ChatML, the template text llama.cpp uses
//! in the same case: `llama_chat_apply_template` with no template detects `"chatml"`, and
//! `common_chat_templates_init` (llama-cli, llama-server) falls back to its
//! `CHATML_TEMPLATE_SRC`, reproduced as [`CHATML_TEMPLATE`]. Callers can tell with
//! [`ChatTemplate::origin`] and should say so: a model that was not trained on ChatML may
//! answer poorly.

use std::collections::BTreeMap;
use std::ffi::{CString, c_char};

use minijinja::{Environment, Error as JinjaError, ErrorKind, Value};

use super::ChatError;
use crate::model::Model;

/// GGUF key of the default chat template.
pub const TEMPLATE_KEY: &str = "tokenizer.chat_template";

/// The template used when the file has none: llama.cpp's `CHATML_TEMPLATE_SRC`.
pub const CHATML_TEMPLATE: &str = "{%- for message in messages -%}\n  {{- '<|im_start|>' + message.role + '\\n' + message.content + '<|im_end|>\\n' -}}\n{%- endfor -%}\n{%- if add_generation_prompt -%}\n  {{- '<|im_start|>assistant\\n' -}}\n{%- endif -%}";

/// Largest template source accepted (the longest real templates are ~20 KiB).
pub const MAX_TEMPLATE_BYTES: usize = 1 << 20;

/// Instructions one render may execute (a bound on templates that loop forever; a long
/// conversation through a complex template takes well under a million).
pub const MAX_RENDER_FUEL: u64 = 50_000_000;

/// Longest `strftime_now` result.
const MAX_STRFTIME_BYTES: usize = 256;

/// Name the template is registered under (shown in error positions).
const TEMPLATE_NAME: &str = "chat_template";

/// Who speaks a message.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Role {
    /// Instructions for the assistant.
    System,
    /// The person chatting.
    User,
    /// The model.
    Assistant,
}

impl Role {
    /// The role's name as templates compare it (`system`, `user`, `assistant`).
    pub fn as_str(self) -> &'static str {
        match self {
            Role::System => "system",
            Role::User => "user",
            Role::Assistant => "assistant",
        }
    }
}

/// One message of a conversation.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Message {
    /// Who speaks.
    pub role: Role,
    /// What is said.
    pub content: String,
}

impl Message {
    /// A message of `role` saying `content`.
    pub fn new(role: Role, content: impl Into<String>) -> Message {
        Message {
            role,
            content: content.into(),
        }
    }
}

/// Where a [`ChatTemplate`]'s source came from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TemplateOrigin {
    /// The model file's `tokenizer.chat_template`.
    Model,
    /// [`CHATML_TEMPLATE`], because the file has no template.
    ChatmlFallback,
    /// Given by the caller instead of the file's (`--chat-template-file`).
    Override,
}

/// A parsed chat template with the token texts it refers to.
pub struct ChatTemplate {
    env: Environment<'static>,
    origin: TemplateOrigin,
    bos_token: String,
    eos_token: String,
}

impl std::fmt::Debug for ChatTemplate {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ChatTemplate")
            .field("origin", &self.origin)
            .field("bos_token", &self.bos_token)
            .field("eos_token", &self.eos_token)
            .finish()
    }
}

impl ChatTemplate {
    /// The template of `model` (ChatML if the file has none), with the texts of the
    /// model's BOS and EOS tokens.
    ///
    /// # Errors
    ///
    /// [`ChatError::TemplateNotText`] if the key is not a string,
    /// [`ChatError::TemplateTooLong`], or [`ChatError::TemplateSyntax`].
    pub fn from_model(model: &Model) -> Result<ChatTemplate, ChatError> {
        let source = model
            .gguf()
            .opt_str(TEMPLATE_KEY)
            .map_err(|_| ChatError::TemplateNotText)?;
        let (bos, eos) = token_texts(model);
        match source {
            Some(source) => ChatTemplate::new(source, TemplateOrigin::Model, bos, eos),
            None => ChatTemplate::new(CHATML_TEMPLATE, TemplateOrigin::ChatmlFallback, bos, eos),
        }
    }

    /// `source` instead of the file's template, with the texts of `model`'s BOS and EOS
    /// tokens (llama.cpp's `--chat-template-file`).
    ///
    /// # Errors
    ///
    /// [`ChatError::TemplateTooLong`] or [`ChatError::TemplateSyntax`].
    pub fn with_source(model: &Model, source: &str) -> Result<ChatTemplate, ChatError> {
        let (bos, eos) = token_texts(model);
        ChatTemplate::new(source, TemplateOrigin::Override, bos, eos)
    }

    /// Parses `source`, recording where it came from and the BOS/EOS texts it may use.
    ///
    /// # Errors
    ///
    /// [`ChatError::TemplateTooLong`] or [`ChatError::TemplateSyntax`].
    pub fn new(
        source: &str,
        origin: TemplateOrigin,
        bos_token: String,
        eos_token: String,
    ) -> Result<ChatTemplate, ChatError> {
        if source.len() > MAX_TEMPLATE_BYTES {
            return Err(ChatError::TemplateTooLong {
                len: source.len(),
                max: MAX_TEMPLATE_BYTES,
            });
        }
        let mut env = Environment::new();
        let mut syntax = minijinja::syntax::SyntaxConfig::builder();
        syntax.trim_blocks(true).lstrip_blocks(true);
        env.set_syntax(
            syntax
                .build()
                .expect("the default delimiters are a valid syntax"),
        );
        env.set_fuel(Some(MAX_RENDER_FUEL));
        env.set_unknown_method_callback(minijinja_contrib::pycompat::unknown_method_callback);
        env.add_function("raise_exception", raise_exception);
        env.add_function("strftime_now", strftime_now);
        env.add_template_owned(TEMPLATE_NAME, source.to_owned())
            .map_err(|e| ChatError::TemplateSyntax {
                message: describe(&e),
            })?;
        Ok(ChatTemplate {
            env,
            origin,
            bos_token,
            eos_token,
        })
    }

    /// Where the source came from.
    pub fn origin(&self) -> TemplateOrigin {
        self.origin
    }

    /// Text of the BOS token the template is given.
    pub fn bos_token(&self) -> &str {
        &self.bos_token
    }

    /// Text of the EOS token the template is given.
    pub fn eos_token(&self) -> &str {
        &self.eos_token
    }

    /// Renders `messages`; with `add_generation_prompt` the text ends by opening the
    /// assistant's turn.
    ///
    /// # Errors
    ///
    /// [`ChatError::TemplateRender`] when the template fails (an undefined value used
    /// wrongly, `raise_exception`, running out of fuel, ...).
    pub fn render(
        &self,
        messages: &[Message],
        add_generation_prompt: bool,
    ) -> Result<String, ChatError> {
        let messages: Vec<Value> = messages
            .iter()
            .map(|m| {
                Value::from(BTreeMap::from([
                    ("role", Value::from(m.role.as_str())),
                    ("content", Value::from(m.content.as_str())),
                ]))
            })
            .collect();
        let ctx = minijinja::context! {
            messages => messages,
            add_generation_prompt => add_generation_prompt,
            bos_token => self.bos_token.as_str(),
            eos_token => self.eos_token.as_str(),
        };
        let render_error = |e: JinjaError| ChatError::TemplateRender {
            message: describe(&e),
        };
        self.env
            .get_template(TEMPLATE_NAME)
            .and_then(|t| t.render(ctx))
            .map_err(render_error)
    }
}

/// Texts of `model`'s BOS and EOS tokens (empty when it has none), as llama.cpp's
/// `common_token_to_piece(.., special = true)` gives them.
fn token_texts(model: &Model) -> (String, String) {
    let piece = |id: Option<u32>| {
        id.map(|id| String::from_utf8_lossy(model.tokenizer.token_to_piece(id, true)).into_owned())
            .unwrap_or_default()
    };
    (piece(model.tokenizer.bos()), piece(model.tokenizer.eos()))
}

/// One line for a minijinja error: its kind, detail and template line, then the details
/// of its causes (a function's error wrapped by the call site).
fn describe(e: &JinjaError) -> String {
    let mut s = e.to_string();
    let mut cause = std::error::Error::source(e);
    while let Some(c) = cause {
        s.push_str(": ");
        s.push_str(&c.to_string());
        cause = c.source();
    }
    s.replace('\n', " ")
}

/// `raise_exception(message)`: Transformers' way for a template to reject its input.
fn raise_exception(message: String) -> Result<Value, JinjaError> {
    Err(JinjaError::new(
        ErrorKind::InvalidOperation,
        format!("the template raised an exception: {message}"),
    ))
}

/// `strftime_now(format)`: the local time formatted like Python's
/// `datetime.now().strftime(format)` (both use the C library's `strftime`).
fn strftime_now(format: String) -> Result<String, JinjaError> {
    let bad =
        |why: &str| JinjaError::new(ErrorKind::InvalidOperation, format!("strftime_now: {why}"));
    if format.is_empty() {
        return Ok(String::new());
    }
    let c_format = CString::new(format).map_err(|_| bad("the format contains a NUL byte"))?;
    // SAFETY: `time` with a null pointer only returns the current time.
    let now = unsafe { libc::time(std::ptr::null_mut()) };
    // SAFETY: `tm` is plain old data; an all-zero value is valid and is overwritten.
    let mut tm: libc::tm = unsafe { std::mem::zeroed() };
    // SAFETY: both pointers are to live locals of the right types.
    if unsafe { libc::localtime_r(&now, &mut tm) }.is_null() {
        return Err(bad("the local time is unavailable"));
    }
    let mut buf = [0u8; MAX_STRFTIME_BYTES];
    // SAFETY: `buf` has `buf.len()` writable bytes, `c_format` is NUL-terminated and `tm`
    // was filled by `localtime_r`; strftime writes at most `buf.len()` bytes.
    let n = unsafe {
        libc::strftime(
            buf.as_mut_ptr() as *mut c_char,
            buf.len(),
            c_format.as_ptr(),
            &tm,
        )
    };
    if n == 0 {
        return Err(bad("the result is empty or longer than 256 bytes"));
    }
    Ok(String::from_utf8_lossy(&buf[..n]).into_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// SmolLM2-135M-Instruct's template, as its GGUF file carries it.
    const SMOLLM2: &str = "{% for message in messages %}{% if loop.first and messages[0]['role'] != 'system' %}{{ '<|im_start|>system\nYou are a helpful AI assistant named SmolLM, trained by Hugging Face<|im_end|>\n' }}{% endif %}{{'<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>' + '\n'}}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}";

    fn template(source: &str) -> ChatTemplate {
        ChatTemplate::new(source, TemplateOrigin::Model, "<s>".into(), "</s>".into())
            .expect("template parses")
    }

    fn user(text: &str) -> Vec<Message> {
        vec![Message::new(Role::User, text)]
    }

    #[test]
    fn smollm2_template_renders_like_transformers() {
        let t = template(SMOLLM2);
        assert_eq!(
            t.render(&user("Hi"), true).expect("renders"),
            "<|im_start|>system\nYou are a helpful AI assistant named SmolLM, trained by Hugging Face<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n"
        );
        let with_system = [
            Message::new(Role::System, "Be brief."),
            Message::new(Role::User, "Hi"),
            Message::new(Role::Assistant, "Hello."),
        ];
        assert_eq!(
            t.render(&with_system, false).expect("renders"),
            "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\nHello.<|im_end|>\n"
        );
    }

    #[test]
    fn chatml_fallback_is_llama_cpps() {
        let t = template(CHATML_TEMPLATE);
        assert_eq!(
            t.render(&user("Hi"), true).expect("renders"),
            "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n"
        );
        assert_eq!(
            t.render(&user("Hi"), false).expect("renders"),
            "<|im_start|>user\nHi<|im_end|>\n"
        );
    }

    #[test]
    fn blocks_are_trimmed_like_jinja2_with_trim_and_lstrip_blocks() {
        let t = template(
            "{% for m in messages %}\n    {% if m.role == 'user' %}\n[{{ m.content }}]\n    {% endif %}\n{% endfor %}",
        );
        assert_eq!(t.render(&user("a"), false).expect("renders"), "[a]\n");
    }

    #[test]
    fn python_methods_and_token_variables_work() {
        let t = template(
            "{{ bos_token }}{% for m in messages %}{% if m.content.startswith(' ') %}{{ m.content.strip().upper() }}{% endif %}{% endfor %}{% for k, v in {'a': 1}.items() %}{{ k }}{{ v }}{% endfor %}{{ eos_token }}",
        );
        assert_eq!(
            t.render(&user("  hi "), false).expect("renders"),
            "<s>HIa1</s>"
        );
    }

    #[test]
    fn raise_exception_fails_the_render_with_its_message() {
        let t = template(
            "{% if messages[0]['role'] != 'system' %}{{ raise_exception('a system message is required') }}{% endif %}",
        );
        let e = t.render(&user("x"), true).expect_err("raises");
        let text = e.to_string();
        assert!(text.contains("a system message is required"), "{text}");
        assert!(!text.contains('\n'), "one line: {text}");
    }

    #[test]
    fn syntax_errors_are_reported_at_parse_time_on_one_line() {
        let e = ChatTemplate::new(
            "{% for m in messages %}{{ m.content }",
            TemplateOrigin::Model,
            String::new(),
            String::new(),
        )
        .expect_err("does not parse");
        assert!(matches!(e, ChatError::TemplateSyntax { .. }), "{e:?}");
        assert!(e.to_string().contains("chat_template:1"), "{e}");
    }

    #[test]
    fn endless_templates_run_out_of_fuel() {
        let t = template(
            "{% for i in range(100000) %}{% for j in range(100000) %}x{% endfor %}{% endfor %}",
        );
        let e = t.render(&user("x"), true).expect_err("out of fuel");
        assert!(matches!(e, ChatError::TemplateRender { .. }), "{e:?}");
    }

    #[test]
    fn strftime_now_formats_the_current_date() {
        let t = template("{{ strftime_now('%Y') }}");
        let year: u32 = t
            .render(&[], false)
            .expect("renders")
            .parse()
            .expect("a year");
        assert!(year >= 2024, "{year}");
    }
}
