//! `engine`: generate models, inspect them, run them, chat with them, benchmark them.

use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;

use anyhow::{Context as _, bail};
use clap::{Args, Parser, Subcommand};
use common::DType;
use engine::bench::{self, BenchParams};
use engine::chat::{ChatSession, ChatTemplate, TemplateOrigin, repl};
use engine::generate::{GenerateParams, generate};
use engine::info::ModelInfo;
use engine::model::Repack;
use engine::presets::WeightFormat;
use engine::quant_mix::Mix;
use engine::sampler::{Sampler, SamplerParams};
use engine::utf8_stream::Utf8Stream;
use engine::{Context, ContextParams, Model, presets, self_profile};

/// A GGUF LLM inference engine with a stable probe ABI (see docs/probe-abi.md).
#[derive(Parser)]
#[command(name = "engine", version, about)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Write a GGUF model with seeded random weights in the shape of a preset.
    GenModel(GenModelArgs),
    /// Generate text from a prompt (with --chat: answer it as a chat message).
    Run(RunArgs),
    /// Chat interactively: one line is one message; /reset, /exit (or end of input).
    Chat(ChatArgs),
    /// Describe a GGUF file: architecture, hyper-parameters, tensor types, tokenizer,
    /// chat template, and whether this engine can run it.
    Info(InfoArgs),
    /// One forward pass over tokens; print the last position's logits.
    Eval(EvalArgs),
    /// Tokenize text with the model's tokenizer (only the vocabulary is read).
    Tokenize(TokenizeArgs),
    /// Measure prefill and decode throughput (like llama-bench).
    Bench(BenchArgs),
    /// List the presets of gen-model.
    Presets,
    /// Time calls of every probe entry point (run traced and untraced to get the
    /// per-hit probe cost; see `cargo xtask bench probes`).
    ProbeBench {
        /// Calls per entry point.
        #[arg(long, default_value_t = 200_000)]
        calls: u64,
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
}

#[derive(Args)]
struct GenModelArgs {
    /// Preset (see `engine presets`).
    #[arg(long)]
    preset: String,
    /// Weight type of every matrix (a ggml type name: f32, f16, q8_0, q4_0, q4_K, q6_K, ...),
    /// or a llama-quantize mix that is not also a type name (q4_K_M, q5_K_M, q3_K_M, ...).
    #[arg(long, default_value = "q8_0", conflicts_with = "ftype")]
    dtype: String,
    /// llama-quantize preset whose per-tensor types to use (Q4_K_M, Q5_K_M, Q3_K_M, Q2_K,
    /// Q6_K, ...; case-insensitive). Unlike `--dtype q2_K` (every matrix Q2_K), `--ftype
    /// Q2_K` is llama.cpp's Q2_K mix.
    #[arg(long)]
    ftype: Option<String>,
    /// Random seed of the weights and vocabulary.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Output file.
    #[arg(short, long)]
    output: PathBuf,
}

#[derive(Args, Clone)]
struct ModelArgs {
    /// GGUF model file.
    #[arg(short, long)]
    model: PathBuf,
    /// Threads of the CPU backend.
    #[arg(short, long, default_value_t = 2)]
    threads: u32,
    /// Context size (default: the model's, capped at 4096).
    #[arg(short = 'c', long)]
    ctx_size: Option<usize>,
    /// Largest batch per graph (longer prompts are prefilled in chunks).
    #[arg(short = 'b', long, default_value_t = engine::context::DEFAULT_BATCH)]
    batch_size: usize,
    /// Keep quantized weights in the file's row-major layout instead of repacking them
    /// into 8-row groups at load time (like llama.cpp's `--no-repack`; slower).
    #[arg(long)]
    no_repack: bool,
    #[command(flatten)]
    offload: OffloadArgs,
    #[command(flatten)]
    kv: KvArgs,
}

