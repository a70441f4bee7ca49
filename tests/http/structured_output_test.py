#!/usr/bin/env python3
"""Structured output against a running medqd: every answer valid JSON under
its schema, checked by the reference validator (`jsonschema`).

  structured_output_test.py --base-url http://127.0.0.1:PORT/v1 --socket SOCKET
                            --models M1,M2 [--quick]

A corpus of JSON Schemas (SCHEMAS below, over 50, every keyword medq
enforces) times three prompts, for each model: the first prompt through the
official `openai` client's chat completions, the second streamed, the third
over the socket's generate op; then the whole corpus again with eight
requests at once (the daemon runs them as one batch, each sequence with its
own grammar). Each answer must end with finish_reason "stop" and validate.
Also: json_object answers are objects, unsupported keywords are 400 naming
them. --quick runs a third of the corpus (the sanitizer legs).
Exit 0: passed; 77: skipped (no `openai` or `jsonschema`); else failed.
"""

import argparse
import concurrent.futures
import json
import socket
import sys

try:
    import jsonschema
    import openai
except ImportError as e:
    print(f"MEDQ-SKIPPED: {e.name} is not installed (scripts/setup-http-tests)")
    sys.exit(77)


def s(length=8):
    return {"type": "string", "maxLength": length}


def obj(props, required=None, **extra):
    out = {"type": "object", "properties": props,
           "required": list(props) if required is None else required,
           "additionalProperties": False}
    out.update(extra)
    return out


