#!/usr/bin/env python3
"""Builds the fuzz targets' seed folders from the reference fixtures and the
hand-written seeds in tests/fuzz/seeds/<target>/.

usage: make_seeds.py FIXTURES_DIR SEEDS_DIR OUT_DIR

The fixtures' tokenizers and weights are megabytes: each becomes a small seed
of the same shape (the first vocabulary entries and merges, a few tensors of
at most 2 elements per dimension), so that one execution stays fast and
libFuzzer's input size limit stays near real headers and configs.
"""
import json
import pathlib
import shutil
import sqlite3
import struct
import sys
import tempfile

VOCAB_KEEP = 1000  # GPT-2-style byte tokens and SentencePiece byte fallbacks are the first ids
MERGES_KEEP = 500
ADDED_KEEP = 16
TENSORS_KEEP = 8


def write(out, target, name, data):
    folder = out / target
    folder.mkdir(parents=True, exist_ok=True)
    (folder / name).write_bytes(data if isinstance(data, bytes) else data.encode())


def dumps(obj):
    return json.dumps(obj, ensure_ascii=False, indent=1)


def shrink_tokenizer(tok):
    model = tok["model"]
    vocab = model.get("vocab")
    if isinstance(vocab, dict):
        model["vocab"] = {k: v for k, v in vocab.items() if v < VOCAB_KEEP}
        kept = model["vocab"]
        merges = []
        for m in model.get("merges", []):
            a, b = m.split(" ", 1) if isinstance(m, str) else m
            if a in kept and b in kept and a + b in kept:
                merges.append(m)
            if len(merges) >= MERGES_KEEP:
                break
        model["merges"] = merges
    elif isinstance(vocab, list):  # Unigram-style [piece, score] lists
        model["vocab"] = vocab[:VOCAB_KEEP]
    tok["added_tokens"] = tok.get("added_tokens", [])[:ADDED_KEEP]
    return tok


def small_config(config):
    # added_tokens_decoder is most of llama3's file and the template does not read it.
    config.pop("added_tokens_decoder", None)
    return config


def tokenizers(fixtures, out):
    for folder in sorted((fixtures / "tokenizers").iterdir()):
        tok_path = folder / "tokenizer.json"
        if not tok_path.is_file():
            continue
        tok = shrink_tokenizer(json.loads(tok_path.read_text()))
        config_path = folder / "tokenizer_config.json"
        config = small_config(json.loads(config_path.read_text())) if config_path.is_file() else None
        write(out, "tokenizer", folder.name, dumps(tok))
        if config is not None:
            no_template = {k: v for k, v in config.items() if k != "chat_template"}
            write(out, "tokenizer", folder.name + "+config", dumps(tok) + "\0" + dumps(no_template))
            write(out, "tokenizer_config", folder.name, dumps(config))
            templates = config.get("chat_template")
            if isinstance(templates, str):
                templates = [{"name": "default", "template": templates}]
            for entry in templates or []:
                write(out, "chat_template", folder.name + "-" + entry["name"], entry["template"])


def safetensors_seed(path):
    with open(path, "rb") as f:
        (length,) = struct.unpack("<Q", f.read(8))
        header = json.loads(f.read(length))
    sizes = {"F64": 8, "F32": 4, "F16": 2, "BF16": 2, "I64": 8, "I32": 4, "I16": 2, "I8": 1,
             "U8": 1, "BOOL": 1}
    small = {}
    if "__metadata__" in header:
        small["__metadata__"] = header["__metadata__"]
    offset = 0
    for name, entry in list((k, v) for k, v in header.items() if k != "__metadata__")[:TENSORS_KEEP]:
        shape = [min(d, 2) for d in entry["shape"]]
        n = sizes[entry["dtype"]]
        for d in shape:
            n *= d
        small[name] = {"dtype": entry["dtype"], "shape": shape, "data_offsets": [offset, offset + n]}
        offset += n
    text = json.dumps(small, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 8)
    return struct.pack("<Q", len(text)) + text + bytes(i % 251 for i in range(offset))