/// A memory budget for the KV cache (seed 004; see docs/backends.md).
#[derive(Args, Clone)]
struct KvArgs {
    /// Keep at most BYTES of K/V data in memory (suffixes K, M, G); chunks of 64
    /// positions beyond it are swapped to files and read back when attention needs them.
    #[arg(long, value_name = "BYTES", value_parser = engine::mem_limit::parse_bytes)]
    kv_budget: Option<u64>,
    /// Directory of the KV swap files (default: the temporary directory).
    #[arg(long, value_name = "DIR", requires = "kv_budget")]
    kv_swap: Option<PathBuf>,
    /// Store swapped chunks quantized to 8 (q8_0) or 4 (q4_0) bits.
    #[arg(long, value_name = "8|4", requires = "kv_budget")]
    kv_compress: Option<engine::kv_cache::KvCompress>,
}

impl KvArgs {
    fn config(&self) -> Option<engine::kv_cache::KvSwapConfig> {
        Some(engine::kv_cache::KvSwapConfig {
            budget: self.kv_budget?,
            dir: self.kv_swap.clone().unwrap_or_else(std::env::temp_dir),
            compress: self.kv_compress,
        })
    }
}

/// Work for the accel backend (a stand-in NPU/GPU with its own threads; see
/// docs/backends.md). Results are the same as on the CPU alone.
#[derive(Args, Clone)]
struct OffloadArgs {
    /// Run layers A..B (B exclusive) on the accel backend; ops it does not support
    /// (softmax, expert routing, row gathers) fall back to the CPU.
    #[arg(long, value_name = "A..B", value_parser = parse_layer_range)]
    offload_layers: Option<std::ops::Range<i32>>,
    /// Split the large matrix products by rows: the accel computes this fraction of
    /// each while the CPU computes the rest, then they sync (0 < RATIO < 1).
    #[arg(long, value_name = "RATIO", value_parser = parse_ratio)]
    split_matmul: Option<f32>,
    /// How the CPU waits for the accel at a sync node.
    #[arg(long, default_value = "spin", value_name = "spin|block")]
    sync: engine::sync::WaitMode,
    /// Threads of the accel backend.
    #[arg(long, default_value_t = 1)]
    accel_threads: u32,
    /// Pin the accel backend's threads to these CPUs (comma-separated).
    #[arg(long, value_delimiter = ',', value_name = "CPUS")]
    accel_cpus: Option<Vec<usize>>,
    /// Relative speed of the accel backend in (0, 1]: each of its ops is stretched to
    /// 1/SPEED times its compute time.
    #[arg(long, default_value_t = 1.0, value_parser = parse_speed)]
    accel_speed: f32,
}

impl OffloadArgs {
    fn params(&self) -> Option<engine::context::OffloadParams> {
        let p = engine::context::OffloadParams {
            accel: engine::backend::accel::AccelConfig {
                n_threads: self.accel_threads,
                cpus: self.accel_cpus.clone(),
                speed: self.accel_speed,
            },
            layers: self.offload_layers.clone(),
            split_matmul: self.split_matmul,
            sync: self.sync,
        };
        p.is_active().then_some(p)
    }
}

fn parse_layer_range(s: &str) -> Result<std::ops::Range<i32>, String> {
    let (a, b) = s
        .split_once("..")
        .ok_or_else(|| format!("`{s}`: layers are a range `A..B` (B exclusive)"))?;
    let num = |x: &str| {
        x.trim()
            .parse::<i32>()
            .map_err(|_| format!("`{s}`: `{x}` is not a layer number"))
    };
    let (a, b) = (num(a)?, num(b)?);
    if a < 0 || b <= a {
        return Err(format!("`{s}`: the range is empty or negative"));
    }
    Ok(a..b)
}

fn parse_ratio(s: &str) -> Result<f32, String> {
    match s.parse::<f32>() {
        Ok(r) if r > 0.0 && r < 1.0 => Ok(r),
        _ => Err(format!(
            "`{s}`: the split ratio is a number between 0 and 1"
        )),
    }
}

fn parse_speed(s: &str) -> Result<f32, String> {
    match s.parse::<f32>() {
        Ok(r) if r > 0.0 && r <= 1.0 => Ok(r),
        _ => Err(format!(
            "`{s}`: the accel speed is in (0, 1] (it can only be slowed down)"
        )),
    }
}

