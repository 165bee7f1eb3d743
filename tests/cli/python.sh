#!/bin/sh
# The Python package (src/python/specdec, over build-shared/libspecdec.so) against the
# command line: tests/python/test_api.py. usage: python.sh SPECDEC
SPECDEC=${1:-build/specdec}
cd "$(dirname "$0")/../.." || exit 2
PY=""
for p in python3 /usr/bin/python3; do
    if command -v "$p" >/dev/null 2>&1 && "$p" -c "import numpy" 2>/dev/null; then PY=$p; break; fi
done
if [ -z "$PY" ]; then
    echo "python: FAIL: no python3 with numpy (sh install-deps.sh installs python3-numpy)"; exit 1
fi
if [ ! -f build-shared/libspecdec.so ]; then
    echo "python: FAIL: no build-shared/libspecdec.so (make shared builds it)"; exit 1
fi
SPECDEC_LIB=build-shared/libspecdec.so timeout 600 "$PY" tests/python/test_api.py "$SPECDEC"
