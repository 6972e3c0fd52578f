//! Chat end to end: `engine run --chat` renders the model's template as llama.cpp's
//! Python front end does, `engine chat` driven through a pipe keeps its conversation in
//! the KV cache and answers exactly as a fresh run over the whole conversation would,
//! says when the context is full and recovers with `/reset`, broken templates fail on
//! one line, and `engine info` describes files it can and cannot run.
//!
//! The generated presets carry Llama 2 (`tiny-llama`), Llama 3 (`tiny-llama3`) and
//! ChatML (`tiny-qwen2`) templates; SmolLM2 (`PROFINFER_SMOLLM2`) is checked when present.

mod common;

use std::io::Write as _;
use std::path::Path;
use std::process::{Command, Output, Stdio};

use common::{engine, oracle, oracle_ready, run_json, smollm2, tokens_of};
use serde_json::{Value, json};

/// The presets with a template each, with the weight type used.
const PRESETS: &[(&str, &str)] = &[
    ("tiny-llama", "q8_0"),
    ("tiny-llama3", "q8_0"),
    ("tiny-qwen2", "q8_0"),
];

/// Runs `cmd` with `input` on its stdin.
fn run_with_input(cmd: &mut Command, input: &str) -> Output {
    let shown = common::display(cmd);
    let mut child = cmd
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("cannot run `{shown}`: {e}"));
    child
        .stdin
        .take()
        .expect("piped stdin")
        .write_all(input.as_bytes())
        .expect("write the conversation");
    child.wait_with_output().expect("wait for the engine")
}

/// `engine chat --json` over `lines`: its turns (one JSON object each) and its stderr.
fn chat_json(model: &Path, extra: &[&str], lines: &[&str]) -> (Vec<Value>, String) {
    let mut cmd = engine("chat");
    cmd.arg("-m").arg(model).arg("--json").args(extra);
    let shown = common::display(&cmd);
    let input: String = lines.iter().map(|l| format!("{l}\n")).collect();
    let out = run_with_input(&mut cmd, &input);
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(out.status.success(), "`{shown}` failed: {stderr}");
    assert!(!stderr.contains("panicked"), "`{shown}` panicked: {stderr}");
    let turns = String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("`{shown}` printed {l:?}: {e}")))
        .collect();
    (turns, stderr)
}

/// llama.cpp's rendering and tokens of `messages` with the file's template.
fn oracle_render(model: &Path, messages: &Value) -> (String, Vec<u32>) {
    let v = run_json(
        oracle("chat-render")
            .arg("--model")
            .arg(model)
            .args(["--messages-json", &messages.to_string()]),
    );
    let prompt = v["prompt"].as_str().expect("prompt text").to_owned();
    (prompt, tokens_of(&v["tokens"], "llama.cpp chat tokens"))
}

fn common_prefix(a: &[u32], b: &[u32]) -> usize {
    a.iter().zip(b).take_while(|(x, y)| x == y).count()
}

#[test]
fn run_chat_renders_the_template_like_llama_cpp() {
    let oracle = oracle_ready();
    for &(preset, dtype) in PRESETS {
        let model = common::model(preset, dtype);
        let v = run_json(engine("run").arg("-m").arg(&model).args([
            "--chat",
            "--system",
            "Be brief.",
            "-p",
            "What is the capital of France?",
            "-n",
            "4",
            "--json",
        ]));
        // The shape of plain `run --json`, plus the rendered prompt and the stop reason.
        for key in [
            "prompt_tokens",
            "generated_tokens",
            "text",
            "timings",
            "prompt",
            "stop",
        ] {
            assert!(v.get(key).is_some(), "{preset}: no `{key}` in {v}");
        }
        let tokens = tokens_of(&v["prompt_tokens"], "prompt_tokens");
        let generated = tokens_of(&v["generated_tokens"], "generated_tokens");
        assert!(
            !generated.is_empty() && generated.len() <= 4,
            "{preset}: {v}"
        );
        assert_eq!(v["timings"]["n_prompt"], tokens.len(), "{preset}");
        if oracle {
            let messages = json!([
                {"role": "system", "content": "Be brief."},
                {"role": "user", "content": "What is the capital of France?"},
            ]);
            let (prompt, expected) = oracle_render(&model, &messages);
            assert_eq!(v["prompt"], prompt.as_str(), "{preset}: rendered text");
            assert_eq!(tokens, expected, "{preset}: prompt tokens");
        }
    }
}