#[derive(Args, Clone)]
struct SamplingArgs {
    /// Temperature (0 = greedy).
    #[arg(long, default_value_t = 0.0)]
    temp: f32,
    /// Top-k (0 = off).
    #[arg(long, default_value_t = 40)]
    top_k: usize,
    /// Top-p (1 = off).
    #[arg(long, default_value_t = 0.95)]
    top_p: f32,
    /// Random seed of the sampler.
    #[arg(long, default_value_t = 0)]
    seed: u64,
}

impl SamplingArgs {
    fn sampler(&self) -> Sampler {
        Sampler::new(SamplerParams {
            temp: self.temp,
            top_k: self.top_k,
            top_p: self.top_p,
            seed: self.seed,
        })
    }
}

#[derive(Args)]
struct RunArgs {
    #[command(flatten)]
    model: ModelArgs,
    /// Prompt text.
    #[arg(short, long, conflicts_with = "tokens")]
    prompt: Option<String>,
    /// Prompt as comma-separated token ids (used as given: no BOS is added).
    #[arg(long, value_delimiter = ',')]
    tokens: Option<Vec<i32>>,
    /// Send the prompt as one user message through the model's chat template and print
    /// only the answer, which ends at the end of the assistant's turn.
    #[arg(long, conflicts_with_all = ["tokens", "ignore_eos"])]
    chat: bool,
    /// System message before the prompt (with --chat).
    #[arg(long, requires = "chat")]
    system: Option<String>,
    /// Jinja chat template to use instead of the model's (with --chat).
    #[arg(long, value_name = "FILE", requires = "chat")]
    chat_template_file: Option<PathBuf>,
    /// Tokens to generate.
    #[arg(short, long, default_value_t = 32)]
    n_predict: usize,
    #[command(flatten)]
    sampling: SamplingArgs,
    /// Keep generating after an end-of-generation token.
    #[arg(long)]
    ignore_eos: bool,
    /// Print one JSON object instead of text and timings.
    #[arg(long)]
    json: bool,
    /// Write per-op and per-phase CLOCK_MONOTONIC timestamps (JSON Lines) to FILE.
    #[arg(long, value_name = "FILE")]
    self_profile: Option<PathBuf>,
    /// Run inside a memory cgroup of its own limited to BYTES (K/M/G suffixes; root):
    /// the mapped model's pages beyond it are evicted and read again when used (an MoE
    /// model larger than memory pages its cold experts in).
    #[arg(long, value_name = "BYTES", value_parser = engine::mem_limit::parse_bytes)]
    mem_limit: Option<u64>,
    /// Drop the model file's pages from the page cache first, so first touches read
    /// from storage.
    #[arg(long)]
    cold: bool,
}

#[derive(Args)]
struct ChatArgs {
    #[command(flatten)]
    model: ModelArgs,
    /// System message that opens the conversation (kept by /reset).
    #[arg(long)]
    system: Option<String>,
    /// Jinja chat template to use instead of the model's.
    #[arg(long, value_name = "FILE")]
    chat_template_file: Option<PathBuf>,
    /// Largest reply in tokens (default: until the end of the turn or of the context).
    #[arg(short, long)]
    n_predict: Option<usize>,
    #[command(flatten)]
    sampling: SamplingArgs,
    /// Print each turn's token counts and speeds (to stderr).
    #[arg(long)]
    stats: bool,
    /// Print one JSON object per turn instead of streaming the replies.
    #[arg(long)]
    json: bool,
}

#[derive(Args)]
struct InfoArgs {
    /// GGUF model file.
    #[arg(short, long)]
    model: PathBuf,
    /// Print JSON.
    #[arg(long)]
    json: bool,
}

#[derive(Args)]
struct EvalArgs {
    #[command(flatten)]
    model: ModelArgs,
    /// Comma-separated token ids.
    #[arg(long, value_delimiter = ',', required = true)]
    tokens: Vec<i32>,
    /// Print JSON (the default output is the top 10 logits).
    #[arg(long)]
    json: bool,
    /// Compute the logits of every token, not only the last one's (llama.cpp's
    /// `logits_all`); with `--json` they are printed as `logits_all`, one array per token.
    #[arg(long)]
    all_logits: bool,
}

