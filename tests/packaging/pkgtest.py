"""Helpers shared by the packaging tests: running commands, skipping, failing.

Each test script exits 0 on success, 1 on failure (after printing every
problem it found) and SKIP (77, the CTest SKIP_RETURN_CODE) when a tool it
needs is absent, saying which one and how to install it.
"""

import os
import re
import shutil
import subprocess
import sys

SKIP = 77


def skip(message):
    print(f"SKIP: {message}")
    sys.exit(SKIP)


def need_tool(tool, package):
    """Returns the tool's path, or skips the test naming its Debian package."""
    path = shutil.which(tool)
    if path is None:
        skip(f"{tool} is not installed (Debian package {package}); this check did not run")
    return path


def run(args, check=True, env=None, timeout=120, **kwargs):
    """Runs a command and returns the CompletedProcess (text mode).

    With check, a non-zero status fails the test with the command's output.
    """
    proc = subprocess.run(args, capture_output=True, text=True, env=env, timeout=timeout,
                          **kwargs)
    if check and proc.returncode != 0:
        fail([f"`{' '.join(map(str, args))}` exited {proc.returncode}",
              f"stdout:\n{proc.stdout}", f"stderr:\n{proc.stderr}"])
    return proc


def clean_env():
    """The environment without MEDQ_* and the variables that move medqd's socket."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("MEDQ_")}
    for k in ("RUNTIME_DIRECTORY", "LISTEN_FDS", "LISTEN_PID", "NOTIFY_SOCKET",
              "JOURNAL_STREAM", "WATCHDOG_USEC", "WATCHDOG_PID"):
        env.pop(k, None)
    return env


def fail(problems):
    for p in problems:
        print(f"FAIL: {p}")
    sys.exit(1)


def finish(problems, what):
    """Fails with every problem, or prints one line saying what passed."""
    if problems:
        fail(problems)
    print(f"OK: {what}")
    sys.exit(0)


def long_options(help_text):
    """Every --long-option named in a CLI11 --help text, in order, once each.

    Only the option columns count (lines that start with whitespace and a
    dash), not words inside descriptions.
    """
    found = []
    for line in help_text.splitlines():
        m = re.match(r"\s+(-\S+(?:\s*,\s*-\S+)*)", line)
        if not m:
            continue
        for name in re.findall(r"--[A-Za-z0-9][A-Za-z0-9_-]*", m.group(1)):
            if name not in found:
                found.append(name)
    return found


def roff_text(path):
    """A man page's source with roff escapes for '-' and fonts removed, so that
    `\\-\\-max\\-queue` and `\\fB\\-\\-json\\fP` read as --max-queue and --json."""
    with open(path, encoding="utf-8") as f:
        text = f.read()
    text = text.replace("\\-", "-").replace("\\(en", "-")
    text = re.sub(r"\\f[BIRP]|\\f\(..|\\&", "", text)
    return text


def mentions(text, word):
    """True when `word` occurs in `text` as a whole word (--max-queue does not
    count as --max-queue-s, nor threads as threads_x)."""
    return re.search(r"(?<![\w-])" + re.escape(word) + r"(?![\w-])", text) is not None
