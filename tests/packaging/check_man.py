#!/usr/bin/env python3
"""Checks the man pages and the default configuration against the binaries.

  check_man.py lint     SOURCE_DIR               mandoc -T lint, man --warnings
  check_man.py coverage SOURCE_DIR MEDQD MEDQ    every flag, command, key documented
  check_man.py selftest SOURCE_DIR MEDQD MEDQ    coverage notices a removed flag or key
  check_man.py config   SOURCE_DIR MEDQD         packaging/medqd.conf states the defaults
  check_man.py exits    SOURCE_DIR               medq.1's exit statuses match common/error.*

`coverage` reads the binaries' --help (medqd --help, medq --help and
medq <command> --help for every command medq --help lists), extracts every
--long-option, and requires it in the matching man page. A configuration key
(an option whose help names its MEDQ_* variable) must appear, with that
variable, in both medqd.8 and medqd.conf.5, and in packaging/medqd.conf.
"""

import os
import re
import shutil
import sys
import tempfile

sys.dont_write_bytecode = True  # keep the source tree clean of __pycache__
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import pkgtest  # noqa: E402

PAGES = ["medq.1", "medqd.8", "medqd.conf.5"]


def lint(source_dir):
    mandoc = shutil.which("mandoc")
    man = shutil.which("man")
    if mandoc is None and man is None:
        pkgtest.skip("neither mandoc (package mandoc) nor man (package man-db) is installed")
    problems = []
    for page in PAGES:
        path = os.path.join(source_dir, "man", page)
        if mandoc is not None:
            # -W style: everything mandoc has to say, down to style hints.
            proc = pkgtest.run([mandoc, "-T", "lint", "-W", "style", path], check=False)
            output = (proc.stdout + proc.stderr).strip()
            if proc.returncode != 0 or output:
                problems.append(f"mandoc -T lint man/{page}:\n{output}")
        if man is not None:
            env = dict(os.environ, MANWIDTH="80", LC_ALL="C.UTF-8")
            proc = pkgtest.run([man, "--warnings", "-l", "-Tutf8", path], check=False, env=env)
            if proc.returncode != 0 or proc.stderr.strip():
                problems.append(f"man --warnings man/{page}:\n{proc.stderr.strip()}")
            elif "NAME" not in re.sub(r".\x08", "", proc.stdout):  # drop overstrikes
                problems.append(f"man/{page} rendered without a NAME section")
    tools = " and ".join(t for t, p in (("mandoc -T lint", mandoc), ("man --warnings", man)) if p)
    pkgtest.finish(problems, f"{tools} report nothing on {', '.join(PAGES)}")


def help_text(binary, *args):
    proc = pkgtest.run([binary, *args, "--help"], env=pkgtest.clean_env())
    return proc.stdout


def subcommands(medq_help):
    """The command names listed under Subcommands: in `medq --help`."""
    names = []
    in_section = False
    for line in medq_help.splitlines():
        if re.match(r"^subcommands:", line, re.IGNORECASE):
            in_section = True
            continue
        if in_section:
            m = re.match(r"^\s+([a-z][a-z0-9-]*)\s", line + " ")
            if m:
                names.append(m.group(1))
            elif line.strip() and not line.startswith(" "):
                in_section = False
    return names


def config_keys(medqd_help):
    """{key: MEDQ_VAR} for every option whose help names its environment
    variable, except --config itself (which chooses the file)."""
    keys = {}
    for env in re.findall(r"\[env (MEDQ_[A-Z0-9_]+)\]", medqd_help):
        key = env[len("MEDQ_"):].lower()
        if key != "config":
            keys[key] = env
    return keys


def conf_file_keys(conf_path):
    """{key: value} of the commented-out `#key = value` lines of medqd.conf."""
    keys = {}
    with open(conf_path, encoding="utf-8") as f:
        for line in f:
            m = re.match(r"^#([a-z][a-z0-9_]*) = (.*)$", line.rstrip("\n"))
            if m:
                keys[m.group(1)] = m.group(2)
    return keys


