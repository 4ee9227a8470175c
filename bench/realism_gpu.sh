#!/usr/bin/env bash
# The scale axis of the realism study on one GPU, in under 10 minutes: MONOTRANS, the floor and
# the dictionary oracle on the verb-final `tr`, step 1 at GPU scale, which the 2-core CPU
# machines cannot reach (docs/world.md, "Which ingredient lifts verb-final transfer?").
#
#   one sweep per model_size, all at once on the one GPU (--parallel CELLS cells each):
#     model_size     medium (6x256) | large (8x512) | base (12x768, BERT-base's shape), each with
#                    its own learning rates (LR_<size> below)
#     pretrain_steps 1000 (today's default) | 4000  (the grid of each sweep; seed 0)
#   every cell: corpus_documents 16000 (4x the default), tasks qa + word-translation.
#
# Fails at once (exit 2) without a CUDA device: this script is not for the CPU.
# Each part stops at LIMIT seconds (default 540) and keeps the cells it finished; the report
# (xlviz report) covers finished cells only. Results go to $OUT (sweep-<size>.log, report.md,
# smoke.txt). Python packages the GPU image lacks travel as wheels in .whl/, as
# for bench/cuda_check.sh (see its header for the list).
#
#   bash bench/realism_gpu.sh                      # on the GPU machine, from the repository root
#   SIZES=medium,base STEPS=4000 CELLS=1 bash bench/realism_gpu.sh   # a smaller grid
set -u
T0=$(date +%s)
LIMIT=${LIMIT:-540}
OUT=${OUT:-/tmp/xlviz-realism-gpu}
SIZES=${SIZES:-medium,large,base}
STEPS=${STEPS:-1000,4000}
DOCS=${DOCS:-16000}
CELLS=${CELLS:-2}
LANGS=${LANGS:-tr}
WORLD=${WORLD:-}   # extra grid over a world setting, e.g. WORLD="world.loanword_share=0,0.3"
mkdir -p "$OUT"
if [ -d .whl ] && [ -z "${NO_WHEELS:-}" ]; then
    python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
    export PYTHONPATH=/tmp/site:$PWD
else
    export PYTHONPATH=$PWD
fi
export HF_HUB_OFFLINE=1 PYTHONUNBUFFERED=1 XLVIZ_WORKER_THREADS=1 OMP_NUM_THREADS=1

python3 - >"$OUT/smoke.txt" 2>&1 <<'PY'
import sys
import torch
import xlviz.cli  # noqa: F401  (every command's imports)
if not torch.cuda.is_available():
    print("realism_gpu.sh: no CUDA device (torch.cuda.is_available() is False); this script runs the GPU points "
          "of the scale axis and refuses to run them on the CPU")
    sys.exit(2)
print("torch", torch.__version__, "device", torch.cuda.get_device_name(0))
PY
rc=$?
cat "$OUT/smoke.txt"
[ $rc -eq 0 ] || exit $rc
left() { echo $((LIMIT - ($(date +%s) - T0))); }

# One sweep per model size, all at once on the GPU (each cell one CPU worker): the learning rates
# differ by size, which a single grid could not say. Today's rates for medium; smaller ones for
# the wider models, as BERT-base pre-trains at 1e-4 (guesses, not tuned: override with
# LR_<size>=PRETRAIN:FINETUNE, e.g. LR_base=3e-4:1e-4).
LR_medium=${LR_medium:-2e-3:1e-3}
LR_large=${LR_large:-1e-3:5e-4}
LR_base=${LR_base:-5e-4:2e-4}
LR_small=${LR_small:-2e-3:1e-3}
IFS=, read -ra SIZE_LIST <<<"$SIZES"
for size in "${SIZE_LIST[@]}"; do
    lrs=LR_$size; lrs=${!lrs:-2e-3:1e-3}
    python3 -c 'import json, sys; print(json.dumps({"tasks": ["qa", "word-translation"], "model_size": sys.argv[1],
        "pretrain_lr": float(sys.argv[2]), "finetune_lr": float(sys.argv[3])}))' "$size" "${lrs%%:*}" "${lrs##*:}" \
        >"/tmp/realism-gpu-$size.json" || exit 1
    GRID=(--grid "pretrain_steps=$STEPS")
    [ -n "$WORLD" ] && GRID+=(--grid "$WORLD")
    timeout $(($(left) - 30)) python3 -m xlviz sweep --config "/tmp/realism-gpu-$size.json" --languages "$LANGS" "${GRID[@]}" \
        --methods monotrans,floor,dictionary-oracle --corpus-documents "$DOCS" --parallel "$CELLS" --workers 1 \
        --out "/tmp/realism-sweep-$size" >"$OUT/sweep-$size.log" 2>&1 &
done
wait
echo "sweeps done after $(($(date +%s) - T0)) s" | tee -a "$OUT/smoke.txt"
: >"$OUT/report.md"
for size in "${SIZE_LIST[@]}"; do
    v=LR_$size
    echo "## model_size $size (pretrain:finetune lr ${!v:-2e-3:1e-3})" >>"$OUT/report.md"
    python3 -m xlviz report "/tmp/realism-sweep-$size" >>"$OUT/report.md" 2>&1
done
nvidia-smi --query-gpu=name,memory.used,memory.total --format=csv >>"$OUT/smoke.txt" 2>&1
tail -n 40 "$OUT/report.md"
echo "total $(($(date +%s) - T0)) s"
