#!/usr/bin/env python3
"""http_bench: what the HTTP endpoint adds over the Unix socket.

  bench/http/http_bench.py [--medqd build/daemon/medqd] [--runs 30]

Starts its own medqd (the built-in demo model, --http-listen on a free
loopback port) and measures, with the standard library only:

  ttft      time to first token of the same streamed request (raw prompt,
            greedy, 8 tokens) over the socket (`generate`) and over HTTP
            (POST /v1/completions with "stream": true), alternating, as
            medians; the difference is the HTTP layer's overhead.
  health    GET /health on one keep-alive connection at 200 requests/s for
            5 s while a long generation runs: achieved rate and latency
            percentiles.

Prints one JSON object. See bench/README.md.
"""

import argparse
import http.client
import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def socket_ttft(path, params):
    s = socket.socket(socket.AF_UNIX)
    s.connect(path)
    t0 = time.perf_counter()
    s.sendall((json.dumps({"v": 1, "id": 1, "op": "generate", "params": params}) + "\n").encode())
    buf = b""
    first = None
    while True:
        chunk = s.recv(65536)
        if not chunk:
            break
        buf += chunk
        while b"\n" in buf:
            line, buf = buf.split(b"\n", 1)
            event = json.loads(line)
            if event.get("event") == "token" and first is None:
                first = time.perf_counter() - t0
            if event.get("event") in ("done", "error", "result"):
                s.close()
                return first
    return first


def http_ttft(port, params):
    conn = http.client.HTTPConnection("127.0.0.1", port)
    body = json.dumps(dict(params, stream=True))
    t0 = time.perf_counter()
    conn.request("POST", "/v1/completions", body, {"content-type": "application/json"})
    r = conn.getresponse()
    first = None
    for line in r:
        if line.startswith(b"data: ") and first is None and b'"text"' in line:
            first = time.perf_counter() - t0
    conn.close()
    return first


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    parser = argparse.ArgumentParser()
    parser.add_argument("--medqd", default=os.path.join(here, "..", "..", "build", "daemon", "medqd"))
    parser.add_argument("--runs", type=int, default=30)
    args = parser.parse_args()

    tmp = tempfile.mkdtemp()
    sock = os.path.join(tmp, "medq.sock")
    port = free_port()
    daemon = subprocess.Popen([args.medqd, "--config", "/dev/null", "--socket", sock,
                               "--state-dir", os.path.join(tmp, "state"), "--models-dir", tmp, "--http-listen", f"127.0.0.1:{port}",
                               "--max-concurrent", "2"],
                              stderr=open(os.path.join(tmp, "medqd.log"), "w"))
    try:
        for _ in range(300):
            try:
                c = http.client.HTTPConnection("127.0.0.1", port, timeout=2)
                c.request("GET", "/health")
                if c.getresponse().status == 200:
                    break
            except OSError:
                pass
            time.sleep(0.1)
        params = {"prompt": "Hello", "max_tokens": 8, "temperature": 0}
        socket_ttft(sock, dict(params, mode="raw"))  # loads the model
        over_socket, over_http = [], []
        for _ in range(args.runs):
            over_socket.append(socket_ttft(sock, dict(params, mode="raw")) * 1000)
            over_http.append(http_ttft(port, params) * 1000)

        # /health at 200/s on one keep-alive connection while a generation runs.
        stop = threading.Event()

        generations = [0]

        def generate():
            # The demo model's context is 256 tokens.
            while not stop.is_set():
                if socket_ttft(sock, {"prompt": "Hello", "max_tokens": 240, "mode": "raw"}):
                    generations[0] += 1
        gen = threading.Thread(target=generate)
        gen.start()
        time.sleep(0.5)
        conn = http.client.HTTPConnection("127.0.0.1", port)
        latencies = []
        busy = 0
        t_start = time.perf_counter()
        for i in range(1000):
            due = t_start + i / 200
            delay = due - time.perf_counter()
            if delay > 0:
                time.sleep(delay)
            t0 = time.perf_counter()
            conn.request("GET", "/health")
            r = conn.getresponse()
            busy += json.loads(r.read())["active_jobs"] > 0
            latencies.append((time.perf_counter() - t0) * 1000)
        elapsed = time.perf_counter() - t_start
        stop.set()
        gen.join()
        latencies.sort()
        out = {
            "ttft_ms": {
                "socket_median": statistics.median(over_socket),
                "http_median": statistics.median(over_http),
                "http_minus_socket": statistics.median(over_http) - statistics.median(over_socket),
                "runs": args.runs,
            },
            "health_keepalive_during_generation": {
                "requests": len(latencies),
                "per_second": len(latencies) / elapsed,
                "p50_ms": latencies[len(latencies) // 2],
                "p99_ms": latencies[int(len(latencies) * 0.99) - 1],
                "max_ms": latencies[-1],
                "answered_while_generating": busy,
                "generations_meanwhile": generations[0],
            },
        }
        print(json.dumps(out, indent=2))
    finally:
        daemon.terminate()
        daemon.wait(timeout=30)


if __name__ == "__main__":
    sys.exit(main())
