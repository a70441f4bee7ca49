#!/usr/bin/env python3
"""Builds the Debian package, checks it, and runs the daemon it contains.

  check_deb.py SOURCE_DIR BUILD_DIR MEDQD MEDQ

1. `cpack -G DEB` from BUILD_DIR's CPackConfig.cmake, into a temporary folder.
2. `dpkg-deb -f`: name, version (medqd --version's), architecture, and a
   Depends naming the package of every shared library medqd and medq link
   (`ldd` + `dpkg -S`).
3. `dpkg-deb -c`: exactly the expected files, modes and owners.
4. `dpkg-deb -e`: conffiles names /etc/medq/medqd.conf; scripts parse (sh -n)
   and, where shellcheck is installed, pass it.
5. As root: `dpkg --root` installs it into an empty root (maintainer scripts
   chrootless, honouring DPKG_ROOT): user medq and /var/lib/medq/models are
   created there, the host is untouched, the conffile is registered, kept on
   remove and deleted on purge.
6. `dpkg -x` into a temporary root: the files are the sources (man pages
   gunzipped), then the extracted medqd runs with the packaged configuration
   on a temporary socket, the extracted `medq health` answers 0 with the
   default limits, and SIGTERM drains it to exit 0 with its socket removed.
"""

import glob
import gzip
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time

sys.dont_write_bytecode = True  # keep the source tree clean of __pycache__
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import pkgtest  # noqa: E402

STARTUP_TIMEOUT_S = 90  # LibTorch loads slowly on a busy machine
DRAIN_TIMEOUT_S = 45
# Asked of the built-in demo model (King James English) by the generation checks.
DEMO_PROMPT = "And God said"


def expected_files(source_dir):
    """{path in the package: mode} for every regular file the package must hold."""
    files = {
        "/usr/bin/medq": 0o755,
        "/usr/sbin/medqd": 0o755,
        "/usr/lib/systemd/system/medqd.service": 0o644,
        "/usr/lib/systemd/system/medqd.socket": 0o644,
        "/usr/lib/systemd/user/medqd.service": 0o644,
        "/usr/lib/systemd/user/medqd.socket": 0o644,
        "/usr/lib/sysusers.d/medq.conf": 0o644,
        "/usr/lib/tmpfiles.d/medq.conf": 0o644,
        "/etc/medq/medqd.conf": 0o644,
        "/usr/share/man/man1/medq.1.gz": 0o644,
        "/usr/share/man/man5/medqd.conf.5.gz": 0o644,
        "/usr/share/man/man8/medqd.8.gz": 0o644,
        "/usr/share/doc/medq/README.md": 0o644,
        "/usr/share/doc/medq/changelog.gz": 0o644,
        "/usr/share/doc/medq/copyright": 0o644,
        "/usr/share/medq/smoke-test": 0o755,
    }
    for doc in glob.glob(os.path.join(source_dir, "docs", "*.md")):
        files["/usr/share/doc/medq/docs/" + os.path.basename(doc)] = 0o644
    for path in demo_model_files(source_dir):
        files[path] = 0o644
    return files


def demo_model_files(source_dir):
    """{path in the package: source file} for the built-in demo model."""
    demo = os.path.join(source_dir, "models", "medq-demo")
    return {"/usr/share/medq/models/medq-demo/" + name: os.path.join(demo, name)
            for name in sorted(os.listdir(demo))}


def sources(source_dir):
    """{path in the package: source file} for the files shipped unchanged."""
    pk = os.path.join(source_dir, "packaging")
    out = {
        "/usr/lib/systemd/system/medqd.service": os.path.join(pk, "medqd.service"),
        "/usr/lib/systemd/system/medqd.socket": os.path.join(pk, "medqd.socket"),
        "/usr/lib/systemd/user/medqd.service": os.path.join(pk, "user/medqd.service"),
        "/usr/lib/systemd/user/medqd.socket": os.path.join(pk, "user/medqd.socket"),
        "/usr/lib/sysusers.d/medq.conf": os.path.join(pk, "medq.sysusers"),
        "/usr/lib/tmpfiles.d/medq.conf": os.path.join(pk, "medq.tmpfiles"),
        "/etc/medq/medqd.conf": os.path.join(pk, "medqd.conf"),
        "/usr/share/doc/medq/README.md": os.path.join(source_dir, "README.md"),
        "/usr/share/doc/medq/changelog.gz": os.path.join(pk, "debian/changelog"),
        "/usr/share/medq/smoke-test": os.path.join(source_dir, "scripts/smoke-test"),
        "/usr/share/doc/medq/copyright": os.path.join(pk, "debian/copyright"),
    }
    out.update(demo_model_files(source_dir))
    for page in ("medq.1", "medqd.conf.5", "medqd.8"):
        out[f"/usr/share/man/man{page[-1]}/{page}.gz"] = os.path.join(source_dir, "man", page)
    return out


