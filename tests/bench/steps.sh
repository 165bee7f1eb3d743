# Sourced by the scripts that run a list of steps on a lent machine (tests/bench/gpu-study.sh,
# tests/gpu-check.sh): each step under its own time limit, its status and seconds kept in
# RESULTS/steps.tsv as it ends, so a step that fails or runs out of time keeps what the
# earlier ones wrote and the next one still runs.
#
#   steps_begin DIR          DIR/.header (# device, driver, commit, command, date from
#                            STEPS_DEVICE, STEPS_DRIVER, STEPS_COMMAND; the commit git's
#                            unless STEPS_COMMIT says it), DIR/DEVICE (which
#                            plots/draw.sh reads) and DIR/steps.tsv's header
#   steps_run NAME LIMIT CMD...
#                            runs CMD under `timeout LIMIT` (the whole process group; KILL 5 s
#                            after TERM), its stdout shown and kept in DIR/.tmp/NAME.out, its
#                            stderr in DIR/NAME.err (removed when empty, its tail shown when
#                            the step fails), and appends a row to steps.tsv:
#                              step  status  seconds  limit_s  headline
#                            status: ok (exit 0), skipped (exit 77: a step that could not
#                            run here, which is not ok), timed out, failed (N). headline:
#                            the step's last stdout line "headline: ..." (a skipped step's
#                            last "skipped: ..." line), "-" when it printed none.
#                            Returns 0 whatever the step did; STEPS_BAD counts the steps
#                            not ok (skipped included), STEPS_FAILED those failed or timed out.
#   steps_table DIR N        the last N rows of steps.tsv as an aligned table
STEPS_BAD=0 STEPS_FAILED=0

# the checkout's commit; a copy without git (a lent machine gets the files alone) says so
steps_commit() {
    if git rev-parse --short HEAD >/dev/null 2>&1; then
        echo "$(git rev-parse --short HEAD)$(git diff --quiet HEAD 2>/dev/null || echo ' (+ local changes)')"
    else echo "unknown (no git here)"; fi
}

steps_begin() {
    STEPS_DIR=$1
    mkdir -p "$STEPS_DIR/.tmp"
    { echo "# device: $STEPS_DEVICE"
      echo "# driver: $STEPS_DRIVER"
      echo "# commit: ${STEPS_COMMIT:-$(steps_commit)}"
      echo "# command: $STEPS_COMMAND"
      echo "# date: $(date -u +%Y-%m-%dT%H:%M:%SZ)"; } > "$STEPS_DIR/.header"
    cp "$STEPS_DIR/.header" "$STEPS_DIR/DEVICE"
    [ -f "$STEPS_DIR/steps.tsv" ] ||
        { cat "$STEPS_DIR/.header"; printf 'step\tstatus\tseconds\tlimit_s\theadline\n'; } > "$STEPS_DIR/steps.tsv"
}

steps_run() {
    _name=$1 _lim=$2
    shift 2
    _out=$STEPS_DIR/.tmp/$_name.out _err=$STEPS_DIR/$_name.err
    echo
    echo "== $_name (time limit $_lim s)"
    _t0=$(date +%s)
    # (the || keeps a caller's set -e from ending the group before the status is kept)
    { _r=0; timeout -k 5 "$_lim" "$@" 2>"$_err" || _r=$?; echo $_r > "$STEPS_DIR/.tmp/$_name.rc"; } | tee "$_out"
    _rc=$(cat "$STEPS_DIR/.tmp/$_name.rc")
    _sec=$(( $(date +%s) - _t0 ))
    _head=$(sed -n 's/^headline: //p' "$_out" | tail -1 | tr '\t' ' ')
    case $_rc in
    0) _st=ok ;;
    77) _st=skipped
        [ -n "$_head" ] || _head=$(sed -n 's/.*\(skipped: \)/\1/p' "$_out" | tail -1 | tr '\t' ' ') ;;
    124|137) _st="timed out" ;;
    *) _st="failed ($_rc)" ;;
    esac
    [ "$_st" = ok ] || STEPS_BAD=$((STEPS_BAD + 1))
    case $_st in timed*|failed*)
        STEPS_FAILED=$((STEPS_FAILED + 1))
        echo "steps: $_name $_st after $_sec s (limit $_lim s); its stderr ($_err):" >&2
        tail -5 "$_err" >&2 ;;
    esac
    [ -s "$_err" ] || rm -f "$_err"
    printf '%s\t%s\t%d\t%d\t%s\n' "$_name" "$_st" "$_sec" "$_lim" "${_head:--}" >> "$STEPS_DIR/steps.tsv"
    return 0
}

steps_table() {
    grep -v '^#' "$1/steps.tsv" | tail -n +2 | tail -n "$2" |
        awk -F'\t' 'BEGIN { printf "%-10s %-11s %5s %5s  %s\n", "step", "status", "s", "limit", "headline" }
                    { printf "%-10s %-11s %5d %5d  %s\n", $1, $2, $3, $4, $5 }'
}
