#!/usr/bin/env python3
"""Writes the embedding references the engine's tests check against
(tests/engine/data/embeddings/), with sentence-transformers and transformers.

Run inside the checkout's .venv (torch from scripts/setup-torch), after
    .venv/bin/pip install -r tools/embeddings/requirements.txt
    scripts/setup-embedding-models
as
    .venv/bin/python tools/embeddings/make_references.py

It writes, all CPU float32:
  tiny-bert/, tiny-mpnet/   random-weight BertModel / MPNetModel
      sentence-transformers folders saved by transformers' save_pretrained
      (safetensors) and SentenceTransformer.save (mean pooling, Normalize).
  tiny-bert.json, tiny-mpnet.json   for texts of random vocabulary words,
      the ids sentence-transformers feeds the model (truncated to the
      folder's max_seq_length) and, for each variant of the folder (pooling
      modes, with and without Normalize, plain transformers folder), the
      vectors encode() returns one text at a time.
  all-MiniLM-L6-v2.json, all-mpnet-base-v2.json   for a corpus of >= 200
      texts (the same for both), the ids the Hugging Face tokenizer gives
      (truncated to the model's max_seq_length: 256 and 384) and encode()'s
      vectors, one text at a time, quantized (see QUANT below).
Deterministic: the same versions write the same files.

With arguments, writes only the files named (tiny-bert, tiny-mpnet,
all-MiniLM-L6-v2, all-mpnet-base-v2), e.g.
    .venv/bin/python tools/embeddings/make_references.py all-mpnet-base-v2
"""
import json
import os
import random
import shutil
import sys
import tempfile

import torch

PINS = {"sentence_transformers": "6.2.0", "transformers": "5.23.0", "torch": "2.15.0"}

import sentence_transformers  # noqa: E402
import transformers  # noqa: E402
from sentence_transformers import SentenceTransformer, models  # noqa: E402
from transformers import (BertConfig, BertModel, BertTokenizerFast, MPNetConfig,  # noqa: E402
                          MPNetModel, MPNetTokenizerFast)

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
OUT = os.path.join(ROOT, "tests", "engine", "data", "embeddings")
MODELS = os.path.join(ROOT, ".cache", "models")
# The real models scripts/setup-embedding-models installs into MODELS.
REAL_MODELS = ("all-MiniLM-L6-v2", "all-mpnet-base-v2")
# Real-model vectors are stored as integers round(v / QUANT): |error| <= 5e-7
# per component of a unit vector, which moves a cosine distance by < 1e-9,
# far below the tests' 1e-4, and keeps the file a few hundred KB.
QUANT = 1e-6


def check_versions():
    have = {"sentence_transformers": sentence_transformers.__version__,
            "transformers": transformers.__version__,
            "torch": torch.__version__.split("+")[0]}
    bad = {k: v for k, v in have.items() if v != PINS[k]}
    if bad:
        sys.exit(f"make_references.py: pinned {PINS}, found {have}; "
                 "install tools/embeddings/requirements.txt")
    return have


def encode_one_at_a_time(st, texts):
    return [st.encode([t], batch_size=1, convert_to_numpy=True)[0].tolist() for t in texts]


def ids_of(st, texts):
    return [st.tokenize([t])["input_ids"][0].tolist() for t in texts]


def cosine_distance(a, b):
    a, b = torch.tensor(a, dtype=torch.float64), torch.tensor(b, dtype=torch.float64)
    return float(1 - torch.nn.functional.cosine_similarity(a, b, dim=0))


def max_batch_distance(st, texts, singles):
    batched = st.encode(texts, batch_size=16, convert_to_numpy=True).tolist()
    return max(cosine_distance(a, b) for a, b in zip(batched, singles))


# --- tiny random-weight folders ------------------------------------------------

TINY_WORDS = 59


def tiny_vocab(specials):
    return specials + [f"w{i}" for i in range(TINY_WORDS)]