def build_deb(build_dir, out_dir):
    cpack = pkgtest.need_tool("cpack", "cmake")
    config = os.path.join(build_dir, "CPackConfig.cmake")
    if not os.path.exists(config):
        pkgtest.fail([f"{config} does not exist: configure the build first"])
    # The gzipped man pages and changelog are build outputs that CPack
    # installs: make them current even when only medqd and medq were built.
    cmake = pkgtest.need_tool("cmake", "cmake")
    pkgtest.run([cmake, "--build", build_dir, "--target", "medq_doc_files"])
    start = time.monotonic()
    pkgtest.run([cpack, "-G", "DEB", "--config", config, "-B", out_dir], timeout=300)
    debs = glob.glob(os.path.join(out_dir, "*.deb"))
    if len(debs) != 1:
        pkgtest.fail([f"cpack made {len(debs)} .deb files in {out_dir}: {debs}"])
    print(f"built {os.path.basename(debs[0])} in {time.monotonic() - start:.1f} s, "
          f"{os.path.getsize(debs[0]) / 1024:.0f} KiB")
    return debs[0]


def owning_packages(binaries):
    """The Debian packages holding the shared libraries the binaries link
    directly (their DT_NEEDED entries, located by ldd): what dpkg-shlibdeps
    must have put into Depends. Indirect libraries come through those."""
    readelf = pkgtest.need_tool("readelf", "binutils")
    packages = {}
    for binary in binaries:
        needed = re.findall(r"\(NEEDED\)\s+Shared library: \[([^\]]+)\]",
                            pkgtest.run([readelf, "-d", binary]).stdout)
        ldd = pkgtest.run(["ldd", binary]).stdout
        located = dict(re.findall(r"^\s*(\S+)\s+=>\s+(/\S+)", ldd, re.MULTILINE))
        # The dynamic loader (needed directly by code using thread-local
        # storage, such as xgrammar's) is listed by its path alone.
        for path in re.findall(r"^\s*(/\S+)\s+\(0x", ldd, re.MULTILINE):
            located.setdefault(os.path.basename(path), path)
        for soname in needed:
            if soname not in located:
                pkgtest.fail([f"ldd cannot locate {soname}, which {binary} needs"])
            path = located[soname]
            candidates = [path, os.path.realpath(path)]
            candidates += ["/usr" + c for c in candidates if c.startswith("/lib")]
            candidates += [c[len("/usr"):] for c in candidates if c.startswith("/usr/lib")]
            for c in candidates:
                proc = pkgtest.run(["dpkg", "-S", c], check=False)
                if proc.returncode == 0:
                    packages[proc.stdout.split(":")[0]] = soname
                    break
            else:
                print(f"note: {path} belongs to no Debian package; not required in Depends")
    return packages


