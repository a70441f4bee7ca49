#!/usr/bin/env python3
"""The official `openai` Python client, unchanged, against a running medqd.

  openai_client_test.py --base-url http://127.0.0.1:PORT/v1 --medq MEDQ --socket SOCKET

The daemon (started by tests/e2e/http_e2e_test.cc) serves the fixture models
(tiny-llama, tiny-qwen2 with a chat template, tiny-bert for embeddings) and
the built-in medq-demo (no chat template) with max_queue 1. Exit 0: passed; 77: skipped (no `openai` package); else failed.
"""

import argparse
import json
import subprocess
import sys
import threading
import time
import urllib.request

try:
    import openai
except ImportError:
    print("MEDQ-SKIPPED: the openai package is not installed (scripts/setup-http-tests)")
    sys.exit(77)


def check(condition, what):
    if not condition:
        raise AssertionError(what)
    print("ok:", what)


def medq_generate(args, *extra):
    out = subprocess.run([args.medq, "--socket", args.socket, "generate", "--json", "--no-stream",
                          *extra], check=True, capture_output=True, text=True).stdout
    return json.loads(out.strip().splitlines()[-1])["text"]


def health(args):
    root = args.base_url.rsplit("/v1", 1)[0]
    with urllib.request.urlopen(root + "/health", timeout=10) as r:
        return json.load(r)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--base-url", required=True)
    parser.add_argument("--medq", required=True)
    parser.add_argument("--socket", required=True)
    args = parser.parse_args()
    print("openai", openai.__version__)
    client = openai.OpenAI(base_url=args.base_url, api_key="unused", max_retries=0, timeout=120)

    ids = [m.id for m in client.models.list()]
    check("tiny-qwen2" in ids and "tiny-llama" in ids, f"models list: {ids}")

    # Completions with a seed: the same text as `medq generate`.
    expected = medq_generate(args, "--model", "tiny-llama", "--raw", "--max-tokens", "12",
                             "--temperature", "0.9", "--seed", "42", "Once upon a time")
    c = client.completions.create(model="tiny-llama", prompt="Once upon a time", max_tokens=12,
                                  temperature=0.9, seed=42)
    check(c.choices[0].text == expected, "completion with a seed equals medq generate")
    check(c.usage.completion_tokens == 12 and c.choices[0].finish_reason == "length",
          "completion usage and finish_reason")
    streamed = "".join(chunk.choices[0].text for chunk in client.completions.create(
        model="tiny-llama", prompt="Once upon a time", max_tokens=12, temperature=0.9, seed=42,
        stream=True) if chunk.choices)
    check(streamed == expected, "streamed completion equals it too")

    # Stop strings.
    stop = expected[len(expected) // 2:len(expected) // 2 + 2]
    s = client.completions.create(model="tiny-llama", prompt="Once upon a time", max_tokens=12,
                                  temperature=0.9, seed=42, stop=[stop])
    check(s.choices[0].text == expected[:expected.find(stop)] and
          s.choices[0].finish_reason == "stop", f"stop string {stop!r}")

    # Chat, through the chat template, streamed and not.
    messages = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi"}]
    chat_expected = medq_generate(args, "--model", "tiny-qwen2", "--chat", "--system", "Be brief.",
                                  "--max-tokens", "10", "--seed", "7", "--temperature", "0.7", "Hi")
    r = client.chat.completions.create(model="tiny-qwen2", messages=messages, max_tokens=10,
                                       seed=7, temperature=0.7)
    check(r.choices[0].message.content == chat_expected and r.choices[0].message.role == "assistant",
          "chat completion equals medq generate --chat")
    raw = client.chat.completions.with_raw_response.create(
        model="tiny-qwen2", messages=messages, max_completion_tokens=10, seed=7, temperature=0.7)
    check(raw.headers.get("x-medq-job", "").startswith("j") and
          "x-medq-queue-ms" in raw.headers, "x-medq-job and x-medq-queue-ms headers")
    chunks = list(client.chat.completions.create(
        model="tiny-qwen2", messages=messages, max_tokens=10, seed=7, temperature=0.7, stream=True,
        stream_options={"include_usage": True}))
    text = "".join(ch.choices[0].delta.content or "" for ch in chunks if ch.choices)
    check(text == chat_expected, "streamed chat equals it too")
    check(chunks[-1].usage is not None and chunks[-1].usage.completion_tokens == 10,
          "include_usage: the last chunk carries usage")

    # The built-in medq-demo chats through its own plain template, as
    # `medq generate --chat` does.
    demo_expected = medq_generate(args, "--model", "medq-demo", "--chat", "--max-tokens", "8",
                                  "Who is the LORD?")
    r = client.chat.completions.create(
        model="medq-demo", messages=[{"role": "user", "content": "Who is the LORD?"}],
        max_tokens=8)
    check(r.choices[0].message.content == demo_expected,
          "chat with medq-demo (its own template) equals medq generate --chat")

    # Errors.
    try:
        client.chat.completions.create(model="no-such-model", messages=messages)
        check(False, "unknown model refused")
    except openai.NotFoundError as e:
        check(e.status_code == 404, "unknown model: 404 NotFoundError")
    try:
        client.chat.completions.create(model="tiny-qwen2", messages=messages, n=9)
        check(False, "n > 8 refused")
    except openai.BadRequestError as e:
        check(e.body.get("param") == "n", "n > 8: 400 naming the param")
    r = client.chat.completions.create(model="tiny-qwen2", messages=messages, n=2,
                                       max_tokens=4, temperature=0.8, seed=1)
    check([c.index for c in r.choices] == [0, 1] and r.usage.completion_tokens == 8,
          "n=2: two choices, usage counts both")

    # Log-probabilities, read through the client's own types.
    r = client.chat.completions.create(model="tiny-qwen2", messages=messages, max_tokens=6,
                                       logprobs=True, top_logprobs=3)
    content = r.choices[0].logprobs.content
    check(len(content) >= 1 and
          all(len(t.top_logprobs) == 3 and t.logprob <= 0 and t.top_logprobs[0].token == t.token
              for t in content), "chat logprobs: each token beside its top 3, greedy first")
    check(b"".join(bytes(t.bytes) for t in content).decode("utf-8") ==
          r.choices[0].message.content, "chat logprobs: the tokens' bytes make the content")
    c = client.completions.create(model="tiny-llama", prompt="Once upon a time", max_tokens=5,
                                  logprobs=2)
    lp = c.choices[0].logprobs
    check(len(lp.tokens) == len(lp.token_logprobs) == len(lp.top_logprobs) ==
          len(lp.text_offset) and lp.text_offset[0] == 0,
          "completion logprobs: four parallel arrays")
    try:
        client.completions.create(model="tiny-llama", prompt="x", temperature="hot")
        check(False, "wrong type refused")
    except openai.BadRequestError as e:
        check(e.body.get("param") == "temperature", "wrong type: 400 naming the param")

    # Embeddings: the client asks for base64 by default; floats equal it.
    e1 = client.embeddings.create(model="tiny-bert", input=["alpha beta", "gamma"])
    e2 = client.embeddings.create(model="tiny-bert", input=["alpha beta", "gamma"],
                                  encoding_format="float")
    check(len(e1.data) == 2 and e1.data[1].index == 1, "embeddings: one vector per input")
    check(all(abs(a - b) < 1e-6 for d1, d2 in zip(e1.data, e2.data)
              for a, b in zip(d1.embedding, d2.embedding)), "base64 and float vectors agree")
    check(e1.usage.prompt_tokens > 0, "embeddings usage")

    # A full queue (max_queue 1): one streams, one waits, the next gets 429
    # with Retry-After. The stream's client hangs up: its job is cancelled
    # and the waiting one runs at once.
    stream = client.completions.create(model="tiny-llama", prompt="Hello", max_tokens=2000,
                                       stream=True)
    next(iter(stream))
    waited = {}

    def wait_in_queue():
        waited["reply"] = client.completions.create(model="tiny-llama", prompt="Hello",
                                                    max_tokens=4)
    t = threading.Thread(target=wait_in_queue)
    t.start()
    for _ in range(200):
        if health(args)["queue_length"] == 1:
            break
        time.sleep(0.05)
    check(health(args)["queue_length"] == 1, "one request waits")
    try:
        client.completions.create(model="tiny-llama", prompt="Hello", max_tokens=4)
        check(False, "a full queue refuses")
    except openai.RateLimitError as e:
        check(e.status_code == 429 and int(e.response.headers["retry-after"]) >= 1,
              "full queue: 429 with Retry-After")
    stream.close()
    t.join(timeout=60)
    check("reply" in waited and waited["reply"].choices[0].finish_reason == "length",
          "after the hang-up the waiting request ran")
    for _ in range(100):
        if health(args)["active_jobs"] == 0:
            break
        time.sleep(0.05)
    check(health(args)["active_jobs"] == 0, "the hung-up stream's job was cancelled")
    print("all passed")


if __name__ == "__main__":
    main()
