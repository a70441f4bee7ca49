#!/usr/bin/env python3
"""Writes tests/engine/data/prequantized: one tiny random Llama, quantized to
4 bits and saved in the checkpoint formats people download for 7B models, so
that the engine's tests load each format and check what medq unpacks against
what the format denotes (daemon/engine/prequantized.h).

  awq-gemm-g64      AutoAWQ's GEMM packing, asymmetric, groups of 64
  gptq-sym-g128     auto-gptq's format (checkpoint_format "gptq", zeros
                    stored minus one), symmetric, groups of 128
  gptq-asym-g32     the same, asymmetric, groups of 32

Each folder holds config.json (a Llama config with its quantization_config),
model.safetensors (the checkpoint) and reference.safetensors: for every
projection P, P.q uint8 [out, in / 2] (the codes q in 0..15 two to a byte,
in plain row order: column 2k in the low nibble of byte k, 2k + 1 in the
high one), P.z uint8 [out, in / group] (the zeros the format denotes, 0..16)
and P.scales float32 [out, in / group] (the checkpoint's fp16 scale, widened
exactly), so that the dequantized float32 weight the format denotes is
(q - z) * s (each product exact in float32: 5 bits times 11). The reference
is the factored form of the dequantized weights because the float32
matrices would be eight times the checkpoint's size (the folder is about
400 KB as it is).

Independent of medq's C++: the packing follows the formats' published code
(AutoAWQ's WQLinear_GEMM.from_linear and its unpack_awq/reverse_awq_order,
auto-gptq's QuantLinear.pack and its dequantization), written here again
with torch integer operations. The script packs, then unpacks what it
packed with the published decoding and checks that it gives back the codes
it meant; the references are what the unpacking gives. autoawq, auto-gptq
and optimum need CUDA builds and are not used.

Run inside the checkout's .venv (torch from scripts/setup-torch), as
    .venv/bin/python tools/model_fixtures/make_prequantized.py
Deterministic: the same versions write the same files.
"""
import json
import os
import sys

import torch
from safetensors.torch import save_file

PINS = {"torch": "2.15.0", "safetensors": "0.8.0"}
OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tests", "engine",
                   "data", "prequantized")
SEED = 20261128
HIDDEN, INTER, HEADS, KV_HEADS, VOCAB, LAYERS = 128, 128, 4, 2, 32, 1
HEAD_DIM = HIDDEN // HEADS
AWQ_ORDER = [0, 2, 4, 6, 1, 3, 5, 7]          # nibble i holds output column 8c + AWQ_ORDER[i]
AWQ_REVERSE_ORDER = [0, 4, 1, 5, 2, 6, 3, 7]  # output column 8c + j is nibble AWQ_REVERSE_ORDER[j]


def check_pins():
    import safetensors
    have = {"torch": torch.__version__.split("+")[0], "safetensors": safetensors.__version__}
    for name, want in PINS.items():
        if have[name] != want:
            sys.exit(f"make_prequantized: {name} {have[name]} is installed; the references "
                     f"were made with {want}")


def projections():
    """(name, out, in) of every projection, as Hugging Face names them."""
    out = []
    for i in range(LAYERS):
        p = f"model.layers.{i}."
        out += [(p + "self_attn.q_proj", HEADS * HEAD_DIM, HIDDEN),
                (p + "self_attn.k_proj", KV_HEADS * HEAD_DIM, HIDDEN),
                (p + "self_attn.v_proj", KV_HEADS * HEAD_DIM, HIDDEN),
                (p + "self_attn.o_proj", HIDDEN, HEADS * HEAD_DIM),
                (p + "mlp.gate_proj", INTER, HIDDEN),
                (p + "mlp.up_proj", INTER, HIDDEN),
                (p + "mlp.down_proj", HIDDEN, INTER)]
    return out


def to_int32(x):
    """int64 holding 32-bit patterns -> int32 with the same bits."""
    x = x & 0xFFFFFFFF
    return torch.where(x >= 2**31, x - 2**32, x).to(torch.int32)