def gather(medqd, medq):
    """What the binaries offer: options per page, commands, config keys."""
    medqd_help = help_text(medqd)
    medq_help = help_text(medq)
    commands = subcommands(medq_help)
    if not commands:
        pkgtest.fail(["medq --help lists no Subcommands; the help format changed?"])
    medq_options = pkgtest.long_options(medq_help)
    for cmd in commands:
        for opt in pkgtest.long_options(help_text(medq, cmd)):
            if opt not in medq_options:
                medq_options.append(opt)
    keys = config_keys(medqd_help)
    if not keys:
        pkgtest.fail(["medqd --help names no [env MEDQ_*] variables; the help format changed?"])
    return {"medqd_options": pkgtest.long_options(medqd_help), "medq_options": medq_options,
            "commands": commands, "keys": keys}


def coverage_problems(found, pages, conf_keys):
    """Every offered name that a page (or medqd.conf) does not mention."""
    problems = []
    for opt in found["medq_options"]:
        if not pkgtest.mentions(pages["medq.1"], opt):
            problems.append(f"medq option {opt} is not in man/medq.1")
    for cmd in found["commands"]:
        if not pkgtest.mentions(pages["medq.1"], cmd):
            problems.append(f"medq command {cmd} is not in man/medq.1")
    for opt in found["medqd_options"]:
        # --max_queue (the config-file spelling) is checked as the key below.
        if "_" in opt:
            continue
        if not pkgtest.mentions(pages["medqd.8"], opt):
            problems.append(f"medqd option {opt} is not in man/medqd.8")
    for key, env in found["keys"].items():
        for page in ("medqd.8", "medqd.conf.5"):
            for word in (key, env):
                if not pkgtest.mentions(pages[page], word):
                    problems.append(f"configuration key {key}: {word} is not in man/{page}")
        if key not in conf_keys:
            problems.append(f"configuration key {key} is not in packaging/medqd.conf")
    for key in conf_keys:
        if key not in found["keys"]:
            problems.append(f"packaging/medqd.conf lists {key}, which medqd does not know")
    return problems


def read_pages(source_dir):
    return {p: pkgtest.roff_text(os.path.join(source_dir, "man", p)) for p in PAGES}


def coverage(source_dir, medqd, medq):
    found = gather(medqd, medq)
    problems = coverage_problems(found, read_pages(source_dir),
                                 conf_file_keys(os.path.join(source_dir, "packaging/medqd.conf")))
    pkgtest.finish(problems,
                   f"{len(found['medq_options'])} medq options, {len(found['commands'])} "
                   f"commands, {len(found['medqd_options'])} medqd options and "
                   f"{len(found['keys'])} configuration keys are all documented")


def selftest(source_dir, medqd, medq):
    """Removing one flag or key from a page must make coverage fail, naming it."""
    found = gather(medqd, medq)
    conf_keys = conf_file_keys(os.path.join(source_dir, "packaging/medqd.conf"))
    pages = read_pages(source_dir)
    if coverage_problems(found, pages, conf_keys):
        pkgtest.fail(["coverage fails on the real pages; run `check_man.py coverage` first"])
    problems = []
    key = next(iter(found["keys"]))
    # An option spelt with underscores (--max_queue) is checked as its key,
    # not as an option: damage a dashed one.
    medqd_option = next(o for o in reversed(found["medqd_options"]) if "_" not in o)
    cases = [("medq.1", found["medq_options"][-1]), ("medq.1", found["commands"][-1]),
             ("medqd.8", medqd_option), ("medqd.conf.5", key),
             ("medqd.8", found["keys"][key])]
    for page, word in cases:
        damaged = dict(pages)
        damaged[page] = re.sub(r"(?<![\w-])" + re.escape(word) + r"(?![\w-])", "", pages[page])
        reported = coverage_problems(found, damaged, conf_keys)
        if not any(word in p and page in p for p in reported):
            problems.append(f"removing {word} from {page} went unnoticed: {reported}")
    without_key = {k: v for k, v in conf_keys.items() if k != key}
    if not any(key in p and "medqd.conf" in p
               for p in coverage_problems(found, pages, without_key)):
        problems.append(f"removing {key} from packaging/medqd.conf went unnoticed")
    pkgtest.finish(problems, f"coverage notices each of {len(cases) + 1} removed names")


