"""The repository's hvd packages as distributions: their names, directories, versions and the hvd
packages each one needs, read from ``packages/*/pyproject.toml`` (the third-party backend template
under ``examples/`` is not one of them: it is a template to copy, not a distribution of ours)."""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10, where build_dist.py builds hvd-core's cp310 wheel: build's tomli
    import tomli as tomllib

ROOT = Path(__file__).resolve().parent.parent


def requirement_name(requirement: str) -> str:
    """The distribution a requirement names, normalized (``hvd-core>=0.2,<0.3`` -> ``hvd-core``)."""
    return re.split(r"[\s\[<>=!~;(]", requirement.strip(), maxsplit=1)[0].lower().replace("_", "-")


@dataclasses.dataclass(frozen=True)
class Package:
    name: str
    path: Path
    pyproject: dict

    @property
    def project(self) -> dict:
        return self.pyproject["project"]

    @property
    def build_requires(self) -> list[str]:
        return list(self.pyproject.get("build-system", {}).get("requires", []))

    @property
    def dist_settings(self) -> dict:
        """``[tool.hvd.dist]``: how the package's wheel is built for publication (``cmake-args``)."""
        return self.pyproject.get("tool", {}).get("hvd", {}).get("dist", {})

    @property
    def native(self) -> bool:
        """Whether its wheel holds compiled code (scikit-build-core's hatchling hook builds it)."""
        hooks = self.pyproject.get("tool", {}).get("hatch", {}).get("build", {}).get("targets", {})
        return "scikit-build" in hooks.get("wheel", {}).get("hooks", {})

    @property
    def interpreter_specific(self) -> bool:
        """Whether its wheel is built per Python (``[tool.hvd] interpreter-specific``: hvd-core's
        extension), where the others' one wheel serves every Python."""
        return bool(self.pyproject.get("tool", {}).get("hvd", {}).get("interpreter-specific"))

    def version(self) -> str:
        """The version hatchling reads (``[tool.hatch.version] path``: ``__version__ = "X"``)."""
        file = self.path / self.pyproject["tool"]["hatch"]["version"]["path"]
        match = re.search(r'^__version__ = "([^"]+)"', file.read_text(), re.MULTILINE)
        if not match:
            raise ValueError(f"{file}: no __version__ line")
        return match.group(1)

    def runtime_requires(self) -> list[str]:
        """Its dependencies and every extra's (``test`` aside: it is never published as a need)."""
        extras = self.project.get("optional-dependencies", {})
        return [*self.project.get("dependencies", []), *(r for x, rs in extras.items() if x != "test" for r in rs)]


def packages() -> dict[str, Package]:
    found = {}
    for pyproject in sorted(ROOT.glob("packages/*/pyproject.toml")):
        data = tomllib.loads(pyproject.read_text())
        found[data["project"]["name"]] = Package(data["project"]["name"], pyproject.parent, data)
    return found


def build_order(found: dict[str, Package]) -> list[Package]:
    """Every package after the hvd packages it needs to build or to run (hvd-core first)."""
    order: list[str] = []

    def visit(name: str, path: tuple[str, ...]) -> None:
        if name in order:
            return
        if name in path:
            raise ValueError("hvd packages depend on each other in a circle: " + " -> ".join((*path, name)))
        package = found[name]
        for requirement in (*package.build_requires, *package.runtime_requires()):
            needed = requirement_name(requirement)
            if needed in found:
                visit(needed, (*path, name))
        order.append(name)

    for name in found:
        visit(name, ())
    return [found[name] for name in order]
