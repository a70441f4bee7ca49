#!/usr/bin/env python3
"""Two medqd behind Debian's nginx, one of them full: 429s are retried on the other.

  proxy_test.py MEDQD MODELS_DIR MODEL

Run by tests/e2e/http_e2e_test.cc with the fixture models. The scale-out
recipe of the README, tested: two daemons (--http-listen on loopback ports),
the first with max_queue 1 and its queue kept full (two clients on its socket
generating long runs back to back: one runs, one waits); nginx in
front with both as upstreams and `proxy_next_upstream ... http_429
non_idempotent`. Every completion through nginx succeeds (those nginx sent
to the full daemon were refused with 429 and retried on the other), the
full daemon counted its QUEUE_FULL refusals, and streaming passes through.
Exit 0: passed; 77: skipped (no nginx: apt-get install nginx-light).
"""

import http.client
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time

SKIP = 77
LAST = [None]  # the fillers' last final event, for a failure's message

NGINX_CONF = """
{user}
worker_processes 1;
pid {dir}/nginx.pid;
error_log {dir}/nginx-error.log info;
events {{ worker_connections 64; }}
http {{
  access_log off;
  client_body_temp_path {dir}/body;
  proxy_temp_path {dir}/proxy;
  fastcgi_temp_path {dir}/fastcgi;
  uwsgi_temp_path {dir}/uwsgi;
  scgi_temp_path {dir}/scgi;
  upstream medq {{
    server 127.0.0.1:{a};
    server 127.0.0.1:{b};
    keepalive 8;
  }}
  server {{
    listen 127.0.0.1:{port};
    location / {{
      proxy_pass http://medq;
      proxy_http_version 1.1;
      proxy_set_header Connection "";
      proxy_buffering off;
      proxy_read_timeout 300s;
      proxy_next_upstream error timeout http_429 http_503 non_idempotent;
      proxy_next_upstream_tries 2;
    }}
  }}
}}
"""


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_http(port, path="/health", status=200, timeout=60):
    deadline = time.time() + timeout
    while time.time() < deadline:
        try:
            c = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
            c.request("GET", path)
            r = c.getresponse()
            r.read()
            if r.status == status:
                return
        except OSError:
            pass
        time.sleep(0.1)
    raise AssertionError(f"nothing answered {status} on port {port}")


def start_daemon(medqd, models, model, tmp, name, *extra):
    d = os.path.join(tmp, name)
    os.makedirs(d)
    port = free_port()
    proc = subprocess.Popen([medqd, "--config", "/dev/null", "--socket", os.path.join(d, "s.sock"),
                             "--state-dir", os.path.join(d, "state"),
                             "--models-dir", models, "--model", model, "--threads", "1", "--http-listen", f"127.0.0.1:{port}", *extra],
                            stderr=open(os.path.join(d, "medqd.log"), "w"))
    return proc, port, os.path.join(d, "s.sock")


def keep_generating(sock_path, stop):
    """Long generations back to back on one connection until `stop`."""
    s = socket.socket(socket.AF_UNIX)
    s.connect(sock_path)
    f = s.makefile("rb")
    n = 0
    while not stop.is_set():
        n += 1
        s.sendall((json.dumps({"v": 1, "id": n, "op": "generate", "params": {
            "prompt": "Hello", "mode": "raw", "max_tokens": 1500}}) + "\n").encode())
        for line in f:
            event = json.loads(line)
            if event.get("event") in ("done", "error"):
                LAST[0] = event
                break
    s.close()


def health(port):
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    c.request("GET", "/health")
    return json.loads(c.getresponse().read())


def post(port, body):
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
    c.request("POST", "/v1/completions", json.dumps(body), {"content-type": "application/json"})
    r = c.getresponse()
    return r.status, r.read().decode()


def main():
    medqd, models, model = sys.argv[1:4]
    nginx = shutil.which("nginx") or ("/usr/sbin/nginx" if os.path.exists("/usr/sbin/nginx") else None)
    if nginx is None:
        print("MEDQ-SKIPPED: nginx is not installed (apt-get install nginx-light)")
        return SKIP
    tmp = tempfile.mkdtemp()
    procs = []
    stop = threading.Event()
    fillers = []
    try:
        full, full_port, full_sock = start_daemon(medqd, models, model, tmp, "full",
                                                  "--max-queue", "1")
        free, free_port_, _ = start_daemon(medqd, models, model, tmp, "free")
        procs += [full, free]
        wait_http(full_port)
        wait_http(free_port_)
        # Keep the first daemon full: one generation runs, one waits.
        for _ in range(2):
            fillers.append(threading.Thread(target=keep_generating, args=(full_sock, stop)))
            fillers[-1].start()
        for _ in range(400):
            if health(full_port)["queue_length"] == 1:
                break
            time.sleep(0.02)
        assert health(full_port)["queue_length"] == 1, \
            f"the first daemon's queue is full: {health(full_port)}; last run: {LAST[0]}"
        status, body = post(full_port, {"prompt": "Hello", "max_tokens": 2})
        assert status == 429, f"the full daemon refuses directly: {status} {body}"

        port = free_port()
        conf = os.path.join(tmp, "nginx.conf")
        with open(conf, "w") as f:
            f.write(NGINX_CONF.format(user="user root;" if os.geteuid() == 0 else "",
                                      dir=tmp, a=full_port, b=free_port_, port=port))
        proxy = subprocess.Popen([nginx, "-p", tmp, "-c", conf, "-g", "daemon off;"],
                                 stderr=open(os.path.join(tmp, "nginx.stderr"), "w"))
        procs.append(proxy)
        wait_http(port)

        for i in range(6):
            status, body = post(port, {"prompt": "Hello", "max_tokens": 3})
            assert status == 200, f"request {i} through nginx: {status} {body}"
            assert json.loads(body)["object"] == "text_completion"
        print("ok: 6 completions through nginx, all 200")

        c = http.client.HTTPConnection("127.0.0.1", full_port, timeout=10)
        c.request("GET", "/metrics")
        metrics = c.getresponse().read().decode()
        refused = [line for line in metrics.splitlines()
                   if line.startswith('medq_requests_total{op="generate",outcome="QUEUE_FULL"}')]
        # The direct request above, and those nginx sent there first.
        assert refused and float(refused[0].split()[-1]) >= 2, \
            f"the full daemon refused the requests nginx sent it first: {refused}"
        print("ok: the full daemon answered 429 and nginx retried on the other:", refused[0])

        # Streaming passes through the proxy unbuffered.
        c = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
        c.request("POST", "/v1/completions",
                  json.dumps({"prompt": "Hello", "max_tokens": 3, "stream": True}),
                  {"content-type": "application/json"})
        r = c.getresponse()
        text = r.read().decode()
        assert r.status == 200 and text.rstrip().endswith("data: [DONE]"), text
        print("ok: a stream through nginx ends with [DONE]")
        print("all passed")
        return 0
    finally:
        stop.set()
        for p in procs:
            p.send_signal(signal.SIGTERM)
        for p in procs:
            try:
                p.wait(timeout=30)
            except subprocess.TimeoutExpired:
                p.kill()
        for t in fillers:
            t.join(timeout=30)
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