def check_metadata(deb, medqd, medq):
    problems = []
    fields = {}
    for name in ("Package", "Version", "Architecture", "Depends", "Maintainer", "Description",
                 "Section", "Priority"):
        fields[name] = pkgtest.run(["dpkg-deb", "-f", deb, name]).stdout.strip()
    version = pkgtest.run([medqd, "--version"]).stdout.split()[-1]
    arch = pkgtest.run(["dpkg", "--print-architecture"]).stdout.strip()
    for name, want in (("Package", "medq"), ("Version", version), ("Architecture", arch)):
        if fields[name] != want:
            problems.append(f"control field {name} is {fields[name]!r}, want {want!r}")
    for name in ("Maintainer", "Description", "Section", "Priority"):
        if not fields[name]:
            problems.append(f"control field {name} is empty")
    depends = {d.strip().split()[0] for alt in fields["Depends"].split(",")
               for d in alt.split("|") if d.strip()}
    for package, lib in sorted(owning_packages([medqd, medq]).items()):
        # A library's shlibs may name a virtual package it Provides
        # (libspdlog1.10 provides libspdlog1.10-fmt9).
        provides = pkgtest.run(["dpkg-query", "-W", "-f", "${Provides}", package]).stdout
        names = {package} | {p.strip().split()[0] for p in provides.split(",") if p.strip()}
        if not names & depends:
            problems.append(f"Depends lacks {package} (for {lib}): {fields['Depends']}")
    print(f"Depends: {fields['Depends']}")
    return problems


def check_contents(deb, source_dir):
    problems = []
    listed = {}
    for line in pkgtest.run(["dpkg-deb", "-c", deb]).stdout.splitlines():
        parts = line.split(None, 5)
        perms, owner, path = parts[0], parts[1], parts[5]
        if perms.startswith("-"):
            listed[path[1:] if path.startswith(".") else path] = (perms, owner)
        if owner != "root/root":
            problems.append(f"{path} is owned by {owner}, not root/root")
    expected = expected_files(source_dir)
    for path, mode in expected.items():
        if path not in listed:
            problems.append(f"the package lacks {path}")
            continue
        want = "-" + "".join(("r" if mode & (4 << s) else "-") + ("w" if mode & (2 << s) else "-")
                             + ("x" if mode & (1 << s) else "-") for s in (6, 3, 0))
        if listed[path][0] != want:
            problems.append(f"{path} has mode {listed[path][0]}, want {want}")
    for path in sorted(set(listed) - set(expected)):
        problems.append(f"the package holds an unexpected file {path}")
    return problems


def check_control(deb, tmp):
    problems = []
    control = os.path.join(tmp, "control")
    pkgtest.run(["dpkg-deb", "-e", deb, control])
    with open(os.path.join(control, "conffiles"), encoding="utf-8") as f:
        conffiles = f.read().split()
    if conffiles != ["/etc/medq/medqd.conf"]:
        problems.append(f"conffiles is {conffiles}, want ['/etc/medq/medqd.conf']")
    for script in ("postinst", "prerm", "postrm"):
        path = os.path.join(control, script)
        if not os.access(path, os.X_OK):
            problems.append(f"maintainer script {script} is missing or not executable")
            continue
        proc = pkgtest.run(["sh", "-n", path], check=False)
        if proc.returncode != 0:
            problems.append(f"maintainer script {script} does not parse: {proc.stderr}")
        if shutil.which("shellcheck"):
            proc = pkgtest.run(["shellcheck", "-s", "sh", path], check=False)
            if proc.returncode != 0:
                problems.append(f"shellcheck {script}:\n{proc.stdout}")
    return problems


def check_extracted(root, source_dir):
    problems = []
    for packaged, source in sources(source_dir).items():
        with open(source, "rb") as f:
            want = f.read()
        path = root + packaged
        if not os.path.exists(path):
            continue  # reported by check_contents
        opener = gzip.open if path.endswith(".gz") else open
        with opener(path, "rb") as f:
            got = f.read()
        if got != want:
            problems.append(f"{packaged} differs from {os.path.relpath(source, source_dir)}")
    return problems


def check_changelog(root, deb):
    """The changelog's newest entry is this package's version."""
    with gzip.open(root + "/usr/share/doc/medq/changelog.gz", "rt", encoding="utf-8") as f:
        first = f.readline()
    version = pkgtest.run(["dpkg-deb", "-f", deb, "Version"]).stdout.strip()
    if not first.startswith(f"medq ({version}) "):
        return [f"changelog.gz starts {first.strip()!r}, not with medq ({version}): "
                "add an entry to packaging/debian/changelog"]
    return []


def host_state():
    """What the maintainer scripts must leave alone on the host when they run
    chrootless for another root."""
    state = {}
    for path in ("/etc/passwd", "/etc/group"):
        with open(path, "rb") as f:
            state[path] = f.read()
    for path in ("/run/medq", "/var/lib/medq", "/etc/medq"):
        state[path] = os.path.exists(path)
    return state


