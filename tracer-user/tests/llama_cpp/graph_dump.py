"""Runs a GGUF model through llama.cpp's C API (llama-cpp-python's ctypes binding) and
writes llama.cpp's own view of every computed graph: for each llama_decode call, the
nodes in execution order with their name and op, taken from the scheduler's eval
callback (called for every node before it is computed).

    python graph_dump.py MODEL PROMPT N_GEN THREADS OUT.json [--wait-stdin]

With --wait-stdin the model is loaded, "ready" is printed, and generation starts when a
line arrives on stdin (so a tracer can attach to the running process first).
"""
import ctypes
import json
import os
import sys

import llama_cpp
from llama_cpp import llama_cpp as C

model_path, prompt, n_gen, threads, out_path = sys.argv[1:6]
n_gen, threads = int(n_gen), int(threads)
wait = "--wait-stdin" in sys.argv[6:]

base = ctypes.CDLL(os.path.join(os.path.dirname(llama_cpp.__file__), "lib", "libggml-base.so.0"))
for fn in ("ggml_op_desc", "ggml_get_name"):
    getattr(base, fn).restype = ctypes.c_char_p
    getattr(base, fn).argtypes = [ctypes.c_void_p]
base.ggml_is_empty.restype = ctypes.c_bool
base.ggml_is_empty.argtypes = [ctypes.c_void_p]

graphs = []


@C.ggml_backend_sched_eval_callback
def on_node(tensor, ask, _user):
    if ask:
        graphs[-1].append(
            {
                "addr": tensor,
                "name": base.ggml_get_name(tensor).decode(),
                "op": base.ggml_op_desc(tensor).decode(),
                "empty": bool(base.ggml_is_empty(tensor)),
            }
        )
    return False  # no node's data is needed: the graph is computed in one piece


C.llama_backend_init()
mparams = C.llama_model_default_params()
model = C.llama_model_load_from_file(model_path.encode(), mparams)
cparams = C.llama_context_default_params()
cparams.n_ctx = 256
cparams.n_threads = threads
cparams.n_threads_batch = threads
cparams.cb_eval = on_node
ctx = C.llama_init_from_model(model, cparams)
vocab = C.llama_model_get_vocab(model)

text = prompt.encode()
tokens = (C.llama_token * 256)()
n = C.llama_tokenize(vocab, text, len(text), tokens, 256, True, False)
if wait:
    print("ready", flush=True)
    sys.stdin.readline()

n_vocab = C.llama_vocab_n_tokens(vocab)
batch_tokens = list(tokens[:n])
generated = []
for step in range(n_gen + 1):
    graphs.append([])
    arr = (C.llama_token * len(batch_tokens))(*batch_tokens)
    if C.llama_decode(ctx, C.llama_batch_get_one(arr, len(batch_tokens))) != 0:
        sys.exit("llama_decode failed")
    logits = C.llama_get_logits_ith(ctx, -1)
    best = max(range(n_vocab), key=lambda i: logits[i])
    generated.append(best)
    batch_tokens = [best]

with open(out_path, "w") as f:
    json.dump({"prompt_tokens": n, "generated": generated, "graphs": graphs}, f)
C.llama_free(ctx)
C.llama_model_free(model)
