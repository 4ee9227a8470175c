#!/usr/bin/env bash
# The CUDA path in one command, for a lent GPU machine: what the CPU machines cannot show.
#
#   1. bench/precision_check.py: `transfer --source files` and `finetune-qa` with
#      --mixed-precision no, bf16 (accelerate's autocast) and fp16 (autocast + loss scaling).
#   2. bench/plateau_census.py: every pre-training stage kind of the bench at the default
#      budgets, seeds 0-9, in bf16 autocast (and the pair models in float32 too): one census
#      process per entry of CENSUS (below), all at once on the one GPU.
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
    timeout $(($(left) - 20)) python3 bench/precision_check.py --steps 200 --precisions "${PRECISIONS:-no,no,bf16,fp16}" --out /tmp/pc >"$OUT/precision.log" 2>&1 & ;;
esac

# The census: one process per entry of CENSUS (`precision:methods:seeds`, space-separated; a
# stage that fails stops only its entry), each running its stages one after the other (workers
# 1) and writing its rows after every seed; the entries share the GPU (and one CPU core each).
# The default: every kind at seeds 0-9 in bf16, the pair models in float32 too. A lease of
# minutes runs a few seeds of each: split the seeds over entries, e.g.
#   CENSUS="bf16:veco:0 bf16:veco:1 bf16:jointpair-joint:3,4 no:jointpair-disjoint:8,9"
# CENSUS_OVERRIDE is JSON merged into every entry's config (a tiny size for a smoke test).
CENSUS=${CENSUS:-"bf16:monotrans,mono-l2:0-9 bf16:jointpair-disjoint:0-9 bf16:jointpair-joint:0-9 \
bf16:jointmulti,jointmulti-large:0-9 bf16:wu-shared-top-2:0-9 bf16:veco:0-9 bf16:clwe:0-9 no:jointpair-disjoint:0-9"}
CENSUS_OVERRIDE=${CENSUS_OVERRIDE:-"{}"}
case " $PARTS " in *" census "*)
    for entry in $CENSUS; do
        IFS=: read -r mp methods seeds <<<"$entry"
        tag=$mp-${methods//,/+}-${seeds//,/.}
        override=$(python3 -c 'import json, sys; print(json.dumps({"workers": 1, **json.loads(sys.argv[1])}))' "$CENSUS_OVERRIDE")
        timeout $(($(left) - 15)) python3 bench/plateau_census.py --seeds "$seeds" --methods "$methods" --mixed-precision "$mp" \
            --override "$override" --out "/tmp/census-$tag" >"/tmp/census-$tag.log" 2>&1 &
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