#[test]
fn chat_reuses_the_cache_and_answers_like_a_fresh_run() {
    for &(preset, dtype) in PRESETS {
        let model = common::model(preset, dtype);
        // One token per graph on both sides: the cached and the fresh computation are
        // then the same operations on the same inputs, so greedy answers are identical.
        let (turns, stderr) = chat_json(
            &model,
            &["-b", "1", "-n", "12"],
            &[
                "Hello there",
                "",
                "What is the capital of France?",
                "/exit",
                "never read",
            ],
        );
        assert_eq!(turns.len(), 2, "{preset}: {turns:?}\n{stderr}");
        let (first, second) = (&turns[0], &turns[1]);
        assert_eq!(first["n_reused"], 0, "{preset}: a fresh conversation");

        // The cache held turn 1's prompt and every reply token but the last.
        let mut cached = tokens_of(&first["prompt_tokens"], "turn 1 prompt");
        let reply = tokens_of(&first["generated_tokens"], "turn 1 reply");
        cached.extend(&reply[..reply.len() - 1]);
        let prompt2 = tokens_of(&second["prompt_tokens"], "turn 2 prompt");
        let expected_reuse = common_prefix(&cached, &prompt2).min(prompt2.len() - 1);
        assert!(
            expected_reuse > 0,
            "{preset}: turn 2 shares nothing with turn 1"
        );
        assert_eq!(second["n_reused"], expected_reuse, "{preset}");
        assert_eq!(
            second["timings"]["n_prompt"],
            prompt2.len() - expected_reuse,
            "{preset}: only the new suffix is prefilled"
        );

        let fresh = run_json(engine("run").arg("-m").arg(&model).args([
            "--tokens",
            &common::token_arg(&prompt2),
            "-b",
            "1",
            "-n",
            "12",
            "--json",
        ]));
        assert_eq!(
            fresh["generated_tokens"], second["generated_tokens"],
            "{preset}: turn 2 differs from a fresh run over the whole conversation"
        );

        if oracle_ready() {
            let messages = json!([
                {"role": "user", "content": "Hello there"},
                {"role": "assistant", "content": first["text"]},
                {"role": "user", "content": "What is the capital of France?"},
            ]);
            let (_, expected) = oracle_render(&model, &messages);
            assert_eq!(prompt2, expected, "{preset}: turn 2 prompt tokens");
        }
    }
}

#[test]
fn chat_says_when_the_context_is_full_and_reset_recovers() {
    let model = common::model("tiny-qwen2", "q8_0");
    let n_ctx = 40;
    let (turns, stderr) = chat_json(
        &model,
        &["-c", &n_ctx.to_string()],
        &[
            "What is the capital of France?",
            "And what is the capital of Germany, please?",
            "/reset",
            "Hi",
        ],
    );
    // Turn 2 does not fit: an error line, no turn, and the loop goes on.
    assert_eq!(turns.len(), 2, "{turns:?}\n{stderr}");
    assert!(
        stderr.contains(&format!(
            "but the context holds {n_ctx}: /reset starts a new one"
        )),
        "{stderr}"
    );
    assert!(stderr.contains("[conversation reset]"), "{stderr}");
    let first = &turns[0];
    let prompt = tokens_of(&first["prompt_tokens"], "turn 1 prompt").len();
    let reply = tokens_of(&first["generated_tokens"], "turn 1 reply").len();
    match first["stop"].as_str() {
        Some("context_full") => {
            assert_eq!(prompt + reply - 1, n_ctx, "the reply filled the context");
            assert!(stderr.contains("[context full (40 tokens)"), "{stderr}");
        }
        Some("end_of_turn") => assert!(prompt + reply - 1 <= n_ctx),
        other => panic!("turn 1 stopped for {other:?}"),
    }
    // After /reset the conversation starts over and reuses the cached template prefix.
    assert!(
        turns[1]["n_reused"].as_u64().is_some_and(|n| n > 0),
        "{}",
        turns[1]
    );
}

