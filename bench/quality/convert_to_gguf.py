#!/usr/bin/env python3
"""llama.cpp's convert_hf_to_gguf.py, run on a model whose BPE pre-tokenizer
it does not know by hash: medq-demo's own tokenizer.

The converter names a BPE tokenizer's pre-tokenizer by the sha256 of the ids
it gives a fixed test string (get_vocab_base_pre) and refuses hashes it has
no entry for. medq-demo's tokenizer.json uses GPT-2's pre-tokenizer as it
is (ByteLevel, use_regex true, no prefix space, no normalizer), so where
the converter fails on exactly that hash (below), this maps it to its
"gpt-2" entry; any other unknown hash still fails. Nothing in the model
folder or the converter is edited. run checks the mapping by comparing
llama-tokenize's ids of the held-out text with medq's and transformers'.

  .venv/bin/python bench/quality/convert_to_gguf.py LLAMA_CPP_SOURCE \
      [convert_hf_to_gguf.py arguments...]
"""
import json
import os
import sys

# get_vocab_base_pre's hash of medq-demo's tokenizer (models/medq-demo).
MEDQ_DEMO_CHKHSH = "87199b73331b1d78f1e57ade7784f5a5a6b0ad79d1478bc80125d42b710c99c1"


def is_gpt2_byte_level(model_dir):
    with open(os.path.join(model_dir, "tokenizer.json"), encoding="utf-8") as f:
        t = json.load(f)
    pre = t.get("pre_tokenizer") or {}
    return (t.get("normalizer") is None and pre.get("type") == "ByteLevel"
            and pre.get("use_regex") is True and pre.get("add_prefix_space") is False
            and t["model"]["type"] == "BPE")


def main():
    source = sys.argv[1]
    sys.argv = [os.path.join(source, "convert_hf_to_gguf.py")] + sys.argv[2:]
    sys.path.insert(0, source)
    import convert_hf_to_gguf
    from conversion import base

    original = base.TextModel.get_vocab_base_pre

    def get_vocab_base_pre(self, tokenizer):
        try:
            return original(self, tokenizer)
        except NotImplementedError:
            from hashlib import sha256
            chktxt_ids = tokenizer.encode(CHKTXT)
            chkhsh = sha256(str(chktxt_ids).encode()).hexdigest()
            if chkhsh == MEDQ_DEMO_CHKHSH and is_gpt2_byte_level(str(self.dir_model)):
                print("convert_to_gguf: medq-demo's tokenizer, pre-tokenizer gpt-2",
                      file=sys.stderr)
                return "gpt-2"
            raise

    base.TextModel.get_vocab_base_pre = get_vocab_base_pre
    convert_hf_to_gguf.main()


# The converter's test string (get_vocab_base_pre's chktxt), copied.
CHKTXT = '\n \n\n \n\n\n \t \t\t \t\n  \n   \n    \n     \n🚀 (normal) 😶\u200d🌫️ (multiple emojis concatenated) ✅ 🦙🦙 3 33 333 3333 33333 333333 3333333 33333333 3.3 3..3 3...3 កាន់តែពិសេសអាច😁 ?我想在apple工作1314151天～ ------======= нещо на Български \'\'\'\'\'\'```````""""......!!!!!!?????? I\'ve been \'told he\'s there, \'RE you sure? \'M not sure I\'ll make it, \'D you like some tea? We\'Ve a\'lL'

if __name__ == "__main__":
    main()
