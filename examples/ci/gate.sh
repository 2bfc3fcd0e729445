#!/usr/bin/env bash
# Gate a new EAGLE-3 draft checkpoint in any CI: exit 0 pass, 1 fail, 2 bad input.
#
#   examples/ci/gate.sh TARGET DRAFT [BASELINE_JSON]
#
# Writes gate-summary.md and gate.json in the working directory; compare a new checkpoint
# against the gate.json of the last good one by passing it as BASELINE_JSON.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
target="${1:?usage: gate.sh TARGET DRAFT [BASELINE_JSON]}"
draft="${2:?usage: gate.sh TARGET DRAFT [BASELINE_JSON]}"
baseline="${3:-}"
args=(gate --target "$target" --draft "$draft" --policy "$here/policy.toml"
      --summary gate-summary.md --json gate.json)
if [ -n "${PROMPTS:-}" ]; then args+=(--prompts "$PROMPTS"); fi
if [ -n "$baseline" ]; then args+=(--baseline "$baseline"); fi
exec eagle3-doctor "${args[@]}"