#[derive(Args)]
struct TokenizeArgs {
    /// GGUF model file.
    #[arg(short, long)]
    model: PathBuf,
    /// Text to tokenize.
    #[arg(short, long)]
    prompt: String,
    /// Do not add BOS/EOS (llama.cpp's add_special=false).
    #[arg(long)]
    no_special: bool,
    /// Recognise special-token text such as `<|im_start|>` (llama.cpp's parse_special).
    #[arg(long)]
    parse_special: bool,
    /// Print JSON.
    #[arg(long)]
    json: bool,
}

#[derive(Args)]
struct BenchArgs {
    #[command(flatten)]
    model: ModelArgs,
    /// Prompt tokens of the prefill test.
    #[arg(short = 'p', long, default_value_t = 512)]
    n_prompt: usize,
    /// Decode steps of the generation test.
    #[arg(short = 'n', long, default_value_t = 128)]
    n_gen: usize,
    /// Repetitions.
    #[arg(short, long, default_value_t = 3)]
    reps: usize,
    /// Prefill chunk sizes to compare (comma-separated, e.g. 32,64,128,256): the
    /// prefill test runs once per size, interleaved, reporting throughput and chunk
    /// latency (seed 001's chunked prefill).
    #[arg(long, value_delimiter = ',', value_name = "SIZES")]
    prefill_chunk: Vec<usize>,
    /// Print JSON.
    #[arg(long)]
    json: bool,
}

/// The weight type named `s` (any ASCII case); the error lists every name the ABI knows.
fn parse_dtype(s: &str) -> anyhow::Result<DType> {
    DType::from_name(s).with_context(|| {
        let names: Vec<&str> = DType::ALL.iter().map(|t| t.name()).collect();
        format!("unknown dtype `{s}` (expected one of {})", names.join(", "))
    })
}

fn parse_mix(s: &str) -> anyhow::Result<Mix> {
    Mix::from_name(s).with_context(|| {
        let names: Vec<&str> = Mix::ALL.iter().map(|m| m.name()).collect();
        format!(
            "unknown llama-quantize preset `{s}` (expected one of {})",
            names.join(", ")
        )
    })
}

fn load(args: &ModelArgs) -> anyhow::Result<Context> {
    let repack = if args.no_repack {
        Repack::Off
    } else {
        Repack::On
    };
    let model = Model::load_with(&args.model, repack)?;
    let params = ContextParams {
        n_ctx: args.ctx_size,
        n_threads: args.threads,
        n_batch: args.batch_size,
        offload: args.offload.params(),
        kv_swap: args.kv.config(),
    };
    Ok(Context::new(Arc::new(model), &params)?)
}

fn gen_model(a: &GenModelArgs) -> anyhow::Result<()> {
    let Some(p) = presets::preset(&a.preset) else {
        let names: Vec<_> = presets::PRESETS.iter().map(|p| p.name).collect();
        bail!(
            "unknown preset `{}` (choose one of {})",
            a.preset,
            names.join(", ")
        );
    };
    let format = match &a.ftype {
        Some(name) => WeightFormat::Mix(parse_mix(name)?),
        None => match (DType::from_name(&a.dtype), Mix::from_name(&a.dtype)) {
            (Some(t), _) => WeightFormat::Pure(t),
            (None, Some(m)) => WeightFormat::Mix(m),
            (None, None) => WeightFormat::Pure(parse_dtype(&a.dtype)?),
        },
    };
    let progress = std::io::IsTerminal::is_terminal(&std::io::stderr());
    presets::write_model(p, format, a.seed, &a.output, progress)?;
    eprintln!(
        "wrote {} ({} {}, seed {})",
        a.output.display(),
        p.name,
        format.name(),
        a.seed
    );
    Ok(())
}

fn run(a: &RunArgs) -> anyhow::Result<()> {
    if a.self_profile.is_some() {
        self_profile::enable();
    }
    if let Some(bytes) = a.mem_limit {
        // Before anything is loaded, so every page of the model is charged to the group.
        let group = engine::mem_limit::enter(bytes)?;
        eprintln!(
            "memory limited to {} MiB (cgroup {})",
            bytes >> 20,
            group.display()
        );
    }
    if a.cold {
        engine::mem_limit::drop_cached(&a.model.model)?;
    }
    let ctx = load(&a.model)?;
    if a.chat {
        let Some(prompt) = &a.prompt else {
            bail!("give the message with -p TEXT");
        };
        run_chat(ctx, a, prompt)?;
    } else {
        run_plain(ctx, a)?;
    }
    if let Some(path) = &a.self_profile {
        let records = self_profile::drain();
        let f =
            std::fs::File::create(path).with_context(|| format!("creating {}", path.display()))?;
        self_profile::write_jsonl(&records, std::io::BufWriter::new(f))
            .with_context(|| format!("writing {}", path.display()))?;
        eprintln!(
            "self-profile: {} spans written to {}",
            records.len(),
            path.display()
        );
    }
    Ok(())
}