#[test]
fn chat_streams_replies_as_text_from_a_pipe() {
    let model = common::model("tiny-llama3", "q8_0");
    let mut cmd = engine("chat");
    cmd.arg("-m").arg(&model).args(["-n", "6", "--stats"]);
    let out = run_with_input(&mut cmd, "Hello\n/help\nHow are you?\n");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    // Streamed text is valid UTF-8 (incomplete characters are held back between tokens).
    let stdout = String::from_utf8(out.stdout).expect("valid UTF-8 on stdout");
    assert!(stdout.ends_with('\n'), "{stdout:?}");
    assert!(
        stderr.contains("/reset starts a new conversation"),
        "{stderr}"
    );
    assert_eq!(stderr.matches("[prompt ").count(), 2, "{stderr}");
}

#[test]
fn broken_templates_fail_on_one_line() {
    let model = common::model("tiny-qwen2", "q8_0");
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR"));
    for (name, source, expected) in [
        (
            "unclosed.jinja",
            "{% for m in messages %}{{ m.content }}",
            "error: the chat template does not parse: syntax error",
        ),
        (
            "raises.jinja",
            "{% if messages[0]['role'] != 'system' %}{{ raise_exception('a system message is required') }}{% endif %}",
            "error: the chat template failed to render the conversation: invalid operation: the template raised an exception: a system message is required",
        ),
    ] {
        let path = dir.join(name);
        std::fs::write(&path, source).expect("write the template");
        let out = engine("run")
            .arg("-m")
            .arg(&model)
            .args(["--chat", "-p", "Hi", "--chat-template-file"])
            .arg(&path)
            .output()
            .expect("run the engine");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{name}: {stderr}");
        assert_eq!(stderr.lines().count(), 1, "{name}: one line, got {stderr}");
        assert!(stderr.starts_with(expected), "{name}: {stderr}");
    }
}

#[test]
fn info_describes_a_runnable_model() {
    let model = common::model("tiny-llama3", "q8_0");
    let v = run_json(engine("info").arg("-m").arg(&model).arg("--json"));
    assert_eq!(v["architecture"], "llama");
    assert_eq!(v["engine"]["runnable"], true, "{v}");
    assert_eq!(v["tokenizer"]["model"], "gpt2");
    assert_eq!(v["tokenizer"]["pre"], "llama-bpe");
    assert_eq!(
        v["tokenizer"]["n_tokens"],
        v["hyper_parameters"]["vocab_size"]
    );
    assert_eq!(v["tokenizer"]["special"]["eos"]["text"], "<|eot_id|>");
    assert!(
        v["chat_template"]["first_line"]
            .as_str()
            .is_some_and(|l| l.contains("messages"))
    );
    let types = v["tensor_types"].as_array().expect("tensor types");
    let sum = |key: &str| {
        types
            .iter()
            .map(|t| t[key].as_u64().expect(key))
            .sum::<u64>()
    };
    assert_eq!(Some(sum("n_tensors")), v["n_tensors"].as_u64());
    assert_eq!(Some(sum("n_params")), v["n_params"].as_u64());
    assert!(types.iter().any(|t| t["type"] == "q8_0"), "{types:?}");

    let out = engine("info")
        .arg("-m")
        .arg(&model)
        .output()
        .expect("run info");
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success());
    for line in [
        "architecture   llama",
        "engine         runs this model",
        "tensor types",
    ] {
        assert!(text.contains(line), "no {line:?} in\n{text}");
    }
}

