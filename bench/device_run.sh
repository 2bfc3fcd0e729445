#!/usr/bin/env bash
# What one device call runs (see bench/RESULTS.md): environment, bf16 parity on the fixtures,
# the 8B-shape benchmark, then the CPU test suite under the device image's torch/transformers.
set -u
OUT="${OUT:-out}"; mkdir -p "$OUT"
export PYTHONPATH=. PYTHONUNBUFFERED=1
{ nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv
  python3 -c "import torch, transformers; print('torch', torch.__version__, 'transformers', transformers.__version__)"; } > "$OUT/env.txt" 2>&1
timeout 150 python3 bench/parity.py --device cuda --dtype bfloat16 > "$OUT/parity-gpu.json" 2> "$OUT/parity-gpu.err"
timeout 330 python3 bench/bench_gpu.py "$@" --out "$OUT/results.md" --profile "$OUT/profile.txt" > "$OUT/bench.log" 2>&1
echo "bench rc=$?" >> "$OUT/bench.log"
# the CPU test suite under the device image's older torch/transformers (compatibility)
if [ "${WITH_TESTS:-0}" = 1 ]; then
  timeout 240 python3 -m pytest -q -x -p no:cacheprovider tests/test_taps.py tests/test_formats.py tests/test_engines.py \
    tests/test_compare.py tests/test_acceptance.py tests/test_batching.py tests/test_inspect.py > "$OUT/pytest.log" 2>&1
  echo "pytest rc=$?" >> "$OUT/pytest.log"
fi
