"""The Dockerfile, read as a build would read it: no Docker engine here, so what the image will be
is checked from the instructions (base pinned by digest, non-root numeric user, entrypoint, no
dev extras, no remote ADD) and tied to the project (the entrypoint is a real console script with
`controller` and `worker` verbs; every package pip installs is in the build context).
hack/hadolint.sh lints the same file in `make lint`.
"""

from __future__ import annotations

import json
import re
import shlex
import subprocess
import sys
import tomllib
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from controller.cli.main import build_parser

ROOT = Path(__file__).resolve().parents[3]
DOCKERFILE = ROOT / "Dockerfile"
DOCKERIGNORE = ROOT / ".dockerignore"
NONROOT = "65532"
DIGEST_RE = re.compile(r"@sha256:[0-9a-f]{64}$")


@dataclass
class Instruction:
    keyword: str
    args: str


@dataclass
class Stage:
    base: str
    name: str | None
    instructions: list[Instruction] = field(default_factory=list)

    def all(self, keyword: str) -> list[Instruction]:
        return [i for i in self.instructions if i.keyword == keyword]


@dataclass
class Dockerfile:
    global_args: dict[str, str]
    stages: list[Stage]

    @property
    def final(self) -> Stage:
        return self.stages[-1]


def _logical_lines(text: str) -> list[str]:
    """Instructions with line continuations joined and comment lines dropped (as BuildKit)."""
    lines: list[str] = []
    current = ""
    for raw in text.splitlines():
        stripped = raw.strip()
        if stripped.startswith("#") or (not stripped and not current):
            continue
        if stripped.endswith("\\"):
            current += stripped[:-1] + " "
            continue
        current += stripped
        if current.strip():
            lines.append(current.strip())
        current = ""
    assert not current, "the Dockerfile ends inside a line continuation"
    return lines


def _substitute(value: str, args: dict[str, str]) -> str:
    return re.sub(
        r"\$\{(\w+)\}|\$(\w+)", lambda m: args.get(m.group(1) or m.group(2), m.group(0)), value
    )


def parse_dockerfile(text: str) -> Dockerfile:
    global_args: dict[str, str] = {}
    stages: list[Stage] = []
    for line in _logical_lines(text):
        keyword, _, rest = line.partition(" ")
        keyword = keyword.upper()
        rest = rest.strip()
        if keyword == "FROM":
            parts = rest.split()
            if "--platform" in parts[0]:
                parts = parts[1:]
            base = _substitute(parts[0], global_args)
            name = parts[2] if len(parts) >= 3 and parts[1].upper() == "AS" else None
            stages.append(Stage(base=base, name=name))
        elif not stages:
            assert keyword == "ARG", f"only ARG may precede the first FROM, found {keyword}"
            key, _, default = rest.partition("=")
            global_args[key] = default
        else:
            stages[-1].instructions.append(Instruction(keyword, rest))
    return Dockerfile(global_args, stages)


@pytest.fixture(scope="module")
def dockerfile() -> Dockerfile:
    return parse_dockerfile(DOCKERFILE.read_text())


def _exec_form(instruction: Instruction) -> list[str]:
    value = json.loads(instruction.args)
    assert isinstance(value, list) and all(isinstance(v, str) for v in value)
    return value


# --- the parser itself, on inputs whose reading is known -------------------------------------


def test_parser_joins_continuations_substitutes_args_and_names_stages() -> None:
    parsed = parse_dockerfile(
        "ARG BASE=img@sha256:" + "a" * 64 + "\n"
        "# a comment\n"
        "FROM ${BASE} AS build\n"
        "RUN a \\\n    && b\n"
        "FROM build\n"
        "USER 1:1\n"
    )
    assert [s.base for s in parsed.stages] == ["img@sha256:" + "a" * 64, "build"]
    assert parsed.stages[0].name == "build"
    assert parsed.stages[0].instructions == [Instruction("RUN", "a  && b")]
    assert parsed.final.all("USER") == [Instruction("USER", "1:1")]


# --- the image ----------------------------------------------------------------------------------


def test_multi_stage_with_every_external_base_pinned_by_digest(dockerfile: Dockerfile) -> None:
    assert len(dockerfile.stages) >= 2, "a builder stage and a runtime stage"
    names = {s.name for s in dockerfile.stages if s.name}
    for stage in dockerfile.stages:
        if stage.base in names:
            continue
        assert DIGEST_RE.search(stage.base), f"FROM {stage.base} is not pinned by digest"
        assert stage.base.startswith("python:3.11-slim@"), stage.base
    # One ARG holds the digest, so a refresh is a one-line change.
    assert sum(bool(DIGEST_RE.search(v)) for v in dockerfile.global_args.values()) == 1


def test_runtime_stage_runs_as_numeric_non_root_user(dockerfile: Dockerfile) -> None:
    users = dockerfile.final.all("USER")
    assert users, "the final stage must set USER"
    assert users[-1].args == f"{NONROOT}:{NONROOT}"
    # Nothing after the last USER may switch back to root.
    after = dockerfile.final.instructions.index(users[-1])
    assert not [i for i in dockerfile.final.instructions[after:] if i.keyword == "RUN"]


def test_entrypoint_is_dmrollout_and_default_command_is_controller(
    dockerfile: Dockerfile,
) -> None:
    (entrypoint,) = dockerfile.final.all("ENTRYPOINT")
    (cmd,) = dockerfile.final.all("CMD")
    assert _exec_form(entrypoint) == ["dmrollout"]
    assert _exec_form(cmd) == ["controller"]


