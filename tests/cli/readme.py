"""The commands of the README and the documents beside it, as written (tests/cli/readme.sh).

usage: readme.py SPECDEC DOC.md...

1. The README's "Five commands": each line '$ build/specdec ...' is run and its output
   compared with the lines shown under it: exactly, except a rate ('N trials/s'); for
   decode, whose times move from run to run, its two settings lines exactly and the first
   word of every other line (the rows and their order; in the table against the predicted
   best, which leaves that scheme out, only the number of rows). A command on the large target's
   F16 file (out/models/large-target-f16.gguf) runs data/models/large-f16.sh first.
2. Every other specdec command shown in a code block (build/specdec, build-mpi/specdec,
   under mpirun or not) parses as written: the same words and --help exit 0, so a
   renamed command or option, or a value it refuses, fails here.
3. Every 'make TARGET' shown names a rule of the Makefile, every 'sh tests/...' or
   'sh SCRIPT' an existing file.
Prints one line per failure and a closing count; exit 1 on any failure.
"""
import os
import re
import shlex
import subprocess
import sys

SPECDEC, DOCS = sys.argv[1], sys.argv[2:]
passed = failed = 0


def ok(cond, what):
    global passed, failed
    if cond:
        passed += 1
    else:
        failed += 1
        print("FAIL: " + what)


def code_lines(path):
    """(line number, command) of each command in the 4-space code blocks, continuations joined."""
    out, cur, start = [], None, 0
    for n, line in enumerate(open(path).read().split("\n"), 1):
        if not line.startswith("    ") or line.strip() == "":
            cur = None
            continue
        text = line[4:]
        if cur is not None:
            cur[1] += " " + text.strip()
        else:
            cur = [n, text.strip()]
            out.append(cur)
        if cur[1].endswith("\\"):
            cur[1] = cur[1][:-1].rstrip()
        else:
            cur = None
    return [(n, c) for n, c in out]


def mask(lines, decode):
    lines = [re.sub(r"[0-9.e+]+ trials/s", "N trials/s", l.rstrip()) for l in lines]
    if decode:
        lines = [l if i < 2 else (l.split() or [""])[0] for i, l in enumerate(lines)]
        # the table against the predicted best lists every scheme but that one: which it
        # leaves out is a timing, so its rows are compared by count, not by name
        heads = [i for i, l in enumerate(lines) if l == "scheme"]
        if len(heads) > 1:
            lines = lines[:heads[1] + 1] + ["SCHEME" if l and l != "#" else l for l in lines[heads[1] + 1:]]
    return lines


# 1. the five commands, run
readme = open(DOCS[0]).read().split("\n")
try:
    first = readme.index("## Five commands")
    end = next(i for i in range(first + 1, len(readme)) if readme[i].startswith("## "))
except (ValueError, StopIteration):
    first, end = 0, 0
ok(end > first, "%s: no '## Five commands' section" % DOCS[0])
ran = 0
i = first
while i < end:
    line = readme[i]
    if line.startswith("    $ build/specdec "):
        cmd = line[len("    $ "):]
        shown = []
        i += 1
        while i < end and readme[i].startswith("    ") and not readme[i].startswith("    $ "):
            shown.append(readme[i][4:])
            i += 1
        args = shlex.split(cmd)
        args[0] = SPECDEC
        if "out/models/large-target-f16.gguf" in args:  # the large target widened, as make demo does first
            subprocess.run(["sh", "data/models/large-f16.sh", SPECDEC], stdout=subprocess.DEVNULL, check=False)
        p = subprocess.run(args, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, timeout=300)
        got = p.stdout.rstrip("\n").split("\n")
        decode = args[1] == "decode"
        a, b = mask(got, decode), mask(shown, decode)
        ok(p.returncode == 0 and a == b, "%s: '%s' prints otherwise than shown (exit %d):\n  shown %s\n  got   %s"
           % (DOCS[0], cmd, p.returncode, b[:3] if a == b else [x for x in b if x not in a][:2],
              [x for x in a if x not in b][:2]))
        ran += 1
        continue
    i += 1
ok(ran == 5, "%s: %d commands under '## Five commands', not 5" % (DOCS[0], ran))

# 2, 3. every command shown parses as written; make targets and scripts exist
rules = set()
for line in open("Makefile"):
    m = re.match(r"^([A-Za-z0-9_.%/-][^:=\s]*(?:\s+[^:=\s]+)*)\s*:(?!=)", line)
    if m:
        rules.update(m.group(1).split())
checked = 0
for doc in DOCS:
    for n, line in code_lines(doc):
        where = "%s:%d" % (doc, n)
        text = re.sub(r"\s+#.*$", "", line.lstrip("$ ").strip())
        for part in re.split(r"\s*(?:&&|\|\||;)\s*", text):
            try:
                words = shlex.split(part)
            except ValueError:
                continue
            while words and re.match(r"^[A-Z_][A-Z0-9_]*=", words[0]):  # VAR=value make ...
                words = words[1:]
            if words[:1] == ["mpirun"]:
                words = words[3:] if len(words) > 3 and words[1] == "-n" else []
            if not words:
                continue
            if words[0] in ("build/specdec", "build-mpi/specdec"):
                args = [SPECDEC] + [w for w in words[1:] if w != "--mpi"] + ["--help"]
                p = subprocess.run(args, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=60)
                ok(p.returncode == 0 and "usage" in p.stdout.lower(),
                   "%s: '%s' does not parse (exit %d): %s" % (where, part, p.returncode, p.stdout.strip()[:200]))
                checked += 1
            elif words[0] == "make":
                for t in words[1:]:
                    if "=" in t or t.startswith("-"):
                        continue
                    ok(t in rules, "%s: 'make %s': no such rule in the Makefile" % (where, t))
                    checked += 1
            elif words[0] == "sh" and len(words) > 1 and not words[1].startswith("-"):
                ok(os.path.isfile(words[1]), "%s: 'sh %s': no such script" % (where, words[1]))
                checked += 1
print("readme: %d commands shown checked, %d of the five run; %d passed, %d failed" % (checked, ran, passed, failed))
sys.exit(1 if failed else 0)
