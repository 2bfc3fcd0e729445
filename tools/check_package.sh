#!/usr/bin/env bash
# The package as a user gets it: build the sdist and, from that sdist, the wheel (python -m build), install
# the wheel into a fresh venv and run the CLI from outside the checkout. What this catches and the test
# suite cannot: a data file, module or entry point that the editable install finds in the source tree
# and the wheel leaves out.
#
#   tools/check_package.sh [PYTHON]      (make package; make test runs it)
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
py="${1:-python3}"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
log="$work/log"

# pip and build talk a lot even when all is well; their output is shown only when a step fails.
quiet() { "$@" >>"$log" 2>&1 || { cat "$log" >&2; echo "failed: $*" >&2; return 1; }; }
step() { echo "package: $1 (${SECONDS}s)"; }

# Build from a copy of the files git would commit: an in-place build writes build/ and *.egg-info into
# the checkout, and a stale egg-info left by `pip install -e .` could leak into the sdist's file list.
mkdir "$work/src"
(cd "$root" && git ls-files -co --exclude-standard -z | xargs -0 tar -cf - --) | tar -xf - -C "$work/src"

# One build environment for both builds (build's default makes a fresh one for each, each installing
# setuptools); setuptools as pyproject.toml's build-system asks.
quiet "$py" -m venv "$work/build-venv"
quiet "$work/build-venv/bin/pip" install build "setuptools>=68" "setuptools-scm>=8"
# The copy has no git metadata: the version is the checkout's, derived from its tags as a build from the
# checkout would (the sdist's PKG-INFO then carries it to the wheel built from the sdist).
version="$(cd "$root" && "$work/build-venv/bin/python" -m setuptools_scm)"
SETUPTOOLS_SCM_PRETEND_VERSION="$version" quiet "$work/build-venv/bin/python" -m build --no-isolation --outdir "$work/dist" "$work/src"
sdist=("$work"/dist/*.tar.gz)
wheel=("$work"/dist/*.whl)
step "built $(basename "${sdist[0]}") and, from it, $(basename "${wheel[0]}")"

# The runtime's data tables are read through importlib.resources: a wheel without them installs fine
# and fails on the first command that needs an engine's table.
for f in "$root"/eagle3_doctor/data/*.json; do
    name="eagle3_doctor/data/$(basename "$f")"
    "$work/build-venv/bin/python" -c "import sys, zipfile; sys.exit(sys.argv[2] not in zipfile.ZipFile(sys.argv[1]).namelist())" \
        "${wheel[0]}" "$name" || { echo "the wheel lacks $name" >&2; exit 1; }
done

# A CPU build of torch first, as the Makefile installs it: the bare requirement can pull a CUDA build.
# --no-compile: byte-compiling torch's and transformers' sources took 23 of this step's 53 s, for a venv
# that runs two commands and is deleted.
quiet "$py" -m venv "$work/venv"
pip="$work/venv/bin/pip"
if ! command -v nvidia-smi >/dev/null 2>&1; then
    quiet "$pip" install --no-compile torch==2.13.0 || quiet "$pip" install --no-compile torch --index-url https://download.pytorch.org/whl/cpu
fi
quiet "$pip" install --no-compile "${wheel[0]}"
step "installed the wheel into a fresh venv"

# From an empty directory, so `import eagle3_doctor` cannot pick up the checkout.
mkdir "$work/run"
cd "$work/run"
exe="$work/venv/bin/eagle3-doctor"
where="$("$work/venv/bin/python" -c 'import eagle3_doctor; print(eagle3_doctor.__file__)')"
case "$where" in
    "$work/venv/"*) ;;
    *) echo "eagle3_doctor imported from $where, not from the installed wheel" >&2; exit 1 ;;
esac
quiet "$exe" --help
# Through a launch command, so the engine flag table (data/serve_flags.json) is read as well.
serve="python -m sglang.launch_server --model-path $root/fixtures/target --speculative-algorithm EAGLE3
  --speculative-draft-model-path $root/fixtures/draft-sglang --speculative-num-steps 3 --speculative-eagle-topk 1"
quiet "$exe" inspect --serve-cmd "$serve" --json inspect.json
"$work/venv/bin/python" -c "import json, sys; d = json.load(open(sys.argv[1])); assert d['serve']['num_steps'] == 3, d" inspect.json
# one version everywhere: the checkout's tag-derived one, in --version and in the JSON's tool field
got="$("$exe" --version)"
[ "$got" = "eagle3-doctor $version" ] || { echo "--version says '$got', the checkout is $version" >&2; exit 1; }
"$work/venv/bin/python" -c "import json, sys; v = json.load(open(sys.argv[1]))['tool']['version']; assert v == sys.argv[2], v" \
    inspect.json "$version"
step "the installed eagle3-doctor $version ran --help, --version and inspect on the fixtures"
