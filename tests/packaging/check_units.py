#!/usr/bin/env python3
"""Checks the systemd units and the sysusers/tmpfiles fragments in packaging/.

  check_units.py verify  SOURCE_DIR MEDQD   systemd-analyze verify, system and user
  check_units.py policy  SOURCE_DIR         the settings the units promise
  check_units.py sysusers SOURCE_DIR        the user, group and folders they create

`verify` loads copies of the units whose ExecStart names the built medqd (the
installed path does not exist at build time) and whose Documentation= man
pages are the ones in man/ (through MANPATH), and fails on any message:
systemd-analyze exits 0 after "Unknown key" warnings, so silence is the test.
"""

import os
import stat
import sys
import tempfile

sys.dont_write_bytecode = True  # keep the source tree clean of __pycache__
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import pkgtest  # noqa: E402

SYSTEM_UNITS = ["medqd.service", "medqd.socket"]


def stage_man_pages(source_dir, tmp):
    """A MANPATH holding man/*.[158], so systemd-analyze can resolve man:medqd(8)."""
    man_root = os.path.join(tmp, "man")
    for page in os.listdir(os.path.join(source_dir, "man")):
        section = page.rsplit(".", 1)[-1]
        os.makedirs(os.path.join(man_root, "man" + section), exist_ok=True)
        with open(os.path.join(source_dir, "man", page), encoding="utf-8") as src:
            text = src.read()
        with open(os.path.join(man_root, "man" + section, page), "w", encoding="utf-8") as dst:
            dst.write(text)
    return man_root


def staged_units(source_dir, sub, names, medqd, dest):
    os.makedirs(dest)
    paths = []
    for name in names:
        with open(os.path.join(source_dir, "packaging", sub, name), encoding="utf-8") as f:
            text = f.read()
        if "/usr/sbin/medqd" not in text and name.endswith(".service"):
            pkgtest.fail([f"packaging/{sub}/{name}: ExecStart does not run /usr/sbin/medqd"])
        path = os.path.join(dest, name)
        with open(path, "w", encoding="utf-8") as f:
            f.write(text.replace("/usr/sbin/medqd", medqd))
        paths.append(path)
    return paths


def verify(source_dir, medqd):
    analyze = pkgtest.need_tool("systemd-analyze", "systemd")
    pkgtest.need_tool("man", "man-db")
    problems = []
    with tempfile.TemporaryDirectory(prefix="medq-units-") as tmp:
        env = dict(os.environ, MANPATH=stage_man_pages(source_dir, tmp))
        runtime = os.path.join(tmp, "xdg")
        os.mkdir(runtime, 0o700)
        for mode, sub in (("--system", ""), ("--user", "user")):
            units = staged_units(source_dir, sub, SYSTEM_UNITS, medqd,
                                 os.path.join(tmp, "units-" + (sub or "system")))
            # The user manager reads the caller's ~/.config/systemd/user too:
            # point it at empty folders so only our units count.
            run_env = dict(env, XDG_RUNTIME_DIR=runtime, HOME=tmp,
                           XDG_CONFIG_HOME=os.path.join(tmp, "config"),
                           XDG_DATA_HOME=os.path.join(tmp, "data")) if mode == "--user" else env
            proc = pkgtest.run([analyze, mode, "verify"] + units, check=False, env=run_env)
            output = (proc.stdout + proc.stderr).strip()
            if proc.returncode != 0 or output:
                problems.append(f"systemd-analyze {mode} verify packaging/{sub or '.'}: "
                                f"exit {proc.returncode}\n{output}")
    pkgtest.finish(problems, "systemd-analyze verify passes silently on the system and user units")


def read_unit(path):
    """A unit as {section: {key: [values...]}} (keys may repeat)."""
    unit = {}
    section = None
    with open(path, encoding="utf-8") as f:
        for raw in f:
            line = raw.strip()
            if not line or line.startswith(("#", ";")):
                continue
            if line.startswith("[") and line.endswith("]"):
                section = unit.setdefault(line[1:-1], {})
                continue
            key, _, value = line.partition("=")
            section.setdefault(key.strip(), []).append(value.strip())
    return unit


