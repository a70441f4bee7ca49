#!/usr/bin/env python3
"""Writes tests/engine/data/models/tiny-qwen3: a random-weight Qwen3 model
with reference outputs from transformers, in the format of the shared model
fixtures (../shared/fixtures/models/README.md), so that the engine's tests
run Qwen3's q/k norms and a head_dim other than hidden_size / heads against
transformers itself. It is also a config as transformers 5 writes it
(rope_parameters, dtype).

Run inside the checkout's .venv (torch from scripts/setup-torch), after
    .venv/bin/pip install -r tools/model_fixtures/requirements.txt
as
    .venv/bin/python tools/model_fixtures/make_tiny_qwen3.py

It writes, CPU float32 compute from the stored bf16 weights, eager attention:
  config.json, generation_config.json, model.safetensors   save_pretrained
  reference.safetensors   input_ids_prompt1/2, logits_prompt1/2 (every
      position), greedy_prompt1/2 (24 ids, KV-cache decoding, no EOS stop)
      with their _topk_ids/_topk_logits (top 8 at each step) and _margins,
      batch_input_ids/batch_attention_mask (right-padded, pad id 0),
      rope_inv_freq
  reference.json   versions, seeds, the smallest greedy margin and the
      cross-checks below
Cross-checks (the script fails if one does not hold): cached greedy
decoding against a full recompute at every step, the padded batch's logits
against each prompt's alone, and float64 against float32.
Deterministic: the same versions write the same files.
"""
import json
import os
import sys

import torch

PINS = {"transformers": "5.23.0", "torch": "2.15.0"}
OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tests", "engine",
                   "data", "models", "tiny-qwen3")
SEED = 20261126
GREEDY_STEPS = 24
TOP_K = 8
MIN_MARGIN = 0.1  # the smallest top1 - top2 logit allowed at a greedy step


def check_pins():
    import transformers
    have = {"transformers": transformers.__version__, "torch": torch.__version__.split("+")[0]}
    for name, want in PINS.items():
        if have[name] != want:
            sys.exit(f"make_tiny_qwen3: {name} {have[name]} is installed; the references "
                     f"were made with {want} (tools/model_fixtures/requirements.txt)")


def make_model(seed):
    from transformers import Qwen3Config, Qwen3ForCausalLM
    config = Qwen3Config(vocab_size=1024, hidden_size=32, intermediate_size=64,
                         num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
                         head_dim=16, rope_theta=1e6, rms_norm_eps=1e-6,
                         tie_word_embeddings=True, max_position_embeddings=4096,
                         bos_token_id=None, eos_token_id=1, attn_implementation="eager")
    torch.manual_seed(seed)
    model = Qwen3ForCausalLM(config)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if name.endswith("norm.weight"):
                # Norm weights away from 1, so that a norm applied without
                # its weight (or to the wrong heads) shows.
                p.uniform_(0.5, 1.5)
            elif name.endswith("embed_tokens.weight"):
                # Also the (tied) lm_head: logits of a few tens, as the
                # shared fixtures', so that greedy steps are clear of ties.
                p.normal_(0.0, 3.0)
            else:
                p.normal_(0.0, 0.4)
    return model.to(torch.bfloat16)


def logits_of(model, ids):
    with torch.no_grad():
        return model(input_ids=ids.view(1, -1)).logits[0]


def greedy(model, prompt):
    """Greedy ids with KV-cache decoding, and each step's top-k and margin."""
    from transformers import DynamicCache
    ids, top_ids, top_logits, margins = [], [], [], []
    cache = DynamicCache(config=model.config)
    with torch.no_grad():
        out = model(input_ids=prompt.view(1, -1), past_key_values=cache, use_cache=True)
        for _ in range(GREEDY_STEPS):
            last = out.logits[0, -1]
            top = torch.topk(last, TOP_K)
            top_ids.append(top.indices)
            top_logits.append(top.values)
            margins.append(top.values[0] - top.values[1])
            token = top.indices[0]
            ids.append(int(token))
            out = model(input_ids=token.view(1, 1), past_key_values=out.past_key_values,
                        use_cache=True)
    return (torch.tensor(ids, dtype=torch.int64), torch.stack(top_ids).to(torch.int64),
            torch.stack(top_logits), torch.stack(margins))


