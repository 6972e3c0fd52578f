"""Runs a GGUF model through llama.cpp's C API (llama-cpp-python's ctypes binding) and
writes llama.cpp's own view of every computed graph: for each llama_decode call, the
nodes in execution order with their name and op, taken from the scheduler's eval
callback (called for every node before it is computed).

    python graph_dump.py MODEL PROMPT N_GEN THREADS OUT.json [--wait-stdin] [--expert-ids]

With --wait-stdin the model is loaded, "ready" is printed, and generation starts when a
line arrives on stdin (so a tracer can attach to the running process first).

With --expert-ids the output also has, per graph, the expert ids every mixture-of-experts
layer chose: the contents of its `ffn_moe_topk-<layer>` tensor (the ids the layer's
MUL_MAT_ID products read), after it is computed, through ggml's own accessors
(`ggml_get_i32_nd`, which follows the tensor's strides: it is a view of the argsort).
Asking for a node's data makes the scheduler compute the graph in pieces, so a trace of
such a run has more graph computations than decode calls.

Works with the bindings of llama-cpp-python 0.3.2 (Nov 2024) to 0.3.36: the venv's, or an
older one from `cargo xtask setup --oracle` in `.venv/llama-builds/llama-cpp-python-<v>/`
with `PYTHONPATH=<that>/python LLAMA_CPP_LIB_PATH=<that>/lib` (the binding loads
`$LLAMA_CPP_LIB_PATH/libllama.so`). The C API changed in between; each call below takes the
newer name and falls back to the older one.
"""
import ctypes
import json
import os
import sys

from llama_cpp import llama_cpp as C

model_path, prompt, n_gen, threads, out_path = sys.argv[1:6]
n_gen, threads = int(n_gen), int(threads)
wait = "--wait-stdin" in sys.argv[6:]
expert_ids = "--expert-ids" in sys.argv[6:]


def api(*names):
    """The first of `names` the binding has (newest name first)."""
    for name in names:
        if hasattr(C, name):
            return getattr(C, name)
    sys.exit(f"the llama_cpp binding has none of {', '.join(names)}")


def mapped_lib(prefix):
    """The path of the mapped library whose file name starts with `prefix`, if any."""
    with open("/proc/self/maps") as maps:
        for line in maps:
            fields = line.split(maxsplit=5)
            if len(fields) == 6 and os.path.basename(fields[5].strip()).startswith(prefix):
                return fields[5].strip()
    return None


def ggml_base_path():
    """The libggml-base the loader mapped for the binding's libllama: libllama's DT_NEEDED
    name (`libggml-base.so.0` in 0.3.36, `libggml-base.so` in 0.3.2 and 0.3.9), next to the
    libllama the binding loaded (`$LLAMA_CPP_LIB_PATH` or `llama_cpp/lib`). Another file of
    the same library would be loaded as a second copy, so the mapped one comes first."""
    lib_dir = os.path.dirname(os.path.abspath(C._lib._name))
    with open("/proc/self/maps") as maps:
        for line in maps:
            fields = line.split(maxsplit=5)
            if len(fields) == 6 and os.path.basename(fields[5].strip()).startswith("libggml-base.so"):
                return fields[5].strip()
    for name in ("libggml-base.so.0", "libggml-base.so"):
        if os.path.exists(os.path.join(lib_dir, name)):
            return os.path.join(lib_dir, name)
    sys.exit(f"no libggml-base.so[.0] mapped or in {lib_dir}")


base = ctypes.CDLL(ggml_base_path())
for fn in ("ggml_op_desc", "ggml_get_name"):
    getattr(base, fn).restype = ctypes.c_char_p
    getattr(base, fn).argtypes = [ctypes.c_void_p]
base.ggml_is_empty.restype = ctypes.c_bool
base.ggml_is_empty.argtypes = [ctypes.c_void_p]