def check_dpkg_install(deb, tmp):
    """As root: dpkg installs the package into an empty root (its maintainer
    scripts run chrootless and must honour DPKG_ROOT), registers the conffile,
    keeps it on remove and deletes it on purge."""
    if os.geteuid() != 0:
        print("note: not root, so dpkg --root install, remove and purge did not run")
        return []
    problems = []
    root = os.path.join(tmp, "dpkg-root")
    for sub in ("var/lib/dpkg/info", "var/lib/dpkg/updates", "var/lib/dpkg/triggers"):
        os.makedirs(os.path.join(root, sub))
    for name in ("status", "available"):
        open(os.path.join(root, "var/lib/dpkg", name), "w", encoding="utf-8").close()
    dpkg = ["dpkg", "--root=" + root, "--log=/dev/null", "--force-not-root",
            "--force-script-chrootless"]
    before = host_state()
    pkgtest.run(dpkg + ["--force-depends", "-i", deb])
    if host_state() != before:
        pkgtest.fail(["the maintainer scripts changed the host instead of DPKG_ROOT"])
    status = pkgtest.run(dpkg + ["-s", "medq"]).stdout
    if "Status: install ok installed" not in status:
        problems.append(f"dpkg --root -i left medq not installed:\n{status}")
    if not re.search(r"(?m)^Conffiles:\n /etc/medq/medqd\.conf [0-9a-f]{32}$", status):
        problems.append("dpkg did not register /etc/medq/medqd.conf as a conffile")
    users = {}
    with open(os.path.join(root, "etc/passwd"), encoding="utf-8") as f:
        for line in f:
            fields = line.split(":")
            users[fields[0]] = int(fields[2])
    if shutil.which("systemd-sysusers") is None:
        print("note: no systemd-sysusers, so postinst created no user; not checked")
    elif "medq" not in users:
        problems.append("postinst did not create the user medq (systemd-sysusers)")
    else:
        models = os.path.join(root, "var/lib/medq/models")
        if not os.path.isdir(models) or os.stat(models).st_uid != users["medq"]:
            problems.append("postinst did not create /var/lib/medq/models owned by medq")
    conf = os.path.join(root, "etc/medq/medqd.conf")
    with open(conf, "a", encoding="utf-8") as f:
        f.write("max_queue = 3\n")
    pkgtest.run(dpkg + ["-r", "medq"])
    if os.path.exists(os.path.join(root, "usr/sbin/medqd")):
        problems.append("dpkg -r left /usr/sbin/medqd behind")
    if not os.path.exists(conf) or "max_queue = 3" not in open(conf, encoding="utf-8").read():
        problems.append("dpkg -r did not keep the edited conffile /etc/medq/medqd.conf")
    pkgtest.run(dpkg + ["-P", "medq"])
    if os.path.exists(conf):
        problems.append("dpkg -P did not remove /etc/medq/medqd.conf")
    if host_state() != before:
        problems.append("removing or purging medq changed the host instead of DPKG_ROOT")
    return problems


