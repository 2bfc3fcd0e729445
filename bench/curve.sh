#!/usr/bin/env bash
# The whole-process cost curve of the measuring commands beside the plain transformers scripts, in device calls
# of at most 10 minutes each on one H200 (kind nvidia-h200). Each call builds the 8B-shaped pair once (about 40 s;
# bench/pair.py) where the machine does not hold it from an earlier call, then runs bench/bench_e2e.py's rows:
#   OUT=out bash bench/curve.sh 1   # 64 x 128 and 256 x 256: every command, the plain forward and generate scripts
#   OUT=out bash bench/curve.sh 2   # 512 x 512: acceptance, diagnose, the plain generate script (batches of 256)
#   OUT=out bash bench/curve.sh 3   # 1024 x 1024: acceptance and diagnose
#   OUT=out bash bench/curve.sh 4   # 4 x 32k and 16 x 8k prompt tokens, 128 new: the long-context rows
#   OUT=out bash bench/curve.sh 5   # 1024 x 1024: the plain generate script alone (batches of 256)
#   OUT=out bash bench/curve.sh 6   # the decode step against its floor at batch 512 and 1024 (the pair of an
#                                   # earlier call), then the speculative continuation on bench_speedup.py's pair
#   OUT=out bash bench/curve.sh 7   # the checks that decide the next change (no pair needed): attention beside the
#                                   # matmuls on two streams (check_overlap.py), the estimator's work from the first
#                                   # scored base at the 8B draft's shape (check_scored_bases.py), the kernels' bits
# Each row prints its phases and peak GPU memory, each run the floor it computes (bench/floor.py);
# bench_e2e.py's own table closes each log.
set -u
OUT="${OUT:-out}"; mkdir -p "$OUT"
export PYTHONPATH=. PYTHONUNBUFFERED=1 TOKENIZERS_PARALLELISM=false
{ nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader
  python3 -c "import torch, transformers; print('torch', torch.__version__, 'transformers', transformers.__version__)"; } > "$OUT/env.txt" 2>&1
reuse() { [ -f /tmp/e2e/target/config.json ] && [ -f /tmp/e2e/draft/config.json ] && echo --reuse; }
e2e() {  # e2e NAME LIMIT_S ARGS...: one bench_e2e.py run, its log in $OUT/NAME.log with its exit status
  local name=$1 limit=$2; shift 2
  timeout "$limit" python3 bench/bench_e2e.py --dir /tmp/e2e $(reuse) "$@" > "$OUT/$name.log" 2>&1
  echo "rc=$?" >> "$OUT/$name.log"
}
case "${1:-1}" in
1)
  e2e c64 260 --copies 4 --new 128 --plain-batch 64 \
      --only plain_forward,plain_generate,inspect,compare-hidden,acceptance,fingerprint,diagnose
  e2e c256 260 --copies 16 --new 256 --plain-batch 256 --only plain_generate,acceptance,diagnose ;;
2)
  e2e c512 400 --copies 32 --new 512 --plain-batch 256 --only acceptance,diagnose,plain_generate ;;
3)
  e2e c1024 560 --copies 64 --new 1024 --only acceptance,diagnose ;;
4)
  e2e long32k 280 --long 4x32768 --new 128 --plain-batch 4 --only plain_generate,compare-hidden,acceptance,diagnose
  e2e long8k 280 --long 16x8192 --new 128 --plain-batch 16 --only plain_generate,compare-hidden,acceptance,diagnose ;;
5)
  e2e c1024plain 580 --copies 64 --new 1024 --plain-batch 256 --only plain_generate ;;
6)
  timeout 150 python3 bench/bench_decode_floor.py --dir /tmp/e2e --batches 512,1024 --routes all > "$OUT/decode_floor.log" 2>&1
  echo "rc=$?" >> "$OUT/decode_floor.log"
  timeout 200 python3 bench/bench_spec_continuation.py --batch-sizes 1,16,64 --ks 3,5 --prompts 64 > "$OUT/spec.log" 2>&1
  echo "rc=$?" >> "$OUT/spec.log" ;;
7)
  timeout 120 python3 bench/check_overlap.py --carveout 0,16,32 > "$OUT/overlap.log" 2>&1
  echo "rc=$?" >> "$OUT/overlap.log"
  timeout 240 python3 bench/check_scored_bases.py --device cuda --hidden 4096 --heads 32 --kv-heads 8 --vocab 32000 \
      --batch 64 > "$OUT/scored_bases.log" 2>&1
  echo "rc=$?" >> "$OUT/scored_bases.log"
  timeout 200 python3 bench/check_kernels_gpu.py > "$OUT/kernels.log" 2>&1
  echo "rc=$?" >> "$OUT/kernels.log" ;;
*) echo "usage: OUT=out bash bench/curve.sh 1|2|3|4|5|6|7" >&2; exit 2 ;;
esac
