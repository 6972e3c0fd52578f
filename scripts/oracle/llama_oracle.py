#!/usr/bin/env python3
"""llama.cpp oracle for profinfer's engine tests and benchmarks.

A small command line over llama-cpp-python (and gguf-py) that prints one JSON object
on stdout. It is run with the project venv: `.venv/bin/python scripts/oracle/llama_oracle.py`
(created by `cargo xtask setup --oracle`).

Subcommands:
  logits    --model F --tokens 1,2,3 [--threads 2]      last-position logits of one forward pass
  logits-all --jobs-json FILE                           logits of every position, for many
            (model, tokens, threads, batch, repack) jobs in one process; each job's
            [n_tokens, n_vocab] f32 logits are written raw (little-endian) to its `out` file
  greedy    --model F --tokens 1,2,3 -n 32 [--threads 2] greedy continuation (argmax computed here)
  tokenize  --model F --text T [--text T2 ...] [--texts-json FILE] [--no-special] [--parse-special]
            [--vocab-only]
  bench     --model F --threads 2 -p 512 -n 128 [--reps 3]   prefill / decode tokens per second
  gguf-read --model F                                    metadata keys and tensors as gguf-py sees them
  chat-render --model F --messages-json JSON [--no-generation-prompt]
                                                         the file's chat template rendered and tokenized
  quantize  --model F --out G --ftype Q4_K_M [--pure] [--threads 2]
                                                         llama.cpp's quantizer (llama_model_quantize)

Evaluation settings (kept identical everywhere so results are comparable): no flash
attention, llama.cpp's default f16 KV cache, n_batch = n_ubatch = 512, logits only for the
last position. Tokens are used exactly as given (no BOS is added).
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import time
from typing import Any, Sequence

# Batch size used for every evaluation (llama-bench's pp512 is one batch of 512).
N_BATCH = 512
# Warm-up passes of each benchmark test before measuring (see cmd_bench).
WARMUP_PASSES = 2
# Extra context slots beyond what a command needs.
CTX_MARGIN = 8


def _parse_tokens(text: str) -> list[int]:
    """Parses a comma-separated token id list such as `1,2,3`."""
    text = text.strip()
    if not text:
        return []
    return [int(t) for t in text.split(",")]


def _load(
    model: str,
    n_ctx: int,
    threads: int,
    n_batch: int = N_BATCH,
    logits_all: bool = False,
    repack: bool = True,
):
    """Loads a model with the oracle's fixed evaluation settings.

    `repack=False` loads it without the CPU backend's extra buffer types
    (`llama_model_params.use_extra_bufts = false`, llama.cpp's `--no-repack`): Q4_0/Q4_K
    matrices then stay row-major and take the stock products (vec_dot, tiled, tinyBLAS)
    instead of the repacked gemv/gemm.
    """
    import llama_cpp.llama_cpp as low
    from llama_cpp import Llama

    default_params = low.llama_model_default_params

    def params_without_repack():
        params = default_params()
        params.use_extra_bufts = False
        return params

    if not repack:
        # Llama() takes no use_extra_bufts argument: it starts from these defaults.
        low.llama_model_default_params = params_without_repack
    try:
        return Llama(
            model_path=model,
            n_ctx=max(n_ctx, 16),
            n_threads=threads,
            n_threads_batch=threads,
            n_batch=n_batch,
            n_ubatch=n_batch,
            logits_all=logits_all,
            flash_attn=False,
            verbose=False,
        )
    finally:
        low.llama_model_default_params = default_params


def _last_logits(llm) -> "Any":
    """Copies the logits of the last evaluated position (a float32 numpy vector)."""
    import llama_cpp
    import numpy as np

    ptr = llama_cpp.llama_get_logits_ith(llm.ctx, -1)
    return np.ctypeslib.as_array(ptr, shape=(llm.n_vocab(),)).copy()


def _eval_fresh(llm, tokens: Sequence[int]) -> None:
    """Evaluates `tokens` from an empty KV cache."""
    llm.reset()
    llm.eval(list(tokens))


def cmd_logits(args: argparse.Namespace) -> dict[str, Any]:
    tokens = _parse_tokens(args.tokens)
    if not tokens:
        raise SystemExit("logits: --tokens must not be empty")
    llm = _load(args.model, len(tokens) + CTX_MARGIN, args.threads)
    _eval_fresh(llm, tokens)
    logits = _last_logits(llm)
    return {"tokens": tokens, "logits": logits.tolist()}


def cmd_logits_all(args: argparse.Namespace) -> dict[str, Any]:
    """Runs every job of `--jobs-json` (a JSON array of {"model", "tokens", "threads",
    "batch", "repack", "out"}): the tokens evaluated from an empty cache in batches of
    `batch` tokens (n_batch = n_ubatch = batch) with logits for every position
    (`logits_all`), written to `out` as raw little-endian f32, row after row."""
    import numpy as np

    with open(args.jobs_json, encoding="utf-8") as f:
        jobs = json.load(f)
    done = []
    for job in jobs:
        tokens = [int(t) for t in job["tokens"]]
        if not tokens:
            raise SystemExit("logits-all: a job has no tokens")
        llm = _load(
            job["model"],
            len(tokens) + CTX_MARGIN,
            int(job["threads"]),
            n_batch=int(job["batch"]),
            logits_all=True,
            repack=bool(job.get("repack", True)),
        )
        _eval_fresh(llm, tokens)
        scores = np.ascontiguousarray(llm.scores[: len(tokens), :], dtype="<f4")
        scores.tofile(job["out"])
        done.append({"out": job["out"], "rows": len(tokens), "n_vocab": llm.n_vocab()})
        llm.close()
        del llm
    return {"jobs": done}


def cmd_greedy(args: argparse.Namespace) -> dict[str, Any]:
    import numpy as np

    tokens = _parse_tokens(args.tokens)
    if not tokens:
        raise SystemExit("greedy: --tokens must not be empty")
    llm = _load(args.model, len(tokens) + args.n + CTX_MARGIN, args.threads)
    _eval_fresh(llm, tokens)
    generated: list[int] = []
    runner_ups: list[int] = []
    margins: list[float] = []
    max_abs: list[float] = []
    for step in range(args.n):
        logits = _last_logits(llm)
        # np.argmax returns the first (lowest) index among equal maxima.
        best = int(np.argmax(logits))
        others = np.array(logits, dtype=np.float32, copy=True)
        others[best] = -np.inf
        second = int(np.argmax(others))
        generated.append(best)
        runner_ups.append(second)
        # Gap between the best and the second-best logit: a near-tie here means another
        # implementation may legitimately pick the second token instead.
        margins.append(float(logits[best] - logits[second]))
        max_abs.append(float(np.abs(logits).max()))
        if step + 1 < args.n:
            llm.eval([best])
    return {
        "prompt_tokens": tokens,
        "generated_tokens": generated,
        "runner_up_tokens": runner_ups,
        "margins": margins,
        "max_abs_logits": max_abs,
    }


def cmd_tokenize(args: argparse.Namespace) -> dict[str, Any]:
    texts: list[str] = list(args.text or [])
    if args.texts_json:
        with open(args.texts_json, encoding="utf-8") as f:
            texts.extend(json.load(f))
    if args.vocab_only:
        from llama_cpp import Llama

        # Only the vocabulary, as llama-tokenize loads it (files without tensors work).
        llm = Llama(model_path=args.model, vocab_only=True, verbose=False)
    else:
        llm = _load(args.model, 64, 1)

    def tok(text: str) -> list[int]:
        # add_bos is passed to llama_tokenize as `add_special`.
        return llm.tokenize(
            text.encode("utf-8"), add_bos=not args.no_special, special=args.parse_special
        )

    if len(texts) == 1 and not args.texts_json:
        return {"tokens": tok(texts[0])}
    return {"texts": texts, "tokens_list": [tok(t) for t in texts]}


def cmd_bench(args: argparse.Namespace) -> dict[str, Any]:
    """Mirrors llama-bench: pp<p> and tg<n> each from an empty cache, warm-up excluded."""
    llm = _load(args.model, args.p + args.n + CTX_MARGIN, args.threads)
    n_vocab = llm.n_vocab()
    rng = random.Random(args.seed)
    bos = llm.token_bos()
    first = [bos] if bos >= 0 else []

    def prompt_tokens(n: int) -> list[int]:
        return (first + [rng.randrange(n_vocab) for _ in range(n)])[:n]

    def run_prefill() -> float:
        tokens = prompt_tokens(args.p)
        llm.reset()
        start = time.perf_counter()
        llm.eval(tokens)
        return time.perf_counter() - start

    def run_decode() -> float:
        llm.reset()
        token = first[0] if first else rng.randrange(n_vocab)
        start = time.perf_counter()
        for _ in range(args.n):
            llm.eval([token])
            token = rng.randrange(n_vocab)
        return time.perf_counter() - start

    # Warm-up: llama-bench runs one; on this VM llama.cpp needs two full passes before its
    # prefill reaches a steady rate (first-touch of the mapped weights, thread start-up),
    # so both implementations are warmed with WARMUP_PASSES passes of each test.
    for _ in range(WARMUP_PASSES):
        if args.p > 0:
            run_prefill()
        if args.n > 0:
            run_decode()

    pp: list[float] = []
    tg: list[float] = []
    for _ in range(args.reps):
        if args.p > 0:
            pp.append(args.p / run_prefill())
        if args.n > 0:
            tg.append(args.n / run_decode())

    def mean(xs: list[float]) -> float | None:
        return sum(xs) / len(xs) if xs else None

    return {
        "prefill_tokens_per_s": mean(pp),
        "decode_tokens_per_s": mean(tg),
        "prefill_tokens_per_s_samples": pp,
        "decode_tokens_per_s_samples": tg,
        "n_prompt": args.p,
        "n_gen": args.n,
        "threads": args.threads,
        "reps": args.reps,
    }


def _field_json(field) -> dict[str, Any]:
    from gguf import GGUFValueType

    types = [t.name for t in field.types]
    if field.types and field.types[0] == GGUFValueType.ARRAY:
        return {"type": "ARRAY", "elem_type": types[-1], "len": len(field.data)}
    value = field.contents()
    return {"type": types[0] if types else None, "value": value}


def cmd_gguf_read(args: argparse.Namespace) -> dict[str, Any]:
    from gguf import GGUFReader

    reader = GGUFReader(args.model)
    metadata = {name: _field_json(field) for name, field in reader.fields.items()}
    tensors = [
        {
            "name": t.name,
            # ggml order: shape[0] is the contiguous (row) dimension.
            "shape": [int(d) for d in t.shape],
            "type": t.tensor_type.name,
            "type_id": int(t.tensor_type),
            "n_elements": int(t.n_elements),
            "n_bytes": int(t.n_bytes),
        }
        for t in reader.tensors
    ]
    return {"metadata": metadata, "tensors": tensors}


# llama.cpp's template for files without one (common/chat.cpp CHATML_TEMPLATE_SRC).
CHATML_TEMPLATE = (
    "{%- for message in messages -%}\n"
    "  {{- '<|im_start|>' + message.role + '\\n' + message.content + '<|im_end|>\\n' -}}\n"
    "{%- endfor -%}\n"
    "{%- if add_generation_prompt -%}\n"
    "  {{- '<|im_start|>assistant\\n' -}}\n"
    "{%- endif -%}"
)


def cmd_chat_render(args: argparse.Namespace) -> dict[str, Any]:
    """Renders messages with the file's chat template as llama-cpp-python does (Python's
    jinja2 through `Jinja2ChatFormatter`, BOS/EOS texts from the vocabulary), then
    tokenizes the text as llama.cpp's chat front ends do: a BOS (EOS) text the template
    wrote is dropped when the vocabulary adds that token anyway
    (`common_chat_template_direct_apply`), then add_special and parse_special are on."""
    from llama_cpp import Llama
    from llama_cpp.llama_chat_format import Jinja2ChatFormatter

    messages = json.loads(args.messages_json)
    llm = Llama(model_path=args.model, vocab_only=True, verbose=False)
    template = llm.metadata.get("tokenizer.chat_template") or CHATML_TEMPLATE
    model = llm._model
    bos_id, eos_id = model.token_bos(), model.token_eos()
    bos = model.token_get_text(bos_id) if bos_id != -1 else ""
    eos = model.token_get_text(eos_id) if eos_id != -1 else ""
    formatter = Jinja2ChatFormatter(
        template=template,
        eos_token=eos,
        bos_token=bos,
        add_generation_prompt=not args.no_generation_prompt,
    )
    prompt = formatter(messages=messages).prompt
    text = prompt
    if model.add_bos_token() and bos and text.startswith(bos):
        text = text[len(bos):]
    if model.add_eos_token() and eos and text.endswith(eos):
        text = text[: -len(eos)]
    tokens = llm.tokenize(text.encode("utf-8"), add_bos=True, special=True)
    return {"prompt": prompt, "tokens": tokens}


def cmd_quantize(args: argparse.Namespace) -> dict[str, Any]:
    """Quantizes a GGUF file with llama.cpp's own quantizer (`llama_model_quantize`, what
    `llama-quantize` runs), so tests get files of every type as llama.cpp's presets make
    them. `--ftype` is a preset name as `llama-quantize` spells it (Q4_K_M, Q6_K, BF16, ...);
    `--pure` gives every weight the preset's base type (no per-tensor mix)."""
    import llama_cpp
    from gguf import GGUFReader

    name = args.ftype.upper()
    ftype = getattr(llama_cpp, f"LLAMA_FTYPE_MOSTLY_{name}", None)
    if ftype is None:
        known = sorted(k[len("LLAMA_FTYPE_MOSTLY_"):] for k in dir(llama_cpp) if k.startswith("LLAMA_FTYPE_MOSTLY_"))
        raise SystemExit(f"unknown ftype {args.ftype!r}; llama.cpp knows {', '.join(known)}")
    params = llama_cpp.llama_model_quantize_default_params()
    params.ftype = ftype
    params.nthread = args.threads
    params.pure = args.pure
    rc = llama_cpp.llama_model_quantize(args.model.encode(), args.out.encode(), params)
    if rc != 0:
        raise SystemExit(f"llama_model_quantize({args.model}, {args.ftype}) failed with {rc}")
    types: dict[str, int] = {}
    for t in GGUFReader(args.out).tensors:
        types[t.tensor_type.name] = types.get(t.tensor_type.name, 0) + 1
    return {"out": args.out, "ftype": name, "tensor_types": types}


