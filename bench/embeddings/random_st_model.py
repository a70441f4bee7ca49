#!/usr/bin/env python3
"""Writes a sentence-transformers folder with random weights in the shape of
all-MiniLM-L6-v2 (BERT, 6 layers, hidden 384, 12 heads, intermediate 1536,
mean pooling, Normalize, max_seq_length 256), for throughput measurements
on a machine that has no real embedding model and no network (the GPU check:
embed_clients_bench on cuda). Its tokenizer is the 64-word WordPiece one of
tests/engine/data/embeddings/tiny-bert: words outside it become [UNK], one
token a word, so the benchmark's short texts keep about the real model's
lengths (11 to 15 tokens). The vectors mean nothing; only their cost does.

Needs torch and transformers (the GPU machine's Python has both).

  python3 bench/embeddings/random_st_model.py OUT_DIR
"""
import json
import pathlib
import shutil
import sys

import torch
import transformers

SOURCE = pathlib.Path(__file__).resolve().parents[2] / "tests/engine/data/embeddings/tiny-bert"
MAX_SEQ_LENGTH = 256


def main():
    if len(sys.argv) != 2:
        sys.exit("usage: random_st_model.py OUT_DIR")
    out = pathlib.Path(sys.argv[1])
    if out.exists():
        shutil.rmtree(out)
    out.mkdir(parents=True)
    vocab = len(json.loads((SOURCE / "tokenizer.json").read_text())["model"]["vocab"])
    config = transformers.BertConfig(
        vocab_size=vocab, hidden_size=384, num_hidden_layers=6, num_attention_heads=12,
        intermediate_size=1536, max_position_embeddings=512, type_vocab_size=2)
    torch.manual_seed(0)
    transformers.BertModel(config, add_pooling_layer=False).save_pretrained(out)
    for name in ("tokenizer.json", "modules.json", "config_sentence_transformers.json"):
        shutil.copy(SOURCE / name, out / name)
    tokenizer_config = json.loads((SOURCE / "tokenizer_config.json").read_text())
    tokenizer_config["model_max_length"] = MAX_SEQ_LENGTH
    (out / "tokenizer_config.json").write_text(json.dumps(tokenizer_config, indent=2))
    (out / "sentence_bert_config.json").write_text(
        json.dumps({"max_seq_length": MAX_SEQ_LENGTH, "do_lower_case": False}, indent=2))
    (out / "1_Pooling").mkdir()
    (out / "1_Pooling/config.json").write_text(
        json.dumps({"embedding_dimension": 384, "pooling_mode": "mean"}, indent=2))
    shutil.copytree(SOURCE / "2_Normalize", out / "2_Normalize")
    print(out)


if __name__ == "__main__":
    main()
