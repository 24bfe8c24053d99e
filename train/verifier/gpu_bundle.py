"""What a lent GPU machine needs for one iteration, in under its 64 MiB transfer limit (issue 44).

    python train/verifier/gpu_bundle.py pack      # here: build/carry/ (~50 MB), from build/ and build/cache/
    python train/verifier/gpu_bundle.py unpack    # there (gpu_iteration.sh does it): build/carry/ -> build/
    python train/verifier/gpu_bundle.py delta MODEL_DIR DEST     # a checkpoint as its int8 difference from the base
    python train/verifier/gpu_bundle.py restore DEST MODEL_DIR   # ... and back (approximately: see below)

The working tree travels too (~13 MB), so the carried folder must stay under ~50 MB (it is ~48 MB). What it holds:
- the base encoder (build/cache/minilm-l6-fp16/, fp16, 45 MB): `model.safetensors` split into its
  even and odd bytes, each xz-compressed (the high bytes of fp16 compress, the low ones hardly):
  ~40 MB, restored byte for byte (SHA-256 checked);
- model b (iteration 1's best, the `--init` of the continuation): NOT byte for byte, which would
  not fit beside the base (45 + 40 MB): its difference from the base, int8 per row (step = 0.75 of
  the row's standard deviation of the difference, clipped at +-127 steps), xz-compressed: 7.8 MB,
  ~2.7 bits a weight. The restored difference is off by 22 % rms (step 0.5: 14 %, 9.5 MB: too
  little room left); the continuation evaluates its starting point as step 0, so what the
  approximation costs is measured, not assumed;
- build/train.jsonl and build/dev.jsonl, xz-compressed, SHA-256 checked on unpacking.
Only numpy and safetensors are needed (both in the runtime venv and the GPU image).
"""

from __future__ import annotations

import argparse
import hashlib
import io
import json
import lzma
import shutil
import sys
from pathlib import Path

import numpy as np
from safetensors.numpy import load_file, save_file

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from halueval import sha256  # the sibling script, as train.py imports it

BUILD = HERE / "build"
CARRY = BUILD / "carry"
BASE = BUILD / "cache" / "minilm-l6-fp16"
MODEL_B = BUILD / "model-b"
BASE_FILES = ("config.json", "special_tokens_map.json", "tokenizer.json", "tokenizer_config.json", "vocab.txt", "SOURCE.txt")
B_FILES = ("config.json", "labels.json", "tokenizer.json", "tokenizer_config.json", "train_config.json", "best.json")
DATA = ("train.jsonl", "dev.jsonl")


def _xz(data: bytes, preset: int) -> bytes:
    return lzma.compress(data, preset=preset)


def _base_key(name: str, base: dict) -> str | None:
    for k in (name, name.removeprefix("bert.")):
        if k in base:
            return k
    return None


def pack_delta(b_path: Path, base_path: Path, step: float = 0.5) -> tuple[bytes, dict]:
    base, b = load_file(str(base_path)), load_file(str(b_path))
    arrays: dict[str, np.ndarray] = {}
    err, sq, sq_d = 0.0, 0.0, 0.0
    for name, w in b.items():
        k = _base_key(name, base)
        if k is None or base[k].shape != w.shape or w.dtype != np.float16:
            arrays[f"raw:{name}"] = w
            continue
        d = w.astype(np.float32) - base[k].astype(np.float32)
        rows = d.reshape(d.shape[0], -1) if d.ndim > 1 else d.reshape(1, -1)
        scale = rows.std(axis=1) * step  # a fraction of the row's spread: ~3 bits a weight after xz
        scale[scale == 0] = 1.0
        q = np.clip(np.rint(rows / scale[:, None]), -127, 127).astype(np.int8)
        arrays[f"q:{name}"], arrays[f"s:{name}"] = q, scale.astype(np.float32)
        back = (base[k].astype(np.float32) + (q * scale[:, None]).reshape(d.shape)).astype(np.float16)
        diff = back.astype(np.float32) - w.astype(np.float32)
        err, sq, sq_d = max(err, float(np.abs(diff).max())), sq + float((diff ** 2).sum()), sq_d + float((d ** 2).sum())
    buf = io.BytesIO()
    np.savez(buf, **{k.replace(":", "__").replace(".", "--"): v for k, v in arrays.items()})
    return buf.getvalue(), {"step_of_row_std": step, "max_abs_error": err, "error_rms_over_difference_rms": (sq / sq_d) ** 0.5}


def unpack_delta(blob: bytes, base_path: Path, out: Path) -> None:
    base = load_file(str(base_path))
    arrays = {k.replace("__", ":").replace("--", "."): v for k, v in np.load(io.BytesIO(blob)).items()}
    tensors: dict[str, np.ndarray] = {}
    for key, v in arrays.items():
        kind, name = key.split(":", 1)
        if kind == "raw":
            tensors[name] = v
        elif kind == "q":
            ref = base[_base_key(name, base)]
            scale = arrays[f"s:{name}"]
            tensors[name] = (ref.astype(np.float32) + (v.astype(np.float32) * scale[:, None]).reshape(ref.shape)).astype(np.float16)
    save_file(tensors, str(out), metadata={"format": "pt"})