def cmd_block_ref(args: argparse.Namespace) -> dict[str, Any]:
    """ggml's own row functions for one block type, called in the oracle's libggml through
    ctypes: `quantize_row_<type>_ref` and `dequantize_row_<type>` on the given weights, and,
    if activations are given, the CPU backend's `from_float` of the type's `vec_dot_type`
    and its `vec_dot` (the SIMD path this machine's libggml-cpu runs). Bytes are hex."""
    import ctypes
    import os
    import llama_cpp

    libdir = os.path.join(os.path.dirname(llama_cpp.__file__), "lib")
    base = ctypes.CDLL(os.path.join(libdir, "libggml-base.so"))
    cpu = ctypes.CDLL(os.path.join(libdir, "libggml-cpu.so"))
    cpu.ggml_cpu_init()
    with open(args.input_json) as f:
        data = json.load(f)
    x = data["weights"]
    n = len(x)
    name = args.type.lower().replace("_k", "_K")
    type_id = {"q2_K": 10, "q3_K": 11, "q4_K": 12, "q5_K": 13, "q6_K": 14, "q8_K": 15}[name]
    base.ggml_row_size.restype = ctypes.c_size_t
    row = base.ggml_row_size(type_id, n)
    fx = (ctypes.c_float * n)(*x)
    q = ctypes.create_string_buffer(row)
    getattr(base, f"quantize_row_{name}_ref")(fx, q, ctypes.c_int64(n))
    back = (ctypes.c_float * n)()
    getattr(base, f"dequantize_row_{name}")(q, back, ctypes.c_int64(n))
    out: dict[str, Any] = {"quantized": q.raw.hex(), "dequantized": list(back)}
    acts = data.get("activations")
    if acts is not None:
        # struct ggml_type_traits_cpu { from_float; vec_dot; vec_dot_type; nrows; }
        vec_dot_t = ctypes.CFUNCTYPE(None, ctypes.c_int, ctypes.POINTER(ctypes.c_float), ctypes.c_size_t,
                                     ctypes.c_void_p, ctypes.c_size_t, ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int)
        from_float_t = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int64)

        class Traits(ctypes.Structure):
            _fields_ = [("from_float", from_float_t), ("vec_dot", vec_dot_t), ("vec_dot_type", ctypes.c_int),
                        ("nrows", ctypes.c_int64)]

        cpu.ggml_get_type_traits_cpu.restype = ctypes.POINTER(Traits)
        traits = cpu.ggml_get_type_traits_cpu(type_id).contents
        dot_type = traits.vec_dot_type
        conv = cpu.ggml_get_type_traits_cpu(dot_type).contents
        fa = (ctypes.c_float * n)(*acts)
        qa = ctypes.create_string_buffer(base.ggml_row_size(dot_type, n))
        conv.from_float(ctypes.cast(fa, ctypes.c_void_p), ctypes.cast(qa, ctypes.c_void_p), n)
        s = ctypes.c_float()
        traits.vec_dot(n, ctypes.byref(s), 0, ctypes.cast(q, ctypes.c_void_p), 0, ctypes.cast(qa, ctypes.c_void_p), 0, 1)
        out.update({"activations_converted": qa.raw.hex(), "vec_dot": s.value})
    return out


