#!/usr/bin/env bash
# What the device calls run (see bench/RESULTS.md), on one 2-GPU H200 machine (kind nvidia-h200-x2).
#   OUT=out bash bench/device_run.sh 1   # GPU 0: attention check, acceptance floor, bf16 parity;
#                                        # GPU 1 at the same time: long contexts, then the DeepSeek-V3 shape
#   OUT=out bash bench/device_run.sh 2   # both GPUs: the sharded (multi-GPU) benchmark; then GPU 0: acceptance
#                                        # floor, GPU 1 at the same time: bf16 parity
# Each step has its own time limit and log; each phase took about 3.5 minutes on 2026-11-30.
set -u
OUT="${OUT:-out}"; mkdir -p "$OUT"
export PYTHONPATH=. PYTHONUNBUFFERED=1 NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
{ nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv
  python3 -c "import torch, transformers; print('torch', torch.__version__, 'transformers', transformers.__version__, 'gpus', torch.cuda.device_count())"; } > "$OUT/env.txt" 2>&1
run() {  # run NAME LIMIT_S CMD...: output to $OUT/NAME.log, rc appended
  local name=$1 limit=$2; shift 2
  timeout "$limit" "$@" > "$OUT/$name.log" 2>&1; echo "rc=$?" >> "$OUT/$name.log"
}
case "${1:-1}" in
1)
  ( export CUDA_VISIBLE_DEVICES=0
    run check 60 python3 bench/check_unroll_gpu.py
    run floor 330 python3 bench/bench_gpu.py --floor --seqs 64 --len 1024 --batch 8 --repeats 5 --compile \
        --profile "$OUT/profile.txt"
    run parity 150 python3 bench/parity.py --device cuda --dtype bfloat16 ) &
  ( export CUDA_VISIBLE_DEVICES=1
    run contexts 330 python3 bench/bench_gpu.py --contexts 8192,32768,131072 --repeats 3
    run deepseek 200 python3 bench/bench_deepseek.py --experts 16 --seqs 8 --len 1024 --batch 2 --repeats 3 ) &
  wait ;;
2)
  run multigpu 240 python3 bench/bench_multigpu.py --seqs 16 --len 1024 --batch 4
  ( export CUDA_VISIBLE_DEVICES=0
    run floor 300 python3 bench/bench_gpu.py --floor --seqs 64 --len 1024 --batch 8 --repeats 5 --compile \
        --profile "$OUT/profile.txt" ) &
  ( export CUDA_VISIBLE_DEVICES=1
    run parity 150 python3 bench/parity.py --device cuda --dtype bfloat16 ) &
  wait ;;
esac
