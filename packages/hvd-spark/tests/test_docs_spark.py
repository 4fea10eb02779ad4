"""Every code block of docs/spark.md runs (horovod.spark.run, run_elastic and the TorchEstimator in one
Python process with Spark local[2]), as the markers say (docs/snippets.py); like every test of
this package, it runs in a private network namespace (conftest.py)."""

from __future__ import annotations

import pathlib

import pytest
from hvd_devtools.doc_pages import load_snippets, repo_root

ROOT = repo_root(__file__)
pytestmark = pytest.mark.skipif(not (ROOT / "docs" / "snippets.py").is_file(), reason=f"no docs at {ROOT / 'docs'}")


@pytest.mark.timeout(600)
def test_every_block_of_spark_md_runs(tmp_path: pathlib.Path) -> None:
    snippets = load_snippets(ROOT)
    assert snippets.check_page(ROOT / "docs" / "spark.md", tmp_path)
