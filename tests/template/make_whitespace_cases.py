#!/usr/bin/env python3
"""Writes data/whitespace_cases.jsonl: seeded random templates that mix tags,
comments, raw blocks, whitespace-control markers (-, +) and whitespace
(spaces, tabs, newlines), with the output Python Jinja2 gives for each under
transformers' settings (trim_blocks, lstrip_blocks). Whitespace handling is
where a port most easily drifts from Jinja2 by a byte, so it gets its own
table. Same row format as language_cases.jsonl. Needs jinja2 3.1.
"""
import json
import os
import random

from make_language_cases import make_env

WS = ["", " ", "  ", "\n", "\t", "\n  ", " \n", "\n\n", "x", "y\n", " z ", "\n\t "]
SIGNS_BLOCK_OPEN = ["", "-", "+"]
SIGNS_BLOCK_CLOSE = ["", "-", "+"]
SIGNS_VAR = ["", "-"]


def ws(rng):
    return rng.choice(WS)


def block(rng, body):
    o = rng.choice(SIGNS_BLOCK_OPEN)
    c = rng.choice(SIGNS_BLOCK_CLOSE)
    return "{%" + o + body + c + "%}"


def fragment(rng, depth):
    kind = rng.randrange(8 if depth < 3 else 5)
    if kind == 0:
        return "{{" + rng.choice(SIGNS_VAR) + " v " + rng.choice(SIGNS_VAR) + "}}"
    if kind == 1:
        return "{#" + rng.choice(SIGNS_BLOCK_OPEN) + " c " + rng.choice(SIGNS_BLOCK_CLOSE) + "#}"
    if kind == 2:
        return block(rng, " set s = 1 ")
    if kind == 3:
        # `{% raw +%}` is a syntax error in Jinja2; keep it rare.
        close = rng.choice(["", "-"]) if rng.random() < 0.9 else "+"
        raw = "{%" + rng.choice(SIGNS_BLOCK_OPEN) + " raw " + close + "%}"
        return raw + ws(rng) + "{{ r }}" + ws(rng) + block(rng, " endraw ")
    if kind == 4:
        return ws(rng)
    if kind == 5:
        return (block(rng, " if v " if rng.random() < 0.7 else " if not v ") + seq(rng, depth + 1) +
                (block(rng, " else ") + seq(rng, depth + 1) if rng.random() < 0.4 else "") +
                block(rng, " endif "))
    if kind == 6:
        return block(rng, " for i in [1, 2] ") + seq(rng, depth + 1) + block(rng, " endfor ")
    return block(rng, " set b ") + seq(rng, depth + 1) + block(rng, " endset ") + "[{{ b }}]"


def seq(rng, depth):
    return "".join(ws(rng) + fragment(rng, depth) for _ in range(rng.randrange(1, 4))) + ws(rng)


def main():
    env = make_env()
    rng = random.Random(20261121)
    out_path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "data",
                            "whitespace_cases.jsonl")
    rows = 0
    with open(out_path, "w", encoding="utf-8") as out:
        for i in range(600):
            template = seq(rng, 0)
            variables = {"v": "V"}
            row = {"name": f"whitespace #{i}", "template": template, "vars": variables}
            try:
                row["expected"] = env.from_string(template).render(**variables)
            except Exception:  # noqa: BLE001 - any Jinja2 failure means "error"
                row["error"] = True
            out.write(json.dumps(row, ensure_ascii=False) + "\n")
            rows += 1
    print(f"wrote {rows} cases to {out_path}")


if __name__ == "__main__":
    main()
