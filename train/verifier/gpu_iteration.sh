#!/usr/bin/env bash
# One training iteration on a lent GPU machine (issue 44), in ~8 minutes of an H100, from what
# gpu_bundle.py packs (the machine has torch, transformers and onnxruntime, no network):
#
#   here:  python train/verifier/data.py && python train/verifier/gpu_bundle.py pack   # -> build/carry (~48 MB)
#   there: bash train/verifier/gpu_iteration.sh "$OUT"        (carry: train/verifier/build/carry)
#   here:  cat $FILES_AT/run.tar.part-* | tar -x -C train/verifier/build
#   dry run, CPU, minutes: bash train/verifier/gpu_iteration.sh /tmp/out --tiny
#
# Two designs side by side on the one GPU, each selected on `--select swaps+natural` (the dev
# set's synthetic swaps against their true peers, contradicted-vs-supported AUC, and the natural
# dev half's AUC, both never tested on):
#   f  from the base encoder (MiniLM-L6), 3 epochs, lr 5e-5, batch 32, max 256 tokens
#   g  from model b (iteration 1, restored from its int8 difference), 2 epochs, lr 2e-5
# Then each best checkpoint is exported to int8 ONNX and measured as the policy runs it:
# probe.py and bench/verifier.py --nli DIR --nli-windows 1 --sets natural-dev (AUC, the threshold
# that blocks <= 3 % of right answers, wrong ones blocked there; rules alongside) needs the proxy's
# own packages (wordllama, ...), which the GPU image lacks: both are tried (BENCH_PYTHON), and run
# here afterwards on the returned int8 folders.
# $OUT gets: summary.txt, run.log and run.tar.part-* (15 MB parts: both int8 ONNX folders, both
# models' int8 differences from the base for a later --init, metrics, logs, bench and probe JSON).
set -euo pipefail
export PYTHONUNBUFFERED=1
OUT=${1:?usage: gpu_iteration.sh OUT_DIR [--tiny]}
TINY=${2:-}
PY=${PYTHON:-python3}
TRAIN_SECONDS=${TRAIN_SECONDS:-320}   # each trainer keeps its best checkpoint so far, so the bound loses no result
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)
cd "$(dirname "$0")"
ROOT=$(cd ../.. && pwd)
B=build
START=$(date +%s)
stamp() { echo "[$(( $(date +%s) - START )) s] $*"; }
exec > >(tee "$OUT/run.log") 2>&1

stamp "unpack"
"$PY" gpu_bundle.py unpack --model-b-out "$B/model-b-carried"
"$PY" -c "import torch; print('torch', torch.__version__, 'cuda', torch.cuda.is_available())"

if [ "$TINY" = "--tiny" ]; then  # a subset, a few steps, on the CPU: proves the chain, measures nothing
    DATA=$B/tiny; mkdir -p "$DATA"
    head -n 192 "$B/train.jsonl" >"$DATA/train.jsonl"; head -n 96 "$B/dev.jsonl" >"$DATA/dev.jsonl"
    COMMON=(--data "$DATA" --batch-size 8 --max-len 96 --eval-every 4 --eval-limit 64 --log-every 2 --device cpu)
    F=(--max-steps 8 --lr 5e-5); G=(--max-steps 8 --lr 2e-5); TRAIN_SECONDS=900
else
    DATA=$B
    COMMON=(--data "$DATA" --batch-size 32 --max-len 256 --eval-every 500 --log-every 100)
    F=(--epochs 3 --lr 5e-5); G=(--epochs 2 --lr 2e-5)
fi
sha256sum "$DATA/train.jsonl" "$DATA/dev.jsonl"

stamp "train f (base) and g (model b) side by side"
timeout "$TRAIN_SECONDS" "$PY" train.py --out "$B/model-f" --select swaps+natural "${COMMON[@]}" "${F[@]}" \
    >"$B/train-f.log" 2>&1 & pf=$!
timeout "$TRAIN_SECONDS" "$PY" train.py --out "$B/model-g" --init "$B/model-b-carried" --select swaps+natural \
    "${COMMON[@]}" "${G[@]}" >"$B/train-g.log" 2>&1 & pg=$!
wait $pf || echo "train f: exit $?"; wait $pg || echo "train g: exit $?"
for n in f g; do echo "== $n"; grep -E "^(eval|best)" "$B/train-$n.log" | cut -c1-260 | tail -5 || true; done

stamp "export"
pids=()
for n in f g; do
    if [ -f "$B/model-$n/best.json" ]; then
        "$PY" export.py --model "$B/model-$n" --out "$B/onnx-$n" >"$B/export-$n.log" 2>&1 & pids+=($!)
    fi
done
for p in "${pids[@]}"; do wait "$p" || echo "an export failed: $?"; done
for n in f g; do echo "== export $n"; tail -4 "$B/export-$n.log" || true; done

stamp "probes; bench natural-dev via the KB (1 window) where the proxy's packages are (not the GPU image: run it here after)"
mkdir -p "$B/results"
onnx=$(ls -d "$B"/onnx-f "$B"/onnx-g 2>/dev/null | while read -r d; do [ -f "$d/model.onnx" ] && echo "$d"; done || true)
[ -n "$onnx" ] && { "${BENCH_PYTHON:-$PY}" probe.py $onnx --json "$B/results/probes.json" >"$B/results/probes.log" 2>&1 || echo "probe failed"; }
for d in $onnx; do
    n=${d##*-}
    (cd "$ROOT" && timeout 600 "${BENCH_PYTHON:-$PY}" bench/verifier.py --nli "train/verifier/$d" --nli-windows 1 --sets natural-dev \
        --json "train/verifier/$B/results/bench-natural-dev-$n.json") >"$B/results/bench-$n.log" 2>&1 || echo "bench $n: exit $? (see results/bench-$n.log)"
done

stamp "pack"
pids=()
for n in f g; do
    if [ -f "$B/model-$n/best.json" ]; then "$PY" gpu_bundle.py delta "$B/model-$n" "$B/delta-$n" & pids+=($!); fi
done
for p in "${pids[@]}"; do wait "$p" || echo "a delta failed: $?"; done
{
    echo "data: $(sha256sum "$DATA/train.jsonl" | cut -c1-64) train, $(sha256sum "$DATA/dev.jsonl" | cut -c1-64) dev${TINY:+ (tiny subset)}"
    for n in f g; do echo "== $n"; cat "$B/model-$n/best.json" 2>/dev/null || echo "no checkpoint"; done
    for n in f g; do echo "== bench $n"; tail -25 "$B/results/bench-$n.log" 2>/dev/null || true; done
    echo "== probes"; cat "$B/results/probes.log" 2>/dev/null || true
} >"$OUT/summary.txt"
pack=()
for n in f g; do
    for f in "onnx-$n/model.onnx" "onnx-$n/config.json" "onnx-$n/tokenizer.json" "onnx-$n/labels.json" "onnx-$n/export.json" \
             "onnx-$n/train_config.json" "onnx-$n/best.json" "model-$n/metrics.jsonl" "model-$n/train_config.json" \
             "delta-$n" "train-$n.log" "export-$n.log"; do
        if [ -e "$B/$f" ]; then pack+=("$f"); fi
    done
done
pack+=(results)
tar -C "$B" -cf "$OUT/run.tar" "${pack[@]}"
split -b 15M "$OUT/run.tar" "$OUT/run.tar.part-"
rm "$OUT/run.tar"
stamp "done"
ls -la "$OUT"
