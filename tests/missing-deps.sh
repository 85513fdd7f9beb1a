#!/bin/sh
echo "The tests need CUnit and jansson: apt-get install libcunit1-dev libjansson-dev, then ./configure again." >&2
exit 1
