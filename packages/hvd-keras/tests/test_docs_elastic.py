"""Every code block of docs/elastic.md runs (the PyTorch script and the Keras fragment through an
elastic horovodrun), as the blocks' markers say (docs/snippets.py): this environment has Keras,
TensorFlow, torch, hvd-torch and horovodrun."""

from __future__ import annotations

import importlib.util
import pathlib

import pytest
from hvd_devtools.doc_pages import load_snippets, repo_root

ROOT = repo_root(__file__)
pytestmark = [
    pytest.mark.skipif(not (ROOT / "docs" / "snippets.py").is_file(), reason=f"no docs at {ROOT / 'docs'}"),
    pytest.mark.skipif(
        importlib.util.find_spec("torch") is None,
        reason="the page's PyTorch script needs torch (a package-matrix cell without it)",
    ),
]


@pytest.mark.timeout(600)
def test_every_block_of_elastic_md_runs(tmp_path: pathlib.Path) -> None:
    snippets = load_snippets(ROOT)
    assert snippets.check_page(ROOT / "docs" / "elastic.md", tmp_path)
