#!/usr/bin/env python3
"""Runs the built medqd the way medqd.service (or the user unit) starts it,
without systemd or the sandbox, and checks that the daemon and the units agree.

  check_service.py system|user SOURCE_DIR MEDQD MEDQ

From the unit files it takes ExecStart (with /usr/sbin/medqd replaced by the
built binary and %t expanded), Environment=, ExecReload and the socket
unit's ListenStream and SocketMode; from RuntimeDirectory= it sets
RUNTIME_DIRECTORY as systemd would, under a temporary folder standing in for
/run (or %t). Then it checks that the daemon:
  - listens where the socket unit's ListenStream says (standalone, until it
    takes the socket through LISTEN_FDS), with the socket unit's mode;
  - answers `medq health` with 0;
  - logs with sd-daemon priority prefixes when JOURNAL_STREAM is set;
  - reloads on the unit's ExecReload (SIGHUP) and keeps serving;
  - stops with status 0 on SIGTERM within the unit's TimeoutStopSec.
/etc/medq/medqd.conf is stood in for by packaging/medqd.conf (MEDQ_CONFIG).
"""

import os
import re
import shlex
import signal
import stat
import subprocess
import sys
import tempfile
import time

sys.dont_write_bytecode = True  # keep the source tree clean of __pycache__
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import pkgtest  # noqa: E402
from check_units import read_unit  # noqa: E402

STARTUP_TIMEOUT_S = 90


def expand(value, specifiers):
    for spec, path in specifiers.items():
        value = value.replace(spec, path)
    return value


def wait_for_log(log_path, pattern, timeout_s):
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        with open(log_path, encoding="utf-8", errors="replace") as f:
            if re.search(pattern, f.read(), re.MULTILINE):
                return True
        time.sleep(0.1)
    return False


def main():
    if len(sys.argv) != 5 or sys.argv[1] not in ("system", "user"):
        print(__doc__)
        sys.exit(2)
    mode, source_dir = sys.argv[1], sys.argv[2]
    medqd, medq = (os.path.abspath(p) for p in sys.argv[3:5])
    unit_dir = os.path.join(source_dir, "packaging", "" if mode == "system" else "user")
    service = read_unit(os.path.join(unit_dir, "medqd.service"))["Service"]
    socket_unit = read_unit(os.path.join(unit_dir, "medqd.socket"))["Socket"]
    problems = []

    with tempfile.TemporaryDirectory(prefix="medq-svc-") as tmp:
        # %t is /run for the system manager and $XDG_RUNTIME_DIR for a user's.
        runtime_root = os.path.join(tmp, "run")
        cache_root = os.path.join(tmp, "cache")
        os.makedirs(runtime_root, 0o755)
        specifiers = {"%t": runtime_root, "%C": cache_root}
        listen = socket_unit["ListenStream"][-1]
        if mode == "system":
            listen = re.sub(r"^/run/", runtime_root + "/", listen)
        listen = expand(listen, specifiers)

        argv = shlex.split(expand(service["ExecStart"][-1], specifiers))
        if argv[0] != "/usr/sbin/medqd":
            pkgtest.fail([f"ExecStart runs {argv[0]}, not /usr/sbin/medqd"])
        argv[0] = medqd
        env = pkgtest.clean_env()
        for assignment in service.get("Environment", []):
            for item in shlex.split(assignment):
                key, _, value = item.partition("=")
                env[key] = expand(value, specifiers)
        if "StateDirectory" in service:
            # As systemd would: the job store (and models) live there.
            state_dir = os.path.join(tmp, "state", service["StateDirectory"][-1])
            os.makedirs(state_dir, int(service.get("StateDirectoryMode", ["0755"])[-1], 8))
            env["STATE_DIRECTORY"] = state_dir
        else:
            # A user daemon's default is under $HOME; keep it in the sandbox.
            env["XDG_STATE_HOME"] = os.path.join(tmp, "xdg-state")
        runtime_dir = os.path.join(runtime_root, service["RuntimeDirectory"][-1])
        os.makedirs(runtime_dir, int(service.get("RuntimeDirectoryMode", ["0755"])[-1], 8))
        env["RUNTIME_DIRECTORY"] = runtime_dir
        env["JOURNAL_STREAM"] = "8:12345"  # medqd only looks whether it is set
        env["XDG_RUNTIME_DIR"] = runtime_root
        env["MEDQ_CONFIG"] = os.path.join(source_dir, "packaging", "medqd.conf")

        log_path = os.path.join(tmp, "medqd.log")
        with open(log_path, "w", encoding="utf-8") as log:
            daemon = subprocess.Popen(argv, env=env, stdout=log, stderr=subprocess.STDOUT)
        try:
            client_env = pkgtest.clean_env()
            health = None
            start = time.monotonic()
            while time.monotonic() - start < STARTUP_TIMEOUT_S and daemon.poll() is None:
                health = pkgtest.run([medq, "--socket", listen, "health"], check=False,
                                     env=client_env)
                if health.returncode == 0:
                    break
                time.sleep(0.2)
            if health is None or health.returncode != 0:
                with open(log_path, encoding="utf-8", errors="replace") as f:
                    log_text = f.read()
                pkgtest.fail([f"medqd started as {mode} medqd.service does not answer on the "
                              f"socket unit's ListenStream ({listen}); exit {daemon.poll()}; "
                              f"log:\n{log_text}"])
            want_mode = socket_unit.get("SocketMode", [None])[-1]
            if mode == "system" and want_mode is not None:
                got = stat.S_IMODE(os.stat(listen).st_mode)
                if got != int(want_mode, 8):
                    problems.append(f"medqd made its socket {oct(got)}, the socket unit "
                                    f"SocketMode={want_mode}")
            with open(log_path, encoding="utf-8", errors="replace") as f:
                first = f.readline()
            if not re.match(r"^<[0-7]>", first):
                problems.append(f"with JOURNAL_STREAM set, log lines lack the <N> priority "
                                f"prefix: {first!r}")

            reload_cmd = shlex.split(service["ExecReload"][-1].replace("$MAINPID",
                                                                       str(daemon.pid)))
            pkgtest.run(reload_cmd)
            if not wait_for_log(log_path, r"SIGHUP: reloaded log_level", 10):
                problems.append(f"ExecReload ({service['ExecReload'][-1]}) did not reload")
            after = pkgtest.run([medq, "--socket", listen, "health"], check=False, env=client_env)
            if after.returncode != 0:
                problems.append(f"medq health exits {after.returncode} after the reload")

            stop_timeout = float(service.get("TimeoutStopSec", ["90"])[-1])
            daemon.send_signal(signal.SIGTERM)
            try:
                status = daemon.wait(timeout=stop_timeout)
                if status != 0:
                    problems.append(f"medqd exited {status} on SIGTERM, want 0")
            except subprocess.TimeoutExpired:
                problems.append(f"medqd did not stop within TimeoutStopSec={stop_timeout:g}")
        finally:
            if daemon.poll() is None:
                daemon.kill()
                daemon.wait()
            if problems:
                with open(log_path, encoding="utf-8", errors="replace") as f:
                    print("medqd log:\n" + f.read())
    pkgtest.finish(problems, f"medqd run as the {mode} unit runs it listens on {listen!r} "
                             f"(the socket unit's path), reloads and stops cleanly")


if __name__ == "__main__":
    main()
