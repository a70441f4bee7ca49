#!/usr/bin/env python3
"""transformers' perplexity of a model on the held-out text that
perplexity_bench wrote (--write-text), under the same protocol (llama-perplexity's,
stated in perplexity_bench.cc and README.md): the check of medq's unquantized
figure.

The text is tokenized by transformers' own tokenizer (tokenizer.json), without
special tokens, and the ids are compared with medq's (--ids, perplexity_bench
--write-ids). The model runs in float32 (the bf16 weights widened exactly), the
arithmetic medq's CPU engine does with bf16 weights (float32 activations).
With --medq (perplexity_bench's JSON), the relative difference from its first
configuration. Prints one JSON document.

Pinned: transformers 5.24.0 (bench/quality/setup-llama-cpp installs it into
.venv) over the torch of scripts/setup-torch (2.15.0).

  .venv/bin/python bench/quality/hf_perplexity.py models/medq-demo TEXT \
      --ids IDS --medq MEDQ_JSON
"""
import argparse
import json
import math
import sys

import torch
import transformers

PINS = {"transformers": "5.24.0", "torch": "2.15.0"}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("model")
    ap.add_argument("text")
    ap.add_argument("--context", type=int, default=0, help="default: the model's")
    ap.add_argument("--ids", help="medq's token ids, one a line")
    ap.add_argument("--medq", help="perplexity_bench's JSON")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--bos", action="store_true", help="as perplexity_bench --bos")
    a = ap.parse_args()

    versions = {"transformers": transformers.__version__,
                "torch": torch.__version__.split("+")[0]}
    if versions != PINS:
        sys.exit(f"hf_perplexity: needs {PINS}, found {versions}")
    torch.set_num_threads(a.threads)

    tok = transformers.AutoTokenizer.from_pretrained(a.model)
    model = transformers.AutoModelForCausalLM.from_pretrained(
        a.model, dtype=torch.float32, attn_implementation="eager").eval()
    with open(a.text, encoding="utf-8") as f:
        text = f.read()
    ids = tok(text, add_special_tokens=False)["input_ids"]
    out = {"versions": versions, "tokens": len(ids), "bos": a.bos}
    if a.ids:
        with open(a.ids) as f:
            medq_ids = [int(line) for line in f]
        out["ids_equal_medq"] = medq_ids == ids
        if medq_ids != ids:
            first = next((i for i, (x, y) in enumerate(zip(ids, medq_ids)) if x != y),
                         min(len(ids), len(medq_ids)))
            out["first_difference"] = first

    context = a.context or model.config.max_position_embeddings
    bos = tok.bos_token_id
    if a.bos:
        ids = [bos] + ids
    first = context // 2
    nll = nll2 = 0.0
    count = 0
    with torch.inference_mode():
        for c in range(len(ids) // context):
            chunk = list(ids[c * context:(c + 1) * context])
            if a.bos:
                chunk[0] = bos
            x = torch.tensor([chunk])
            logits = model(x).logits[0]
            logp = torch.log_softmax(logits[first:context - 1].double(), dim=-1)
            target = x[0, first + 1:]
            n = -logp.gather(1, target.view(-1, 1)).view(-1)
            nll += n.sum().item()
            nll2 += (n * n).sum().item()
            count += n.numel()
    mean = nll / count
    ppl = math.exp(mean)
    out.update({"context": context, "chunks": len(ids) // context, "scored_tokens": count,
                "mean_nll": mean, "perplexity": ppl,
                "perplexity_stderr": math.sqrt(max(0.0, nll2 / count - mean * mean) /
                                               (count - 1)) * ppl})
    if a.medq:
        with open(a.medq) as f:
            medq = json.load(f)["results"][0]
        out["medq_config"] = medq["config"]
        out["medq_perplexity"] = medq["perplexity"]
        out["relative_difference"] = medq["perplexity"] / ppl - 1
    print(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