def pack_rows(codes, order):
    """codes int64 [r, 8k] in 0..15 -> int32 [r, k]: nibble i of word c holds
    column 8c + order[i] (packing along the last dimension)."""
    r, n = codes.shape
    words = torch.zeros(r, n // 8, dtype=torch.int64)
    for i in range(8):
        words |= codes[:, order[i]::8] << (4 * i)
    return to_int32(words)


def nibbles(words):
    """int32 [r, k] -> int64 [r, 8k], nibble i of word c at column 8c + i."""
    w = words.to(torch.int64) & 0xFFFFFFFF
    shifts = torch.arange(0, 32, 4, dtype=torch.int64)
    return ((w[:, :, None] >> shifts[None, None, :]) & 0xF).reshape(w.shape[0], -1)


def quantize(w, group, sym, awq):
    """w float32 [out, in] -> (q [out, in], z [out, in / group], s fp16
    [out, in / group]) as each tool's quantizer computes them (round to
    nearest; GPTQ's error feedback changes which codes, not what they mean)."""
    out, inp = w.shape
    g = w.reshape(out, inp // group, group)
    lo, hi = g.amin(dim=2), g.amax(dim=2)
    if awq:  # AutoAWQ pseudo_quantize_tensor, zero_point=True
        s = ((hi - lo).clamp(min=1e-5) / 15).half()
        z = (-torch.round(lo / s.float())).clamp(0, 15)
    elif sym:  # auto-gptq Quantizer, sym: zero fixed at (maxq + 1) / 2
        amax = torch.maximum(lo.abs(), hi)
        s = (2 * amax / 15).half()
        z = torch.full_like(amax, 8.0)
    else:  # auto-gptq Quantizer, asym: the range always holds 0
        lo, hi = lo.clamp(max=0), hi.clamp(min=0)
        s = ((hi - lo) / 15).half()
        z = torch.round(-lo / s.float())
    q = (torch.round(g / s.float()[:, :, None]) + z[:, :, None]).clamp(0, 15)
    return q.reshape(out, inp).to(torch.int64), z.to(torch.int64), s


def write_awq(w, group):
    """AutoAWQ GEMM: qweight [in, out/8] and qzeros [in/group, out/8] packed
    along the output in AWQ_ORDER, scales fp16 [in/group, out]; w = (q - z) s."""
    q, z, s = quantize(w, group, sym=False, awq=True)
    tensors = {"qweight": pack_rows(q.t().contiguous(), AWQ_ORDER),
               "qzeros": pack_rows(z.t().contiguous(), AWQ_ORDER),
               "scales": s.t().contiguous()}
    # The published unpacking: nibbles in bit order, then AWQ_REVERSE_ORDER.
    rev = torch.arange(w.shape[0]).reshape(-1, 8)[:, AWQ_REVERSE_ORDER].reshape(-1)
    uq = nibbles(tensors["qweight"])[:, rev].t()
    uz = nibbles(tensors["qzeros"])[:, rev].t()
    return tensors, uq, uz, tensors["scales"].t()


def write_gptq(w, group, sym):
    """auto-gptq (checkpoint_format "gptq"): qweight [in/8, out] packed along
    the input, low nibble first; qzeros [in/group, out/8] along the output,
    low nibble first, holding z - 1; scales fp16 [in/group, out]; g_idx
    [in] = i / group; w = (q - (stored + 1)) s."""
    q, z, s = quantize(w, group, sym=sym, awq=False)
    if (z == 0).any():
        sys.exit("make_prequantized: a GPTQ zero of 0, which the v1 format cannot store")
    inp = w.shape[1]
    tensors = {"qweight": pack_rows(q, list(range(8))).t().contiguous(),
               "qzeros": pack_rows((z - 1).t().contiguous(), list(range(8))),
               "scales": s.t().contiguous(),
               "g_idx": (torch.arange(inp) // group).to(torch.int32)}
    # The published unpacking: qweight's nibbles down the input, zeros + 1.
    uq = nibbles(tensors["qweight"].t().contiguous())
    uz = (nibbles(tensors["qzeros"]) + 1).t()
    return tensors, uq, uz, tensors["scales"].t()


def config(qconfig):
    return {"architectures": ["LlamaForCausalLM"], "model_type": "llama",
            "vocab_size": VOCAB, "hidden_size": HIDDEN, "intermediate_size": INTER,
            "num_hidden_layers": LAYERS, "num_attention_heads": HEADS,
            "num_key_value_heads": KV_HEADS, "max_position_embeddings": 256,
            "rms_norm_eps": 1e-5, "rope_theta": 10000.0, "hidden_act": "silu",
            "tie_word_embeddings": True, "torch_dtype": "float16", "bos_token_id": 1,
            "eos_token_id": 2, "quantization_config": qconfig}


FORMATS = {
    "awq-gemm-g64": ({"quant_method": "awq", "bits": 4, "group_size": 64, "zero_point": True,
                      "version": "gemm", "modules_to_not_convert": None},
                     lambda w: write_awq(w, 64)),
    "gptq-sym-g128": ({"quant_method": "gptq", "bits": 4, "group_size": 128, "desc_act": False,
                       "sym": True, "true_sequential": True, "damp_percent": 0.01,
                       "static_groups": False, "checkpoint_format": "gptq"},
                      lambda w: write_gptq(w, 128, sym=True)),
    "gptq-asym-g32": ({"quant_method": "gptq", "bits": 4, "group_size": 32, "desc_act": False,
                       "sym": False, "true_sequential": True, "damp_percent": 0.01,
                       "static_groups": False, "checkpoint_format": "gptq"},
                      lambda w: write_gptq(w, 32, sym=False)),
}


def main():
    check_pins()
    torch.manual_seed(SEED)
    # The fp32 model: weights of about the scale trained ones have, a few
    # larger ones so that groups differ in range.
    base = {"model.embed_tokens.weight": torch.randn(VOCAB, HIDDEN) * 0.5,
            "model.norm.weight": 1 + 0.1 * torch.randn(HIDDEN)}
    for i in range(LAYERS):
        p = f"model.layers.{i}."
        base[p + "input_layernorm.weight"] = 1 + 0.1 * torch.randn(HIDDEN)
        base[p + "post_attention_layernorm.weight"] = 1 + 0.1 * torch.randn(HIDDEN)
    weights = {}
    for name, out, inp in projections():
        w = torch.randn(out, inp) / inp**0.5
        w *= torch.where(torch.rand(out, inp) < 0.01, 4.0, 1.0)
        weights[name] = w
    summary = {"versions": PINS, "seed": SEED, "formats": {}}
    for folder, (qconfig, write) in FORMATS.items():
        group = qconfig["group_size"]
        ckpt = {k: v.half() for k, v in base.items()}
        ref = {}
        max_error = 0.0
        for name, out, inp in projections():
            tensors, uq, uz, us = write(weights[name])
            q, z, s = quantize(weights[name], group, sym=qconfig.get("sym", False),
                               awq=qconfig["quant_method"] == "awq")
            if not (torch.equal(uq, q) and torch.equal(uz, z) and torch.equal(us, s)):
                sys.exit(f"make_prequantized: {folder} {name}: unpacking does not give back "
                         "the codes packed")
            for k, v in tensors.items():
                ckpt[f"{name}.{k}"] = v
            codes = uq - uz.repeat_interleave(group, dim=1)
            # q two to a byte in plain row order (even columns low), z a byte.
            ref[name + ".q"] = (uq[:, 0::2] | uq[:, 1::2] << 4).to(torch.uint8).contiguous()
            ref[name + ".z"] = uz.to(torch.uint8).contiguous()
            ref[name + ".scales"] = us.float().contiguous()
            deq = codes.double() * us.double().repeat_interleave(group, dim=1)
            max_error = max(max_error, (deq - weights[name].double()).abs().max().item())
        d = os.path.join(OUT, folder)
        os.makedirs(d, exist_ok=True)
        with open(os.path.join(d, "config.json"), "w") as f:
            json.dump(config(qconfig), f, indent=2)
            f.write("\n")
        save_file(ckpt, os.path.join(d, "model.safetensors"), metadata={"format": "pt"})
        save_file(ref, os.path.join(d, "reference.safetensors"), metadata={"format": "pt"})
        summary["formats"][folder] = {"quantization_config": qconfig,
                                      "max_abs_quantization_error": max_error}
    with open(os.path.join(OUT, "reference.json"), "w") as f:
        json.dump(summary, f, indent=2)
        f.write("\n")


if __name__ == "__main__":
    main()