def recomputed_greedy(model, prompt):
    seq = prompt.clone()
    for _ in range(GREEDY_STEPS):
        seq = torch.cat([seq, logits_of(model, seq)[-1].argmax().view(1)])
    return seq[prompt.numel():]


def main():
    check_pins()
    os.makedirs(OUT, exist_ok=True)
    stored = make_model(SEED)
    stored.save_pretrained(OUT)
    # What a correct float32 implementation computes: the stored bf16
    # weights upcast, float32 math.
    from transformers import Qwen3ForCausalLM
    model = Qwen3ForCausalLM.from_pretrained(OUT, dtype=torch.float32,
                                             attn_implementation="eager").eval()
    gen = torch.Generator().manual_seed(SEED + 1)
    prompts = {"prompt1": torch.randint(2, 1024, (10,), generator=gen),
               "prompt2": torch.randint(2, 1024, (4,), generator=gen)}
    tensors = {}
    info = {"pins": PINS, "seed": SEED, "checks": {}}
    smallest = float("inf")
    for name, ids in prompts.items():
        tensors[f"input_ids_{name}"] = ids.to(torch.int64)
        tensors[f"logits_{name}"] = logits_of(model, ids).float()
        g, top_ids, top_logits, margins = greedy(model, ids)
        tensors[f"greedy_{name}"] = g
        tensors[f"greedy_{name}_topk_ids"] = top_ids
        tensors[f"greedy_{name}_topk_logits"] = top_logits.float()
        tensors[f"greedy_{name}_margins"] = margins.float()
        smallest = min(smallest, float(margins.min()))
        if not torch.equal(recomputed_greedy(model, ids), g):
            sys.exit(f"make_tiny_qwen3: cached and recomputed greedy ids differ ({name})")
        f64 = logits_of(model.double(), ids).float()
        model.float()
        diff = float((f64 - tensors[f"logits_{name}"]).abs().max())
        info["checks"][f"fp64_vs_fp32_logits_{name}"] = diff
        if diff > 2e-4:
            sys.exit(f"make_tiny_qwen3: float64 and float32 logits differ by {diff} ({name})")
        info[f"greedy_{name}"] = g.tolist()
    if smallest < MIN_MARGIN:
        sys.exit(f"make_tiny_qwen3: a greedy margin is {smallest}; pick another SEED")
    info["smallest_greedy_margin"] = smallest
    length = max(p.numel() for p in prompts.values())
    batch = torch.zeros(2, length, dtype=torch.int64)
    mask = torch.zeros(2, length, dtype=torch.int64)
    for r, ids in enumerate(prompts.values()):
        batch[r, :ids.numel()] = ids
        mask[r, :ids.numel()] = 1
    with torch.no_grad():
        batched = model(input_ids=batch, attention_mask=mask).logits
    for r, name in enumerate(prompts):
        n = prompts[name].numel()
        diff = float((batched[r, :n] - tensors[f"logits_{name}"]).abs().max())
        info["checks"][f"batch_vs_single_{name}"] = diff
        if diff > 1e-4:
            sys.exit(f"make_tiny_qwen3: batched and single logits differ by {diff} ({name})")
    tensors["batch_input_ids"] = batch
    tensors["batch_attention_mask"] = mask
    tensors["rope_inv_freq"] = model.model.rotary_emb.inv_freq.float().clone()
    from safetensors.torch import save_file
    save_file({k: v.contiguous() for k, v in tensors.items()},
              os.path.join(OUT, "reference.safetensors"))
    with open(os.path.join(OUT, "reference.json"), "w") as f:
        json.dump(info, f, indent=2, sort_keys=True)
        f.write("\n")
    print(f"make_tiny_qwen3: wrote {os.path.normpath(OUT)}; smallest greedy margin {smallest:.4f}")


if __name__ == "__main__":
    main()
