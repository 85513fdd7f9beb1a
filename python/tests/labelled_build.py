"""Builds tests/labelled.c, the C extension with LP_SCOPE labels, for the tests and the bench.

Against the liblabelprof pkg-config finds (make points PKG_CONFIG_PATH at the
build tree), with the build's compiler and flags (LP_CC, LP_CFLAGS,
LP_LDFLAGS: make check and make bench set them) or Python's own.
"""

import os
import shlex
import subprocess
import sysconfig

HERE = os.path.dirname(os.path.abspath(__file__))


def pkg_config(*args):
    out = subprocess.run(["pkg-config"] + list(args), check=True, capture_output=True, text=True).stdout
    return shlex.split(out)


def build(out_dir):
    """Compiles labelled.c into out_dir; returns out_dir. Raises RuntimeError with the compiler's output."""
    cc = shlex.split(os.environ.get("LP_CC") or sysconfig.get_config_var("CC") or "cc")
    cflags = shlex.split(os.environ.get("LP_CFLAGS", "-O2 -g"))
    ldflags = shlex.split(os.environ.get("LP_LDFLAGS", ""))
    rpath = ["-Wl,-rpath," + w[2:] for w in pkg_config("--libs-only-L", "labelprof")]
    target = os.path.join(str(out_dir), "labelled" + sysconfig.get_config_var("EXT_SUFFIX"))
    cmd = (
        cc
        + ["-shared", "-fPIC", "-std=gnu11", "-Wall", "-Wextra", "-Werror"]
        + cflags
        + ["-I" + sysconfig.get_paths()["include"]]
        + pkg_config("--cflags", "labelprof")
        + [os.path.join(HERE, "labelled.c"), "-o", target]
        + ldflags
        + pkg_config("--libs", "labelprof")
        + rpath
    )
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        raise RuntimeError("building tests/labelled.c failed:\n%s\n%s" % (" ".join(cmd), r.stderr))
    return str(out_dir)
