"""Every other package reaches hvd-core through its public façades only, and hvd-core names no plugin.

Plugin packages (backends, frameworks, the launcher) and the third-party backend template may
import from hvd-core only: ``horovod.common`` (its public names), ``horovod.common.plugin_api``,
``horovod.common.framework_api``, ``horovod.common.exceptions`` (where Horovod's users import
``HorovodInternalError`` from), and, in tests, the test kit ``horovod.common.testing``. Anything
else is hvd-core's private structure, free to change between releases: a package reaching into it
breaks then. The check reads the source (imports, and attribute chains such as
``horovod.common._core``), so it also covers imports inside functions.
"""

from __future__ import annotations

import ast
import os
import pathlib

import pytest

import horovod.common

ROOT = pathlib.Path(os.environ.get("HVD_REPO_ROOT", pathlib.Path(__file__).resolve().parents[3]))
CORE = ROOT / "packages" / "hvd-core"
# horovod.common.elastic: Horovod's own module of that name (State, ObjectState, run_fn), which
# scripts and framework packages import; its submodules are private.
FACADES = {
    "horovod.common.plugin_api",
    "horovod.common.framework_api",
    "horovod.common.exceptions",
    "horovod.common.elastic",
}
TEST_KIT = "horovod.common.testing"
PUBLIC_NAMES = set(horovod.common.__all__) | {"plugin_api", "framework_api", "exceptions", "elastic"}


def _python_files(directory: pathlib.Path) -> list[pathlib.Path]:
    return sorted(p for p in directory.rglob("*.py") if ".nox" not in p.parts and "build" not in p.parts)


def _other_packages() -> list[pathlib.Path]:
    packages = [p for p in sorted((ROOT / "packages").iterdir()) if (p / "pyproject.toml").exists() and p != CORE]
    return packages + [p for p in sorted((ROOT / "examples").iterdir()) if (p / "pyproject.toml").exists()]


def _allowed(module: str, in_tests: bool) -> bool:
    if module == "horovod.common" or module in FACADES:
        return True
    return in_tests and (module == TEST_KIT or module.startswith(TEST_KIT + "."))


def private_uses(path: pathlib.Path, in_tests: bool) -> list[str]:
    """Where `path` names a private hvd-core module or name, as 'file:line: what'."""
    found = []
    tree = ast.parse(path.read_text(), str(path))
    for node in ast.walk(tree):
        used: list[str] = []
        if isinstance(node, ast.Import):
            used = [alias.name for alias in node.names if alias.name.startswith("horovod.common")]
            used = [m for m in used if not _allowed(m, in_tests)]
        elif isinstance(node, ast.ImportFrom) and (node.module or "").startswith("horovod.common"):
            module = node.module or ""
            if module == "horovod.common":
                used = [f"{module}.{a.name}" for a in node.names if a.name not in PUBLIC_NAMES and a.name != "testing"]
                if not in_tests:
                    used += [f"{module}.testing" for a in node.names if a.name == "testing"]
            elif not _allowed(module, in_tests):
                used = [module]
        elif (
            isinstance(node, ast.Attribute)
            and ast.unparse(node.value) == "horovod.common"
            and node.attr not in PUBLIC_NAMES
            and not (in_tests and node.attr == "testing")
        ):
            used = [f"horovod.common.{node.attr}"]
        found += [f"{path.relative_to(ROOT)}:{node.lineno}: {name}" for name in used]
    return found


@pytest.mark.parametrize("package", _other_packages(), ids=lambda p: p.name)
def test_package_uses_only_hvd_cores_public_api(package: pathlib.Path) -> None:
    problems = []
    for path in _python_files(package):
        in_tests = "tests" in path.relative_to(package).parts
        problems += private_uses(path, in_tests)
    assert not problems, (
        "private hvd-core names used (import from horovod.common.plugin_api or .framework_api):\n" + "\n".join(problems)
    )


def test_the_check_catches_private_imports(tmp_path: pathlib.Path) -> None:
    # The checker itself, on code that does what no package may do.
    bad = tmp_path / "bad.py"
    bad.write_text(
        "from horovod.common import _core, basics\n"
        "from horovod.common.config import Topology\n"
        "import horovod.common.plugins\n"
        "def f():\n"
        "    from horovod.common.testing import run_cluster\n"
        "    return horovod.common._native\n"
    )
    global ROOT
    saved, ROOT = ROOT, tmp_path
    try:
        as_source = private_uses(bad, in_tests=False)
        as_test = private_uses(bad, in_tests=True)
    finally:
        ROOT = saved
    assert [line.split(": ")[1] for line in as_source] == [
        "horovod.common._core",
        "horovod.common.basics",
        "horovod.common.config",
        "horovod.common.plugins",
        "horovod.common.testing",
        "horovod.common._native",
    ], as_source
    assert len(as_test) == len(as_source) - 1  # tests may use the test kit


def test_hvd_core_names_no_plugin_package() -> None:
    # hvd-core asks plugins through hooks and specs; it never imports a backend, framework or launcher.
    # One documented exception: ``horovod.run`` is hvd-runner's, resolved lazily by horovod/__init__.py
    # with an ImportError naming the package to install (Horovod's API has it at the top level).
    allowed = {("__init__.py", "horovod.runner")}
    problems = []
    for path in _python_files(CORE / "src"):
        for node in ast.walk(ast.parse(path.read_text())):
            modules = []
            if isinstance(node, ast.Import):
                modules = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                modules = [node.module or ""]
            for module in modules:
                top = module.split(".")[:2]
                if (path.name, module) in allowed and path.parent.name == "horovod":
                    continue
                if top[0] == "horovod" and len(top) > 1 and top[1] != "common":
                    problems.append(f"{path.relative_to(ROOT)}:{node.lineno}: {module}")
    assert not problems, problems