def models(fixtures, out):
    for folder in sorted((fixtures / "models").iterdir()):
        config = folder / "config.json"
        generation = folder / "generation_config.json"
        if config.is_file():
            data = config.read_bytes()
            if generation.is_file():
                data += b"\0" + generation.read_bytes()
            write(out, "model_config", folder.name, data)
        adapter = folder / "adapter_config.json"
        if adapter.is_file():
            write(out, "adapter_config", folder.name, adapter.read_bytes())
        for st in sorted(folder.glob("*.safetensors")):
            write(out, "safetensors", folder.name + "-" + st.stem, safetensors_seed(st))


# daemon/store/job_store.cc's schema (kSchema).
JOB_STORE_SCHEMA = """
CREATE TABLE IF NOT EXISTS jobs (  id INTEGER PRIMARY KEY,  op TEXT NOT NULL,  priority INTEGER NOT NULL,  params TEXT NOT NULL,  owner TEXT NOT NULL,  state TEXT NOT NULL,  created_at REAL NOT NULL,  finished_at REAL,  result TEXT);
CREATE INDEX IF NOT EXISTS jobs_unfinished ON jobs(state, priority, id);
CREATE TABLE IF NOT EXISTS ids (k INTEGER PRIMARY KEY CHECK (k = 0), next INTEGER NOT NULL);
CREATE TABLE IF NOT EXISTS meta (k INTEGER PRIMARY KEY CHECK (k = 0), store TEXT NOT NULL,  commits INTEGER NOT NULL);
CREATE TABLE IF NOT EXISTS lost (first INTEGER NOT NULL, last INTEGER NOT NULL,  at REAL NOT NULL, why TEXT NOT NULL);
"""

JOB_STORE_JOBS = [
    # id, op, priority, params, owner, state, created_at, finished_at, result
    (1, "generate", 1, '{"prompt":"hi","max_tokens":4}', "uid:1000", "queued", 1.0, None, None),
    (2, "embed", 1, '{"input":["a","b"]}', "http", "done", 2.0, 3.0, '{"data":[[0.5]]}'),
    (3, "generate", 2, '{"messages":[{"role":"user","content":"x"}]}', "uid:0", "failed", 4.0,
     5.0, '{"error":{"code":"INTERNAL"}}'),
    (4, "generate", 0, '{"prompt":"p"}', "uid:1000", "cancelled", 6.0, 7.0, '{"text":""}'),
    (5, "generate", 1, '{"prompt":"q"}', "uid:1000", "timed_out", 8.0, 9.0, '{"text":"t"}'),
    (6, "generate", 0, '{"prompt":"r"}', "http", "queued", 10.0, None, None),
]


def job_store_files(jobs, store="0123456789abcdef0123456789abcdef", wal_jobs=(), version=1,
                    forgotten=0, lost=(), damage_sql=None):
    """A store as JobStore writes it (512-byte pages, to keep seeds small):
    jobs.db's bytes, its WAL's (the commits of `wal_jobs`, not checkpointed)
    and the mark that matches them. `damage_sql` then changes the database
    behind the store's back."""
    with tempfile.TemporaryDirectory() as tmp:
        path = pathlib.Path(tmp) / "jobs.db"
        db = sqlite3.connect(path, isolation_level=None)
        db.execute("PRAGMA page_size=512")
        db.execute("PRAGMA journal_mode=WAL")
        db.execute("PRAGMA wal_autocheckpoint=0")
        db.executescript(JOB_STORE_SCHEMA)
        db.execute(f"PRAGMA user_version={version}")
        commits = 0
        db.execute("INSERT INTO meta (k, store, commits) VALUES (0, ?, 0)", (store,))

        def add(rows):
            nonlocal commits
            for row in rows:
                db.execute("BEGIN IMMEDIATE")
                db.execute("INSERT INTO jobs VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)", row)
                db.execute("UPDATE meta SET commits = commits + 1 WHERE k = 0")
                db.execute("COMMIT")
                commits += 1

        add(jobs)
        if forgotten:
            db.execute("INSERT INTO ids (k, next) VALUES (0, ?)", (forgotten,))
        for first, last in lost:
            db.execute("INSERT INTO lost VALUES (?, ?, 1.0, 'damaged')", (first, last))
        if damage_sql:
            db.execute(damage_sql)
        db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        add(wal_jobs)
        data = path.read_bytes()
        wal = pathlib.Path(str(path) + "-wal")
        wal_data = wal.read_bytes() if wal.exists() else b""
        db.close()
    last_id = max([r[0] for r in list(jobs) + list(wal_jobs)] + [forgotten])
    mark = {"v": 1, "store": store, "commits": commits, "last_id": last_id, "reserved": 1024}
    return data, wal_data, json.dumps(mark, separators=(",", ":")).encode() + b"\n"


