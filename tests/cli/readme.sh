#!/bin/sh
# The commands of the README and the documents beside it (STUDY.md, CERTIFY.md, SCALE.md),
# as written: the README's five commands run and compared with the output it shows, every
# other specdec command parsed (its words and --help), every make target and script
# named checked to exist (tests/cli/readme.py). usage: readme.sh SPECDEC
SPECDEC=${1:-build/specdec}
cd "$(dirname "$0")/../.." || exit 2
command -v python3 >/dev/null 2>&1 || { echo "readme: FAIL: no python3 (sh install-deps.sh installs it)"; exit 1; }
timeout 600 python3 tests/cli/readme.py "$SPECDEC" README.md STUDY.md CERTIFY.md SCALE.md
