"""Builds labelprof's Python module against liblabelprof, found by pkg-config.

The module is one extension, labelprof._labelprof: the bindings
(src/labelprof.c) linked to the shared liblabelprof, so that Python labels
and the labels of every C extension share one pseudo-stack per thread, and
the labelprof command's own sources (src/read.c runs them), so that
labelprof.read() and labelprof.stats() read traces with the command's
readers. Their list is the Makefile's: cmd_sources and the command's
CPPFLAGS are read from ../Makefile.am, so that a file moved or added there
needs no change here. The package therefore builds from this repository's
tree (pip install ./python), not from a copy of python/ alone.

pkg-config finds labelprof, yajl and zlib: an installed labelprof (make
install), or a build tree's labelprof-uninstalled.pc through
PKG_CONFIG_PATH (make check does that). The module is linked with a run
path to the library's directory, so that it loads the library it was built
against without LD_LIBRARY_PATH.

LABELPROF_WERROR=1 (set by make) adds -Werror and the project's warnings
to the module's own sources. LABELPROF_CONFIG_H (set by make) names the
configured build's config.h for the command's sources; without it (pip)
the module needs no configure run at all.
"""

import os
import re
import shlex
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)


def fail(msg):
    sys.exit("labelprof setup.py: " + msg)


def pkg_config(*args):
    cmd = [os.environ.get("PKG_CONFIG", "pkg-config")] + list(args)
    try:
        out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
    except FileNotFoundError:
        fail("pkg-config is not installed (Debian: apt-get install pkg-config)")
    except subprocess.CalledProcessError as e:
        fail(
            "pkg-config %s failed: %s\n"
            "Install labelprof first (make install), or point PKG_CONFIG_PATH at a build tree "
            "(its labelprof-uninstalled.pc); yajl and zlib come from libyajl-dev and zlib1g-dev."
            % (" ".join(args), e.stderr.strip())
        )
    return shlex.split(out)


def makefile_am_variable(name):
    """The words of `name` in ../Makefile.am, from its `=` and `+=` lines, continuations included."""
    path = os.path.join(ROOT, "Makefile.am")
    try:
        with open(path, encoding="utf-8") as f:
            lines = f.read().split("\n")
    except OSError as e:
        fail("cannot read %s (%s): the module builds from labelprof's source tree" % (path, e.strerror))
    words, i, found = [], 0, False
    pattern = re.compile(r"^%s\s*\+?=(.*)$" % re.escape(name))
    while i < len(lines):
        m = pattern.match(lines[i])
        i += 1
        if not m:
            continue
        found = True
        text = m.group(1)
        while text.endswith("\\") and i < len(lines):
            text = text[:-1] + " " + lines[i]
            i += 1
        words += text.split("#", 1)[0].split()
    if not found:
        fail("%s has no %s: cannot tell which sources the command has" % (path, name))
    return words


def command_sources():
    """The command but main(): its .c files, the directories of its headers, and its -D and -I flags."""
    sources, include_dirs, macros = [], [], []
    for word in makefile_am_variable("cmd_sources"):
        if "$" in word:
            fail("cmd_sources in Makefile.am holds %r, which this script cannot expand" % word)
        path = os.path.join(ROOT, word)
        if word.endswith(".c"):
            if path not in sources:
                sources.append(path)
        elif os.path.dirname(path) not in include_dirs:
            include_dirs.append(os.path.dirname(path))
    for word in makefile_am_variable("tools_labelprof_CPPFLAGS"):
        if re.fullmatch(r"\$\((YAJL|ZLIB)_CFLAGS\)", word):
            continue  # pkg-config's, below
        m = re.fullmatch(r"-I\$\((?:top_)?srcdir\)/(.*)", word)
        if m:
            include_dirs.append(os.path.join(ROOT, m.group(1)))
        elif word.startswith("-D"):
            name, _, value = word[2:].partition("=")
            macros.append((name, value or None))
        else:
            fail("tools_labelprof_CPPFLAGS in Makefile.am holds %r, which this script cannot use" % word)
    return sources, include_dirs, macros


def version():
    with open(os.path.join(ROOT, "configure.ac"), encoding="utf-8") as f:
        m = re.search(r"AC_INIT\(\[labelprof\],\s*\[([^\]]+)\]", f.read())
    if not m:
        fail("no version in configure.ac's AC_INIT")
    return m.group(1)