# Strings are bounded (maxLength, enum, pattern, format) and numbers ranged,
# so that a model with random weights ends its documents within the budget;
# the validity checked is the schema's whole, required keys included.
SCHEMAS = [
    {"type": "boolean"},
    {"type": "null"},
    {"type": "integer", "minimum": 0, "maximum": 9},
    {"type": "integer", "minimum": -50, "maximum": 50},
    {"type": "integer", "exclusiveMinimum": 0, "exclusiveMaximum": 100},
    {"enum": ["yes", "no", "unsure"]},
    {"const": "fixed"},
    s(1),
    s(12),
    {"type": "string", "minLength": 2, "maxLength": 4},
    {"type": "string", "pattern": "^[A-Z][0-9]{2}(\\.[0-9])?$"},
    {"type": "string", "pattern": "^(mg|ml|g)$"},
    {"type": "string", "format": "date"},
    {"type": "string", "format": "date-time"},
    {"type": "string", "format": "time"},
    {"type": "string", "format": "uuid"},
    {"type": "string", "format": "ipv4"},
    {"type": ["string", "null"], "maxLength": 5},
    {"anyOf": [{"type": "integer", "minimum": 0, "maximum": 5}, {"type": "null"}]},
    {"anyOf": [s(3), {"type": "boolean"}]},
    {"type": "array", "items": {"type": "boolean"}, "maxItems": 3},
    {"type": "array", "items": s(4), "minItems": 1, "maxItems": 2},
    {"type": "array", "items": {"type": "integer", "minimum": 0, "maximum": 99}, "maxItems": 4},
    {"type": "array", "items": {"enum": ["a", "b"]}, "minItems": 2, "maxItems": 2},
    obj({}),
    obj({"ok": {"type": "boolean"}}),
    obj({"name": s()}),
    obj({"age": {"type": "integer", "minimum": 0, "maximum": 120}}),
    obj({"name": s(), "age": {"type": "integer", "minimum": 0, "maximum": 120}}),
    obj({"sex": {"enum": ["female", "male", "unknown"]}, "pregnant": {"type": "boolean"}}),
    obj({"code": {"type": "string", "pattern": "^[A-Z][0-9]{2}$"}, "seen": {"type": "string", "format": "date"}}),
    obj({"drug": s(10), "dose": {"type": "integer", "minimum": 1, "maximum": 1000},
         "unit": {"enum": ["mg", "ml", "g"]}}),
    obj({"a": s(2), "b": s(2)}, required=["a"]),
    obj({"a": s(2), "b": {"type": "integer", "minimum": 0, "maximum": 3}}, required=[]),
    obj({"note": {"type": ["string", "null"], "maxLength": 6}}),
    obj({"tags": {"type": "array", "items": s(3), "maxItems": 3}}),
    obj({"scores": {"type": "array", "items": {"type": "integer", "minimum": 0, "maximum": 10},
                    "minItems": 1, "maxItems": 3}}),
    obj({"patient": obj({"id": {"type": "string", "pattern": "^P[0-9]{3}$"}, "age": {"type": "integer", "minimum": 0, "maximum": 99}})}),
    obj({"vitals": obj({"hr": {"type": "integer", "minimum": 30, "maximum": 200},
                        "bp": {"type": "string", "pattern": "^[0-9]{2,3}/[0-9]{2,3}$"}})}),
    obj({"meds": {"type": "array", "maxItems": 2,
                  "items": obj({"name": s(6), "mg": {"type": "integer", "minimum": 1, "maximum": 500}})}}),
    obj({"dx": {"anyOf": [obj({"icd": {"type": "string", "pattern": "^[A-Z][0-9]{2}$"}}), {"type": "null"}]}}),
    obj({"smoker": {"anyOf": [{"type": "boolean"}, {"enum": ["former"]}]}}),
    obj({"kind": {"const": "lab"}, "value": {"type": "integer", "minimum": 0, "maximum": 9}}),
    obj({"when": {"type": "string", "format": "date-time"}, "who": s(5)}),
    obj({"id": {"type": "string", "format": "uuid"}}),
    obj({"flag": {"type": "boolean"}, "count": {"type": "integer", "minimum": 0, "maximum": 3},
         "label": s(3), "none": {"type": "null"}}),
    {"$defs": {"dose": obj({"mg": {"type": "integer", "minimum": 1, "maximum": 99}})},
     **obj({"first": {"$ref": "#/$defs/dose"}, "second": {"$ref": "#/$defs/dose"}})},
    {"definitions": {"yn": {"enum": ["y", "n"]}},
     **obj({"fever": {"$ref": "#/definitions/yn"}, "cough": {"$ref": "#/definitions/yn"}})},
    {"$defs": {"node": obj({"v": {"type": "integer", "minimum": 0, "maximum": 9}})},
     "type": "array", "items": {"$ref": "#/$defs/node"}, "maxItems": 2},
    obj({"matrix": {"type": "array", "maxItems": 2,
                    "items": {"type": "array", "items": {"type": "boolean"}, "maxItems": 2}}}),
    obj({"title": s(4), "description": s(4)}, title="annotated", description="keywords that only describe"),
    obj({"x": {"type": "integer", "minimum": 0, "maximum": 5, "description": "an annotated field", "default": 1}}),
    obj({"deep": obj({"deeper": obj({"deepest": {"type": "boolean"}})})}),
    obj({"status": {"enum": ["active", "resolved", "inactive"]},
         "onset": {"type": ["string", "null"], "format": "date"}}),
]

PROMPTS = [
    "Extract the patient's fields from this note as JSON: 54-year-old woman, BP 130/85.",
    "Return JSON only. Note: no known allergies; metformin 500 mg twice daily.",
    "In the beginning was the Word",
]

UNSUPPORTED = ["oneOf", "allOf", "not", "if", "patternProperties", "uniqueItems", "multipleOf",
               "minProperties", "prefixItems", "propertyNames"]


def check(condition, what):
    if not condition:
        raise AssertionError(what)