/// `run` without a template: echoes the prompt, then streams the continuation.
fn run_plain(mut ctx: Context, a: &RunArgs) -> anyhow::Result<()> {
    let prompt: Vec<i32> = match (&a.prompt, &a.tokens) {
        (_, Some(t)) => t.clone(),
        (Some(p), None) => ctx
            .model()
            .tokenizer
            .tokenize(p, true, false)
            .into_iter()
            .map(|t| t as i32)
            .collect(),
        (None, None) => bail!("give a prompt with -p TEXT or --tokens IDS"),
    };
    let mut sampler = a.sampling.sampler();
    let params = GenerateParams {
        n_predict: a.n_predict,
        ignore_eos: a.ignore_eos,
    };
    let model = ctx.model().clone();
    ctx.check_fits(prompt.len() + a.n_predict.saturating_sub(1))?;
    let mut stdout = std::io::stdout().lock();
    if !a.json {
        write!(
            stdout,
            "{}",
            model
                .tokenizer
                .decode(&prompt.iter().map(|&t| t as u32).collect::<Vec<_>>())
        )?;
        stdout.flush()?;
    }
    let json = a.json;
    let mut stream = Utf8Stream::new();
    let mut echo = TextEcho::new(stdout);
    let g = generate(&mut ctx, &prompt, &params, &mut sampler, |tok| {
        if !json {
            echo.write(&stream.push(model.tokenizer.token_to_piece(tok as u32, false)));
        }
    })?;
    let mut stdout = echo.finish()?;
    let ids: Vec<u32> = g.generated_tokens.iter().map(|&t| t as u32).collect();
    let text = model.tokenizer.decode(&ids);
    let kv_swap = ctx.kv_swap_stats();
    if json {
        let mut v = serde_json::to_value(&g)?;
        v["text"] = text.into();
        if let Some(st) = kv_swap {
            v["kv_swap"] = serde_json::to_value(st)?;
        }
        writeln!(stdout, "{v}")?;
    } else {
        write!(stdout, "{}", stream.finish())?;
        writeln!(stdout)?;
        print_timings(&g.timings);
    }
    if let Some(st) = kv_swap {
        eprintln!(
            "kv budget: {} chunks out ({} bytes), {} in ({} bytes), peak resident {} bytes",
            st.chunks_out, st.bytes_out, st.chunks_in, st.bytes_in, st.peak_resident
        );
    }
    Ok(())
}

/// Generated text streamed to an output as it comes; the first write error stops the
/// writing and is returned at the end, the generation itself goes on.
struct TextEcho<W: Write> {
    out: W,
    error: Option<std::io::Error>,
}

impl<W: Write> TextEcho<W> {
    fn new(out: W) -> Self {
        TextEcho { out, error: None }
    }

    /// Writes and flushes `text`, unless a write already failed.
    fn write(&mut self, text: &str) {
        if self.error.is_none()
            && let Err(e) = self
                .out
                .write_all(text.as_bytes())
                .and_then(|()| self.out.flush())
        {
            self.error = Some(e);
        }
    }

    /// The output back, or the first write error.
    fn finish(self) -> std::io::Result<W> {
        match self.error {
            Some(e) => Err(e),
            None => Ok(self.out),
        }
    }
}

