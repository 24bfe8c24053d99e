"""Export a trained verifier to ONNX and quantize it to int8 (onnxruntime dynamic quantization).

    python train/verifier/export.py                               # build/model -> build/model-onnx/
    python train/verifier/export.py --model DIR --out DIR2
    python train/verifier/export.py --quantize-only build/model-onnx  # int8 from an existing model.onnx (no torch)

Written to --out: model.fp32.onnx (inputs input_ids, attention_mask, token_type_ids, int64,
[batch, sequence]; output logits [batch, 3]), model.onnx (the int8 model: weights int8, activations
quantized on the fly), tokenizer.json, labels.json, export.json (sizes, the largest difference
between torch and onnxruntime logits, int8 agreement with fp32, latency), and config.json naming
the outputs in NLI terms (entailment, contradiction, neutral), so the folder is what the policy's
`checker: nli` loads (`poisoning.nli.model_path: DIR`). bench/verifier.py --model DIR reads it too.

Checks printed: fp32 ONNX logits against torch (max |diff|, should be < 1e-3), the int8 model's
agreement with fp32 on the argmax and its largest probability difference, on the 20 natural pairs
and up to 200 dev pairs; latency per pair on this machine's CPU at 256 tokens, one pair and ten
pairs a call.
"""

from __future__ import annotations

import argparse
import inspect
import json
import shutil
import sys
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

BUILD = HERE / "build"
INPUTS = ("input_ids", "attention_mask", "token_type_ids")


def quantize(out: Path) -> Path:
    from onnxruntime.quantization import QuantType, quantize_dynamic

    src, dst = out / "model.fp32.onnx", out / "model.onnx"
    # per-channel scales: on 600 dev pairs the argmax agrees with fp32 on 98.5 % (per-tensor: 95.5 %,
    # P(contradicted) off by up to 0.86) for the same 23 MB
    quantize_dynamic(str(src), str(dst), weight_type=QuantType.QInt8, per_channel=True)
    return dst


NLI_NAMES = {"supported": "entailment", "contradicted": "contradiction", "not_covered": "neutral"}


def nli_config(out: Path) -> None:
    """config.json with the outputs named as the NLI checker reads them (it maps labels by name)."""
    labels = json.loads((out / "labels.json").read_text())
    (out / "config.json").write_text(json.dumps({
        "id2label": {str(n): NLI_NAMES[label] for n, label in enumerate(labels)}, "trained_labels": labels,
        "max_position_embeddings": 512}, indent=1) + "\n")


def check_pairs(limit: int = 200) -> list[tuple[str, str]]:
    """The pairs the exported models are compared on: the natural pairs and some dev pairs."""
    with (HERE / "natural_pairs.jsonl").open(encoding="utf-8") as f:
        pairs = [(r["evidence"], r["claim"]) for r in map(json.loads, f)]
    dev = BUILD / "dev.jsonl"
    if dev.exists():
        with dev.open(encoding="utf-8") as f:
            for n, line in enumerate(f):
                if n >= limit:
                    break
                r = json.loads(line)
                pairs.append((r["premise"], r["claim"]))
    return pairs


class OrtRunner:
    """An ONNX verifier on onnxruntime's CPU provider with its tokenizer (pairs truncated longest first)."""

    def __init__(self, model: Path, tokenizer_json: Path, max_len: int) -> None:
        import onnxruntime as ort
        from tokenizers import Tokenizer

        self.session = ort.InferenceSession(str(model), providers=["CPUExecutionProvider"])
        self.names = {i.name for i in self.session.get_inputs()}
        self.tok = Tokenizer.from_file(str(tokenizer_json))
        self.tok.enable_truncation(max_length=max_len, strategy="longest_first")

    def logits(self, pairs: list[tuple[str, str]], batch: int = 16, pad_to: int = 0) -> np.ndarray:
        self.tok.enable_padding(pad_id=0, pad_token="[PAD]", length=pad_to or None)
        out = []
        for start in range(0, len(pairs), batch):
            enc = self.tok.encode_batch(pairs[start:start + batch])
            feed = {"input_ids": np.array([e.ids for e in enc], dtype=np.int64),
                    "attention_mask": np.array([e.attention_mask for e in enc], dtype=np.int64),
                    "token_type_ids": np.array([e.type_ids for e in enc], dtype=np.int64)}
            out.append(self.session.run(None, {k: v for k, v in feed.items() if k in self.names})[0])
        return np.concatenate(out)


def softmax(x: np.ndarray) -> np.ndarray:
    e = np.exp(x - x.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)


