#!/usr/bin/env python3
"""medq's quantized decode against llama.cpp's on the same checkpoints (issue
44); prints one JSON document.

The checkpoints: engine_bench's random-weight SmolLM-135M- and
Qwen2.5-0.5B-shaped models (bench/engine/random_model.cc, bf16), written once
with engine_bench --keep. The same folders, with medq-demo's tokenizer copied
in (the converter needs one; it pads the vocabulary to the model's size, and
llama-bench never tokenizes), converted to GGUF BF16 (the weights exactly,
convert_to_gguf.py) and quantized by llama-quantize to Q8_0, Q4_0 and Q4_K_M
with its own choice for the tied embedding (as users run them).

Each round runs, for each shape, engine_bench (bf16; int8 and int4 in groups
of 64 for the projections only; int8+emb and int4+emb, lm_head and the
embeddings quantized too (LoadOptions::quantize_embeddings), as llama.cpp's
default mixes quantize the tied embedding: 128-token prompt, then 128 new
tokens, decode tok/s after the prefill)
and then llama-bench on the three GGUFs (tg128 at depth 128: 128 tokens
generated after a 128-token context, one repetition, weights repacked as
llama.cpp does by default), all with 2 threads;
--rounds rounds, so that a machine whose speed drifts moves both alike.
Medians and ranges per configuration, and the ratios of the medians: each
medq quantization against medq bf16 and against the llama.cpp type of the
same width (int8 against Q8_0, int4 against Q4_0 and Q4_K_M), projections
only and +emb. The load average at the start and at the end goes with them.

--prefill measures reading a prompt instead: engine_bench's prefill of 512
tokens (bf16, int8 and int4 projections; +emb changes nothing there, lm_head
reading one row) against llama-bench's pp512 on the BF16 GGUF and the three
quantized ones.

  .venv/bin/python bench/quality/speed.py [--rounds 3] [--build build] [--prefill]
"""
import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys

ROOT = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
WORK = ".llama-cpp/work/speed"
LLAMA_SOURCE = ".llama-cpp/llama_cpp_python-0.3.36/vendor/llama.cpp"
SHAPES = ["SmolLM-135M", "Qwen2.5-0.5B"]
GGUF_TYPES = ["Q8_0", "Q4_0", "Q4_K_M"]
# engine_bench --quantize names; "none" is bf16 as it is.
QUANTIZE = ["int8", "int4", "int8+emb", "int4+emb"]
# Each medq quantization against the llama.cpp types of the same width.
PEERS = {"int8": ["Q8_0"], "int4": ["Q4_0", "Q4_K_M"]}
# --prefill: the prompt's length, medq's quantizations and llama.cpp's types.
PREFILL_TOKENS = 512
PREFILL_QUANTIZE = ["int8", "int4"]
PREFILL_GGUF_TYPES = ["BF16"] + GGUF_TYPES


def sh(cmd):
    return subprocess.run(cmd, check=True, text=True, capture_output=True)


def log(msg):
    print(f"speed: {msg}", file=sys.stderr, flush=True)


def summary(values):
    return {"median": statistics.median(values), "min": min(values), "max": max(values),
            "runs": values}


