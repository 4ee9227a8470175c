#!/usr/bin/env bash
# The CUDA path in one command, for a lent GPU machine: what the CPU machines cannot show.
#
#   1. bench/precision_check.py: `transfer --source files` and `finetune-qa` with
#      --mixed-precision no, bf16 (accelerate's autocast) and fp16 (autocast + loss scaling).
#   2. bench/plateau_census.py: every pre-training stage kind of the bench at the default
#      budgets, seeds 0-9, in bf16 autocast (and the pair models in float32 too): one census
#      process per group of methods, all at once on the one GPU.
#   3. xlviz sweep: a two-seed grid through submitit's local executor on the GPU, then its report.
#
# PARTS picks the parts (default: all three). Each part stops at LIMIT seconds (default 480) and keeps what it finished: the census writes
# its rows after every seed. Results go to $OUT (census.json, census.md, precision.log,
# sweep.log, logs.txt). Python packages the machine lacks (or has at other versions) travel as
# wheels in .whl/ (see the device notes); the GPU image's torch is used as it is.
# The wheels this was run with (the GPU image had Python 3.12, torch 2.11, transformers 5.17):
#   pip download --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
#       --platform manylinux_2_28_x86_64 --platform manylinux2014_x86_64 -d .whl \
#       transformers==5.23.0 huggingface_hub==2.4.0 httpx2==2.16.2 httpcore2==2.16.2 truststore==0.10.5 \
#       tokenizers==0.23.3 hf-xet==1.8.0 submitit==1.5.4 gensim==4.4.0 smart_open click==8.5.1 idna==3.18 \
#       regex==2026.11.19
#
#   bash bench/cuda_check.sh            # on the GPU machine, from the repository root
set -u
T0=$(date +%s)
LIMIT=${LIMIT:-480}
PARTS=${PARTS:-precision census sweep}
OUT=${OUT:-/tmp/xlviz-cuda-check}
mkdir -p "$OUT"
if [ -d .whl ] && [ -z "${NO_WHEELS:-}" ]; then
    python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
    export PYTHONPATH=/tmp/site:$PWD
else
    export PYTHONPATH=$PWD
fi
export HF_HUB_OFFLINE=1 PYTHONUNBUFFERED=1 XLVIZ_WORKER_THREADS=1 OMP_NUM_THREADS=1

python3 - >"$OUT/smoke.txt" 2>&1 <<'EOF'
import torch, transformers, accelerate, tokenizers
import xlviz.cli  # noqa: F401  (every command's imports)
from xlviz.training.loop import resolve_mixed_precision
print("torch", torch.__version__, "transformers", transformers.__version__, "accelerate", accelerate.__version__,
      "tokenizers", tokenizers.__version__)
gpu = torch.cuda.get_device_name(0) if torch.cuda.is_available() else "no CUDA device"
print("device", gpu, "auto ->", resolve_mixed_precision("auto"))
if torch.cuda.is_available():  # what accelerate's autocast gives a Linear layer under each precision
    from xlviz.training.loop import make_accelerator
    layer, x = torch.nn.Linear(8, 8).cuda(), torch.randn(2, 8, device="cuda")
    for mp in ("no", "bf16", "fp16"):
        with make_accelerator(mp).autocast():
            print("autocast", mp, "->", layer(x).dtype)
EOF
rc=$?
cat "$OUT/smoke.txt"
[ $rc -eq 0 ] || exit 1
python3 -m pytest -q -p no:cacheprovider tests/test_verdicts.py -k "monitor" 2>&1 | tail -n 2 | tee -a "$OUT/smoke.txt"
left() { echo $((LIMIT - ($(date +%s) - T0))); }

case " $PARTS " in *" precision "*)
    timeout $(($(left) - 20)) python3 bench/precision_check.py --steps 200 --out /tmp/pc >"$OUT/precision.log" 2>&1 & ;;
esac

# The census: one process per group of methods (a stage that fails stops only its group), each
# running its stages one after the other (workers 1) over seeds 0-9 and writing its rows after
# every seed; the groups share the GPU. PRECISIONS: bf16 for every group; float32 for the pair
# models, the kind that stayed on the plateau at the old warm-up.
case " $PARTS " in *" census "*)
    for group in monotrans,mono-l2 jointpair-disjoint jointpair-joint jointmulti,jointmulti-large wu-shared-top-2 veco clwe \
                 no:jointpair-disjoint; do
        mp=bf16; methods=$group
        case $group in no:*) mp=no; methods=${group#no:} ;; esac
        tag=$mp-${methods//,/+}
        timeout $(($(left) - 15)) python3 bench/plateau_census.py --seeds 0-9 --methods $methods --mixed-precision $mp \
            --override '{"workers": 1}' --out /tmp/census-$tag >/tmp/census-$tag.log 2>&1 &
    done ;;
esac

case " $PARTS " in *" sweep "*)
    timeout $(($(left) - 20)) python3 -m xlviz sweep --grid world.languages=svo,sov --grid seed=0,1 --methods monotrans,floor \
        --pretrain-steps 300 --transfer-steps 100 --finetune-steps 200 --corpus-documents 1500 \
        --qa-train-paragraphs 400 --qa-test-paragraphs 60 --out /tmp/sweep >"$OUT/sweep.log" 2>&1 \
        && python3 -m xlviz report /tmp/sweep >>"$OUT/sweep.log" 2>&1 & ;;
esac
wait

python3 - "$OUT" <<'EOF'
import json, sys
from pathlib import Path
sys.path.insert(0, "bench")
from plateau_census import tables
out = Path(sys.argv[1])
rows = []
for f in sorted(Path("/tmp").glob("census-*/census.json")):
    rows += json.loads(f.read_text())
(out / "census.json").write_text(json.dumps(rows, indent=1))
(out / "census.md").write_text(tables(rows) if rows else "no census rows")
print(len(rows), "census rows")
EOF
for f in /tmp/census-*.log; do echo "== $f"; tail -5 "$f"; done >"$OUT/logs.txt"
nvidia-smi --query-gpu=name,memory.used,memory.total --format=csv >>"$OUT/logs.txt" 2>&1
echo "total $(($(date +%s) - T0)) s"