def job_store_input(db=b"", wal=None, mark=None, no_db=False, reopen=True, probe=1):
    """tests/fuzz/job_store_fuzz.cc's input."""
    flags = (1 if mark is not None else 0) | (2 if wal is not None else 0) | \
        (4 if no_db else 0) | (8 if reopen else 0)
    mark, wal = mark or b"", wal or b""
    return struct.pack("<BBHI", flags, probe, len(mark), len(wal)) + mark + wal + db


def job_stores(out):
    """Seeds for job_store: valid stores, and the damage JobStore must see
    (issue 46: an emptied jobs.db, garbage in the WAL, a bad row, ...)."""
    def seed(name, data):
        write(out, "job_store", name, data)

    empty_db, _, empty_mark = job_store_files([])
    seed("new", job_store_input(empty_db, mark=empty_mark))
    seed("missing", job_store_input(no_db=True, reopen=False))
    db, _, mark = job_store_files(JOB_STORE_JOBS[:5], forgotten=7, lost=[(8, 9)])
    seed("jobs", job_store_input(db, mark=mark, probe=2))
    seed("jobs-no-mark", job_store_input(db, probe=5))
    seed("jobs-bad-mark", job_store_input(db, mark=mark[:len(mark) // 2], reopen=False))
    seed("emptied", job_store_input(b"", mark=mark))
    seed("deleted", job_store_input(no_db=True, mark=mark))
    seed("replaced", job_store_input(empty_db, mark=mark))
    seed("truncated", job_store_input(db[:1024], mark=mark))
    seed("garbage", job_store_input(bytes((i * 37) % 256 for i in range(1024)), mark=mark))
    behind = json.loads(mark)
    behind.update(commits=behind["commits"] + 3, last_id=12, reserved=2048)
    seed("behind", job_store_input(db, mark=json.dumps(behind).encode()))
    behind.update(last_id=2**63, reserved=2**64 - 1)
    seed("mark-past-ids", job_store_input(db, mark=json.dumps(behind).encode()))
    base, wal, wal_mark = job_store_files(JOB_STORE_JOBS[:3], wal_jobs=JOB_STORE_JOBS[3:])
    seed("wal", job_store_input(base, wal=wal, mark=wal_mark, probe=4))
    seed("wal-lost", job_store_input(base, mark=wal_mark, probe=4))
    seed("wal-garbage", job_store_input(
        base, wal=wal[:1100] + bytes((i * 91) % 256 for i in range(len(wal) - 1100)),
        mark=wal_mark))
    bad = [(1, "generate", 1, "[]", "uid:1000", "queued", 1.0, None, None),
           (2, "embed", 7, '{"input":"a"}', "", "queued", -1.0, None, None),
           (3, "translate", 1, "{", "uid:1000", "sleeping", 1.0, None, None),
           (4, "generate", 1, '{"prompt":"p"}', "uid:1000", "done", 1.0, 2.0, "{")]
    db, _, mark = job_store_files(bad)
    seed("bad-rows", job_store_input(db, mark=mark, probe=4))
    db, _, mark = job_store_files(
        JOB_STORE_JOBS[:2], damage_sql="UPDATE meta SET store = CAST(x'30c0ff' AS TEXT)")
    seed("bad-identity", job_store_input(db, mark=mark))
    seed("bad-identity-no-mark", job_store_input(db))
    db, _, mark = job_store_files(JOB_STORE_JOBS[:1], version=2)
    seed("newer", job_store_input(db, mark=mark))


def main():
    fixtures, seeds, out = (pathlib.Path(a) for a in sys.argv[1:4])
    if out.exists():
        shutil.rmtree(out)
    out.mkdir(parents=True)
    if (fixtures / "tokenizers").is_dir():
        tokenizers(fixtures, out)
    if (fixtures / "models").is_dir():
        models(fixtures, out)
    job_stores(out)
    for folder in sorted(p for p in seeds.iterdir() if p.is_dir()):
        for seed in sorted(folder.iterdir()):
            write(out, folder.name, "hand-" + seed.name, seed.read_bytes())


if __name__ == "__main__":
    main()