#[test]
fn info_explains_why_a_model_cannot_run() {
    use engine_gguf::{Array, GgmlType, GgufWriter};
    // An architecture, a tensor type and a pre-tokenizer this engine does not have.
    let path = Path::new(env!("CARGO_TARGET_TMPDIR")).join("info-unsupported.gguf");
    let mut w = GgufWriter::new();
    w.add_kv("general.architecture", "mamba").expect("kv");
    w.add_kv("mamba.block_count", 1u32).expect("kv");
    w.add_kv("tokenizer.ggml.model", "gpt2").expect("kv");
    w.add_kv("tokenizer.ggml.pre", "no-such-pre-tokenizer")
        .expect("kv");
    let tokens: Vec<String> = (0..4).map(|i| format!("t{i}")).collect();
    w.add_kv("tokenizer.ggml.tokens", Array::Str(tokens))
        .expect("kv");
    w.add_kv("tokenizer.ggml.eos_token_id", 3u32).expect("kv");
    w.add_tensor("token_embd.weight", &[256, 4], GgmlType::Q4_K)
        .expect("tensor");
    let mut out = std::io::BufWriter::new(std::fs::File::create(&path).expect("create"));
    w.write_header(&mut out).expect("header");
    w.write_tensor_data(&mut out, "token_embd.weight", &vec![0u8; 4 * 144])
        .expect("data");
    w.finish(&mut out).expect("finish");
    drop(out);

    let v = run_json(engine("info").arg("-m").arg(&path).arg("--json"));
    assert_eq!(v["engine"]["runnable"], false);
    let why = v["engine"]["error"].as_str().expect("an error");
    assert!(why.contains("unknown architecture `mamba`"), "{why}");
    assert_eq!(v["tensor_types"][0]["type"], "q4_K");
    assert_eq!(v["tensor_types"][0]["bytes"], 4 * 144);
    assert_eq!(v["hyper_parameters"]["block_count"], 1);
    assert_eq!(v["tokenizer"]["special"]["eos"]["text"], "t3");
    let tokenizer_error = v["tokenizer"]["error"].as_str().expect("tokenizer error");
    assert!(
        tokenizer_error.contains("no-such-pre-tokenizer"),
        "{tokenizer_error}"
    );
    assert!(v["chat_template"].is_null());
}

/// SmolLM2-135M-Instruct answers a chat question sensibly, from the prompt llama.cpp
/// renders, and holds a two-turn conversation.
///
/// The question is worded so that the Q4_1 file answers it: asked "What is the capital of
/// France?", llama.cpp's own greedy answer (and so the engine's, token for token) is
/// "L'Étoile, la Marseillaise, ...".
#[test]
fn smollm2_chat_answers_from_llama_cpps_prompt() {
    let Some(model) = smollm2() else { return };
    let question = "Which city is the capital of France?";
    let v = run_json(
        engine("run")
            .arg("-m")
            .arg(&model)
            .args(["--chat", "-p", question, "-n", "48", "--json"]),
    );
    let text = v["text"].as_str().expect("answer");
    assert!(text.contains("Paris"), "answer: {text:?}");
    assert_eq!(v["stop"], "end_of_turn", "{v}");
    if oracle_ready() {
        let (prompt, tokens) =
            oracle_render(&model, &json!([{"role": "user", "content": question}]));
        assert_eq!(v["prompt"], prompt.as_str());
        assert_eq!(tokens_of(&v["prompt_tokens"], "prompt_tokens"), tokens);
    }
    let (turns, stderr) = chat_json(&model, &["-n", "48"], &[question, "And of Germany?"]);
    assert_eq!(turns.len(), 2, "{stderr}");
    assert_eq!(
        turns[0]["text"], v["text"],
        "the chat's first answer is run --chat's"
    );
    assert!(turns[1]["n_reused"].as_u64().is_some_and(|n| n > 0));
    let second = turns[1]["text"].as_str().expect("answer");
    assert!(second.contains("Berlin"), "answer: {second:?}");
}
