#!/usr/bin/env bash
# The doctor on the shipped fixtures: a draft trained on layer_out[1,3,4] of an 8-layer target,
# served by SGLang with the ids written the way the seed incident wrote them ([-1, 1, 3]).
# Exit 1 from a command means "findings" (expected here); anything else is a failure.
set -uo pipefail
cd "$(dirname "$0")/.."
run() {
  echo
  echo "\$ eagle3-doctor $*"
  eagle3-doctor "$@"
  rc=$?
  if [ "$rc" -gt 1 ]; then echo "demo: eagle3-doctor exited $rc" >&2; exit "$rc"; fi
}
F=fixtures
# start here: where the acceptance gap lives, the lever that recovers it and its exact edit
run diagnose --target $F/target --draft $F/draft-sglang --engine sglang --layer-ids=-1,1,3 \
    --prompts $F/prompts.jsonl --limit 8 --max-new-tokens 64 --quiet
run compare-hidden --target $F/target --draft $F/draft-sglang --engine sglang --layer-ids=-1,1,3 \
    --prompts $F/prompts.jsonl --limit 8 --quiet
run compare-hidden --target $F/target --draft $F/draft-sglang --engine sglang --train-dump $F/specforge-dump --matrix --quiet
run acceptance --target $F/target --draft $F/draft-sglang --engine sglang --layer-ids=-1,1,3 \
    --prompts $F/prompts.jsonl --limit 8 --num-steps 5 --max-new-tokens 64 --reference-loop --quiet
exit 0
