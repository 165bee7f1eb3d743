#!/usr/bin/env python3
"""Runs llama.cpp's llama-speculative or llama-speculative-simple (with -v) and prints
the ids of the tokens it generated, space-separated: what `specdec certify --decoder`
reads. Neither program prints ids in its output; both print them in their debug log.

    spec_ids.py tree|simple PROGRAM ARGS...

tree    (llama-speculative): "draft token I of sequence S (ID, '...') accepted" (at
        temperature 0: "the sampled target token matches the Ith drafted token of
        sequence S (ID, '...')") and "the sampled target token (ID, '...') did not
        match" lines, in order: a block's accepted drafts, then the token sampled by
        the target (residual or bonus).
simple  (llama-speculative-simple): the draft is candidate 0 at each position of
        "draft candidate   0, pos P: ID" lines; "accepted A/D draft tokens, the last
        target token is: (ID)" ends a block: its tokens are the first A drafts and ID.

Exits with the program's status when it fails, 3 when no id could be read (after
eight runs with the same seed).
"""
import re
import subprocess
import sys

TREE = re.compile(r"draft token \d+ of sequence \d+ \((\d+), '.*?'\) (accepted|rejected)"
                  r"|the sampled target token \((\d+), '"
                  r"|the sampled target token matches the \d+th drafted token of sequence \d+ \((\d+), '", re.S)
SIMPLE = re.compile(r"seq_id 0, draft candidate +0, pos +(\d+): +(\d+) "
                    r"|accepted (\d+)/\d+ draft tokens, the last target token is: \((\d+)\)")


def tree_ids(log):
    ids = []
    for m in TREE.finditer(log):
        if m.group(1) is not None:
            if m.group(2) == "accepted":
                ids.append(int(m.group(1)))
        elif m.group(3) is not None:
            ids.append(int(m.group(3)))
        else:  # greedy verification (temperature 0): a draft equal to the target's token
            ids.append(int(m.group(4)))
    return ids


def simple_ids(log):
    ids, draft = [], []
    for m in SIMPLE.finditer(log):
        if m.group(1) is not None:
            if int(m.group(1)) == 0:
                draft = []
            draft.append(int(m.group(2)))
        else:
            ids.extend(draft[: int(m.group(3))])
            ids.append(int(m.group(4)))
            draft = []
    return ids


def main(argv):
    if len(argv) < 3 or argv[1] not in ("tree", "simple"):
        sys.stderr.write(__doc__)
        return 2
    # llama.cpp's log is written by a worker thread: on a busy machine a run's debug lines
    # are sometimes missing when the program exits (no ids, or the first alone). The same
    # seed gives the same tokens, so a run whose log has fewer than two ids is run again
    # (eight times at most; a first token that ends the text has one id every time, and
    # its program exits at once, when a lost line is likeliest).
    ids = []
    for _ in range(8):
        p = subprocess.run(argv[2:], stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                           stderr=subprocess.PIPE)
        log = p.stderr.decode("utf-8", "replace")
        if p.returncode != 0:
            sys.stderr.write(log[-2000:])
            return p.returncode if p.returncode > 0 else 1
        got = tree_ids(log) if argv[1] == "tree" else simple_ids(log)
        if len(got) > len(ids):
            ids = got
        if len(ids) >= 2:
            break
    if not ids:
        sys.stderr.write("spec_ids.py: no token ids in the log of %s\n" % argv[2])
        return 3
    print(" ".join(str(i) for i in ids))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
