"""train/verifier/gpu_bundle.py (issue 44): a checkpoint carried as its int8 difference from the
base comes back with the same names, shapes and dtypes, close to the original; new tensors (the
classifier head) come back exactly."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("safetensors")
from safetensors.numpy import load_file, save_file  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "train" / "verifier"))
import gpu_bundle  # noqa: E402


def test_delta_round_trip(tmp_path):
    rng = np.random.default_rng(0)
    base = {"embeddings.word_embeddings.weight": rng.normal(0, 0.05, (50, 8)).astype(np.float16),
            "encoder.layer.0.output.dense.bias": rng.normal(0, 0.05, (8,)).astype(np.float16)}
    tuned = {f"bert.{k}": (v.astype(np.float32) + rng.normal(0, 0.002, v.shape)).astype(np.float16) for k, v in base.items()}
    tuned["classifier.weight"] = rng.normal(0, 0.05, (3, 8)).astype(np.float16)
    save_file(base, str(tmp_path / "base.safetensors"))
    save_file(tuned, str(tmp_path / "tuned.safetensors"))
    blob, info = gpu_bundle.pack_delta(tmp_path / "tuned.safetensors", tmp_path / "base.safetensors", 0.75)
    gpu_bundle.unpack_delta(blob, tmp_path / "base.safetensors", tmp_path / "back.safetensors")
    back = load_file(str(tmp_path / "back.safetensors"))
    assert set(back) == set(tuned)
    assert np.array_equal(back["classifier.weight"], tuned["classifier.weight"])
    for k, v in tuned.items():
        assert back[k].shape == v.shape and back[k].dtype == np.float16
        diff = back[k].astype(np.float32) - v.astype(np.float32)
        assert float(np.abs(diff).max()) < 0.002, k
    assert info["error_rms_over_difference_rms"] < 0.3
