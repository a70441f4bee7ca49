#!/usr/bin/env python3
"""Builds the fuzz targets' seed folders from the reference fixtures and the
hand-written seeds in tests/fuzz/seeds/<target>/.

usage: make_seeds.py FIXTURES_DIR SEEDS_DIR OUT_DIR

The fixtures' tokenizers and weights are megabytes: each becomes a small seed
of the same shape (the first vocabulary entries and merges, a few tensors of
at most 2 elements per dimension), so that one execution stays fast and
libFuzzer's input size limit stays near real headers and configs.
"""
import json
import pathlib
import shutil
import struct
import sys

VOCAB_KEEP = 1000  # GPT-2-style byte tokens and SentencePiece byte fallbacks are the first ids
MERGES_KEEP = 500
ADDED_KEEP = 16
TENSORS_KEEP = 8


def write(out, target, name, data):
    folder = out / target
    folder.mkdir(parents=True, exist_ok=True)
    (folder / name).write_bytes(data if isinstance(data, bytes) else data.encode())


def dumps(obj):
    return json.dumps(obj, ensure_ascii=False, indent=1)


def shrink_tokenizer(tok):
    model = tok["model"]
    vocab = model.get("vocab")
    if isinstance(vocab, dict):
        model["vocab"] = {k: v for k, v in vocab.items() if v < VOCAB_KEEP}
        kept = model["vocab"]
        merges = []
        for m in model.get("merges", []):
            a, b = m.split(" ", 1) if isinstance(m, str) else m
            if a in kept and b in kept and a + b in kept:
                merges.append(m)
            if len(merges) >= MERGES_KEEP:
                break
        model["merges"] = merges
    elif isinstance(vocab, list):  # Unigram-style [piece, score] lists
        model["vocab"] = vocab[:VOCAB_KEEP]
    tok["added_tokens"] = tok.get("added_tokens", [])[:ADDED_KEEP]
    return tok


def small_config(config):
    # added_tokens_decoder is most of llama3's file and the template does not read it.
    config.pop("added_tokens_decoder", None)
    return config


def tokenizers(fixtures, out):
    for folder in sorted((fixtures / "tokenizers").iterdir()):
        tok_path = folder / "tokenizer.json"
        if not tok_path.is_file():
            continue
        tok = shrink_tokenizer(json.loads(tok_path.read_text()))
        config_path = folder / "tokenizer_config.json"
        config = small_config(json.loads(config_path.read_text())) if config_path.is_file() else None
        write(out, "tokenizer", folder.name, dumps(tok))
        if config is not None:
            no_template = {k: v for k, v in config.items() if k != "chat_template"}
            write(out, "tokenizer", folder.name + "+config", dumps(tok) + "\0" + dumps(no_template))
            write(out, "tokenizer_config", folder.name, dumps(config))
            templates = config.get("chat_template")
            if isinstance(templates, str):
                templates = [{"name": "default", "template": templates}]
            for entry in templates or []:
                write(out, "chat_template", folder.name + "-" + entry["name"], entry["template"])


def safetensors_seed(path):
    with open(path, "rb") as f:
        (length,) = struct.unpack("<Q", f.read(8))
        header = json.loads(f.read(length))
    sizes = {"F64": 8, "F32": 4, "F16": 2, "BF16": 2, "I64": 8, "I32": 4, "I16": 2, "I8": 1,
             "U8": 1, "BOOL": 1}
    small = {}
    if "__metadata__" in header:
        small["__metadata__"] = header["__metadata__"]
    offset = 0
    for name, entry in list((k, v) for k, v in header.items() if k != "__metadata__")[:TENSORS_KEEP]:
        shape = [min(d, 2) for d in entry["shape"]]
        n = sizes[entry["dtype"]]
        for d in shape:
            n *= d
        small[name] = {"dtype": entry["dtype"], "shape": shape, "data_offsets": [offset, offset + n]}
        offset += n
    text = json.dumps(small, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 8)
    return struct.pack("<Q", len(text)) + text + bytes(i % 251 for i in range(offset))


def models(fixtures, out):
    for folder in sorted((fixtures / "models").iterdir()):
        config = folder / "config.json"
        generation = folder / "generation_config.json"
        if config.is_file():
            data = config.read_bytes()
            if generation.is_file():
                data += b"\0" + generation.read_bytes()
            write(out, "model_config", folder.name, data)
        adapter = folder / "adapter_config.json"
        if adapter.is_file():
            write(out, "adapter_config", folder.name, adapter.read_bytes())
        for st in sorted(folder.glob("*.safetensors")):
            write(out, "safetensors", folder.name + "-" + st.stem, safetensors_seed(st))


def main():
    fixtures, seeds, out = (pathlib.Path(a) for a in sys.argv[1:4])
    if out.exists():
        shutil.rmtree(out)
    out.mkdir(parents=True)
    if (fixtures / "tokenizers").is_dir():
        tokenizers(fixtures, out)
    if (fixtures / "models").is_dir():
        models(fixtures, out)
    for folder in sorted(p for p in seeds.iterdir() if p.is_dir()):
        for seed in sorted(folder.iterdir()):
            write(out, folder.name, "hand-" + seed.name, seed.read_bytes())


if __name__ == "__main__":
    main()
