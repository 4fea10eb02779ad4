"""Every code block of the guides this environment can run (torch, horovodrun, Gloo, MPI) is run.

The blocks are extracted and checked by docs/snippets.py, as each block's marker says (see its
docstring); a page that changes without its code still working fails here.
"""

from __future__ import annotations

import pathlib
import types

import pytest
from hvd_devtools.doc_pages import load_snippets, repo_root

ROOT = repo_root(__file__)
GUIDES = ROOT / "docs" / "guides"
PAGES = [
    "installing.md",
    "first-job.md",
    "horovodrun.md",
    "mpi.md",
    "gpu.md",
    "adasum.md",
    "autotune.md",
    "job-report.md",
    "data-service.md",
    "benchmarks.md",
    "backend-plugin.md",
    "migrating.md",
    "troubleshooting.md",
    "versioning.md",
    "distributions.md",
]
#: Pages whose blocks other environments run: what they need is not here.
ELSEWHERE = {
    "elastic.md": "packages/hvd-keras/tests/test_docs_elastic.py (Keras)",
    "spark.md": "packages/hvd-spark/tests/test_docs_spark.py (Spark)",
}
pytestmark = pytest.mark.skipif(not (ROOT / "docs" / "snippets.py").is_file(), reason=f"no docs at {ROOT / 'docs'}")


@pytest.fixture(scope="module")
def snippets() -> types.ModuleType:
    return load_snippets(ROOT)


@pytest.mark.parametrize("page", PAGES)
@pytest.mark.timeout(600)
def test_every_block_of_the_page_runs(snippets: types.ModuleType, page: str, tmp_path: pathlib.Path) -> None:
    checked = snippets.check_page(GUIDES / page, tmp_path)
    assert checked, f"{page} has no code block"


def test_the_front_page_blocks_are_checked(snippets: types.ModuleType, tmp_path: pathlib.Path) -> None:
    assert snippets.check_page(ROOT / "docs" / "index.md", tmp_path)


def test_every_page_with_code_is_tested(snippets: types.ModuleType) -> None:
    """A guide with a code block (docs/guides/, and the pages beside them in docs/ that the guides
    link to) is in PAGES or ELSEWHERE: none is left untested. (docs/index.md, the site's front page,
    is the site's to test.)"""
    beside = [ROOT / "docs" / name for name in ("elastic.md", "failure-handling.md", "spark.md")]
    pages = [*beside, *sorted(GUIDES.glob("*.md"))]
    with_code = {page.name for page in pages if snippets.blocks(page)}
    untested = with_code - set(PAGES) - set(ELSEWHERE)
    assert not untested, f"code blocks nobody runs: add {sorted(untested)} to a test of docs/snippets.py"


def test_horovodrun_md_names_every_flag() -> None:
    """The horovodrun guide lists every option string of horovodrun's parser (hidden ones too)."""
    from horovod.runner.cli import build_parser

    text = (GUIDES / "horovodrun.md").read_text()
    flags = [o for a in build_parser()._actions for o in a.option_strings if o not in ("-h", "--help")]
    missing = [flag for flag in flags if f"`{flag}" not in text]
    assert not missing, f"docs/guides/horovodrun.md does not mention {missing}"


@pytest.mark.parametrize(
    "page, error",
    [
        ("```yaml\na: 1\n```\n", "unmarked 'yaml' block"),
        ("```bash\nexit 3\n```\n", "exit status 3, expected 0"),
        ("```python\nprint('a')\n```\n<!-- snippet: output -->\n```text\nb\n```\n", "'b' was not printed"),
        ('<!-- snippet: illustrative reason="" -->\n```bash\nhorovodrun -np 2 python x.py\n```\n', "must say why"),
        ('<!-- snippet: illustrative reason="x" -->\n```bash\nhorovodrun -np 0 python x.py\n```\n', "refuses"),
        ('<!-- snippet: illustrative reason="x" -->\n```bash\n./dev test -s nosuch\n```\n', "no such session"),
        ('<!-- snippet: illustrative reason="x" -->\n```c\nint f(void) { return g(); }\n```\n', "does not compile"),
        ("<!-- snippet: file name=c.yaml config=horovodrun -->\n```yaml\nparams: {nope: 1}\n```\n", "would warn"),
    ],
)
def test_a_block_that_does_not_hold_fails(
    snippets: types.ModuleType, page: str, error: str, tmp_path: pathlib.Path
) -> None:
    (tmp_path / "page.md").write_text(page)
    with pytest.raises(AssertionError, match=error):
        snippets.check_page(tmp_path / "page.md", tmp_path)
