#!/usr/bin/env python3
"""The quality benchmark of issue 44, end to end; prints one JSON document.

1. The demo model's corpus (scripts/kjv-corpus), checked against the
   fingerprint its training recorded (models/medq-demo/training.json).
2. medq: build/bench/quality/perplexity_bench on the held-out chapters, bf16
   as loaded, int8, int4 in groups of 32, 64 and 128 (it writes the held-out
   text and its ids).
3. transformers on the same text and protocol (hf_perplexity.py): the check
   of medq's bf16 figure (target: within 1e-3 relative) and of its ids.
4. With --llama-cpp: llama.cpp from bench/quality/setup-llama-cpp. The model
   converted to GGUF F32 (convert_to_gguf.py; the bf16 weights exactly),
   quantized by llama-quantize to Q8_0, Q4_0 and Q4_K_M twice: with the
   token embedding (which is also the output matrix: tied) kept F32, so that
   only the projections are quantized as in medq ("projections"), and with
   llama-quantize's own choice for it ("default"). llama-tokenize's ids of the
   held-out text are compared with medq's; llama-perplexity runs on the same
   text with the same context and chunks (the GGUF adds no BOS token, as
   medq's tokenizer adds none: checked), 2 threads.
5. The comparison: each quantization's increase over its own unquantized
   run, medq's against llama.cpp's of the same bit width.

Work files go to .llama-cpp/work (ignored by git).

  .venv/bin/python bench/quality/run.py [--llama-cpp] [--build build]
"""
import argparse
import json
import os
import re
import subprocess
import sys

ROOT = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
MODEL = "models/medq-demo"
WORK = ".llama-cpp/work"
LLAMA_SOURCE = ".llama-cpp/llama_cpp_python-0.3.36/vendor/llama.cpp"
# (name, llama-quantize type, bits the comparison pairs it with)
QUANTS = [("Q8_0", "Q8_0", "int8"), ("Q4_0", "Q4_0", "int4"), ("Q4_K_M", "Q4_K_M", "int4")]


def sh(cmd, **kw):
    return subprocess.run(cmd, check=True, text=True, capture_output=True, **kw)


def log(msg):
    print(f"run: {msg}", file=sys.stderr, flush=True)


def llama_perplexity(bin_dir, gguf, text, context, threads):
    cmd = [f"{bin_dir}/llama-perplexity", "-m", gguf, "-f", text, "-c", str(context), "-b",
           str(context), "-t", str(threads)]
    # This llama.cpp's logger (a thread of its own) sometimes loses the last
    # lines at exit, the final estimate among them (exit status 0): run
    # again, up to three times.
    for _ in range(3):
        r = sh(cmd)
        out = r.stdout + r.stderr
        m = re.search(r"Final estimate: PPL = ([0-9.]+) \+/- ([0-9.]+)", out)
        if m:
            break
    chunks = re.search(r"calculating perplexity over (\d+) chunks", out)
    if not m:
        raise RuntimeError(f"llama-perplexity on {gguf}: no estimate\n{out[-2000:]}")
    return {"perplexity": float(m.group(1)), "perplexity_stderr": float(m.group(2)),
            "chunks": int(chunks.group(1)) if chunks else None}


def tensor_types(quantize_log):
    """llama-quantize's log -> ({type: tensors}, {tensor: fallback type}): what
    each tensor became, and those whose width the chosen type's block does not
    divide (K-quants need multiples of 256)."""
    types, fallbacks = {}, {}
    for line in quantize_log.splitlines():
        m = re.search(r"\]\s+(\S+)\s+- .*type =\s+(\w+),\s+(converting to (\w+)|size)", line)
        if m:
            t = m.group(4) or m.group(2)
            types[t] = types.get(t, 0) + 1
        m = re.search(r"warning: (\S+)\s+- .*falling back to\s+(\w+)", line)
        if m:
            fallbacks[m.group(1)] = m.group(2)
    return types, fallbacks


def gguf_add_bos(gguf):
    sys.path.insert(0, os.path.join(LLAMA_SOURCE, "gguf-py"))  # what the converter wrote with
    from gguf import GGUFReader
    field = GGUFReader(gguf).fields.get("tokenizer.ggml.add_bos_token")
    return bool(field.parts[field.data[0]][0]) if field else False


