#!/bin/sh
# make test-arm: runs the tests of a cross-built ARM tree ($1, default build-arm) under
# qemu-user. Each ARM program X of the tree gets a twin $1/qemu/X, a script that runs it
# under qemu-aarch64, and tests/run-tests.sh runs $1/qemu as its build tree: the cmocka
# programs and the command-line scripts, which call specdec and its helper programs by
# path, all under emulation. A program the emulator runs cannot start another ARM
# program (execve goes to the kernel, which runs only x86 here), and x86 Python, Open
# MPI and Slurm cannot load or launch ARM programs: TEST_SKIP below leaves those tests,
# and the slowest scripts, to make test, each printed as skipped with its reason.
# Libraries are found in Debian's multiarch folders (/usr/lib/aarch64-linux-gnu,
# installed by install-deps.sh --arm).
# The kernel tests run again on an ARMv8.0 CPU without the dot-product instructions
# (qemu's -cpu cortex-a57; the default, max, has them): the NEON set's other path.
# Then the same logits on both architectures: the shipped target's (F16) and its
# draft's, and those of the target converted to Q8_0, over a prompt and 8 greedy tokens
# (generate --log-logits), from the x86 build (X86, default build/specdec) and from
# this tree under the emulator, byte for byte: the generic sets alike (plain C, ISO
# rounding; the exponential is each libm's expf), and NEON like the x86 fused sets
# (AVX2, AVX-512: src/model/cpu/README.md) on both ARM CPUs, where this x86 CPU runs one.
# usage: run-arm.sh [BUILD [X86]]   QEMU=... names the emulator (default qemu-aarch64)
BUILD=${1:-build-arm}
X86=${2:-build/specdec}
QEMU=${QEMU:-qemu-aarch64}
cd "$(dirname "$0")/.." || exit 2
command -v "$QEMU" >/dev/null 2>&1 || { echo "run-arm: no $QEMU: sh install-deps.sh --arm installs qemu-user"; exit 1; }
[ -x "$BUILD/specdec" ] || { echo "run-arm: no $BUILD/specdec: make test-arm builds it"; exit 1; }
rm -rf "$BUILD/qemu"
# the twins: every ARM executable of the tree (specdec, tests/test_*, tests/exec/*)
find "$BUILD" -path "$BUILD/qemu" -prune -o -type f -perm -u+x -print | while read -r f; do
    head -c 20 "$f" | od -An -tx1 | tr -d ' \n' | grep -q '^7f454c46.*b700$' || continue # ELF, e_machine AArch64
    rel=${f#"$BUILD"/}
    mkdir -p "$BUILD/qemu/$(dirname "$rel")"
    printf '#!/bin/sh\nexec %s %s "$@"\n' "$QEMU" "$(cd "$(dirname "$f")" && pwd)/${f##*/}" > "$BUILD/qemu/$rel"
    chmod +x "$BUILD/qemu/$rel"
done
[ -x "$BUILD/qemu/specdec" ] || { echo "run-arm: $BUILD/specdec is not an AArch64 program"; exit 1; }
echo "run-arm: $("$BUILD/qemu/specdec" --version 2>&1 | head -1), under $("$QEMU" --version | head -1)"
# What is left to make test: what cannot run here (x86 Python, Slurm, a sweep's
# workers), and the scripts whose emulated runs take far longer than their native
# minutes while they check little of ARM's own (orchestration, statistics, timing,
# llama.cpp's x86 programs; their arithmetic is the unit tests' and the logits' below).
# SPECDEC_MPI=skip: mpi.sh checks the plain build's refusals, not the x86 Open MPI runs;
# SPECDEC_TEST_QEMU: test_pool skips its fork test, which crashes qemu-user itself.
# SLOW: unit tests and scripts of minutes emulated whose arithmetic is plain C that make
# test runs natively; ARM_FULL=1 runs them too (over an hour on 2 cores).
CANNOT="python.sh the x86 Python cannot load an ARM libspecdec.so
slurm.sh Slurm's x86 srun cannot launch ARM programs
sweep.sh its workers are specdec started again by path, an ARM program the kernel cannot run here
readme.sh the README's commands, about 150 s natively, many times that emulated: make test runs them
arch.sh its reference is llama.cpp's x86 programs and Python: make test runs it
exec.sh certify --exec's protocol, about 450 s natively: make test runs it
ladder.sh the ladder's bench, about 90 s natively: make test runs it
figs.sh the figures' recipes, about 40 s natively: make test runs it
cpu-sets.sh the large target's greedy text under each set, minutes emulated: test_cpu and the logits below hold the sets
replay.sh decode and replay runs, about 30 s natively; one check is of the machine's timing: make test runs it"
SLOW="test_certify statistics over many thousands of runs, about 4 minutes emulated: make test runs it (ARM_FULL=1 here)
test_decode speculative decoding certified over thousands of texts, many minutes emulated: make test runs it (ARM_FULL=1 here)
test_otm statistics over many runs, minutes emulated: make test runs it (ARM_FULL=1 here)
test_tree statistics over many trees, many minutes emulated: make test runs it (ARM_FULL=1 here)
convert.sh every conversion and type, about 19 minutes emulated: make test runs it; the Q8_0 logits below are ARM's (ARM_FULL=1 here)
json.sh every command's envelope, about 6 minutes emulated: make test runs it (ARM_FULL=1 here)
options.sh the option table's parsing, about 6 minutes emulated: make test runs it (ARM_FULL=1 here)"
[ "${ARM_FULL:-0}" = 1 ] && SLOW=""
TEST_SKIP="$CANNOT${SLOW:+
$SLOW}" \
SPECDEC_MPI=skip SPECDEC_TEST_QEMU=1 sh tests/run-tests.sh "$BUILD/qemu"
rc=$?
for t in test_cpu test_gemm; do
    echo "== $t on an ARMv8.0 CPU (QEMU_CPU=cortex-a57)"
    QEMU_CPU=cortex-a57 "$BUILD/qemu/tests/$t" > "$BUILD/qemu/$t.a57.log" 2>&1 ||
        { tail -20 "$BUILD/qemu/$t.a57.log"; echo "run-arm: FAIL: $t on cortex-a57"; rc=1; }