def build_tiny(kind, folder, tmp):
    torch.manual_seed(1234 if kind == "bert" else 4321)
    vocab_path = os.path.join(tmp, f"{kind}-vocab.txt")
    if kind == "bert":
        vocab = tiny_vocab(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"])
        config = BertConfig(vocab_size=len(vocab), hidden_size=32, num_hidden_layers=2,
                            num_attention_heads=4, intermediate_size=64,
                            max_position_embeddings=64, type_vocab_size=2,
                            initializer_range=0.2)
        model_cls, tok_cls, max_seq = BertModel, BertTokenizerFast, 24
    else:
        # MPNet's pad must be id 1 (its position ids hard-code padding_idx 1).
        vocab = tiny_vocab(["<s>", "<pad>", "</s>", "[UNK]", "<mask>"])
        # 160 positions: sequences past 128 reach the capped relative buckets.
        config = MPNetConfig(vocab_size=len(vocab), hidden_size=32, num_hidden_layers=2,
                             num_attention_heads=4, intermediate_size=64,
                             max_position_embeddings=160, relative_attention_num_buckets=32,
                             initializer_range=0.2, pad_token_id=1, bos_token_id=0,
                             eos_token_id=2)
        model_cls, tok_cls, max_seq = MPNetModel, MPNetTokenizerFast, 150
    with open(vocab_path, "w") as f:
        f.write("\n".join(vocab) + "\n")
    tokenizer = tok_cls(vocab_path)
    model = model_cls(config, add_pooling_layer=False).eval()
    # Random LayerNorm parameters and biases too (the defaults are 1 and 0).
    with torch.no_grad():
        for name, p in model.named_parameters():
            if "LayerNorm" in name or name.endswith(".bias"):
                p.copy_(torch.randn_like(p) * 0.2 + (1.0 if name.endswith("LayerNorm.weight") else 0))
    hf_dir = os.path.join(tmp, f"{kind}-hf")
    model.save_pretrained(hf_dir, safe_serialization=True)
    tokenizer.save_pretrained(hf_dir)
    st = SentenceTransformer(modules=[models.Transformer(hf_dir, max_seq_length=max_seq),
                                      models.Pooling(32, pooling_mode="mean"),
                                      models.Normalize()], device="cpu")
    shutil.rmtree(folder, ignore_errors=True)
    st.save(folder)
    for extra in ("README.md",):
        p = os.path.join(folder, extra)
        if os.path.exists(p):
            os.remove(p)
    return max_seq


# Variants the C++ test rebuilds from the committed folder: the Pooling
# config written as given (new and legacy key forms), Normalize kept or
# dropped, or modules.json removed (a plain transformers folder).
TINY_VARIANTS = [
    {"name": "mean+normalize", "pooling": {"embedding_dimension": 32, "pooling_mode": "mean",
                                           "include_prompt": True}, "normalize": True},
    {"name": "mean", "pooling": {"embedding_dimension": 32, "pooling_mode": "mean"},
     "normalize": False},
    {"name": "cls", "pooling": {"embedding_dimension": 32, "pooling_mode": "cls"},
     "normalize": False},
    {"name": "max", "pooling": {"embedding_dimension": 32, "pooling_mode": "max"},
     "normalize": True},
    {"name": "lasttoken", "pooling": {"embedding_dimension": 32, "pooling_mode": "lasttoken"},
     "normalize": False},
    {"name": "mean_sqrt_len_tokens",
     "pooling": {"embedding_dimension": 32, "pooling_mode": "mean_sqrt_len_tokens"},
     "normalize": False},
    {"name": "weightedmean", "pooling": {"embedding_dimension": 32, "pooling_mode": "weightedmean"},
     "normalize": False},
    {"name": "legacy cls+mean", "pooling": {"word_embedding_dimension": 32,
                                            "pooling_mode_cls_token": True,
                                            "pooling_mode_mean_tokens": True,
                                            "pooling_mode_max_tokens": False,
                                            "pooling_mode_mean_sqrt_len_tokens": False},
     "normalize": True},
    {"name": "legacy lasttoken", "pooling": {"word_embedding_dimension": 32,
                                             "pooling_mode_lasttoken": True},
     "normalize": True},
    {"name": "plain", "plain": True},
]


def write_variant(base, variant, dest):
    shutil.copytree(base, dest)
    if variant.get("plain"):
        for p in ("modules.json", "sentence_bert_config.json", "config_sentence_transformers.json"):
            if os.path.exists(os.path.join(dest, p)):
                os.remove(os.path.join(dest, p))
        shutil.rmtree(os.path.join(dest, "1_Pooling"))
        shutil.rmtree(os.path.join(dest, "2_Normalize"))
        return
    with open(os.path.join(dest, "1_Pooling", "config.json"), "w") as f:
        json.dump(variant["pooling"], f, indent=2)
    with open(os.path.join(dest, "modules.json")) as f:
        modules = json.load(f)
    if not variant["normalize"]:
        modules = [m for m in modules if not m["type"].endswith("Normalize")]
        shutil.rmtree(os.path.join(dest, "2_Normalize"))
    with open(os.path.join(dest, "modules.json"), "w") as f:
        json.dump(modules, f, indent=2)


def tiny_texts(max_seq, rng):
    lengths = [0, 1, 2, 3, 5, 8, 9, 13, 17, max_seq - 2, max_seq - 1, max_seq + 7]
    lengths += [rng.randint(1, max_seq + 10) for _ in range(8)]
    return [" ".join(f"w{rng.randrange(TINY_WORDS)}" for _ in range(n)) for n in lengths]


def make_tiny(kind, tmp):
    folder = os.path.join(OUT, f"tiny-{kind}")
    max_seq = build_tiny(kind, folder, tmp)
    texts = tiny_texts(max_seq, random.Random(7 if kind == "bert" else 8))
    variants = []
    batch_worst = 0.0
    for i, v in enumerate(TINY_VARIANTS):
        dest = os.path.join(tmp, f"{kind}-variant-{i}")
        write_variant(folder, v, dest)
        st = SentenceTransformer(dest, device="cpu")
        if i == 0:
            ids = ids_of(st, texts)
        assert ids_of(st, texts) == ids, v["name"]
        vectors = encode_one_at_a_time(st, texts)
        batch_worst = max(batch_worst, max_batch_distance(st, texts, vectors))
        entry = {k: v[k] for k in ("name", "pooling", "normalize", "plain") if k in v}
        entry["dims"] = len(vectors[0])
        entry["vectors"] = [[float(f"{x:.8g}") for x in vec] for vec in vectors]
        variants.append(entry)
    return {"model": f"tiny-{kind}", "max_seq_length": max_seq, "texts": texts, "ids": ids,
            "variants": variants, "batched_vs_single_max_cosine_distance": batch_worst}


# --- the real model's corpus ---------------------------------------------------

def real_corpus():
    texts = [
        "", " ", "   \t\n  ", "\u200b", "\u0301", "\u200b\u200d\ufeff", "\x00\x01\x7f",
        "Hello world", "hello world", "HELLO WORLD!!!", "The quick brown fox jumps over the lazy dog.",
        "A man is eating food.", "A man is eating a piece of bread.", "The girl is carrying a baby.",
        "A man is riding a horse.", "A woman is playing violin.", "Two men pushed carts through the woods.",
        "A man is riding a white horse on an enclosed ground.", "A monkey is playing drums.",
        "Someone in a gorilla costume is playing a set of drums.",
        "café", "Café crème", "naïve résumé", "Ångström", "Crème brûlée à la française",
        "São Paulo e Brasília", "Ærøskøbing", "Dvořák's Symphony No. 9", "El niño comió piña",
        "e\u0301te\u0301 (decomposed accents)", "ﬁnancial ﬂow ligatures", "Ｆｕｌｌｗｉｄｔｈ ｔｅｘｔ",
        "中文句子的嵌入测试", "我爱北京天安门", "日本語のテキストです。", "東京は日本の首都です",
        "한국어 문장입니다", "混合 mixed 文本 text", "漢字かなカナ漢字", "𠀀𠀁 rare CJK extension B",
        "Emoji 😀 test", "🎉🎉🎉", "👩‍👩‍👧‍👦 family", "I ❤️ NY", "thumbs 👍🏽 up", "🇺🇸🇫🇷 flags",
        "Привет, мир!", "Γειά σου Κόσμε", "مرحبا بالعالم", "שלום עולם", "नमस्ते दुनिया", "สวัสดีชาวโลก",
        "https://example.com/path?q=1&r=2#frag", "user@example.org wrote:", "C++ templates <T>",
        "def f(x): return x ** 2", "SELECT * FROM t WHERE id = 42;", "3.14159 2.71828 1.41421",
        "1,000,000 dollars", "$5.99 / €4.50 / £3.20 / ¥500", "Mr. O'Neil's can't-won't rock'n'roll",
        "!!!???...", "--- *** ###", "a", "I", ".", "[CLS] [SEP] [MASK] [PAD]", "[UNK]",
        "unaffable", "supercalifragilisticexpialidocious", "antidisestablishmentarianism",
        "tab\tseparated\tvalues", "line\nbreaks\r\nhere", "non\u00a0breaking\u00a0space",
        "soft\u00adhyphen", "zero\u200bwidth", "mIxEd CaSe WoRdS",
    ]
    # Plain sentences built from a fixed vocabulary: many short and medium texts.
    rng = random.Random(2024)
    subjects = ["The doctor", "A patient", "My neighbour", "The committee", "Our team",
                "The old library", "A small dog", "The engineer", "Every student", "The market"]
    verbs = ["reviewed", "ignored", "celebrated", "described", "questioned", "measured",
             "painted", "repaired", "predicted", "organised"]
    objects = ["the annual report", "a broken window", "the river at dawn", "new vaccine trials",
               "the quarterly budget", "an ancient map", "the football match", "a jazz concert",
               "the weather forecast", "several blood samples"]
    tails = ["", " yesterday", " with great care", " before lunch", " in Paris",
             " despite the rain", " for the third time", " quietly", " under pressure", " again"]
    for _ in range(90):
        texts.append(f"{rng.choice(subjects)} {rng.choice(verbs)} {rng.choice(objects)}"
                     f"{rng.choice(tails)}.")
    # Multi-sentence and very long texts (past 256 / 384 tokens: truncated).
    words = ("medicine research patient clinical trial data analysis hospital treatment "
             "diagnosis symptoms therapy outcome cohort study result evidence review").split()
    for n in (40, 120, 250, 254, 255, 300, 600, 1200):
        texts.append(" ".join(rng.choice(words) for _ in range(n)))
    texts.append("中文" * 400)
    texts.append("😀" * 300)
    texts.append("é" * 2000)
    texts.append(("Lorem ipsum dolor sit amet, consectetur adipiscing elit. " * 40).strip())
    texts.append("word " * 253)
    texts.append("x" * 5000)
    # Mixed scripts in one text.
    for i in range(20):
        parts = [rng.choice(["health", "santé", "健康", "здоровье", "صحة", "😷", "1234", "Ωμέγα"])
                 for _ in range(rng.randint(1, 30))]
        texts.append(" ".join(parts))
    return texts


def make_real(name):
    st = SentenceTransformer(os.path.join(MODELS, name), device="cpu")
    texts = real_corpus()
    assert len(texts) >= 200, len(texts)
    ids = ids_of(st, texts)
    vectors = encode_one_at_a_time(st, texts)
    batch_worst = max_batch_distance(st, texts, vectors)
    return {"model": name, "max_seq_length": st.max_seq_length,
            "quant": QUANT, "dims": len(vectors[0]), "texts": texts, "ids": ids,
            "vectors": [[round(x / QUANT) for x in v] for v in vectors],
            "batched_vs_single_max_cosine_distance": batch_worst}


def dump(obj, name):
    path = os.path.join(OUT, name)
    with open(path, "w", encoding="utf-8") as f:
        # One line per list of numbers keeps the file small and diffable.
        f.write(json.dumps(obj, ensure_ascii=False, separators=(",", ":")))
        f.write("\n")
    print(f"wrote {os.path.relpath(path, ROOT)} ({os.path.getsize(path)} bytes)")


def main():
    versions = check_versions()
    wanted = sys.argv[1:] or ["tiny-bert", "tiny-mpnet", *REAL_MODELS]
    unknown = set(wanted) - {"tiny-bert", "tiny-mpnet", *REAL_MODELS}
    if unknown:
        sys.exit(f"make_references.py: unknown reference(s) {sorted(unknown)}")
    torch.set_num_threads(1)
    os.makedirs(OUT, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        for kind in ("bert", "mpnet"):
            if f"tiny-{kind}" not in wanted:
                continue
            ref = make_tiny(kind, tmp)
            ref["versions"] = versions
            dump(ref, f"tiny-{kind}.json")
    for name in REAL_MODELS:
        if name not in wanted:
            continue
        if not os.path.exists(os.path.join(MODELS, name, "model.safetensors")):
            sys.exit(f"make_references.py: {name} is not installed; "
                     "run scripts/setup-embedding-models first")
        ref = make_real(name)
        ref["versions"] = versions
        dump(ref, f"{name}.json")


if __name__ == "__main__":
    main()