def main(argv: Sequence[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)

    p = sub.add_parser("logits", help="last-position logits of one forward pass")
    p.add_argument("--model", required=True)
    p.add_argument("--tokens", required=True)
    p.add_argument("--threads", type=int, default=2)
    p.set_defaults(func=cmd_logits)

    p = sub.add_parser("logits-all", help="logits of every position, for many jobs")
    p.add_argument("--jobs-json", required=True, help="file with a JSON array of jobs")
    p.set_defaults(func=cmd_logits_all)

    p = sub.add_parser("greedy", help="greedy continuation")
    p.add_argument("--model", required=True)
    p.add_argument("--tokens", required=True)
    p.add_argument("-n", type=int, default=32)
    p.add_argument("--threads", type=int, default=2)
    p.set_defaults(func=cmd_greedy)

    p = sub.add_parser("tokenize", help="llama.cpp tokenization")
    p.add_argument("--model", required=True)
    p.add_argument("--text", action="append")
    p.add_argument("--texts-json", help="file with a JSON array of strings")
    p.add_argument("--no-special", action="store_true", help="add_special=false")
    p.add_argument("--parse-special", action="store_true", help="parse_special=true")
    p.add_argument("--vocab-only", action="store_true", help="load only the vocabulary")
    p.set_defaults(func=cmd_tokenize)

    p = sub.add_parser("bench", help="prefill and decode throughput")
    p.add_argument("--model", required=True)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("-p", type=int, default=512)
    p.add_argument("-n", type=int, default=128)
    p.add_argument("--reps", type=int, default=3)
    p.add_argument("--seed", type=int, default=1)
    p.set_defaults(func=cmd_bench)

    p = sub.add_parser("gguf-read", help="metadata and tensors as read by gguf-py")
    p.add_argument("--model", required=True)
    p.set_defaults(func=cmd_gguf_read)

    p = sub.add_parser("chat-render", help="chat template rendered and tokenized")
    p.add_argument("--model", required=True)
    p.add_argument("--messages-json", required=True, help='[{"role": "user", "content": "Hi"}]')
    p.add_argument("--no-generation-prompt", action="store_true")
    p.set_defaults(func=cmd_chat_render)

    p = sub.add_parser("quantize", help="llama.cpp's quantizer (llama_model_quantize)")
    p.add_argument("--model", required=True)
    p.add_argument("--out", required=True)
    p.add_argument("--ftype", required=True, help="Q4_K_M, Q5_K_M, Q6_K, Q3_K_M, Q2_K, Q4_1, Q5_0, Q5_1, Q8_0, BF16, ...")
    p.add_argument("--pure", action="store_true", help="no per-tensor mix: every weight gets the base type")
    p.add_argument("--threads", type=int, default=2)
    p.set_defaults(func=cmd_quantize)

    p = sub.add_parser("block-ref", help="ggml's quantize/dequantize/vec_dot of one block type on given rows")
    p.add_argument("--type", required=True, help="q2_K, q3_K, q4_K, q5_K, q6_K or q8_K")
    p.add_argument("--input-json", required=True, help='{"weights": [...], "activations": [...] (optional)}')
    p.set_defaults(func=cmd_block_ref)

    args = parser.parse_args(argv)
    result = args.func(args)
    json.dump(result, sys.stdout)
    sys.stdout.write("\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