/// `run --chat`: one user message through the chat template, the answer streamed.
fn run_chat(ctx: Context, a: &RunArgs, prompt: &str) -> anyhow::Result<()> {
    let template = chat_template(ctx.model(), a.chat_template_file.as_deref())?;
    let mut session = ChatSession::new(ctx, template, a.system.clone());
    let mut sampler = a.sampling.sampler();
    let json = a.json;
    let mut echo = TextEcho::new(std::io::stdout().lock());
    let reply = session.turn(prompt, &mut sampler, Some(a.n_predict), |text| {
        if !json {
            echo.write(text);
        }
    })?;
    let mut stdout = echo.finish()?;
    if json {
        // The shape of plain `run --json`, with the whole rendered prompt as prompt_tokens
        // (a fresh session prefills all of it) plus the chat fields.
        let mut v = serde_json::to_value(&reply.generation)?;
        v["text"] = reply.text.into();
        v["prompt"] = reply.prompt.into();
        v["stop"] = reply.stop.as_str().into();
        writeln!(stdout, "{v}")?;
    } else {
        writeln!(stdout)?;
        if reply.stop == engine::chat::StopReason::ContextFull {
            eprintln!("[context full: answer cut; enlarge the context with -c]");
        }
        print_timings(&reply.generation.timings);
    }
    Ok(())
}

/// The model's chat template, or the one in `file`; says so when falling back to ChatML.
fn chat_template(model: &Model, file: Option<&std::path::Path>) -> anyhow::Result<ChatTemplate> {
    let template = match file {
        Some(path) => {
            let source = std::fs::read_to_string(path)
                .with_context(|| format!("reading the chat template {}", path.display()))?;
            ChatTemplate::with_source(model, &source)?
        }
        None => ChatTemplate::from_model(model)?,
    };
    if template.origin() == TemplateOrigin::ChatmlFallback {
        eprintln!("note: the model has no chat template; using ChatML, as llama.cpp does");
    }
    Ok(template)
}

fn print_timings(t: &engine::generate::Timings) {
    eprintln!(
        "\nprompt {} tokens, generated {} | TTFT {:.2} ms | TPOT {:.2} ms | prefill {:.2} tok/s | decode {:.2} tok/s",
        t.n_prompt,
        t.n_generated,
        t.ttft_ms,
        t.tpot_ms,
        t.prefill_tokens_per_s,
        t.decode_tokens_per_s
    );
}

fn chat(a: &ChatArgs) -> anyhow::Result<()> {
    use std::io::IsTerminal as _;
    let ctx = load(&a.model)?;
    let template = chat_template(ctx.model(), a.chat_template_file.as_deref())?;
    let terminal = std::io::stdin().is_terminal();
    if terminal {
        eprintln!(
            "chatting with {} (context {} tokens); /reset starts over, /exit or Ctrl-D leaves",
            a.model.model.display(),
            ctx.n_ctx()
        );
    }
    let mut session = ChatSession::new(ctx, template, a.system.clone());
    let mut sampler = a.sampling.sampler();
    let options = repl::ReplOptions {
        max_tokens: a.n_predict,
        show_prompt: terminal && !a.json,
        stats: a.stats,
        json: a.json,
    };
    repl::run(
        &mut session,
        &mut sampler,
        std::io::stdin().lock(),
        &mut std::io::stdout().lock(),
        &mut std::io::stderr().lock(),
        &options,
    )
    .context("chatting over stdin/stdout")?;
    Ok(())
}

fn info(a: &InfoArgs) -> anyhow::Result<()> {
    let info = ModelInfo::inspect(&a.model)?;
    let mut stdout = std::io::stdout().lock();
    if a.json {
        writeln!(stdout, "{}", serde_json::to_string(&info)?)?;
    } else {
        info.write_text(&mut stdout)?;
    }
    Ok(())
}

fn eval(a: &EvalArgs) -> anyhow::Result<()> {
    let mut ctx = load(&a.model)?;
    let mut all = Vec::new();
    if a.all_logits {
        ctx.set_all_logits(true);
        ctx.check_fits(a.tokens.len())?;
        let n_vocab = ctx.model().config.n_vocab;
        for chunk in a.tokens.chunks(ctx.n_batch()) {
            ctx.decode(chunk)?;
            all.extend(ctx.batch_logits().chunks(n_vocab).map(<[f32]>::to_vec));
        }
    } else {
        engine::generate::prefill(&mut ctx, &a.tokens)?;
    }
    let logits = ctx.logits();
    if a.json {
        let mut out = serde_json::json!({ "tokens": a.tokens, "logits": logits });
        if a.all_logits {
            out["logits_all"] = serde_json::json!(all);
        }
        println!("{out}");
    } else {
        let mut idx: Vec<usize> = (0..logits.len()).collect();
        idx.sort_by(|&x, &y| logits[y].total_cmp(&logits[x]));
        for &i in idx.iter().take(10) {
            println!("{i:>8} {:>10.4}", logits[i]);
        }
    }
    Ok(())
}

