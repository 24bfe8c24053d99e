#!/usr/bin/env bash
# The whole training run in one command, for a lent GPU machine (torch, transformers and
# onnxruntime in its image; no network): build the data, a 20-step smoke test, three designs side
# by side on the one GPU, int8 export of each, and a tarball of what the repository keeps.
#
#   here:  python train/verifier/data.py && python train/verifier/train.py --prepare-base
#   there: bash train/verifier/device_train.sh "$OUT"
#          (carry train/verifier/build/cache/halueval_qa.jsonl and train/verifier/build/cache/minilm-l6-fp16)
#   here:  cat verifier-run.tar.part-* | tar -x -C train/verifier/build
#
# The designs (issue 44 asks for more than one, chosen on dev data only):
#   a  MiniLM-L6, 6 layers, 3-way head, 3 epochs, lr 3e-5 (train.py's defaults)
#   b  the same, 6 epochs, lr 5e-5
#   c  the lowest 3 layers only (about half the CPU time a pair), 6 epochs, lr 6e-5
# Each trainer saves its best checkpoint at every evaluation, so the time bound on training
# (TRAIN_SECONDS) keeps the best one reached, never nothing.
set -euo pipefail
export PYTHONUNBUFFERED=1
OUT=${1:?usage: device_train.sh OUT_DIR}
TRAIN_SECONDS=${TRAIN_SECONDS:-330}
PY=${PYTHON:-python3}
cd "$(dirname "$0")"

"$PY" data.py
sha256sum build/train.jsonl build/dev.jsonl
"$PY" train.py --max-steps 20 --eval-limit 256 --out build/smoke 2>&1 | grep -v "Loading weights"

run() {  # name, then train.py's arguments
    local name=$1; shift
    timeout "$TRAIN_SECONDS" "$PY" train.py --out "build/model-$name" "$@" >"build/train-$name.log" 2>&1 || true
}
run a &
run b --epochs 6 --lr 5e-5 &
run c --epochs 6 --lr 6e-5 --layers 3 &
wait
for name in a b c; do
    echo "== $name"; grep -E "^(eval|best)" "build/train-$name.log" | tail -4 || true
done

for name in a b c; do
    if [ -f "build/model-$name/best.json" ]; then
        "$PY" export.py --model "build/model-$name" --out "build/onnx-$name" >"build/export-$name.log" 2>&1 &
    fi
done
wait
for name in a b c; do echo "== export $name"; tail -8 "build/export-$name.log" || true; done

# keep the better 6-layer design (dev selection score) and the 3-layer one: 16 MiB a file comes back
six=$("$PY" -c "
import json
score = {n: json.load(open(f'build/model-{n}/best.json'))['selection'] for n in 'ab'}
print(max(score, key=score.get))")
echo "6-layer design kept: $six"
pack=()
for name in "$six" c; do
    pack+=("onnx-$name/model.onnx" "onnx-$name/config.json" "onnx-$name/tokenizer.json" "onnx-$name/labels.json" "onnx-$name/export.json"
           "onnx-$name/train_config.json" "onnx-$name/best.json" "model-$name/metrics.jsonl" "train-$name.log" "export-$name.log")
done
for name in a b; do pack+=("model-$name/best.json" "model-$name/metrics.jsonl" "train-$name.log"); done
tar -C build -cf "$OUT/verifier-run.tar" $(printf '%s\n' "${pack[@]}" | sort -u)
split -b 15M "$OUT/verifier-run.tar" "$OUT/verifier-run.tar.part-"
rm "$OUT/verifier-run.tar"
ls -la "$OUT"
