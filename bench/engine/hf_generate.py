#!/usr/bin/env python3
"""transformers' generate() on the checkpoints `engine_bench --keep DIR` wrote:
the peer of medq's single-stream decode (issue 42). Greedy, bf16, a prompt of
--prompt-tokens random ids and --new-tokens new ones, three ways: the static
cache in eager PyTorch (disable_compile=True), the static cache as
transformers runs it by default (it compiles the forward pass with
torch.compile on first use: the warm-up run pays for that), and the dynamic
cache.

Decode tok/s = (new - 1) / (time of new tokens - time of one token): the
prefill and the first token fall out. --repetitions runs each; the JSON gives
the median, min and max. Runs where the machine's python3 holds CUDA PyTorch
and transformers (the GPU machines'); prints one JSON document.

  python3 bench/engine/hf_generate.py DIR/SmolLM-135M DIR/Qwen2.5-0.5B
"""
import argparse
import json
import statistics
import sys
import time


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("dirs", nargs="+")
    ap.add_argument("--device", default="cuda:0")
    ap.add_argument("--prompt-tokens", type=int, default=128)
    ap.add_argument("--new-tokens", type=int, default=128)
    ap.add_argument("--repetitions", type=int, default=3)
    args = ap.parse_args()

    import torch
    import transformers
    from transformers import AutoModelForCausalLM

    device = torch.device(args.device)
    results = []
    for d in args.dirs:
        try:
            model = AutoModelForCausalLM.from_pretrained(d, dtype=torch.bfloat16)
        except TypeError:  # transformers before 4.56 names it torch_dtype
            model = AutoModelForCausalLM.from_pretrained(d, torch_dtype=torch.bfloat16)
        model = model.to(device).eval()
        vocab = model.config.vocab_size
        g = torch.Generator().manual_seed(12345)
        ids = torch.randint(3, vocab, (1, args.prompt_tokens), generator=g).to(device)
        for cache in ("static", "static-compiled", "dynamic"):
            def run(n):
                kwargs = dict(max_new_tokens=n, min_new_tokens=n, do_sample=False,
                              pad_token_id=0)
                if cache.startswith("static"):
                    kwargs["cache_implementation"] = "static"
                    kwargs["disable_compile"] = cache == "static"
                torch.cuda.synchronize(device)
                t = time.perf_counter()
                with torch.inference_mode():
                    model.generate(ids, **kwargs)
                torch.cuda.synchronize(device)
                return time.perf_counter() - t

            try:
                run(args.new_tokens)  # warm-up: kernels, cache allocation
                rates = []
                for _ in range(args.repetitions):
                    one = run(1)
                    full = run(args.new_tokens)
                    rates.append((args.new_tokens - 1) / max(full - one, 1e-9))
                results.append({"model": d.rstrip("/").split("/")[-1], "cache": cache,
                                "decode_tok_s": statistics.median(rates),
                                "decode_tok_s_min": min(rates), "decode_tok_s_max": max(rates)})
            except Exception as e:  # noqa: BLE001 - one row's failure is its row
                results.append({"model": d, "cache": cache, "error": repr(e)})
            print(json.dumps(results[-1]), file=sys.stderr)
        del model
        torch.cuda.empty_cache()
    print(json.dumps({"benchmark": "hf_generate", "transformers": transformers.__version__,
                      "torch": torch.__version__, "device": torch.cuda.get_device_name(device),
                      "prompt_tokens": args.prompt_tokens, "new_tokens": args.new_tokens,
                      "results": results}, indent=2))


if __name__ == "__main__":
    main()
