#!/usr/bin/env python3
"""Writes data/expression_cases.jsonl: seeded random expressions (literals,
operators, filters, tests, methods, slices) printed with `{{ ... }}`, with
what Python Jinja2 prints for each or whether it raises, under transformers'
settings. Catches drift in Python semantics: int/float arithmetic and
printing, repr of containers, truthiness, comparisons, type errors. Same row
format as language_cases.jsonl. Needs jinja2 3.1.
"""
import json
import os
import random

from make_language_cases import make_env

ATOMS = ["0", "1", "2", "7", "-3", "10", "0.5", "2.0", "1e-05", "1.5e20", "-0.0", "'a'", "'Hé'",
         "''", "' x '", "'a,b'", "none", "true", "false", "[]", "[1, 2]", "['b', 'A', 'c']",
         "(1, 'x')", "{}", "{'k': 1, 'j': [2]}", "v", "n", "s", "l", "d", "missing"]
BINOPS = ["+", "-", "*", "/", "//", "%", "~", "==", "!=", "<", ">=", "in", "not in", "and", "or"]
# Filters that return lazy generators in Jinja2 are followed by |list, as
# templates use them, so that their errors surface and nothing prints as
# "<generator object ... at 0x...>".
FILTERS = ["length", "upper", "lower", "string", "tojson", "first", "last", "list",
           "reverse|list", "sort", "unique|list", "join", "join(', ')", "trim", "int", "float",
           "abs", "round", "round(1)", "default('D')", "default('D', true)", "capitalize",
           "title", "items|list", "dictsort", "min", "max", "sum", "replace('a', 'b')",
           "indent(2)", "count", "select|list", "map('string')|list", "tojson(indent=1)"]
TESTS = ["defined", "undefined", "none", "string", "number", "integer", "float", "mapping",
         "iterable", "sequence", "boolean", "true", "false", "odd", "even", "eq 1", "in [1, 'a']"]
METHODS = ["strip()", "upper()", "split(',')", "startswith('a')", "endswith('b')", "title()",
           "replace('a', 'z')", "lstrip('a')", "get('k')",
           "get('z', 0)", "count(1)", "index(2)", "format(1)"]
SLICES = ["[0]", "[-1]", "[1:]", "[::-1]", "[:1]", "['k']", ".k", "[5]"]


def expr(rng, depth):
    r = rng.random()
    if depth >= 3 or r < 0.3:
        return rng.choice(ATOMS)
    if r < 0.55:
        return f"({expr(rng, depth + 1)} {rng.choice(BINOPS)} {expr(rng, depth + 1)})"
    if r < 0.7:
        return f"({expr(rng, depth + 1)}|{rng.choice(FILTERS)})"
    if r < 0.78:
        neg = "not " if rng.random() < 0.3 else ""
        return f"({expr(rng, depth + 1)} is {neg}{rng.choice(TESTS)})"
    if r < 0.86:
        return f"{rng.choice(ATOMS)}.{rng.choice(METHODS)}"
    if r < 0.93:
        # Jinja2 folds constant subexpressions at compile time, where a
        # failing subscript quietly becomes Undefined; at run time the same
        # subscript raises. Templates subscript variables, so test that.
        inner = rng.choice(["v", "n", "s", "l", "d", "missing"])
        if rng.random() < 0.5:
            inner += "|" + rng.choice(FILTERS)
        return f"({inner}){rng.choice(SLICES)}"
    if r < 0.97:
        return f"({expr(rng, depth + 1)} if {expr(rng, depth + 1)} else {expr(rng, depth + 1)})"
    return f"(not {expr(rng, depth + 1)})"


def main():
    env = make_env()
    rng = random.Random(1121)
    variables = {"v": 3, "n": None, "s": "a,b", "l": [3, 1, 2], "d": {"k": "v", "a": 1.5}}
    out_path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "data",
                            "expression_cases.jsonl")
    seen = set()
    rows = 0
    with open(out_path, "w", encoding="utf-8") as out:
        while len(seen) < 1500:
            e = expr(rng, 0)
            if e in seen:
                continue
            seen.add(e)
            template = "{{ " + e + " }}"
            row = {"name": f"expression {e}", "template": template, "vars": variables}
            try:
                row["expected"] = env.from_string(template).render(**variables)
            except Exception:  # noqa: BLE001 - any Jinja2 failure means "error"
                row["error"] = True
            # Jinja2's select/map/unique/items/... return lazy generators whose
            # printed form holds a memory address (and whose errors only
            # surface when consumed); such rows say nothing about templates.
            if "<generator object" in row.get("expected", ""):
                continue
            out.write(json.dumps(row, ensure_ascii=False) + "\n")
            rows += 1
    print(f"wrote {rows} cases to {out_path}")


if __name__ == "__main__":
    main()
