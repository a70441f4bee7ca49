#!/usr/bin/env python3
"""The sentence-transformers peer of embed_bench: texts/s of
SentenceTransformer.encode(texts, batch_size=B) on CPU with N torch threads,
on the corpora embed_bench --print-corpus wrote, measured the way embed_bench
measures (an untimed warm-up of two batches, then --repeats measurements of
whole passes over the corpus until --min-seconds have passed). encode()
tokenizes, runs the model, pools, normalizes and returns numpy arrays: the
same end-to-end work as embed_bench's tokenize + Embed. One JSON object on
stdout.

Run with the checkout's venv (scripts/setup-torch, then
tools/embeddings/requirements.txt):
  .venv/bin/python bench/embeddings/st_peer.py --corpus FILE --model DIR
"""

import argparse
import json
import os
import statistics
import sys
import time


def summary(values):
    values = sorted(values)
    return {"median": statistics.median(values), "min": values[0], "max": values[-1]}


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--corpus", required=True, help="JSON from embed_bench --print-corpus")
    p.add_argument("--model", required=True, help="sentence-transformers folder")
    p.add_argument("--threads", type=int, default=0, help="torch threads; 0: one per core")
    p.add_argument("--batch-sizes", default="1,8,32")
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--min-seconds", type=float, default=1.0)
    a = p.parse_args()

    import torch
    import sentence_transformers
    from sentence_transformers import SentenceTransformer

    threads = a.threads if a.threads > 0 else os.cpu_count()
    torch.set_num_threads(threads)
    with open(a.corpus) as f:
        corpora = json.load(f)

    t0 = time.perf_counter()
    model = SentenceTransformer(a.model, device="cpu")
    load_ms = (time.perf_counter() - t0) * 1000

    # The ids the model sees must be embed_bench's: same tokenizer, same
    # truncation (no text here is longer than max_seq_length).
    mismatches = 0
    for c in corpora.values():
        ids = model.tokenizer(c["texts"], truncation=True, max_length=model.max_seq_length)
        mismatches += sum(len(x) != n for x, n in zip(ids["input_ids"], c["tokens"]))

    batch_sizes = [int(b) for b in a.batch_sizes.split(",")]
    results = []
    for name, c in corpora.items():
        texts = c["texts"]
        for b in batch_sizes:
            model.encode(texts[: 2 * b], batch_size=b)  # warm-up
            rates = []
            for _ in range(a.repeats):
                start = time.perf_counter()
                passes = 0
                while True:
                    out = model.encode(texts, batch_size=b)
                    passes += 1
                    elapsed = time.perf_counter() - start
                    if elapsed >= a.min_seconds:
                        break
                if out.shape[0] != len(texts):
                    sys.exit("st_peer: encode returned the wrong number of vectors")
                rates.append(passes * len(texts) / elapsed)
            results.append({"corpus": name, "batch": b, "texts_s": summary(rates)})

    print(json.dumps({
        "benchmark": "embeddings",
        "impl": "sentence-transformers",
        "torch": torch.__version__,
        "sentence_transformers": sentence_transformers.__version__,
        "model": os.path.basename(os.path.normpath(a.model)),
        "device": "cpu",
        "threads": threads,
        "torch_threads": torch.get_num_threads(),
        "load_ms": load_ms,
        "token_count_mismatches": mismatches,
        "repeats": a.repeats,
        "min_seconds": a.min_seconds,
        "results": results,
    }, indent=2))


if __name__ == "__main__":
    main()