def socket_generate(path, model, prompt, schema):
    request = {"v": 1, "op": "generate", "id": "so",
               "params": {"model": model, "prompt": prompt, "mode": "raw", "max_tokens": 150,
                          "response_format": {"type": "json_schema",
                                              "json_schema": {"name": "s", "schema": schema}}}}
    with socket.socket(socket.AF_UNIX) as sock:
        sock.connect(path)
        sock.sendall((json.dumps(request) + "\n").encode())
        text, buf = "", b""
        while True:
            data = sock.recv(65536)
            check(data, "the socket answered until done")
            buf += data
            while b"\n" in buf:
                line, buf = buf.split(b"\n", 1)
                event = json.loads(line)
                if event["event"] == "token":
                    text += event["text"]
                elif event["event"] == "done":
                    return text, event["finish_reason"]
                elif event["event"] == "error":
                    raise AssertionError(f"socket error: {event}")


def ask(client, args, model, schema, prompt_index):
    prompt = PROMPTS[prompt_index]
    fmt = {"type": "json_schema", "json_schema": {"name": "s", "schema": schema, "strict": True}}
    messages = [{"role": "user", "content": prompt}]
    if prompt_index == 0:
        r = client.chat.completions.create(model=model, messages=messages, max_tokens=150,
                                           response_format=fmt)
        return r.choices[0].message.content, r.choices[0].finish_reason
    if prompt_index == 1:
        text, finish = "", None
        for chunk in client.chat.completions.create(model=model, messages=messages, max_tokens=150,
                                                    response_format=fmt, stream=True):
            if chunk.choices:
                text += chunk.choices[0].delta.content or ""
                finish = chunk.choices[0].finish_reason or finish
        return text, finish
    return socket_generate(args.socket, model, prompt, schema)


def validate(model, index, prompt_index, schema, answer):
    text, finish = answer
    where = f"{model} schema {index} prompt {prompt_index}: {text!r} ({finish})"
    check(finish == "stop", f"ended by the grammar, not the budget: {where}")
    try:
        document = json.loads(text)
    except json.JSONDecodeError as e:
        raise AssertionError(f"not JSON ({e}): {where}") from None
    jsonschema.validate(document, schema, cls=jsonschema.Draft202012Validator,
                        format_checker=jsonschema.Draft202012Validator.FORMAT_CHECKER)


TOOLS = [
    {"type": "function", "function": {
        "name": "record_vitals", "description": "Record a patient's vitals",
        "parameters": obj({"hr": {"type": "integer", "minimum": 30, "maximum": 200},
                           "temp_c": {"type": "integer", "minimum": 34, "maximum": 42}})}},
    {"type": "function", "function": {
        "name": "flag", "description": "Flag the note for review",
        "parameters": obj({"reason": {"enum": ["unclear", "urgent"]}})}},
]


def call_chat(client, model, tool_choice, stream, parallel=True):
    """(content, tool_calls as dicts, finish_reason) of one chat answer."""
    kwargs = dict(model=model, max_tokens=150, tools=TOOLS, tool_choice=tool_choice,
                  parallel_tool_calls=parallel,
                  messages=[{"role": "user", "content": "Pulse 72, temperature 37."}])
    if not stream:
        r = client.chat.completions.create(**kwargs)
        message = r.choices[0].message
        calls = [{"id": c.id, "name": c.function.name, "arguments": c.function.arguments}
                 for c in message.tool_calls or []]
        return message.content, calls, r.choices[0].finish_reason
    content, calls, finish = "", {}, None
    for chunk in client.chat.completions.create(stream=True, **kwargs):
        if not chunk.choices:
            continue
        delta = chunk.choices[0].delta
        content += delta.content or ""
        for c in delta.tool_calls or []:
            entry = calls.setdefault(c.index, {"id": None, "name": "", "arguments": ""})
            entry["id"] = c.id or entry["id"]
            entry["name"] += (c.function.name or "") if c.function else ""
            entry["arguments"] += (c.function.arguments or "") if c.function else ""
        finish = chunk.choices[0].finish_reason or finish
    return content or None, [calls[i] for i in sorted(calls)], finish