fn tokenize(a: &TokenizeArgs) -> anyhow::Result<()> {
    let tokenizer = Model::load_tokenizer(&a.model)?;
    let ids = tokenizer.tokenize(&a.prompt, !a.no_special, a.parse_special);
    if a.json {
        println!("{}", serde_json::json!({ "tokens": ids }));
    } else {
        for id in ids {
            let piece = String::from_utf8_lossy(tokenizer.token_to_piece(id, true)).into_owned();
            println!("{id:>8} {piece:?}");
        }
    }
    Ok(())
}

fn bench_cmd(a: &BenchArgs) -> anyhow::Result<()> {
    let mut ctx = load(&a.model)?;
    let r = bench::run(
        &mut ctx,
        &BenchParams {
            n_prompt: a.n_prompt,
            n_gen: a.n_gen,
            reps: a.reps,
            prefill_chunks: a.prefill_chunk.clone(),
        },
    )?;
    if a.json {
        println!("{}", serde_json::to_string(&r)?);
    } else {
        println!("| test | threads | tokens/s |");
        println!("|---|---|---|");
        if r.chunks.is_empty() {
            println!(
                "| pp{} | {} | {:.2} ± {:.2} |",
                r.n_prompt, r.threads, r.prefill_tokens_per_s, r.prefill_stddev
            );
        }
        for c in &r.chunks {
            println!(
                "| pp{} chunk {} ({} chunks, {:.2} ms each, max {:.2}) | {} | {:.2} ± {:.2} |",
                r.n_prompt,
                c.chunk,
                c.n_chunks,
                c.chunk_ms,
                c.max_chunk_ms,
                r.threads,
                c.prefill_tokens_per_s,
                c.prefill_stddev
            );
        }
        if r.n_gen > 0 {
            println!(
                "| tg{} | {} | {:.2} ± {:.2} |",
                r.n_gen, r.threads, r.decode_tokens_per_s, r.decode_stddev
            );
            println!(
                "decode reads {:.1} MB of weights per token: {:.1} GB/s; reading them alone \
                 with {} threads: {:.1} GB/s",
                r.decode_weight_bytes as f64 / 1e6,
                r.decode_weight_bytes as f64 * r.decode_tokens_per_s / 1e9,
                r.threads,
                r.weight_read_gb_per_s
            );
        }
    }
    Ok(())
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match &cli.command {
        Command::GenModel(a) => gen_model(a),
        Command::Run(a) => run(a),
        Command::Chat(a) => chat(a),
        Command::Info(a) => info(a),
        Command::Eval(a) => eval(a),
        Command::Tokenize(a) => tokenize(a),
        Command::Bench(a) => bench_cmd(a),
        Command::ProbeBench { calls, json } => {
            let costs = engine::probe_bench::run(*calls);
            if *json {
                println!("{}", serde_json::to_string(&costs).unwrap_or_default());
            } else {
                for c in costs {
                    println!("{:<30} {:>10.1} ns/call", c.symbol, c.ns_per_call);
                }
            }
            Ok(())
        }
        Command::Presets => {
            for p in presets::PRESETS {
                println!(
                    "{:<14} {:<6} layers {:>2} embd {:>5} heads {:>2}/{:<2} ff {:>5} vocab {:>6} ctx {}",
                    p.name,
                    p.arch,
                    p.n_layer,
                    p.n_embd,
                    p.n_head,
                    p.n_head_kv,
                    p.n_ff,
                    p.n_vocab,
                    p.n_ctx
                );
            }
            Ok(())
        }
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            if e.downcast_ref::<std::io::Error>()
                .is_some_and(|io| io.kind() == std::io::ErrorKind::BrokenPipe)
            {
                return ExitCode::SUCCESS;
            }
            eprintln!("error: {e:#}");
            ExitCode::from(2)
        }
    }
}
