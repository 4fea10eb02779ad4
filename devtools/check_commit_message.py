"""The commit-message rule of README.md's contributing section, for pre-commit's commit-msg hook:
a subject line of at most 72 characters, a blank line, and a body that says why.

    python devtools/check_commit_message.py .git/COMMIT_EDITMSG

Lines git drops are not counted: comments (``#``) and, with ``git commit -v``, everything from the
scissors line on. Git's own merge, fixup and squash subjects pass as they are.
"""

from __future__ import annotations

import sys

MOST_SUBJECT = 72
SCISSORS = "# ------------------------ >8 ------------------------"
GIT_MADE = ("Merge ", 'Revert "', "fixup! ", "squash! ", "amend! ")


def problems(message: str) -> list[str]:
    """What is wrong with ``message`` (empty when it follows the rule).

    :param message: the commit message as git hands it to the hook.
    """
    lines = []
    for line in message.splitlines():
        if line.startswith(SCISSORS):
            break
        if not line.startswith("#"):
            lines.append(line.rstrip())
    while lines and not lines[-1]:
        lines.pop()
    if not lines or not lines[0]:
        return ["the message has no subject line"]
    subject = lines[0]
    if subject.startswith(GIT_MADE):
        return []
    found = []
    if len(subject) > MOST_SUBJECT:
        found.append(f"the subject has {len(subject)} characters; at most {MOST_SUBJECT}: put the details in the body")
    # (Trailing blank lines are gone: a second line means a body follows.)
    if len(lines) < 2 or lines[1]:
        found.append("the subject needs a blank line after it, then a body that says why")
    return found


def main(argv: list[str]) -> int:
    with open(argv[1], encoding="utf-8") as file:
        found = problems(file.read())
    for problem in found:
        print(f"commit message: {problem}", file=sys.stderr)
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