def check_tools(client, model):
    schemas = {t["function"]["name"]: t["function"]["parameters"] for t in TOOLS}
    for stream in (False, True):
        for choice in ({"type": "function", "function": {"name": "record_vitals"}}, "required"):
            # One call each: a weak model given room for eight uses it.
            content, calls, finish = call_chat(client, model, choice, stream, parallel=False)
            where = f"{model} tool_choice {choice} stream {stream}: {calls} {finish}"
            check(finish == "tool_calls", f"finish_reason tool_calls: {where}")
            check(len(calls) == 1 and not content, f"one call and no content: {where}")
            for call in calls:
                check(call["id"] and call["name"] in schemas, f"a known tool: {where}")
                if isinstance(choice, dict):
                    check(call["name"] == "record_vitals", f"the named tool: {where}")
                jsonschema.validate(json.loads(call["arguments"]), schemas[call["name"]],
                                    cls=jsonschema.Draft202012Validator)
        # "none": no calls read, the answer is text.
        content, calls, finish = call_chat(client, model, "none", stream)
        check(not calls and finish in ("stop", "length"), f"none: {calls} {finish}")


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--base-url", required=True)
    parser.add_argument("--socket", required=True)
    parser.add_argument("--models", required=True)
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args()
    client = openai.OpenAI(base_url=args.base_url, api_key="none", max_retries=0, timeout=600)
    schemas = SCHEMAS[::3] if args.quick else SCHEMAS
    check(len(SCHEMAS) >= 50, f"a corpus of at least 50 schemas ({len(SCHEMAS)})")
    for schema in SCHEMAS:
        jsonschema.Draft202012Validator.check_schema(schema)

    answers = 0
    for model in args.models.split(","):
        # Alone, one request at a time.
        for index, schema in enumerate(schemas):
            for p in range(len(PROMPTS)):
                validate(model, index, p, schema, ask(client, args, model, schema, p))
                answers += 1
        # Together: eight at once share the batch.
        jobs = [(i, p) for i in range(len(schemas)) for p in range(len(PROMPTS))]
        with concurrent.futures.ThreadPoolExecutor(8) as pool:
            futures = {pool.submit(ask, client, args, model, schemas[i], p): (i, p) for i, p in jobs}
            for future in concurrent.futures.as_completed(futures):
                i, p = futures[future]
                validate(model, i, p, schemas[i], future.result())
                answers += 1
        print(f"ok: {model}: {len(schemas)} schemas x {len(PROMPTS)} prompts, alone and batched")

        # json_object: an object (a random model's strings may not end, so
        # only a finished answer is parsed).
        r = client.chat.completions.create(model=model, max_tokens=64,
                                           messages=[{"role": "user", "content": PROMPTS[0]}],
                                           response_format={"type": "json_object"})
        text = r.choices[0].message.content
        check(text.startswith("{"), f"json_object opens an object: {text!r}")
        if r.choices[0].finish_reason == "stop":
            check(isinstance(json.loads(text), dict), f"json_object is an object: {text!r}")

        check_tools(client, model)
        print(f"ok: {model}: forced tool calls valid, plain and streamed")

    for keyword in UNSUPPORTED:
        schema = {"type": "object", keyword: [] if keyword.endswith("Of") else {}}
        try:
            client.chat.completions.create(
                model=args.models.split(",")[0], messages=[{"role": "user", "content": "x"}],
                response_format={"type": "json_schema",
                                 "json_schema": {"name": "s", "schema": schema}})
            raise AssertionError(f"{keyword} was not refused")
        except openai.BadRequestError as e:
            check(f'"{keyword}"' in str(e), f"{keyword} refused by name: {e}")
            check(e.body.get("param") == "response_format", f"param response_format: {e.body}")
    print(f"ok: {len(UNSUPPORTED)} unsupported keywords refused by name")
    print(f"all passed ({answers} answers valid)")


if __name__ == "__main__":
    main()