def latency(runner: OrtRunner, pairs: list[tuple[str, str]], max_len: int) -> dict:
    """Milliseconds per pair, padded to max_len (tokenizing included): one pair a call, ten pairs a call."""
    out = {}
    for batch in (1, 10):
        sample = (pairs * 10)[:max(40, batch * 4)]
        runner.logits(sample[:batch], batch, pad_to=max_len)  # warm up
        started = time.perf_counter()
        runner.logits(sample, batch, pad_to=max_len)
        out[f"ms_per_pair_batch{batch}"] = (time.perf_counter() - started) * 1000 / len(sample)
    return out


def export(model_dir: Path, out: Path, max_len: int, opset: int) -> dict:
    import torch
    from transformers import AutoModelForSequenceClassification, AutoTokenizer

    out.mkdir(parents=True, exist_ok=True)
    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    # eager attention: the exported graph is plain MatMul/Softmax, which every onnxruntime quantizes
    model = AutoModelForSequenceClassification.from_pretrained(model_dir, dtype=torch.float32,
                                                               attn_implementation="eager").eval()
    model.config.return_dict = False
    dummy = tokenizer(["a premise about a mountain"] * 2, ["a claim"] * 2, padding="max_length", max_length=32,
                      return_tensors="pt")
    args = tuple(dummy[k] for k in INPUTS)
    kwargs = {}
    if "dynamo" in inspect.signature(torch.onnx.export).parameters:
        kwargs["dynamo"] = False  # the TorchScript exporter: dynamic axes, no onnxscript needed
    torch.onnx.export(model, args, str(out / "model.fp32.onnx"), input_names=list(INPUTS), output_names=["logits"],
                      dynamic_axes={**{k: {0: "batch", 1: "sequence"} for k in INPUTS}, "logits": {0: "batch"}},
                      opset_version=opset, do_constant_folding=True, **kwargs)
    tokenizer.save_pretrained(out)  # writes tokenizer.json (a fast tokenizer)
    labels = model_dir / "labels.json"
    if labels.exists():
        shutil.copy(labels, out / "labels.json")
    else:
        (out / "labels.json").write_text(json.dumps([model.config.id2label[i] for i in range(model.config.num_labels)]) + "\n")
    for name in ("train_config.json", "best.json"):
        if (model_dir / name).exists():
            shutil.copy(model_dir / name, out / name)

    pairs = check_pairs()
    enc = tokenizer([p for p, _ in pairs], [c for _, c in pairs], truncation="longest_first", max_length=max_len,
                    padding=True, return_tensors="pt")
    with torch.no_grad():
        want = model(**{k: enc[k] for k in INPUTS})[0].numpy()
    got = OrtRunner(out / "model.fp32.onnx", out / "tokenizer.json", max_len).logits(pairs)
    return {"torch_vs_onnx_max_abs_diff": float(np.abs(want - got).max()), "check_pairs": len(pairs)}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", type=Path, default=BUILD / "model", help="a folder written by train.py")
    parser.add_argument("--out", type=Path, default=BUILD / "model-onnx")
    parser.add_argument("--quantize-only", type=Path, metavar="DIR", help="quantize DIR/model.fp32.onnx only (no torch)")
    parser.add_argument("--max-len", type=int, default=256)
    parser.add_argument("--opset", type=int, default=17)
    args = parser.parse_args(argv)
    out = args.quantize_only or args.out
    report: dict = {}
    if not args.quantize_only:
        report.update(export(args.model, out, args.max_len, args.opset))
    int8 = quantize(out)
    pairs = check_pairs()
    nli_config(out)
    fp32 = softmax(OrtRunner(out / "model.fp32.onnx", out / "tokenizer.json", args.max_len).logits(pairs))
    q8_runner = OrtRunner(int8, out / "tokenizer.json", args.max_len)
    q8 = softmax(q8_runner.logits(pairs))
    report.update({
        "int8_argmax_agreement": float(np.mean(fp32.argmax(1) == q8.argmax(1))),
        "int8_max_prob_diff": float(np.abs(fp32 - q8).max()),
        "model_fp32_onnx_mb": (out / "model.fp32.onnx").stat().st_size / 1e6,
        "model_int8_onnx_mb": int8.stat().st_size / 1e6,
        **{f"int8_{k}": v for k, v in latency(q8_runner, pairs, args.max_len).items()},
    })
    (out / "export.json").write_text(json.dumps(report, indent=1) + "\n")
    for k, v in report.items():
        print(f"{k:32} {v:.4g}" if isinstance(v, float) else f"{k:32} {v}")


if __name__ == "__main__":
    main()
