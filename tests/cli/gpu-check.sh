#!/bin/sh
# The GPU check (tests/gpu-check.sh) refuses bad arguments, a missing build and a machine
# or build without a GPU before measuring anything, and says so; a step that exits
# non-zero is 'failed' in its summary (the dry run's planted step `fail`), and on a GPU a
# missing compute-sanitizer fails the sanitize step. (The whole dry run, every step on
# the CPU with a planted hang, failing and malformed step: make gpu-check-dry.)
# usage: gpu-check.sh path/to/specdec
SPECDEC=${1:-build/specdec}
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
. "$(dirname "$0")/lib.sh"
S=tests/gpu-check.sh
B=$(dirname "$SPECDEC")
# a build folder with the plain specdec: whatever this machine has, no usable CUDA device
mkdir -p "$T/b/tests/bench"
ln -s "$(cd "$B" && pwd)/specdec" "$T/b/specdec"
printf '#!/bin/sh\nexit 1\n' > "$T/b/tests/test_cuda"
cp "$T/b/tests/test_cuda" "$T/b/tests/bench/bench_cuda"
chmod +x "$T/b/tests/test_cuda" "$T/b/tests/bench/bench_cuda"
echo "sources: 1" > "$T/b/BUNDLE"
expect 1 "built from other sources than this tree's" -- env GPU_CHECK_BUILD="$T/b" sh $S
echo "sources: $(sh tests/bench/cuda-bundle.sh --sources-sum)" > "$T/b/BUNDLE"
expect 1 "needs an NVIDIA GPU" -- env GPU_CHECK_BUILD="$T/b" sh $S --results "$T/r"
if [ -e "$T/r" ]; then bad "the refusal left a results folder"; else ok; fi
expect 1 "nothing measured" -- env GPU_CHECK_BUILD="$T/b" OUT="$T/out" sh $S --steps test --results "$T/r"
if [ -s "$T/out/log.txt" ]; then ok; else bad "the refusal left no log.txt in \$OUT"; fi
# the dry run's planted failing step (exit 3) is 'failed (3)' in steps.tsv and the summary
expect 1 "gpu-check: FAIL: 0 of 1 steps ok, 1 failed or timed out, 0 skipped" -- \
    env GPU_CHECK_BUILD="$T/b" sh $S --dry-run --steps fail --results "$T/dry"
grep -q "^fail	failed (3)	" "$T/dry/steps.tsv" 2>/dev/null && grep -q "^fail  *failed (3) " "$T/dry/summary.txt" \
    && ok || bad "the planted failing step is not 'failed (3)': $(cat "$T/dry/steps.tsv" 2>/dev/null | tail -1)"
# on a GPU (CHECK_DEVICE=cuda) a missing compute-sanitizer fails the sanitize step
expect 1 "^headline: sanitize: compute-sanitizer not found" -- env CHECK_RESULTS="$T/dry" CHECK_BUILD="$T/b" \
    CHECK_DEVICE=cuda CHECK_SANITIZER= CHECK_SAN_TESTS=plan sh $S --step sanitize
expect 1 "is not built" -- env GPU_CHECK_BUILD="$T/none" sh $S
expect 1 "does not exist" -- sh $S --bundle "$T/none.tar.gz"
expect 2 "unknown step 'tset'" -- sh $S --steps test,tset
expect 2 "unknown step 'hang'" -- sh $S --steps hang
expect 2 "unknown argument '--bogus'" -- sh $S --bogus
expect 0 "dry-run" -- sh $S --help
expect 2 "" -- sh $S --headline bogus
expect 2 "no test named 'bogus'" -- env SPECDEC_CUDA_TESTS=plan,bogus "$B/tests/test_cuda"
expect 2 "names no test" -- env SPECDEC_CUDA_TESTS=, "$B/tests/test_cuda"
expect 0 "PASSED  \] 3 test" -- env SPECDEC_CUDA_TESTS='!plan,unavailable' "$B/tests/test_cuda"
expect 2 "no test named 'bogus'" -- env SPECDEC_CUDA_TESTS='!bogus' "$B/tests/test_cuda"
expect 1 "built without CUDA" -- env SPECDEC_REQUIRE_GPU=1 SPECDEC_CUDA_TESTS=unavailable "$B/tests/test_cuda"
# the bundle: unpacked from xz (xz, or Python's tarfile where there is no xz) or gzip into
# the repository; the room a lent machine has left
u=out/gpu-check-unpack.$$
mkdir -p "$T/u/$u" && echo bundled > "$T/u/$u/f"
(cd "$T/u" && tar -cf - out | xz > "$T/b.tar.xz" && tar -czf "$T/b.tar.gz" out)
for how in xz python gz; do
    b=$T/b.tar.xz; [ $how = gz ] && b=$T/b.tar.gz
    expect 0 "$u/f" -- env BUNDLE_UNPACK=$how sh tests/bench/cuda-bundle.sh --unpack "$b"
    [ "$(cat "$u/f" 2>/dev/null)" = bundled ] && ok || bad "--unpack ($how) did not unpack $u/f"
    rm -rf "$u"
done
expect 0 "room: the tree [0-9]* KiB + the bundle [0-9]* KiB ($T/b.tar.xz) = [0-9]* KiB of the 65536 a lent machine receives: [0-9]* KiB left" -- \
    sh tests/bench/cuda-bundle.sh --room "$T/b.tar.xz"
finish "cli gpu-check"