def test_entrypoint_is_the_projects_console_script_with_both_verbs() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert project["scripts"]["dmrollout"] == "controller.cli.main:main"
    parser = build_parser()
    for argv in (["controller"], ["worker"], ["temporal", "setup"]):
        args = parser.parse_args(argv)
        assert callable(args.func), argv


def test_runtime_environment_is_read_only_root_friendly(dockerfile: Dockerfile) -> None:
    env: dict[str, str] = {}
    for instruction in dockerfile.final.all("ENV"):
        for token in shlex.split(instruction.args):
            key, _, value = token.partition("=")
            env[key] = value
    assert env["PYTHONDONTWRITEBYTECODE"] == "1"
    assert env["HOME"] == "/tmp"
    assert env["PATH"].split(":")[0] == "/opt/venv/bin"


def test_final_stage_only_copies_the_built_virtualenv(dockerfile: Dockerfile) -> None:
    builder = dockerfile.stages[0]
    copies = dockerfile.final.all("COPY")
    assert [c.args for c in copies] == [f"--from={builder.name} /opt/venv /opt/venv"]
    assert not [r for r in dockerfile.final.all("RUN") if "pip" in r.args]


def test_no_dev_or_local_extras_are_installed(dockerfile: Dockerfile) -> None:
    installs = [
        i.args for s in dockerfile.stages for i in s.all("RUN") if re.search(r"pip install", i.args)
    ]
    assert installs, "the builder installs the project"
    for args in installs:
        assert not re.search(r"\.\[|\[(dev|local)\]|-e\s|--editable", args), args
        assert re.search(r"pip install (--no-cache-dir )?\.(\s|$)", args), args


def test_no_add_instructions_fetch_urls(dockerfile: Dockerfile) -> None:
    for stage in dockerfile.stages:
        for add in stage.all("ADD"):
            assert "://" not in add.args, f"ADD of a URL: {add.args}"
            assert "git@" not in add.args


RUNTIME_PACKAGES = {"decisionmodel", "kube", "activities", "workflows", "controller"}
LOCAL_ONLY_PACKAGES = {"simulators", "localenv"}


def _copied_into(stage: Stage) -> set[str]:
    return {
        src.rstrip("/")
        for copy in stage.all("COPY")
        if not copy.args.startswith("--from")
        for src in copy.args.split()[:-1]
    }


def test_build_context_holds_exactly_the_runtime_packages(dockerfile: Dockerfile) -> None:
    """pip installs what setuptools finds in the context: each runtime package must be copied in
    (and let through the .dockerignore allow-list), and the local environment must not be, or the
    image carries the simulators and the dev harness (issue 13: 493 MB before the split)."""
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())
    patterns = config["tool"]["setuptools"]["packages"]["find"]["include"]
    assert {p.rstrip("*") for p in patterns} == RUNTIME_PACKAGES | LOCAL_ONLY_PACKAGES
    copied = _copied_into(dockerfile.stages[0])
    assert copied == RUNTIME_PACKAGES | {"pyproject.toml", "README.md"}
    allowed = {
        line[1:].rstrip("/")
        for line in DOCKERIGNORE.read_text().splitlines()
        if line.startswith("!")
    }
    assert allowed == RUNTIME_PACKAGES | {"pyproject.toml", "README.md"}
    for package in RUNTIME_PACKAGES:
        assert (ROOT / package / "__init__.py").exists(), package


def test_builder_checks_every_runtime_module_imports_and_drops_pip(dockerfile: Dockerfile) -> None:
    (install,) = [r.args for r in dockerfile.stages[0].all("RUN") if "pip install" in r.args]
    # The import check names every runtime package and runs isolated (-I), so it imports the
    # installed copy, not the sources in the WORKDIR.
    check = re.search(r"python -I -c \"([^\"]+)\"", install)
    assert check, install
    assert all(f"'{p}'" in check.group(1) for p in RUNTIME_PACKAGES), check.group(1)
    # pip and setuptools leave the venv last, so the copied venv holds neither.
    removals = install.split("&&")
    assert any("pip uninstall --yes pip setuptools" in step for step in removals), install
    assert install.index("pip uninstall --yes pip setuptools") < install.index("python -I -c")


def test_runtime_modules_import_without_the_local_environment() -> None:
    """What the image's build-time import check does, without an image: every runtime module
    imports while localenv and simulators cannot be imported (only `dev up`/`demo` need them,
    lazily). A top-level import of the local environment would fail the image build."""
    code = (
        "import sys, importlib, pkgutil\n"
        "sys.modules.update(localenv=None, simulators=None)\n"
        f"for p in {sorted(RUNTIME_PACKAGES)!r}:\n"
        "    for m in pkgutil.walk_packages(importlib.import_module(p).__path__, p + '.'):\n"
        "        importlib.import_module(m.name)\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=300
    )
    assert result.returncode == 0, result.stderr[-2000:]


def test_dockerignore_keeps_local_state_out() -> None:
    lines = [
        line.strip()
        for line in DOCKERIGNORE.read_text().splitlines()
        if line.strip() and not line.startswith("#")
    ]
    assert lines[0] == "*", "an allow-list: everything is excluded first"
    reincluded = {line[1:].rstrip("/") for line in lines if line.startswith("!")}
    assert not reincluded & {".venv", ".git", "tests", ".ci", "hack", "deploy", "charts"}
