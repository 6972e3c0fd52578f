//! `engine`: generate models, run them, benchmark them.

use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;

use anyhow::{Context as _, bail};
use clap::{Args, Parser, Subcommand};
use common::DType;
use engine::bench::{self, BenchParams};
use engine::generate::{GenerateParams, generate};
use engine::model::Repack;
use engine::sampler::{Sampler, SamplerParams};
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
    /// Generate text from a prompt.
    Run(RunArgs),
    /// One forward pass over tokens; print the last position's logits.
    Eval(EvalArgs),
    /// Tokenize text with the model's tokenizer.
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
    /// Weight type of the matrices: f32, f16, q8_0 or q4_0.
    #[arg(long, default_value = "q8_0")]
    dtype: String,
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
    /// Tokens to generate.
    #[arg(short, long, default_value_t = 32)]
    n_predict: usize,
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
    /// Keep generating after an end-of-generation token.
    #[arg(long)]
    ignore_eos: bool,
    /// Print one JSON object instead of text and timings.
    #[arg(long)]
    json: bool,
    /// Write per-op and per-phase CLOCK_MONOTONIC timestamps (JSON Lines) to FILE.
    #[arg(long, value_name = "FILE")]
    self_profile: Option<PathBuf>,
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
    /// Print JSON.
    #[arg(long)]
    json: bool,
}

fn parse_dtype(s: &str) -> anyhow::Result<DType> {
    Ok(match s {
        "f32" => DType::F32,
        "f16" => DType::F16,
        "q8_0" => DType::Q8_0,
        "q4_0" => DType::Q4_0,
        _ => bail!("unknown dtype `{s}` (expected f32, f16, q8_0 or q4_0)"),
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
    let dtype = parse_dtype(&a.dtype)?;
    let progress = std::io::IsTerminal::is_terminal(&std::io::stderr());
    presets::write_model(p, dtype, a.seed, &a.output, progress)?;
    eprintln!(
        "wrote {} ({} {}, seed {})",
        a.output.display(),
        p.name,
        dtype.name(),
        a.seed
    );
    Ok(())
}

fn run(a: &RunArgs) -> anyhow::Result<()> {
    if a.self_profile.is_some() {
        self_profile::enable();
    }
    let mut ctx = load(&a.model)?;
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
    let mut sampler = Sampler::new(SamplerParams {
        temp: a.temp,
        top_k: a.top_k,
        top_p: a.top_p,
        seed: a.seed,
    });
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
    let g = generate(&mut ctx, &prompt, &params, &mut sampler, |tok| {
        if !json {
            let _ = stdout.write_all(model.tokenizer.token_to_piece(tok as u32, false));
            let _ = stdout.flush();
        }
    })?;
    let ids: Vec<u32> = g.generated_tokens.iter().map(|&t| t as u32).collect();
    let text = model.tokenizer.decode(&ids);
    if json {
        let mut v = serde_json::to_value(&g)?;
        v["text"] = text.into();
        writeln!(stdout, "{v}")?;
    } else {
        let t = &g.timings;
        writeln!(stdout)?;
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

fn eval(a: &EvalArgs) -> anyhow::Result<()> {
    let mut ctx = load(&a.model)?;
    engine::generate::prefill(&mut ctx, &a.tokens)?;
    let logits = ctx.logits();
    if a.json {
        println!(
            "{}",
            serde_json::json!({ "tokens": a.tokens, "logits": logits })
        );
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
    let model = Model::load(&a.model)?;
    let ids = model
        .tokenizer
        .tokenize(&a.prompt, !a.no_special, a.parse_special);
    if a.json {
        println!("{}", serde_json::json!({ "tokens": ids }));
    } else {
        for id in ids {
            let piece =
                String::from_utf8_lossy(model.tokenizer.token_to_piece(id, true)).into_owned();
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
        },
    )?;
    if a.json {
        println!("{}", serde_json::to_string(&r)?);
    } else {
        println!("| test | threads | tokens/s |");
        println!("|---|---|---|");
        println!(
            "| pp{} | {} | {:.2} ± {:.2} |",
            r.n_prompt, r.threads, r.prefill_tokens_per_s, r.prefill_stddev
        );
        println!(
            "| tg{} | {} | {:.2} ± {:.2} |",
            r.n_gen, r.threads, r.decode_tokens_per_s, r.decode_stddev
        );
    }
    Ok(())
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match &cli.command {
        Command::GenModel(a) => gen_model(a),
        Command::Run(a) => run(a),
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
