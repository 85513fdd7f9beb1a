#!/bin/sh
echo "The tests need CUnit, jansson and libxml2: apt-get install libcunit1-dev libjansson-dev libxml2-dev (or ./install-deps), then ./configure again." >&2
exit 1
