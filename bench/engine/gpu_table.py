#!/usr/bin/env python3
"""One table from scripts/gpu-check's peer step: medq's engine_bench (CUDA
graphs on; off with MEDQ_CUDA_GRAPHS=0, "eager"; graphs and fused kernels
off, "neither") beside transformers' generate() (hf_generate.py) on the same
checkpoints, in the same run.

  python3 bench/engine/gpu_table.py OUTDIR
"""
import json
import pathlib
import statistics
import sys


def load(path):
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return None


def cell(values):
    """A median with its range, or the one value."""
    if not values:
        return "-"
    if len(values) == 1:
        return f"{values[0]:.1f}"
    return f"{statistics.median(values):.1f} ({min(values):.1f}-{max(values):.1f})"


def main():
    out = pathlib.Path(sys.argv[1])
    medq = {}  # (model, label) -> [decode tok/s], plus first/warm prefill
    extra = {}
    for path in sorted(out.glob("peer_medq_*.json")):
        doc = load(path)
        if not doc:
            continue
        label = next((k for k in ("eager", "plain") if k in path.name), "graphs")
        for r in doc.get("results", []):
            if "decode_tok_s" not in r:
                continue
            medq.setdefault((r["model"], label), []).append(r["decode_tok_s"])
            extra.setdefault((r["model"], label), []).append(r)
    hf = {}
    for path in sorted(out.glob("peer_hf*.json")):
        doc = load(path)
        for r in (doc or {}).get("results", []):
            if "decode_tok_s" in r:
                hf.setdefault((r["model"], r["cache"]), []).append(r["decode_tok_s"])
    models = sorted({m for m, _ in medq} | {m for m, _ in hf})
    print("| model | medq graphs tok/s | medq eager tok/s | medq neither tok/s | "
          "transformers static | transformers static, compiled | transformers dynamic | "
          "graphs / static | share of ceiling | "
          "ttft / warm prefill | host ms / token |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |")

    for m in models:
        g = medq.get((m, "graphs"), [])
        s = hf.get((m, "static"), [])
        ratio = f"{statistics.median(g) / statistics.median(s):.2f}" if g and s else "-"
        rows = extra.get((m, "graphs"), [])
        share = "-"
        ttft = "-"
        host = "-"
        if rows:
            if all("decode_host_ms_per_token" in r for r in rows):
                host = f"{statistics.median([r['decode_host_ms_per_token'] for r in rows]):.3f}"
            share = f"{statistics.median([r.get('decode_fraction_of_ceiling', 0) for r in rows]):.3f}"
            ttft = f"{statistics.median([r['ttft_ms'] / r['prefill_ms'] for r in rows]):.2f}"
        print(f"| {m} | {cell(g)} | {cell(medq.get((m, 'eager'), []))} | "
              f"{cell(medq.get((m, 'plain'), []))} | {cell(s)} | "
              f"{cell(hf.get((m, 'static-compiled'), []))} | "
              f"{cell(hf.get((m, 'dynamic'), []))} | {ratio} | {share} | {ttft} | {host} |")


def first_request(out):
    doc = load(out / "peer_ttft512_bench.json")
    if not doc:
        return
    print()
    print("| model | prompt | first request prefill ms | next prefill ms | first / next |")
    print("| --- | --- | --- | --- | --- |")
    for r in doc.get("results", []):
        if "ttft_ms" in r and r.get("prefill_ms"):
            print(f"| {r['model']} | {doc.get('prompt_tokens')} | {r['ttft_ms']:.2f} | "
                  f"{r['prefill_ms']:.2f} | {r['ttft_ms'] / r['prefill_ms']:.2f} |")


def attention_splits(out):
    """Decode after prompts of some length with attention walked by one
    block a head (attn_medq_one_*) and split into chunks
    (attn_medq_auto_*), runs interleaved."""
    runs = {}  # (model, prompt tokens, mode) -> [decode tok/s]
    for path in sorted(out.glob("attn_medq_*_bench.json")):
        doc = load(path) or {}
        mode = "auto" if path.name.startswith("attn_medq_auto_") else "one"
        for r in doc.get("results", []):
            if "decode_tok_s" in r:
                key = (r["model"], doc.get("prompt_tokens"), mode)
                runs.setdefault(key, []).append(r["decode_tok_s"])
    if not runs:
        return
    print()
    print("| model | prompt | one split tok/s | split (auto) tok/s | auto / one |")
    print("| --- | --- | --- | --- | --- |")
    for m, prompt in sorted({(m, p) for m, p, _ in runs}, key=lambda k: (k[0], k[1] or 0)):
        one, auto = runs.get((m, prompt, "one"), []), runs.get((m, prompt, "auto"), [])
        ratio = f"{statistics.median(auto) / statistics.median(one):.2f}" if one and auto else "-"
        print(f"| {m} | {prompt} | {cell(one)} | {cell(auto)} | {ratio} |")


if __name__ == "__main__":
    main()
    first_request(pathlib.Path(sys.argv[1]))
    attention_splits(pathlib.Path(sys.argv[1]))