def run_llama_cpp(a, heldout, medq_ids, context):
    bin_dir = sh(["bench/quality/setup-llama-cpp"]).stdout.strip().splitlines()[-1]
    f32 = f"{WORK}/medq-demo-F32.gguf"
    if not os.path.exists(f32):
        log("converting to GGUF F32")
        sh([sys.executable, "bench/quality/convert_to_gguf.py", LLAMA_SOURCE, MODEL, "--outtype",
            "f32", "--outfile", f32])
    # medq's run had no BOS (its tokenizer adds none); llama.cpp must agree.
    if gguf_add_bos(f32):
        raise RuntimeError(f"{f32} asks for a BOS token; run perplexity_bench with --bos")
    out = {"gguf_add_bos_token": False}

    r = sh([f"{bin_dir}/llama-tokenize", "-m", f32, "-f", heldout, "--ids", "--log-disable",
            "--no-bos"])
    ids = json.loads(r.stdout.strip().splitlines()[-1])
    out["tokenizer"] = {"tokens": len(ids), "ids_equal_medq": ids == medq_ids}
    if ids != medq_ids:
        out["tokenizer"]["first_difference"] = next(
            (i for i, (x, y) in enumerate(zip(ids, medq_ids)) if x != y),
            min(len(ids), len(medq_ids)))

    runs = [{"config": "F32", "mix": None, **llama_perplexity(
        bin_dir, f32, heldout, context, a.threads)}]
    log(f"llama.cpp F32: {runs[0]['perplexity']}")
    for mix in ("projections", "default"):
        for name, qtype, _ in QUANTS:
            gguf = f"{WORK}/medq-demo-{name}-{mix}.gguf"
            cmd = [f"{bin_dir}/llama-quantize"]
            if mix == "projections":
                cmd += ["--token-embedding-type", "f32", "--output-tensor-type", "f32"]
            cmd += [f32, gguf, qtype, str(a.threads)]
            q = sh(cmd)
            types, fallbacks = tensor_types(q.stdout + q.stderr)
            p = llama_perplexity(bin_dir, gguf, heldout, context, a.threads)
            p["increase_percent"] = 100 * (p["perplexity"] / runs[0]["perplexity"] - 1)
            runs.append({"config": name, "mix": mix, "tensor_types": types,
                         "fallbacks": fallbacks, "bytes": os.path.getsize(gguf), **p})
            log(f"llama.cpp {name} ({mix}): {p['perplexity']}")
    out["results"] = runs
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", default="build")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--llama-cpp", action="store_true")
    a = ap.parse_args()
    os.chdir(ROOT)
    os.makedirs(WORK, exist_ok=True)

    corpus, heldout, ids_file = f"{WORK}/kjv.txt", f"{WORK}/heldout.txt", f"{WORK}/medq.ids"
    sh(["scripts/kjv-corpus", corpus])
    log("medq perplexity_bench")
    medq = json.loads(sh([f"{a.build}/bench/quality/perplexity_bench", "--corpus", corpus,
                          "--model", MODEL, "--quantize", "none,int8,int4", "--groups",
                          "32,64,128", "--threads", str(a.threads), "--write-text", heldout,
                          "--write-ids", ids_file]).stdout)
    with open(f"{MODEL}/training.json") as f:
        trained = json.load(f)["corpus"]
    medq["corpus"]["fingerprint_as_trained"] = (
        medq["corpus"]["fingerprint_fnv1a64"] == trained["fingerprint_fnv1a64"])
    medq["corpus"]["validation_tokens_match_training"] = (
        medq["corpus"]["validation_tokens_as_trained"] == trained["validation_tokens"])
    with open(f"{WORK}/medq.json", "w") as f:
        json.dump(medq, f)
    log("transformers")
    hf = json.loads(sh([sys.executable, "bench/quality/hf_perplexity.py", MODEL, heldout, "--ids",
                        ids_file, "--medq", f"{WORK}/medq.json", "--threads",
                        str(a.threads)]).stdout)
    doc = {"medq": medq, "transformers": hf}

    if a.llama_cpp:
        with open(ids_file) as f:
            medq_ids = [int(line) for line in f]
        llama = run_llama_cpp(a, heldout, medq_ids, medq["protocol"]["context"])
        doc["llama_cpp"] = llama
        by = {r["config"]: r for r in medq["results"]}
        comparison = []
        for r in llama["results"][1:]:
            bits = next(b for n, _, b in QUANTS if n == r["config"])
            for name, m in by.items():
                if m["quantization"] != bits:
                    continue
                comparison.append({
                    "medq": name, "llama_cpp": r["config"], "mix": r["mix"],
                    "medq_increase_percent": m["increase_percent"],
                    "llama_cpp_increase_percent": r["increase_percent"],
                    "medq_no_larger": m["increase_percent"] <= r["increase_percent"]})
        doc["comparison"] = comparison
        doc["unquantized_relative_difference"] = (
            by["none"]["perplexity"] / llama["results"][0]["perplexity"] - 1)
    print(json.dumps(doc, indent=2))


if __name__ == "__main__":
    main()
