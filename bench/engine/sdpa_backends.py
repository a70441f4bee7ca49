#!/usr/bin/env python3
"""Decode-step attention on a CUDA device, backend by backend.

The engine's decode calls scaled_dot_product_attention with one query
position against keys that grow by one each step (q: [1, heads, 1, D],
k and v: [1, kv_heads, S, D], enable_gqa). For each model shape, dtype and
backend this times one call at a key length seen for the first time (as
every decode step is) and at a length seen before, and names the backend
PyTorch picks by default. Prints one JSON document. Needs a CUDA PyTorch of
2.5 or later (enable_gqa); runs in its own python3, no packages beyond it.
"""
import json
import statistics
import sys
import time

import torch
from torch.nn.attention import SDPBackend, sdpa_kernel
import torch.nn.functional as F

SHAPES = {"SmolLM-135M": (9, 3, 64), "Qwen2.5-0.5B": (14, 2, 64)}
BACKENDS = {
    "default": None,
    "flash": SDPBackend.FLASH_ATTENTION,
    "efficient": SDPBackend.EFFICIENT_ATTENTION,
    "cudnn": SDPBackend.CUDNN_ATTENTION,
    "math": SDPBackend.MATH,
}


def call(q, k, v, backend):
    if backend is None:
        return F.scaled_dot_product_attention(q, k, v, enable_gqa=True)
    with sdpa_kernel([backend]):
        return F.scaled_dot_product_attention(q, k, v, enable_gqa=True)


def ms(fn):
    torch.cuda.synchronize()
    t = time.perf_counter()
    fn()
    torch.cuda.synchronize()
    return (time.perf_counter() - t) * 1e3


def measure(heads, kv_heads, d, dtype, backend, first, count):
    dev = torch.device("cuda:0")
    new, seen = [], []
    for s in range(first, first + count):
        q = torch.randn(1, heads, 1, d, device=dev, dtype=dtype)
        k = torch.randn(1, kv_heads, s, d, device=dev, dtype=dtype)
        v = torch.randn(1, kv_heads, s, d, device=dev, dtype=dtype)
        new.append(ms(lambda: call(q, k, v, backend)))
        seen.append(ms(lambda: call(q, k, v, backend)))
    return {"new_length_ms": statistics.median(new), "seen_length_ms": statistics.median(seen)}


def main():
    out = {"benchmark": "sdpa_backends", "torch": torch.__version__,
           "device": torch.cuda.get_device_name(0),
           "cudnn_sdp_enabled": torch.backends.cuda.cudnn_sdp_enabled(), "results": []}
    # Warm up the context and each backend's module load on lengths not timed.
    for heads, kv_heads, d in SHAPES.values():
        for backend in BACKENDS.values():
            for dtype in (torch.bfloat16, torch.float32):
                try:
                    measure(heads, kv_heads, d, dtype, backend, 8, 2)
                except RuntimeError:
                    pass
    # Each backend its own key lengths: a backend that caches per shape must
    # not find the lengths another one has just built for.
    first = 200
    for name, (heads, kv_heads, d) in SHAPES.items():
        for dtype in (torch.bfloat16, torch.float32):
            for label, backend in BACKENDS.items():
                row = {"shape": name, "dtype": str(dtype).replace("torch.", ""),
                       "backend": label, "first_length": first}
                first += 40
                try:
                    row.update(measure(heads, kv_heads, d, dtype, backend, row["first_length"],
                                       40))
                except RuntimeError as e:
                    row["error"] = str(e).splitlines()[0][:120]
                out["results"].append(row)
                print(json.dumps(row), file=sys.stderr)
    print(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