class BuildExt(build_ext):
    """Compiles the command's sources with their own flags, then the bindings, linked together."""

    def finalize_options(self):
        super().finalize_options()
        # What the module is built against is pkg-config's answer, which setuptools cannot date: a
        # build/ left by an earlier pip install against another library would otherwise be reused.
        self.force = True

    def write_config_h(self):
        """Writes the config.h the command's sources include, under build_temp; returns its directory.

        LABELPROF_CONFIG_H names a configured build's config.h (make sets it): the command's sources then
        see what configure found, as in the labelprof command. Without it (pip install ./python) nothing
        of configure's is needed: the command's sources test no HAVE_ macro, so the system extensions
        configure turns on (AC_USE_SYSTEM_EXTENSIONS) and configure.ac's version stand in. Either way
        src/cmd_streams.h follows, which sends the command's output to the module.
        """
        configured = os.environ.get("LABELPROF_CONFIG_H")
        lines = ["/* Written by labelprof's python/setup.py for the command's sources in the module. */"]
        if configured:
            if not os.path.isfile(configured):
                fail("LABELPROF_CONFIG_H names %s, which is not a file" % configured)
            lines.append('#include "%s"' % os.path.abspath(configured))
        else:
            lines += ["#ifndef _GNU_SOURCE", "#define _GNU_SOURCE 1", "#endif",
                      '#define PACKAGE_VERSION "%s"' % version()]
        lines.append('#include "%s"' % os.path.join(HERE, "src", "cmd_streams.h"))
        text = "\n".join(lines) + "\n"
        config_dir = os.path.join(os.path.abspath(self.build_temp), "cmd-config")
        os.makedirs(config_dir, exist_ok=True)
        path = os.path.join(config_dir, "config.h")
        try:
            with open(path, "w", encoding="utf-8") as f:
                f.write(text)
        except OSError as e:
            fail("cannot write %s: %s" % (path, e.strerror))
        return config_dir

    def build_extension(self, ext):
        cmd_c, cmd_inc, cmd_macros = command_sources()
        lib_cflags = pkg_config("--cflags", "labelprof")
        dep_cflags = pkg_config("--cflags", "yajl", "zlib")
        config_dir = self.write_config_h()
        # The command's own files: their config.h (first on the path, and included first), hidden symbols
        # (nothing of the command may stand in for a function of liblabelprof's), warnings as the command
        # is built with.
        pre = ["-std=gnu11", "-include", os.path.join(config_dir, "config.h"), "-fvisibility=hidden"] + dep_cflags
        post = ["-Wall", "-Wextra", "-Wno-unused-parameter"]
        macros = cmd_macros
        inc = [config_dir] + cmd_inc
        jobs = os.cpu_count() or 2
        with ThreadPoolExecutor(max_workers=jobs) as pool:
            objects = list(
                pool.map(
                    lambda src: self.compiler.compile(
                        [src],
                        output_dir=self.build_temp,
                        macros=macros,
                        include_dirs=inc,
                        debug=self.debug,
                        extra_preargs=pre,
                        extra_postargs=post,
                        depends=ext.depends,
                    )[0],
                    cmd_c,
                )
            )
        ext.extra_objects = objects + list(ext.extra_objects or [])
        ext.include_dirs = list(ext.include_dirs) + cmd_inc
        ext.extra_compile_args = list(ext.extra_compile_args) + lib_cflags + ["-fvisibility=hidden", "-std=gnu11"]
        if os.environ.get("LABELPROF_WERROR") == "1":
            ext.extra_compile_args += ["-Wall", "-Wextra", "-Werror", "-Wno-missing-field-initializers"]
        libs = pkg_config("--libs", "labelprof", "yajl", "zlib")
        libdirs = [w[2:] for w in pkg_config("--libs-only-L", "labelprof")]
        ext.extra_link_args = list(ext.extra_link_args) + libs + ["-lm"]
        ext.runtime_library_dirs = list(ext.runtime_library_dirs) + libdirs
        super().build_extension(ext)


setup(
    version=version(),
    packages=["labelprof"],
    ext_modules=[
        Extension(
            "labelprof._labelprof",
            sources=["src/labelprof.c", "src/read.c"],
            depends=["src/cmd_streams.h"],
        )
    ],
    cmdclass={"build_ext": BuildExt},
)
