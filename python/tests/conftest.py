"""Fixtures of labelprof's Python suite.

`labelled` is tests/labelled.c, a C extension with LP_SCOPE labels, built
once per run against the same liblabelprof as the module (labelled_build.py).
`run_script` runs Python code in a child interpreter that finds the same
module and extension.
"""

import os
import subprocess
import sys
import textwrap

import labelled_build
import pytest


def slow():
    """LP_TEST_SLOW: how many times slower than native the tests run (qemu, sanitizers)."""
    return int(os.environ.get("LP_TEST_SLOW") or 1)


@pytest.fixture(scope="session")
def labelled_dir(tmp_path_factory):
    return labelled_build.build(tmp_path_factory.mktemp("labelled"))


@pytest.fixture(scope="session")
def labelled(labelled_dir):
    sys.path.insert(0, labelled_dir)
    import labelled as mod

    return mod


@pytest.fixture
def run_script(labelled_dir, tmp_path):
    """run_script(code, env=None): (returncode, stdout, stderr) of `python3 -c code` in tmp_path."""

    def run(code, env=None, timeout=120 * slow()):
        e = dict(os.environ)
        paths = [labelled_dir] + [p for p in sys.path if p and os.path.isdir(p)]
        e["PYTHONPATH"] = os.pathsep.join(paths)
        e.update(env or {})
        r = subprocess.run(
            [sys.executable, "-c", textwrap.dedent(code)],
            cwd=str(tmp_path),
            env=e,
            capture_output=True,
            text=True,
            timeout=timeout,
        )
        return r.returncode, r.stdout, r.stderr

    return run
