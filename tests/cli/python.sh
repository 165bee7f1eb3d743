#!/bin/sh
# The Python package (src/python/specdec, over build-shared/libspecdec.so) against the
# command line: tests/python/test_api.py; then the install a Python user makes, `pip
# install --no-build-isolation .` into a fresh virtual environment (setuptools and wheel
# from the system: no network), used from elsewhere: its libspecdec.so is the one inside
# the installed package, its version the command's. usage: python.sh SPECDEC
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
SPECDEC_LIB=build-shared/libspecdec.so timeout 600 "$PY" tests/python/test_api.py "$SPECDEC" || exit 1

if ! "$PY" -c "import setuptools, wheel, venv" 2>/dev/null; then
    echo "python: FAIL: no setuptools, wheel or venv for $PY (sh install-deps.sh installs python3-setuptools, python3-wheel, python3-venv)"
    exit 1
fi
T=$(mktemp -d) || exit 1
trap 'rm -rf "$T"' EXIT
ROOT=$(pwd)
"$PY" -m venv --system-site-packages "$T/venv" &&
    "$T/venv/bin/pip" install --quiet --no-build-isolation --no-index --no-deps --no-cache-dir "$ROOT" > "$T/pip.log" 2>&1 ||
    { echo "python: FAIL: pip install --no-build-isolation . failed:"; tail -20 "$T/pip.log"; exit 1; }
want=$("$SPECDEC" --version)
cd "$T" && got=$(env -u SPECDEC_LIB -u PYTHONPATH "$T/venv/bin/python" - "$T/venv" <<'EOF2'
import sys, specdec
d, t = specdec.pair("dirichlet:6,1,3")
inside = specdec._lib._name.startswith(sys.argv[1]) and specdec.__file__.startswith(sys.argv[1])
print("specdec %s %s %.15f" % (specdec.__version__, "inside" if inside else "outside:" + specdec._lib._name,
                               specdec.accept(d, t, k=2, scheme="rrs")))
EOF2
)
acc=$("$ROOT/$SPECDEC" accept --pair dirichlet:6,1,3 -k 2 --scheme rrs | awk '$1 == "rrs" { print $3 }')
if [ "$got" = "$want inside $acc" ]; then
    echo "python: pip install .: the installed package and its libspecdec.so give the command's numbers"
else
    echo "python: FAIL: pip install .: got '$got', want '$want inside $acc'"; exit 1
fi
