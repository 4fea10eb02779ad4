"""Tooling for the repository's own tests, not for users: no package ships it.

- ``docstrings``: every public parameter of a package's API documented with ``:param name:``;
- ``doc_pages``: ``docs/snippets.py``, which runs the docs' code blocks, loaded by path;
- ``examples``: an example of ``examples/`` launched as a user would, through ``horovodrun``.

The packages' tests import it through pytest's ``pythonpath`` setting (``../../devtools`` in each
package's ``pyproject.toml``), so it is found whenever a package's tests run from the checkout.
"""
