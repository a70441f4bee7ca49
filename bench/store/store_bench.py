#!/usr/bin/env python3
"""store_bench: what the durable job store costs a request.

  bench/store/store_bench.py [--medqd build/daemon/medqd] [--runs 200] [--state-dir DIR]

Starts two medqd (the built-in demo model, warmed up): one with a job store
(its state directory on the disk the store would use: --state-dir, default a
temporary folder beside this checkout's build), one with state_dir "none".
Then, alternating request by request between them:

  ttft     time to first token of the same streamed generate (raw prompt,
           greedy, 1 token): with the store it includes recording the job
           (one fsynced SQLite commit) before it is queued;
  submit   (store only) time until `submit` answers with the job id: a
           resolve, one fsynced insert, the queueing;
  result   (store only) time of `result` on a finished job (one read on the
           store thread).

Prints one JSON object: medians, p90 and ranges in milliseconds, and the
store's size after the run. Peer: the same daemon without a store, in the
same run. See bench/README.md.
"""

import argparse
import json
import os
import shutil
import socket
import statistics
import subprocess
import tempfile
import time


def call(path, op, params):
    """One request; returns (seconds to its final reply, first token time, final reply)."""
    s = socket.socket(socket.AF_UNIX)
    s.connect(path)
    t0 = time.perf_counter()
    s.sendall((json.dumps({"v": 1, "id": 1, "op": op, "params": params}) + "\n").encode())
    buf, first = b"", None
    with s:
        while True:
            chunk = s.recv(65536)
            if not chunk:
                raise RuntimeError(f"{op}: the daemon closed the connection")
            buf += chunk
            while b"\n" in buf:
                line, buf = buf.split(b"\n", 1)
                event = json.loads(line)
                if event.get("event") == "token" and first is None:
                    first = time.perf_counter() - t0
                if event.get("event") in ("done", "error", "result"):
                    if event["event"] == "error":
                        raise RuntimeError(f"{op}: {event}")
                    return time.perf_counter() - t0, first, event


def start(medqd, tmp, name, state_dir):
    sock = os.path.join(tmp, name + ".sock")
    log = open(os.path.join(tmp, name + ".log"), "w")
    proc = subprocess.Popen([medqd, "--config", "/dev/null", "--socket", sock, "--state-dir",
                             state_dir, "--threads", "1", "--log-level", "warn"], stderr=log)
    for _ in range(500):
        try:
            if call(sock, "health", {})[2]["result"]["ready"]:
                break
        except (OSError, RuntimeError, KeyError):
            time.sleep(0.02)
    return proc, sock


def summary(seconds):
    ms = sorted(x * 1000 for x in seconds)
    return {"median": statistics.median(ms), "p90": ms[int(0.9 * (len(ms) - 1))],
            "min": ms[0], "max": ms[-1], "n": len(ms)}


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    root = os.path.join(here, "..", "..")
    parser = argparse.ArgumentParser()
    parser.add_argument("--medqd", default=os.path.join(root, "build", "daemon", "medqd"))
    parser.add_argument("--runs", type=int, default=200)
    parser.add_argument("--state-dir", default=None,
                        help="where the store lives (default: a fresh folder under build/)")
    args = parser.parse_args()

    tmp = tempfile.mkdtemp(prefix="medq-store-bench.")
    state = args.state_dir or tempfile.mkdtemp(prefix="store-bench.",
                                               dir=os.path.join(root, "build"))
    with_store, plain = start(args.medqd, tmp, "store", state), start(args.medqd, tmp, "none", "none")
    try:
        params = {"prompt": "Once upon a time", "mode": "raw", "max_tokens": 1, "temperature": 0}
        for sock in (with_store[1], plain[1]):  # load and warm the model
            call(sock, "generate", params)
        ttft = {"store": [], "none": []}
        submit, result = [], []
        last_job = None
        for i in range(args.runs):
            order = [("store", with_store[1]), ("none", plain[1])]
            if i % 2:
                order.reverse()
            for name, sock in order:
                ttft[name].append(call(sock, "generate", params)[1])
            took, _, reply = call(with_store[1], "submit", {"op": "generate", "params": params})
            submit.append(took)
            if last_job:
                result.append(call(with_store[1], "result", {"job": last_job, "wait": True})[0])
            last_job = reply["result"]["job"]
        health = call(with_store[1], "health", {})[2]["result"]
        out = {
            "bench": "store",
            "runs": args.runs,
            "ttft_ms": {name: summary(v) for name, v in ttft.items()},
            "ttft_added_ms": statistics.median(ttft["store"]) * 1000 -
                             statistics.median(ttft["none"]) * 1000,
            "submit_ms": summary(submit),
            "result_ms": summary(result),
            "store": health["store"],
        }
        print(json.dumps(out, indent=1))
    finally:
        for proc, _ in (with_store, plain):
            proc.terminate()
            proc.wait()
        shutil.rmtree(tmp, ignore_errors=True)
        if args.state_dir is None:
            shutil.rmtree(state, ignore_errors=True)


if __name__ == "__main__":
    main()
