#!/bin/sh
# Generates ./configure from configure.ac and Makefile.am (needs autoconf, automake, libtool, pkg-config).
set -e
cd "$(dirname "$0")"
autoreconf --install --force