def pack(args: argparse.Namespace) -> None:
    CARRY.mkdir(parents=True, exist_ok=True)
    manifest: dict = {"base": {}, "model_b": {}, "data": {}}
    raw = (BASE / "model.safetensors").read_bytes()
    manifest["base"]["model.safetensors"] = hashlib.sha256(raw).hexdigest()
    arr = np.frombuffer(raw, dtype=np.uint8)
    for part, plane in (("even", arr[0::2]), ("odd", arr[1::2])):
        (CARRY / f"base.{part}.xz").write_bytes(_xz(plane.tobytes(), args.preset))
    (CARRY / "base-files").mkdir(exist_ok=True)
    for name in BASE_FILES:
        if (BASE / name).exists():
            shutil.copy2(BASE / name, CARRY / "base-files" / name)
    if not args.no_model_b:
        blob, info = pack_delta(MODEL_B / "model.safetensors", BASE / "model.safetensors", args.delta_step)
        (CARRY / "model-b.delta.xz").write_bytes(_xz(blob, args.preset))
        manifest["model_b"] = {"original_sha256": sha256(MODEL_B / "model.safetensors"), **info}
        (CARRY / "b-files").mkdir(exist_ok=True)
        for name in B_FILES:
            if (MODEL_B / name).exists():
                shutil.copy2(MODEL_B / name, CARRY / "b-files" / name)
    for name in DATA:
        src = args.data / name
        manifest["data"][name] = sha256(src)
        (CARRY / f"{name}.xz").write_bytes(_xz(src.read_bytes(), args.preset))
    (CARRY / "manifest.json").write_text(json.dumps(manifest, indent=1) + "\n")
    total = sum(p.stat().st_size for p in CARRY.rglob("*") if p.is_file())
    for p in sorted(CARRY.rglob("*")):
        if p.is_file():
            print(f"{p.stat().st_size:>12,}  {p.relative_to(CARRY)}")
    print(f"{total:>12,}  total ({total / 2**20:.1f} MiB); model b: {manifest['model_b']}")


def unpack(args: argparse.Namespace) -> None:
    manifest = json.loads((CARRY / "manifest.json").read_text())
    BASE.mkdir(parents=True, exist_ok=True)
    even = np.frombuffer(lzma.decompress((CARRY / "base.even.xz").read_bytes()), dtype=np.uint8)
    odd = np.frombuffer(lzma.decompress((CARRY / "base.odd.xz").read_bytes()), dtype=np.uint8)
    raw = np.empty(len(even) + len(odd), dtype=np.uint8)
    raw[0::2], raw[1::2] = even, odd
    if hashlib.sha256(raw.tobytes()).hexdigest() != manifest["base"]["model.safetensors"]:
        sys.exit("base encoder: SHA-256 mismatch")
    (BASE / "model.safetensors").write_bytes(raw.tobytes())
    for p in (CARRY / "base-files").iterdir():
        shutil.copy2(p, BASE / p.name)
    if manifest["model_b"]:
        out = args.model_b_out
        out.mkdir(parents=True, exist_ok=True)
        unpack_delta(lzma.decompress((CARRY / "model-b.delta.xz").read_bytes()), BASE / "model.safetensors", out / "model.safetensors")
        for p in (CARRY / "b-files").iterdir():
            shutil.copy2(p, out / p.name)
    for name, digest in manifest["data"].items():
        (BUILD / name).write_bytes(lzma.decompress((CARRY / f"{name}.xz").read_bytes()))
        if sha256(BUILD / name) != digest:
            sys.exit(f"{name}: SHA-256 mismatch")
        print(f"{name} {digest}")
    print("unpacked: base encoder (exact), model b (int8 difference)" if manifest["model_b"] else "unpacked: base encoder")


def delta(args: argparse.Namespace) -> None:
    """A checkpoint train.py wrote, as its int8 difference from the base (~8 MB, for $OUT): the
    next session restores it with `restore` and continues from it (`train.py --init`)."""
    blob, info = pack_delta(args.model / "model.safetensors", BASE / "model.safetensors", args.delta_step)
    args.dest.mkdir(parents=True, exist_ok=True)
    (args.dest / "model.delta.xz").write_bytes(_xz(blob, args.preset))
    for name in B_FILES:
        if (args.model / name).exists():
            shutil.copy2(args.model / name, args.dest / name)
    (args.dest / "delta.json").write_text(json.dumps({"original_sha256": sha256(args.model / "model.safetensors"), **info}, indent=1) + "\n")
    print(f"{args.model} -> {args.dest}: {info}")


def restore(args: argparse.Namespace) -> None:
    args.dest.mkdir(parents=True, exist_ok=True)
    unpack_delta(lzma.decompress((args.model / "model.delta.xz").read_bytes()), BASE / "model.safetensors", args.dest / "model.safetensors")
    for name in B_FILES:
        if (args.model / name).exists():
            shutil.copy2(args.model / name, args.dest / name)
    print(f"{args.model} -> {args.dest}")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("action", choices=("pack", "unpack", "delta", "restore"))
    parser.add_argument("model", type=Path, nargs="?", help="delta: a train.py folder; restore: a folder delta wrote")
    parser.add_argument("dest", type=Path, nargs="?", help="delta/restore: where to write")
    parser.add_argument("--data", type=Path, default=BUILD, help="folder with train.jsonl and dev.jsonl (pack)")
    parser.add_argument("--preset", type=int, default=6, help="xz preset (pack)")
    parser.add_argument("--delta-step", type=float, default=0.75, help="model b's int8 step, a fraction of each row's std (pack)")
    parser.add_argument("--no-model-b", action="store_true", help="carry the base encoder and the data only (pack)")
    parser.add_argument("--model-b-out", type=Path, default=BUILD / "model-b-carried", help="where model b is restored (unpack)")
    args = parser.parse_args(argv)
    {"pack": pack, "unpack": unpack, "delta": delta, "restore": restore}[args.action](args)


if __name__ == "__main__":
    main()