def prepare(a, bin_dir):
    """Writes the checkpoints and their GGUFs once; returns {shape: {type: path}}."""
    ggufs = {}
    for shape in SHAPES:
        d = f"{WORK}/{shape}"
        if not os.path.exists(f"{d}/model.safetensors"):
            log(f"writing {shape}")
            sh([f"{a.build}/bench/engine/engine_bench", "--keep", WORK, "--models", shape,
                "--dtypes", "bf16", "--new-tokens", "2", "--threads", str(a.threads)])
        for f in ("tokenizer.json", "tokenizer_config.json"):
            shutil.copy(f"models/medq-demo/{f}", f"{d}/{f}")
        bf16 = f"{WORK}/{shape}-BF16.gguf"
        if not os.path.exists(bf16):
            log(f"converting {shape}")
            sh([sys.executable, "bench/quality/convert_to_gguf.py", LLAMA_SOURCE, d, "--outtype",
                "bf16", "--outfile", bf16])
        ggufs[shape] = {"BF16": bf16}
        for t in GGUF_TYPES:
            out = f"{WORK}/{shape}-{t}.gguf"
            if not os.path.exists(out):
                sh([f"{bin_dir}/llama-quantize", bf16, out, t, str(a.threads)])
            ggufs[shape][t] = out
    return ggufs


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", default="build")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--rounds", type=int, default=3)
    # --repack 1 (llama.cpp's default): Q4_0 and Q8_0 weights in the
    # interleaved layouts its AVX-512 kernels are fastest with (its AMX path,
    # which crashes here, is compiled out: setup-llama-cpp).
    ap.add_argument("--repack", default="1", help="llama-bench --repack 0|1")
    ap.add_argument("--prefill", action="store_true",
                    help=f"prefill of {PREFILL_TOKENS} tokens (pp{PREFILL_TOKENS}), not decode")
    a = ap.parse_args()
    if a.prefill:
        quantize, types, metric = PREFILL_QUANTIZE, PREFILL_GGUF_TYPES, "prefill_tok_s"
        medq_args = ["--prompt-tokens", str(PREFILL_TOKENS), "--new-tokens", "8"]
        llama_args = ["-p", str(PREFILL_TOKENS), "-n", "0"]
    else:
        quantize, types, metric = QUANTIZE, GGUF_TYPES, "decode_tok_s"
        medq_args, llama_args = [], ["-p", "0", "-n", "128", "-d", "128"]
    os.chdir(ROOT)
    os.makedirs(WORK, exist_ok=True)
    bin_dir = sh(["bench/quality/setup-llama-cpp"]).stdout.strip().splitlines()[-1]
    ggufs = prepare(a, bin_dir)
    load_start = os.getloadavg()

    medq, llama = {}, {}
    extra = {}
    for r in range(a.rounds):
        for shape in SHAPES:
            log(f"round {r + 1}: medq {shape}")
            doc = json.loads(sh([f"{a.build}/bench/engine/engine_bench", "--keep", WORK,
                                 "--models", shape, "--dtypes", "bf16", "--quantize",
                                 ",".join(quantize), "--threads", str(a.threads)] +
                                medq_args).stdout)
            extra["read_bandwidth_gb_s"] = doc["read_bandwidth_gb_s"]
            for res in doc["results"]:
                q = res.get("quantize", "none")
                key = (shape, q + ("+emb" if res.get("quantized_embeddings") else ""))
                medq.setdefault(key, []).append(res[metric])
                log(f"  medq {key[1]}: {res[metric]:.1f} tok/s")
                extra.setdefault(f"{shape}/{key[1]}/weight_bytes", res.get("parameter_bytes"))
            log(f"round {r + 1}: llama.cpp {shape}")
            out = sh([f"{bin_dir}/llama-bench", "-m", ",".join(ggufs[shape][t] for t in types),
                      "-t", str(a.threads)] + llama_args +
                     ["-r", "1", "--repack", a.repack, "-o", "json"]).stdout
            for res in json.loads(out):
                t = next(t for t in types if res["model_filename"].endswith(f"-{t}.gguf"))
                llama.setdefault((shape, t), []).append(res["avg_ts"])
                log(f"  llama.cpp {t}: {res['avg_ts']:.1f} tok/s")
                extra[f"{shape}/{t}/model_size"] = res.get("model_size")

    results = []
    for shape in SHAPES:
        m = {q: summary(medq[(shape, q)]) for q in ["none"] + quantize}
        l = {t: summary(llama[(shape, t)]) for t in types}
        ratio = lambda x, y: x["median"] / y["median"]
        ratios = {}
        for q in quantize:
            ratios[f"{q}/bf16"] = ratio(m[q], m["none"])
        for q in quantize:
            for t in PEERS[q.split("+")[0]]:
                ratios[f"{q}/{t}"] = ratio(m[q], l[t])
        ratios["bf16/Q8_0"] = ratio(m["none"], l["Q8_0"])
        if "BF16" in l:
            ratios["bf16/BF16"] = ratio(m["none"], l["BF16"])
        results.append({
            "model": shape,
            f"medq_{metric}": m,
            f"llama_cpp_{metric}": l,
            "bytes": {k.split("/", 1)[1]: v for k, v in extra.items() if k.startswith(shape + "/")},
            "ratios": ratios})
    print(json.dumps({"benchmark": ("quantized_prefill_vs_llama_cpp" if a.prefill else
                                    "quantized_decode_vs_llama_cpp"),
                      "threads": a.threads, "rounds": a.rounds,
                      "prompt_tokens": PREFILL_TOKENS if a.prefill else 128,
                      "new_tokens": 8 if a.prefill else 128,
                      "read_bandwidth_gb_s": extra.get("read_bandwidth_gb_s"),
                      "llama_bench": {"test": f"pp{PREFILL_TOKENS}" if a.prefill else
                                      "tg128 @ d128", "repack": a.repack},
                      "load_average_1min": {"start": load_start[0],
                                            "end": os.getloadavg()[0]},
                      "results": results}, indent=2))


if __name__ == "__main__":
    main()