def policy(source_dir):
    """The unit settings the issue asks for, so that an edit cannot drop one unnoticed."""
    pk = os.path.join(source_dir, "packaging")
    problems = []

    def expect(unit_name, unit, section, key, value):
        got = unit.get(section, {}).get(key, [])
        if value not in got:
            problems.append(f"{unit_name}: [{section}] {key}={value} expected, found {got}")

    svc = read_unit(os.path.join(pk, "medqd.service"))
    sock = read_unit(os.path.join(pk, "medqd.socket"))
    for key, value in [("Type", "notify"), ("WatchdogSec", "30"), ("User", "medq"),
                       ("Group", "medq"), ("RuntimeDirectory", "medq"),
                       ("StateDirectory", "medq"), ("NoNewPrivileges", "yes"),
                       ("ProtectSystem", "strict"), ("ProtectHome", "yes"),
                       ("PrivateTmp", "yes"), ("DevicePolicy", "closed"),
                       ("DeviceAllow", "/dev/nvidiactl rw"), ("DeviceAllow", "/dev/nvidia-uvm rw"),
                       ("DeviceAllow", "char-nvidia-frontend rw"),
                       ("RestrictAddressFamilies", "AF_UNIX"), ("ProtectKernelTunables", "yes"),
                       ("ProtectControlGroups", "yes"), ("RestrictNamespaces", "yes"),
                       ("LockPersonality", "yes"), ("SystemCallArchitectures", "native"),
                       ("ExecStart", "/usr/sbin/medqd")]:
        expect("medqd.service", svc, "Service", key, value)
    # LibTorch and the CUDA JIT need writable+executable memory; PrivateDevices
    # would hide /dev/nvidia*.
    for forbidden in ("MemoryDenyWriteExecute", "PrivateDevices", "ProcSubset"):
        if forbidden in svc.get("Service", {}):
            problems.append(f"medqd.service: {forbidden}= must not be set (breaks CUDA)")
    for key, value in [("ListenStream", "/run/medq/medq.sock"), ("SocketMode", "0660"),
                       ("SocketGroup", "medq")]:
        expect("medqd.socket", sock, "Socket", key, value)

    usvc = read_unit(os.path.join(pk, "user", "medqd.service"))
    usock = read_unit(os.path.join(pk, "user", "medqd.socket"))
    expect("user/medqd.service", usvc, "Service", "Type", "notify")
    expect("user/medqd.service", usvc, "Service", "WatchdogSec", "30")
    expect("user/medqd.socket", usock, "Socket", "ListenStream", "%t/medq/medq.sock")
    if "MemoryDenyWriteExecute" in usvc.get("Service", {}):
        problems.append("user/medqd.service: MemoryDenyWriteExecute= must not be set")
    # The service's drain must fit in its stop timeout (drain_timeout_s default 30).
    for name, unit in (("medqd.service", svc), ("user/medqd.service", usvc)):
        stop = unit.get("Service", {}).get("TimeoutStopSec", ["90"])[-1]
        if float(stop) <= 30:
            problems.append(f"{name}: TimeoutStopSec={stop} leaves no time for the 30 s drain")
    pkgtest.finish(problems,
                   "the units carry the required activation, watchdog and sandbox settings")


def sysusers(source_dir):
    """Applies the fragments to an empty root and checks what they create."""
    sysusers_tool = pkgtest.need_tool("systemd-sysusers", "systemd")
    tmpfiles_tool = pkgtest.need_tool("systemd-tmpfiles", "systemd")
    pk = os.path.join(source_dir, "packaging")
    problems = []
    with tempfile.TemporaryDirectory(prefix="medq-root-") as root:
        for sub, src in (("sysusers.d", "medq.sysusers"), ("tmpfiles.d", "medq.tmpfiles")):
            os.makedirs(os.path.join(root, "usr/lib", sub))
            with open(os.path.join(pk, src), encoding="utf-8") as f:
                text = f.read()
            with open(os.path.join(root, "usr/lib", sub, "medq.conf"), "w", encoding="utf-8") as f:
                f.write(text)
        os.makedirs(os.path.join(root, "etc"))
        pkgtest.run([sysusers_tool, "--root=" + root])
        users = {}
        with open(os.path.join(root, "etc/passwd"), encoding="utf-8") as f:
            for line in f:
                fields = line.rstrip("\n").split(":")
                users[fields[0]] = fields
        groups = {}
        with open(os.path.join(root, "etc/group"), encoding="utf-8") as f:
            for line in f:
                fields = line.rstrip("\n").split(":")
                groups[fields[0]] = fields
        medq = users.get("medq")
        if medq is None:
            pkgtest.fail(["sysusers: no user medq created"])
        if int(medq[2]) >= 1000 or int(medq[2]) == 0:
            problems.append(f"sysusers: medq has uid {medq[2]}, not a system uid")
        if medq[5] != "/var/lib/medq" or not medq[6].endswith("nologin"):
            problems.append(f"sysusers: medq home/shell are {medq[5]} {medq[6]}")
        if "medq" not in groups or groups["medq"][2] != medq[3]:
            problems.append("sysusers: group medq missing or not medq's primary group")

        if os.geteuid() != 0:
            print("note: not root, so the tmpfiles part (which chowns) did not run")
        else:
            pkgtest.run([tmpfiles_tool, "--create", "--root=" + root])
            for path, mode in (("run/medq", 0o750), ("var/lib/medq", 0o750),
                               ("var/lib/medq/models", 0o750)):
                full = os.path.join(root, path)
                if not os.path.isdir(full):
                    problems.append(f"tmpfiles: /{path} not created")
                    continue
                st = os.stat(full)
                if stat.S_IMODE(st.st_mode) != mode or st.st_uid != int(medq[2]) \
                        or st.st_gid != int(medq[3]):
                    problems.append(f"tmpfiles: /{path} is {oct(stat.S_IMODE(st.st_mode))} "
                                    f"{st.st_uid}:{st.st_gid}, want {oct(mode)} medq:medq")
    pkgtest.finish(problems, "sysusers and tmpfiles create user medq and its folders")


def main():
    if len(sys.argv) < 3:
        print(__doc__)
        sys.exit(2)
    what, source_dir = sys.argv[1], sys.argv[2]
    if what == "verify" and len(sys.argv) == 4:
        verify(source_dir, os.path.abspath(sys.argv[3]))
    elif what == "policy":
        policy(source_dir)
    elif what == "sysusers":
        sysusers(source_dir)
    print(__doc__)
    sys.exit(2)


if __name__ == "__main__":
    main()