graphs = []
# Per graph: [{"name", "k", "n_tokens", "ids"}] of the `ffn_moe_topk-<layer>` tensors.
routes = []
TOPK = "ffn_moe_topk-"
if expert_ids:
    cpu = ctypes.CDLL(mapped_lib("libggml-cpu.so") or sys.exit("no libggml-cpu mapped"))
    cpu.ggml_get_i32_nd.restype = ctypes.c_int32
    cpu.ggml_get_i32_nd.argtypes = [ctypes.c_void_p] + [ctypes.c_int] * 4
    for fn in ("ggml_nelements", "ggml_nrows"):
        getattr(base, fn).restype = ctypes.c_int64
        getattr(base, fn).argtypes = [ctypes.c_void_p]


def read_ids(tensor):
    """A computed `[k, n_tokens]` I32 tensor's ids, token by token."""
    n_tokens = base.ggml_nrows(tensor)
    k = base.ggml_nelements(tensor) // n_tokens
    ids = [cpu.ggml_get_i32_nd(tensor, i, t, 0, 0) for t in range(n_tokens) for i in range(k)]
    return {"name": base.ggml_get_name(tensor).decode(), "k": k, "n_tokens": n_tokens, "ids": ids}


@C.ggml_backend_sched_eval_callback
def on_node(tensor, ask, _user):
    if not ask:
        # Only the nodes asked for below come back, computed.
        routes[-1].append(read_ids(tensor))
        return True
    if ask:
        graphs[-1].append(
            {
                "addr": tensor,
                "name": base.ggml_get_name(tensor).decode(),
                "op": base.ggml_op_desc(tensor).decode(),
                "empty": bool(base.ggml_is_empty(tensor)),
            }
        )
        if expert_ids and base.ggml_get_name(tensor).decode().startswith(TOPK):
            return True
    return False  # no other node's data is needed


C.llama_backend_init()
mparams = C.llama_model_default_params()
model = api("llama_model_load_from_file", "llama_load_model_from_file")(model_path.encode(), mparams)
if not model:
    sys.exit(f"llama.cpp could not load {model_path}")
cparams = C.llama_context_default_params()
cparams.n_ctx = 256
cparams.n_threads = threads
cparams.n_threads_batch = threads
cparams.cb_eval = on_node
ctx = api("llama_init_from_model", "llama_new_context_with_model")(model, cparams)
if not ctx:
    sys.exit("llama.cpp could not create a context")
# llama_tokenize and the vocabulary size take the vocab since llama.cpp split it from the
# model (0.3.9, 0.3.36), the model before (0.3.2).
has_vocab = hasattr(C, "llama_model_get_vocab")
vocab = C.llama_model_get_vocab(model) if has_vocab else None
tokenizer = vocab if has_vocab else model

text = prompt.encode()
tokens = (C.llama_token * 256)()
n = C.llama_tokenize(tokenizer, text, len(text), tokens, 256, True, False)
if n < 0:
    sys.exit(f"the prompt is longer than 256 tokens ({-n})")
if wait:
    print("ready", flush=True)
    sys.stdin.readline()

n_vocab = C.llama_vocab_n_tokens(vocab) if has_vocab else C.llama_n_vocab(model)
# llama_batch_get_one(tokens, n_tokens) in 0.3.2 and later; older bindings also took the
# first position and the sequence id (untested: no binding here has that form).
batch_args = len(C._lib.llama_batch_get_one.argtypes)
batch_tokens = list(tokens[:n])
generated = []
n_past = 0
for step in range(n_gen + 1):
    graphs.append([])
    routes.append([])
    arr = (C.llama_token * len(batch_tokens))(*batch_tokens)
    if batch_args == 4:
        batch = C.llama_batch_get_one(arr, len(batch_tokens), n_past, 0)
    else:
        batch = C.llama_batch_get_one(arr, len(batch_tokens))
    if C.llama_decode(ctx, batch) != 0:
        sys.exit("llama_decode failed")
    n_past += len(batch_tokens)
    logits = C.llama_get_logits_ith(ctx, -1)
    best = max(range(n_vocab), key=lambda i: logits[i])
    generated.append(best)
    batch_tokens = [best]

with open(out_path, "w") as f:
    out = {"prompt_tokens": n, "generated": generated, "graphs": graphs}
    if expert_ids:
        out["routes"] = routes
    json.dump(out, f)
C.llama_free(ctx)
api("llama_model_free", "llama_free_model")(model)