done

# logits SPECDEC SET MODEL OUT: the logits files OUT.target.npy and OUT.draft.npy
T=$(mktemp -d) || exit 1
trap 'rm -rf "$T"' EXIT
logits() {
    SPECDEC_CPU=$2 "$1" generate --model "$3" --draft data/models/draft.gguf --max-tokens 8 \
        --prompt "The ship sailed into the harbour and" --temperature 0 --log-logits "$4" >/dev/null 2>"$T/err" ||
        { echo "cross-arch: FAIL: $1 under $2: $(cat "$T/err")"; return 1; }
}
same=0; differ=0
cross() { # X86_SET ARM_SET MODEL [ARM_CPU]
    logits "$X86" "$1" "$3" "$T/x86" && QEMU_CPU=${4:-max} logits "$BUILD/qemu/specdec" "$2" "$3" "$T/arm" ||
        { differ=$((differ + 1)); return; }
    what="$(basename "$3"): x86 $1 and ARM $2${4:+ on $4}"
    if cmp -s "$T/x86.target.npy" "$T/arm.target.npy" && cmp -s "$T/x86.draft.npy" "$T/arm.draft.npy"; then
        echo "cross-arch: $what: the same logits, bit for bit"; same=$((same + 1))
    else
        echo "cross-arch: FAIL: $what: the logits differ"; differ=$((differ + 1))
    fi
}
if [ ! -x "$X86" ]; then
    echo "cross-arch: FAIL: no x86 build $X86 (make test-arm builds it)"; differ=1
elif ! "$X86" convert --model data/models/target.gguf --out "$T/target-q8_0.gguf" --type q8_0 >"$T/err" 2>&1; then
    echo "cross-arch: FAIL: convert to Q8_0: $(cat "$T/err")"; differ=1
else
    cross generic generic data/models/target.gguf
    sets=$("$X86" generate --model data/models/target.gguf --prompt a --max-tokens 1 2>&1 >/dev/null |
        sed -n 's/.*CPU kernels [a-z0-9]* (this CPU: \([a-z0-9 ]*\)).*/\1/p')
    fused=
    case " $sets " in *" avx2 "*) fused=avx2 ;; *" avx512 "*) fused=avx512 ;; esac
    if [ -n "$fused" ]; then
        cross $fused neon data/models/target.gguf
        cross $fused neon "$T/target-q8_0.gguf"
        cross $fused neon "$T/target-q8_0.gguf" cortex-a57
    else
        echo "cross-arch: skipped: NEON against the x86 fused sets (this CPU runs: $sets)"
    fi
fi
echo "cross-arch: $same the same, $differ differ"
[ "$rc" = 0 ] && [ "$differ" = 0 ]
