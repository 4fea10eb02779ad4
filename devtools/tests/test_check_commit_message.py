"""The commit-message check of the pre-commit configuration (devtools/check_commit_message.py)."""

from __future__ import annotations

import pathlib
import subprocess
import sys

import pytest

DEVTOOLS = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(DEVTOOLS))

from check_commit_message import MOST_SUBJECT, problems  # noqa: E402  (a script beside, not a package)

GOOD = "hvd-core: one subject line\n\nThe reasons, in the body.\n"


def test_a_subject_and_a_body_pass() -> None:
    assert problems(GOOD) == []


@pytest.mark.parametrize(
    "message, complaint",
    [
        ("x" * (MOST_SUBJECT + 1) + "\n\nwhy\n", "at most 72"),
        ("a subject\nno blank line\n", "blank line after it"),
        ("a subject alone\n", "blank line after it"),
        ("a subject\n\n\n", "blank line after it"),  # trailing blank lines are no body
        ("a subject\n\n# only git's comments\n", "blank line after it"),
        ("\n\nwhy\n", "no subject"),
    ],
)
def test_what_the_rule_refuses(message: str, complaint: str) -> None:
    assert any(complaint in problem for problem in problems(message)), problems(message)


def test_git_comments_and_the_verbose_diff_are_not_the_message() -> None:
    comment = "# Please enter the commit message\n"
    message = GOOD + comment + "# ------------------------ >8 ------------------------\n+" + "y" * 200
    assert problems(message) == []


def test_merges_and_fixups_pass_as_git_writes_them() -> None:
    assert problems("Merge branch 'x' into main\n") == []
    assert problems("fixup! " + "z" * 100 + "\n") == []


def test_the_hook_exits_non_zero_and_says_why(tmp_path: pathlib.Path) -> None:
    message = tmp_path / "COMMIT_EDITMSG"
    message.write_text("y" * 100 + "\n")
    run = subprocess.run(
        [sys.executable, str(DEVTOOLS / "check_commit_message.py"), str(message)], capture_output=True, text=True
    )
    assert run.returncode == 1 and "at most 72" in run.stderr
    message.write_text(GOOD)
    assert subprocess.run([sys.executable, str(DEVTOOLS / "check_commit_message.py"), str(message)]).returncode == 0