def run_daemon(root, tmp):
    """Starts the packaged medqd; checks health, a generation and the packaged smoke test."""
    problems = []
    medqd = os.path.join(root, "usr/sbin/medqd")
    medq = os.path.join(root, "usr/bin/medq")
    conf = os.path.join(root, "etc/medq/medqd.conf")
    sock = os.path.join(tmp, "run", "medq.sock")
    env = pkgtest.clean_env()
    log_path = os.path.join(tmp, "medqd.log")
    with open(log_path, "w", encoding="utf-8") as log:
        daemon = subprocess.Popen([medqd, "--config", conf, "--socket", sock, "--state-dir",
                                   os.path.join(tmp, "state")], env=env,
                                  stdout=log, stderr=subprocess.STDOUT)
    try:
        start = time.monotonic()
        health = None
        while time.monotonic() - start < STARTUP_TIMEOUT_S and daemon.poll() is None:
            health = pkgtest.run([medq, "--socket", sock, "health"], check=False, env=env)
            if health.returncode == 0:
                break
            time.sleep(0.2)
        ready_s = time.monotonic() - start
        if health is None or health.returncode != 0:
            problems.append(f"medq health never answered 0 within {STARTUP_TIMEOUT_S} s "
                            f"(daemon exit {daemon.poll()}; last: "
                            f"{health.returncode if health else None} {health and health.stderr})")
            return problems
        print(f"packaged medqd ready after {ready_s:.1f} s")
        reply = json.loads(
            pkgtest.run([medq, "--socket", sock, "--json", "health"], env=env).stdout)
        limits = reply.get("limits", {})
        for key, want in (("max_connections", 256), ("max_message_bytes", 16 << 20),
                          ("idle_timeout_s", 60.0), ("queue_timeout_s", 300.0),
                          ("drain_timeout_s", 30.0)):
            if limits.get(key) != want:
                problems.append(f"health limits.{key} = {limits.get(key)}, want the default {want}")
        if reply.get("ready") is not True or reply.get("status") not in ("ok", "degraded"):
            problems.append(f"health says status {reply.get('status')} ready {reply.get('ready')}")
        version = pkgtest.run([medq, "--socket", sock, "version"], check=False, env=env)
        if version.returncode != 0:
            problems.append(f"medq version exited {version.returncode}: {version.stderr}")
        # No model is configured: the packaged daemon serves its built-in demo model.
        gen = pkgtest.run([medq, "--socket", sock, "--json", "generate", "--max-tokens", "8",
                           DEMO_PROMPT], check=False, env=env)
        if gen.returncode != 0:
            problems.append(f"medq generate with the built-in model exited {gen.returncode}: "
                            f"{gen.stderr}")
        else:
            done = json.loads(gen.stdout)
            if not done.get("text", "").strip() or done.get("usage", {}).get(
                    "completion_tokens", 0) < 1:
                problems.append(f"medq generate with the built-in model gave no text: {done}")
        # The packaged smoke test against the packaged daemon, as a user would run it.
        smoke = pkgtest.run([sys.executable, os.path.join(root, "usr/share/medq/smoke-test"),
                             "--socket", sock, "--requests", "5", "--max-tokens", "8",
                             "--cleanup-between", "--prompt", DEMO_PROMPT],
                            check=False, env=env)
        print(smoke.stdout)
        if smoke.returncode != 0:
            problems.append(f"the packaged smoke-test exited {smoke.returncode}: {smoke.stderr}")
        daemon.send_signal(signal.SIGTERM)
        status = daemon.wait(timeout=DRAIN_TIMEOUT_S)
        if status != 0:
            problems.append(f"medqd exited {status} after SIGTERM, want 0")
        if os.path.exists(sock):
            problems.append("medqd left its socket behind after SIGTERM")
    finally:
        if daemon.poll() is None:
            daemon.kill()
            daemon.wait()
        if problems:
            with open(log_path, encoding="utf-8", errors="replace") as f:
                print("medqd log:\n" + f.read())
    return problems


def main():
    if len(sys.argv) != 5:
        print(__doc__)
        sys.exit(2)
    source_dir, build_dir = sys.argv[1:3]
    medqd, medq = (os.path.abspath(p) for p in sys.argv[3:5])
    pkgtest.need_tool("dpkg-deb", "dpkg")
    pkgtest.need_tool("dpkg", "dpkg")
    problems = []
    with tempfile.TemporaryDirectory(prefix="medq-deb-") as tmp:
        deb = build_deb(build_dir, os.path.join(tmp, "out"))
        problems += check_metadata(deb, medqd, medq)
        problems += check_contents(deb, source_dir)
        problems += check_control(deb, tmp)
        problems += check_dpkg_install(deb, tmp)
        root = os.path.join(tmp, "root")
        pkgtest.run(["dpkg", "-x", deb, root])
        problems += check_extracted(root, source_dir)
        problems += check_changelog(root, deb)
        problems += run_daemon(root, tmp)
    pkgtest.finish(problems, "the .deb has the expected files and metadata, and its medqd, with the "
                             "packaged configuration, serves health, the built-in model "
                             "and the packaged smoke test")


if __name__ == "__main__":
    main()