def config(source_dir, medqd):
    """Uncommenting every line of packaging/medqd.conf must change nothing:
    the values it shows are the built-in defaults, and the file parses."""
    conf = os.path.join(source_dir, "packaging/medqd.conf")
    with open(conf, encoding="utf-8") as f:
        text = f.read()
    problems = []
    env = pkgtest.clean_env()
    with tempfile.TemporaryDirectory(prefix="medq-conf-") as tmp:
        empty = os.path.join(tmp, "empty.conf")
        open(empty, "w", encoding="utf-8").close()
        active = os.path.join(tmp, "active.conf")
        with open(active, "w", encoding="utf-8") as f:
            f.write(re.sub(r"(?m)^#([a-z][a-z0-9_]* = )", r"\1", text))
        sock = ["--socket", os.path.join(tmp, "medq.sock")]

        def printed(path, extra):
            out = pkgtest.run([medqd, "--config", path, *extra, "--print-config"], env=env).stdout
            return [line for line in out.splitlines() if not line.startswith("#")]

        # The packaged file as shipped (all commented) parses and is the defaults.
        if printed(conf, sock) != printed(empty, sock):
            problems.append("packaging/medqd.conf as shipped changes the configuration")
        defaults = printed(empty, sock)
        shown = printed(active, sock)
        if shown != defaults:
            diff = [f"{a!r} vs default {b!r}" for a, b in zip(shown, defaults) if a != b]
            problems.append(f"packaging/medqd.conf, uncommented, is not the defaults: {diff}")
        # The socket line documents the system daemon's path, which is the
        # computed default for root without RUNTIME_DIRECTORY.
        if os.geteuid() == 0:
            socket_line = [line for line in printed(active, []) if line.startswith("socket =")]
            if socket_line != [line for line in printed(empty, []) if line.startswith("socket =")]:
                problems.append(f"the socket documented in medqd.conf ({socket_line}) is not "
                                "root's default")
        printed_keys = [line.split(" = ")[0] for line in defaults]
        if sorted(printed_keys) != sorted(conf_file_keys(conf)):
            problems.append(f"medqd --print-config keys {printed_keys} differ from those in "
                            f"packaging/medqd.conf {sorted(conf_file_keys(conf))}")
    pkgtest.finish(problems, "packaging/medqd.conf parses and shows exactly the built-in defaults")


def exit_statuses(source_dir):
    """{status: [wire names]} from common/error.h and error.cc: the statuses
    `medq` exits with and which error code maps to which."""
    with open(os.path.join(source_dir, "common/error.h"), encoding="utf-8") as f:
        values = dict(re.findall(r"inline constexpr int (kExit\w+) = (\d+);", f.read()))
    with open(os.path.join(source_dir, "common/error.cc"), encoding="utf-8") as f:
        table = re.findall(r'CodeInfo\{ErrorCode::\w+, "([A-Z_]+)", (kExit\w+)\}', f.read())
    if not values or not table:
        pkgtest.fail(["cannot read the exit statuses from common/error.h and error.cc"])
    statuses = {int(v): [] for v in values.values()}
    for name, constant in table:
        statuses[int(values[constant])].append(name)
    return statuses


def exits(source_dir):
    """medq(1)'s EXIT STATUS lists every status, each error code under its own."""
    text = read_pages(source_dir)["medq.1"]
    section = re.search(r"(?ms)^\.SH EXIT STATUS$(.*?)^\.SH ", text)
    if section is None:
        pkgtest.fail(["man/medq.1 has no EXIT STATUS section"])
    entries = {int(m.group(1)): m.group(2) for m in
               re.finditer(r"(?ms)^\.TP\n\.B (\d+)\n(.*?)(?=^\.TP$|\Z)", section.group(1))}
    problems = []
    statuses = exit_statuses(source_dir)
    for status, names in sorted(statuses.items()):
        if status not in entries:
            problems.append(f"exit status {status} is not in man/medq.1 EXIT STATUS")
            continue
        for name in names:
            if not pkgtest.mentions(entries[status], name):
                problems.append(f"error code {name} (exit {status}) is not under {status} in "
                                f"man/medq.1 EXIT STATUS")
    for status in entries:
        if status not in statuses:
            problems.append(f"man/medq.1 documents exit status {status}, which medq never uses")
    pkgtest.finish(problems, f"man/medq.1 documents the {len(statuses)} exit statuses and "
                             f"which error code gives which")


def main():
    args = sys.argv[1:]
    commands = {"lint": (lint, 1), "coverage": (coverage, 3), "selftest": (selftest, 3),
                "config": (config, 2), "exits": (exits, 1)}
    if not args or args[0] not in commands or len(args) - 1 != commands[args[0]][1]:
        print(__doc__)
        sys.exit(2)
    commands[args[0]][0](*args[1:])


if __name__ == "__main__":
    main()
