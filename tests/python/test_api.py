"""The Python package (src/python/specdec) against the command line, number for number.

    python3 tests/python/test_api.py build/specdec

Each check runs a function of the package and the `specdec` command on the same input
(the command with --json where it has it) and compares every number the two report:
exactly where the command prints full precision, to its printed digits elsewhere. And
a library error must reach Python as specdec.Error with the C message. Prints one line
per failure and a closing count; exit 1 on any failure.
"""
import json
import math
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "src", "python"))
sys.path.insert(0, os.path.join(HERE, "..", "exec"))

import numpy as np  # noqa: E402

import specdec  # noqa: E402
import adapter  # noqa: E402 (the Python sampler certify --exec runs in tests/cli/exec.sh)

SPECDEC = sys.argv[1] if len(sys.argv) > 1 else "build/specdec"
passed, failed = 0, 0


def check(name, ok, detail=""):
    global passed, failed
    if ok:
        passed += 1
    else:
        failed += 1
        print("FAIL: %s %s" % (name, detail))


def close(name, got, want, rtol=0.0, atol=0.0):
    """got and want equal within rtol (relative) or atol; NaN only equals NaN (null)."""
    if want is None:
        want = math.nan
    same = (math.isnan(got) and math.isnan(want)) or abs(got - want) <= max(atol, rtol * abs(want))
    check(name, same, "python %r, command %r" % (got, want))


def run(*args, code=0):
    p = subprocess.run([SPECDEC] + list(args), capture_output=True, text=True, timeout=300)
    if p.returncode != code:
        check("specdec " + " ".join(args), False, "exit %d (want %d): %s" % (p.returncode, code, p.stderr[-300:]))
    return p


def runjson(*args, code=0):
    """The command's --json object, its envelope checked: command, version, settings, results."""
    out = json.loads(run(*args, "--json", code=code).stdout)
    keys = list(out)
    check("%s --json: the envelope" % args[0],
          keys[:3] == ["command", "version", "settings"] and keys[-1] == "results" and out["command"] == args[0]
          and isinstance(out["version"], str) and len(out["version"]) > 0
          and isinstance(out["settings"], dict) and isinstance(out["results"], list), "keys %s" % keys)
    return out


PAIR = "dirichlet:6,1,2385"
ALL7 = ["sd", "specinfer", "rrs", "kseq", "otm", "otm-lp", "otm-setlp"]


def test_accept():
    draft, target = specdec.pair(PAIR)
    cli = runjson("accept", "--pair", PAIR, "-k", "3", "--scheme", ",".join(ALL7))
    check("accept: vocab", cli["settings"]["vocab"] == draft.size)
    py = specdec.accept(draft, target, k=3, scheme=ALL7, drafts=True)
    for row in cli["results"]:
        acc, used = py[row["scheme"]]
        close("accept %s" % row["scheme"], acc, row["acceptance"])
        close("accept %s drafts" % row["scheme"], used, row["drafts"])
    # batched: rows of two pairs at once, each row the command's on that pair
    d2, t2 = specdec.pair("zipf:50,1.2,0.7")
    d1, t1 = specdec.pair("dirichlet:50,0.5,9")
    batch = specdec.accept(np.stack([d1, d2]), np.stack([t1, t2]), k=4, scheme="all")
    for i, spec in enumerate(["dirichlet:50,0.5,9", "zipf:50,1.2,0.7"]):
        for row in runjson("accept", "--pair", spec, "-k", "4")["results"]:
            close("accept batch row %d %s" % (i, row["scheme"]), batch[row["scheme"]][i], row["acceptance"])
    # kseq at a given gamma
    g = runjson("accept", "--pair", PAIR, "-k", "3", "--scheme", "kseq", "--gamma", "2.5")["results"][0]
    close("accept kseq gamma 2.5", specdec.accept(draft, target, k=3, scheme="kseq", gamma=2.5), g["acceptance"])


def test_float32():
    """float32 laws: held to float32's precision and rescaled in double, as the command
    line reads a float32 .npy (a Dirichlet(1) pair of 1000 tokens sums to 1 within 2e-9,
    not within double's 1e-9)."""
    rng = np.random.default_rng(2385)  # sums 1 - 1.8e-9 and 1 - 1.3e-9
    d32, t32 = (rng.dirichlet(np.ones(1000)).astype(np.float32) for _ in range(2))
    with tempfile.TemporaryDirectory() as tmp:
        dp, tp, op = (os.path.join(tmp, n) for n in ("d.npy", "t.npy", "off.npy"))
        np.save(dp, d32)
        np.save(tp, t32)
        np.save(op, (t32 * np.float32(0.999)).astype(np.float32))
        for row in runjson("accept", "--draft", dp, "--target", tp, "-k", "2")["results"]:
            close("float32 accept " + row["scheme"], specdec.accept(d32, t32, k=2, scheme=row["scheme"]),
                  row["acceptance"], rtol=1e-15)
        batch = specdec.accept(np.stack([d32, t32]), np.stack([t32, d32]), k=2, scheme="sd")
        close("float32 accept batch row 0", batch[0], specdec.accept(d32, t32, k=2, scheme="sd"))
        p = run("accept", "--draft", dp, "--target", op, "--scheme", "sd", code=1)
        try:
            specdec.accept(d32, t32 * np.float32(0.999), scheme="sd")
            check("float32: a sum off by 1e-3 raises", False)
        except specdec.Error as e:
            check("float32: the C message", str(e) and str(e) in p.stderr, "python %r, command %r" % (str(e), p.stderr))


def test_mc():
    for spec, scheme, k in [("zipf:50,1.2,0.7", "rrs", 3), ("zipf:300,1.2,0.7", "specinfer", 2),
                            (PAIR, "kseq", 4)]:
        draft, target = specdec.pair(spec)
        cli = runjson("mc", "--pair", spec, "--scheme", scheme, "-k", str(k), "--samples", "100000",
                      "--seed", "77", "--threads", "2")["results"][0]
        py = specdec.mc(draft, target, scheme, k=k, samples=1e5, seed=77, threads=1)
        where = "mc %s %s k=%d" % (spec, scheme, k)
        for key in ("acceptance", "ci_low", "ci_high", "exact", "z", "samples", "cells", "bins", "k_used"):
            close("%s %s" % (where, key), py[key], cli[key])
        for key in ("chi2", "chi2_p", "g", "g_p"):  # printed with 6 digits
            close("%s %s" % (where, key), py[key], cli[key], rtol=1e-5, atol=1e-300)


def _row(text, name):
    """The numbers of a pair's row in certify --exec's table."""
    for line in text.splitlines():
        f = line.split()
        if f and f[0] == name:
            return f
    return None


def test_certify():
    spec = PAIR
    draft, target = specdec.pair(spec)
    py_exe = sys.executable
    # (scheme claimed, sampler's scheme, planted bug, k): correct ones, one whose output law
    # is wrong, one whose law is right but whose acceptance is not the claimed scheme's
    runs = [("specinfer", "specinfer", None, 3), ("rrs", "rrs", None, 2),
            ("specinfer", "specinfer", "ratio-inverted", 2), ("kseq", "specinfer", None, 3)]
    for scheme, impl, bug, k in runs:
        sampler = adapter.Sampler(impl, bug)

        def start(vocab, kk, seed):
            sampler.pair(vocab, kk, seed, draft, target)

        def cases(drafts):
            answers = [sampler.case([int(x) for x in row]) for row in drafts]
            return [a[0] for a in answers], [a[1] for a in answers]

        py = specdec.certify(cases, draft, target, k=k, scheme=scheme, samples=20000, seed=2385,
                             name=spec, start=start)
        cmd = "%s %s %s%s" % (py_exe, os.path.join(HERE, "..", "exec", "adapter.py"), impl,
                              " --bug " + bug if bug else "")
        p = run("certify", "--exec", cmd, "--scheme", scheme, "-k", str(k), "--pair", spec,
                "--samples", "20000", code=0 if scheme == impl and not bug else 1)
        f = _row(p.stdout, spec)
        where = "certify %s as %s%s k=%d" % (impl, scheme, " (" + bug + ")" if bug else "", k)
        if f is None:
            check(where, False, "no row in: " + p.stdout[-300:])
            continue
        close(where + " k", py["k"], float(f[2]))
        close(where + " cases", py["cases"], float(f[3]))
        close(where + " acceptance", py["acceptance"], float(f[4]), atol=5e-7)
        close(where + " exact", py["exact"], float(f[5]), atol=5e-7)
        close(where + " z", py["z"], float(f[6]), atol=5e-3)
        close(where + " chi2 p", py["chi2_p"], float(f[7]), rtol=5e-3, atol=1e-300)
        close(where + " G p", py["g_p"], float(f[8]), rtol=5e-3, atol=1e-300)
        close(where + " tail p", py["tail_p"], float(f[9]), rtol=5e-3, atol=1e-300)
        close(where + " power", py["power"], float(f[10]), atol=5e-4)
        check(where + " verdict", py["verdict"] == f[-1], "python %s, command %s" % (py["verdict"], f[-1]))
        check(where + " pass", py["pass"] == (f[-1] == "PASS"), "python %s, command %s" % (py["pass"], f[-1]))
        check(where + " verdict expected", py["pass"] == (scheme == impl and not bug), str(py["pass"]))


def exact_power(target, alt, n, alpha):
    """The power of the output-law test on two tokens, without simulation: the binomial
    law under alt of the counts whose p-value (the smaller of chi-square's and G's, one
    degree of freedom: erfc(sqrt(x / 2))) is below alpha."""
    total = 0.0
    for k in range(n + 1):
        o, e = (n - k, k), (n * target[0], n * target[1])
        chi2 = sum((oi - ei) ** 2 / ei for oi, ei in zip(o, e))
        g = 2 * sum(oi * math.log(oi / ei) for oi, ei in zip(o, e) if oi > 0)
        if min(math.erfc(math.sqrt(chi2 / 2)), math.erfc(math.sqrt(g / 2))) < alpha:
            total += math.exp(math.lgamma(n + 1) - math.lgamma(k + 1) - math.lgamma(n - k + 1)
                              + k * math.log(alt[1]) + (n - k) * math.log(alt[0]))
    return total


def test_certify_verdicts():
    """INCONCLUSIVE and TOO-GOOD reach Python as the command says them; the power printed
    is the exact one (not 10 alpha's)."""
    spec = "bernoulli:0.3,0.6"
    draft, target = specdec.pair(spec)
    sampler = adapter.Sampler("sd", None)

    def start(vocab, kk, seed):
        sampler.pair(vocab, kk, seed, draft, target)

    def cases(drafts):
        answers = [sampler.case([int(x) for x in row]) for row in drafts]
        return [a[0] for a in answers], [a[1] for a in answers]

    # a correct sampler at 300 cases: the power against the planted bug is short of 0.9
    py = specdec.certify(cases, draft, target, k=1, scheme="sd", samples=300, name=spec, start=start)
    check("certify at 300 cases: INCONCLUSIVE", py["verdict"] == "INCONCLUSIVE" and not py["pass"], str(py))
    cmd = "%s %s sd" % (sys.executable, os.path.join(HERE, "..", "exec", "adapter.py"))
    f = _row(run("certify", "--exec", cmd, "--scheme", "sd", "--pair", spec, "--samples", "300", code=3).stdout, spec)
    check("certify at 300 cases: the command's row", f is not None and f[-1] == "INCONCLUSIVE" and
          abs(float(f[10]) - py["power"]) < 5e-4, str(f))
    # the planted bug (one draft, its correction from the target) on two tokens: 0.263 exactly,
    # 0.432 at 10 alpha; 200 simulated runs put the estimate within 0.1 (3 standard errors)
    beta = np.minimum(draft, target).sum()
    alt = np.minimum(draft, target) + (1 - beta) * target
    want, loose = exact_power(target, alt, 300, 1e-6), exact_power(target, alt, 300, 1e-5)
    check("certify: power against the exact one", abs(py["power"] - want) < 0.1 and abs(loose - want) > 0.15,
          "simulated %g, exact %g (at 10 alpha %g)" % (py["power"], want, loose))

    # a stratified sampler: the target's 10 tokens in turn, the drafts ignored: too good
    d2, t2 = specdec.pair("uniform:20,2")
    support, turn = np.flatnonzero(t2), [0]

    def cycle(drafts):
        n = len(drafts)
        tokens = support[(turn[0] + np.arange(n)) % len(support)]
        turn[0] += n
        return tokens, np.zeros(n, dtype=np.uint8)

    py = specdec.certify(cycle, d2, t2, k=2, samples=10000, name="uniform:20,2")
    check("certify a stratified sampler: TOO-GOOD", py["verdict"] == "TOO-GOOD" and py["too_good"] and not py["pass"],
          str(py))
    loop = 'n=0; while read w rest; do [ "$w" = case ] && echo $((n % 10)) 0 && n=$((n + 1)); done'
    f = _row(run("certify", "--exec", loop, "--pair", "uniform:20,2", "--samples", "10000", code=4).stdout, "uniform:20,2")
    check("certify a stratified sampler: the command's row", f is not None and f[-1] == "TOO-GOOD", str(f))


def test_certify_errors():
    draft, target = specdec.pair(PAIR)

    def garbage(drafts):
        return [7] * len(drafts), [0] * len(drafts)  # token 7 of a 6-token vocabulary

    try:
        specdec.certify(garbage, draft, target, samples=100)
        check("certify: a bad answer raises", False)
    except specdec.Error as e:
        check("certify: the bad answer named", "token 7 is not below V = 6" in str(e), str(e))

    class Boom(Exception):
        pass

    def boom(drafts):
        raise Boom("sampler broke")

    try:
        specdec.certify(boom, draft, target, samples=100)
        check("certify: the sampler's exception comes back", False)
    except Boom:
        check("certify: the sampler's exception comes back", True)


def test_tree():
    for lm, scheme, shape in [("markov:8,1,0.5,3,0.5", "rrs", "kconfig:3,2"),
                              ("const:0.8", "sd", "chain:4"),
                              ("markov:8,1,0.5,3,0.5", "kseq", "spectr:2,2")]:
        cli = runjson("tree", "--lm", lm, "--scheme", scheme, "--shape", shape, "--samples", "20000",
                      "--seed", "5")["results"][0]
        py = specdec.tree(lm, scheme, shape, samples=2e4, seed=5)
        for key in ("block_efficiency", "exact", "mc", "ci_low", "ci_high", "nodes", "depth"):
            close("tree %s %s %s %s" % (lm, scheme, shape, key), py[key], cli[key])


def test_replay():
    rng = np.random.default_rng(2385)
    dl = rng.normal(size=(3, 40, 30)) * 2
    tl = dl + rng.normal(size=dl.shape)
    with tempfile.TemporaryDirectory() as tmp:
        dp, tp = os.path.join(tmp, "d.npy"), os.path.join(tmp, "t.npy")
        np.save(dp, dl)
        np.save(tp, tl)
        for k, temp in [(4, 1.0), (2, 0.7)]:
            cli = runjson("replay", "--draft-log", dp, "--target-log", tp, "-k", str(k), "--temperature",
                          str(temp), "--samples", "500")
            py = specdec.replay(dl, tl, k=k, temperature=temp, samples=500)
            where = "replay k=%d T=%g" % (k, temp)
            close(where + " positions", py["positions"], cli["positions"])
            close(where + " tv mean", py["tv"]["mean"], cli["tv"]["mean"], rtol=1e-9)
            for key in ("min", "p10", "median", "p90", "max"):
                close("%s tv %s" % (where, key), py["tv"][key], cli["tv"]["quantiles"][key], rtol=1e-9)
            check(where + " schemes", sorted(py["schemes"]) == sorted(r["scheme"] for r in cli["results"]))
            for r in cli["results"]:
                s = py["schemes"].get(r["scheme"], {})
                for key in ("mean_acceptance", "ci_low", "ci_high", "mc_positions", "k"):
                    close("%s %s %s" % (where, r["scheme"], key), s.get(key, math.nan), r[key], rtol=1e-11)
                for key in ("min", "p10", "median", "p90", "max"):
                    close("%s %s %s" % (where, r["scheme"], key), s.get(key, math.nan), r["quantiles"][key], rtol=1e-9)
            for g, c in zip(py["chain"], cli["chain"]):
                for key in ("block_efficiency", "speedup", "iid_block_efficiency"):
                    close("%s chain gamma %d %s" % (where, c["gamma"], key), g[key], c[key], rtol=1e-9)


def test_errors():
    """A library error is specdec.Error carrying the C message the command prints."""
    draft, target = np.array([0.5, 0.6]), np.array([0.5, 0.5])
    p = run("accept", "--draft", "0.5,0.6", "--target", "0.5,0.5", "--scheme", "sd", code=1)
    try:
        specdec.accept(draft, target, scheme="sd")
        check("error: non-normalised draft raises", False)
    except specdec.Error as e:
        check("error: the C message", str(e) and str(e) in p.stderr, "python %r, command %r" % (str(e), p.stderr))
        check("error: the status", e.status == -1, str(e.status))
    p = run("tree", "--lm", "markov:8,1,0.5,3,0.5", "--scheme", "rrs", "--shape", "kconfig:0,2", code=2)
    try:
        specdec.tree("markov:8,1,0.5,3,0.5", "rrs", "kconfig:0,2")
        check("error: a bad shape raises", False)
    except specdec.Error as e:
        check("error: the shape's C message", str(e) and str(e) in p.stderr, "python %r, command %r" % (str(e), p.stderr))
    try:
        specdec.mc(specdec.pair(PAIR)[0], specdec.pair(PAIR)[1], "nope")
        check("error: an unknown scheme raises", False)
    except specdec.Error as e:
        check("error: the scheme's C message", "unknown scheme 'nope'" in str(e), str(e))


def test_version():
    p = run("--version")
    check("version", p.stdout.strip() == "specdec " + specdec.__version__, "%r, %r" % (p.stdout, specdec.__version__))


def test_accept_more():
    """ints where they count, -k lists, logits and normalize, and 'all' skipping what the
    command skips, each against the command on the same input."""
    draft, target = specdec.pair(PAIR)
    acc, used = specdec.accept(draft, target, k=4, scheme="rrs", drafts=True)
    check("accept drafts is an int", type(used) is int and used == 4 and type(acc) is float, repr((acc, used)))
    batch = specdec.accept(np.stack([draft, target]), np.stack([target, draft]), k=3, scheme="sd", drafts=True)
    check("accept batch drafts are ints", batch[1].dtype.kind == "i", str(batch[1].dtype))
    cli = runjson("accept", "--pair", PAIR, "-k", "1,2,4")
    py = specdec.accept(draft, target, k=[1, 2, 4], scheme="all")
    check("accept -k 1,2,4: 15 rows", len(cli["results"]) == 15 and cli["settings"]["k_list"] == [1, 2, 4])
    for row in cli["results"]:
        close("accept -k list k=%d %s" % (row["k"], row["scheme"]), py[row["k"]][row["scheme"]], row["acceptance"])
    rng = np.random.default_rng(7)
    dl, tl = rng.normal(size=40) * 2, rng.normal(size=40) * 2
    with tempfile.TemporaryDirectory() as tmp:
        dp, tp = os.path.join(tmp, "d.npy"), os.path.join(tmp, "t.npy")
        np.save(dp, dl)
        np.save(tp, tl)
        cli = runjson("accept", "--draft", dp, "--target", tp, "--logits", "--temperature", "0.7", "--top-p", "0.9",
                      "--top-k", "20", "-k", "3")
        py = specdec.accept(dl, tl, k=3, logits=True, temperature=0.7, top_p=0.9, top_k=20)
        for row in cli["results"]:
            close("accept --logits %s" % row["scheme"], py[row["scheme"]], row["acceptance"])
        np.save(dp, np.abs(dl))
        np.save(tp, np.abs(tl))
        cli = runjson("accept", "--draft", dp, "--target", tp, "--normalize", "-k", "2")
        py = specdec.accept(np.abs(dl), np.abs(tl), k=2, normalize=True)
        for row in cli["results"]:
            close("accept --normalize %s" % row["scheme"], py[row["scheme"]], row["acceptance"])
        c = runjson("mc", "--draft", dp, "--target", tp, "--normalize", "--scheme", "rrs", "--samples", "20000",
                    "--seed", "3")["results"][0]
        m = specdec.mc(np.abs(dl), np.abs(tl), "rrs", samples=2e4, seed=3, normalize=True)
        close("mc --normalize acceptance", m["acceptance"], c["acceptance"])
        check("mc samples is an int", type(m["samples"]) is int, repr(m["samples"]))
        # V = 32000, k = 4: rrs beyond its exact method's reach, skipped as the command skips it
        big = [rng.dirichlet(np.ones(32000)) for _ in range(2)]
        np.save(dp, big[0])
        np.save(tp, big[1])
        cli = runjson("accept", "--draft", dp, "--target", tp, "-k", "4")
        import warnings
        with warnings.catch_warnings(record=True) as w:
            warnings.simplefilter("always")
            py = specdec.accept(big[0], big[1], k=4, scheme="all")
        check("accept all at V = 32000: rrs skipped with a warning",
              py["rrs"] is None and any("rrs skipped" in str(x.message) for x in w), repr(py))
        for row in cli["results"]:
            if row["acceptance"] is None:
                check("accept V=32000 %s skipped by both" % row["scheme"], py[row["scheme"]] is None)
            else:
                close("accept V=32000 %s" % row["scheme"], py[row["scheme"]], row["acceptance"])
    try:
        specdec.accept(draft, target, scheme="sd", temperature=0.5)
        check("accept: a temperature without logits raises", False)
    except specdec.Error as e:
        check("accept: temperature without logits", "logits only" in str(e), str(e))


def test_certify_scheme():
    """A built-in scheme certified as `specdec certify --scheme S` certifies it (token level)."""
    for spec, scheme, k in [(PAIR, "rrs", 2), ("zipf:300,1.2,0.7", "specinfer", 3), ("bernoulli:0.5,0.5", "sd", 2)]:
        draft, target = specdec.pair(spec)
        cli = runjson("certify", "--scheme", scheme, "--pair", spec, "-k", str(k), "--samples", "100000",
                      "--seq-samples", "10000", "--seed", "11", code=3 if spec.startswith("bernoulli") else 0)
        cli = cli["results"][0]
        py = specdec.certify(scheme, draft, target, k=k, samples=1e5, seed=11)
        where = "certify %s %s k=%d" % (scheme, spec, k)
        for key in ("acceptance", "ci_low", "ci_high", "exact", "z", "samples", "cells", "bins", "k_used"):
            close("%s %s" % (where, key), py[key], cli[key])
        for key in ("chi2_p", "g_p", "tail_p"):
            close("%s %s" % (where, key), py[key], cli[key], rtol=1e-5, atol=1e-300)
        close(where + " power", py["power"], cli["power"])
        check(where + " power_runs", py["power_runs"] == cli["power_samples"], "%r %r" % (py["power_runs"], cli["power_samples"]))
        check(where + " too_good, verdict", py["too_good"] == cli["too_good"] and py["verdict"] == cli["verdict"]
              and py["pass"] == cli["pass"], "%s %s" % (py["verdict"], cli["verdict"]))
    check("certify sd on a pair the bug leaves alone: INCONCLUSIVE", py["verdict"] == "INCONCLUSIVE" and py["power_na"],
          py["verdict"])


def test_tree_more():
    """Trees from rank acceptance, from two laws, grown on a pair, priced by a cost model."""
    cost = ["--cost-draft", "0.05", "--cost-target", "affine:0.9,0.02", "--overhead", "0.01"]
    pc = dict(cost_draft=0.05, cost_target="affine:0.9,0.02", overhead=0.01)
    keys = ("block_efficiency", "predicted_efficiency", "nodes", "depth", "draft_calls", "iteration_time",
            "token_rate", "speedup", "mbsu")
    for opt in ("gt", "throughput"):
        cli = runjson("tree", "--ranks", "0.6,0.2,0.1", "--scheme", "rrs", "--optimize", opt, *cost)
        py = specdec.tree(ranks=[0.6, 0.2, 0.1], scheme="rrs", optimize=opt, **pc)
        rows = [py] + ([py["throughput"]] if opt == "gt" else [])
        check("tree --ranks %s: rows" % opt, len(rows) == len(cli["results"]))
        for got, want in zip(rows, cli["results"]):
            check("tree --ranks %s %s shape" % (opt, want["label"]), got["shape"] == want["shape"], got["shape"])
            for key in keys:
                close("tree --ranks %s %s %s" % (opt, want["label"], key), got[key], want.get(key), rtol=1e-9)
    draft, target = specdec.pair("dirichlet:12,1,5")
    with tempfile.TemporaryDirectory() as tmp:
        dp, tp = os.path.join(tmp, "d.npy"), os.path.join(tmp, "t.npy")
        np.save(dp, draft)
        np.save(tp, target)
        for scheme, shape in [("rrs", "kconfig:2,2"), ("sd", "4"), ("kseq", "spectr:2,2")]:
            cli = runjson("tree", "--draft", dp, "--target", tp, "--scheme", scheme, "--shape", shape,
                          "--samples", "20000", "--seed", "4", *cost)["results"][0]
            py = specdec.tree(draft=draft, target=target, scheme=scheme, shape=shape, samples=2e4, seed=4, **pc)
            for key in keys[:1] + keys[2:] + ("exact", "mc", "ci_low", "ci_high", "samples"):
                close("tree arrays %s %s %s" % (scheme, shape, key), py[key], cli[key], rtol=1e-9)
    cli = runjson("tree", "--lm", "markov:8,1,0.5,3,0.5", "--scheme", "rrs", "--optimize", "gt", "--samples", "3000",
                  "--budget", "10", *cost)
    py = specdec.tree("markov:8,1,0.5,3,0.5", "rrs", optimize="gt", samples=3000, budget=10, **pc)
    for r, x in zip(py["rank_acceptance"], cli["rank_acceptance"]):
        close("tree optimize gt rank acceptance", r, x, rtol=1e-5)
    for got, want in zip([py, py["throughput"]], cli["results"]):
        check("tree optimize %s shape" % want["label"], got["shape"] == want["shape"], got["shape"])
        for key in ("block_efficiency", "mc", "speedup", "predicted_efficiency"):
            close("tree optimize %s %s" % (want["label"], key), got[key], want[key], rtol=1e-9)
    # the speed formula alone, against the tree's own
    t = specdec.tree("const:0.8", "chain", "chain:4", exact=True, samples=0, **pc)
    sp = specdec.speed(t["block_efficiency"], t["draft_calls"], t["nodes"], **pc)
    for key in ("iteration_time", "token_rate", "speedup", "mbsu"):
        close("speed %s" % key, sp[key], t[key], rtol=1e-12)
    close("speed by hand", specdec.speed(3.3616, 4, 4)["speedup"], 3.3616 / 1.4, rtol=1e-12)


def test_replay_cost():
    rng = np.random.default_rng(5)
    dl = rng.normal(size=(2, 30, 20)) * 2
    tl = dl + rng.normal(size=dl.shape)
    with tempfile.TemporaryDirectory() as tmp:
        dp, tp, cp = (os.path.join(tmp, n) for n in ("d.npy", "t.npy", "c.tsv"))
        np.save(dp, dl)
        np.save(tp, tl)
        with open(cp, "w") as f:
            f.write("# n m_t m_d\n" + "".join("%d %g %g\n" % (n, 2 + 0.3 * n, 0.2 + 0.01 * n) for n in range(1, 17)))
        cli = runjson("replay", "--draft-log", dp, "--target-log", tp, "-k", "3", "--cost", cp, "--samples", "300")
        py = specdec.replay(dl, tl, k=3, cost=cp, samples=300)
        for g, c in zip(py["chain"], cli["chain"]):
            close("replay --cost chain gamma %d speedup" % c["gamma"], g["speedup"], c["speedup"], rtol=1e-9)
        plain = specdec.replay(dl, tl, k=3, samples=300)
        check("replay: the cost file changes the speedups", plain["chain"][3]["speedup"] != py["chain"][3]["speedup"])


def test_decode():
    """decode from Python: --ids token for token, and the runs' counts for the same seed
    (both with the same cost file, so neither measures)."""
    M = ["--target", "data/models/target.gguf", "--draft", "data/models/draft.gguf"]
    tm, dm = "data/models/target.gguf", "data/models/draft.gguf"
    for scheme, temp in [("sd", "0"), ("rsd-s", "1")]:
        p = run("decode", *M, "--prompt", "Call me Ishmael", "--scheme", scheme, "--ids", "--max-tokens", "16",
                "--temperature", temp, "--seed", "9", "--threads", "1")
        ids = specdec.decode(tm, dm, "Call me Ishmael", scheme=scheme, ids=True, max_tokens=16,
                             temperature=float(temp), seed=9, threads=1)
        check("decode ids %s T=%s" % (scheme, temp), " ".join(map(str, ids)) == p.stdout.strip(),
              "python %s, command %s" % (ids, p.stdout.strip()))
    with tempfile.TemporaryDirectory() as tmp:
        cp, pp = os.path.join(tmp, "c.tsv"), os.path.join(tmp, "p.txt")
        prompts = ["Call me Ishmael.", "Some years ago, never mind", "how long precisely"]
        with open(pp, "w") as f:
            f.write("\n".join(prompts) + "\n")
        cli = runjson("decode", *M, "--prompts", pp, "--scheme", "sd,rsd-c,mcsd", "--max-tokens", "12",
                      "--calibrate", "2", "--threads", "1", "--seed", "21", "--cost-out", cp, "--quiet")
        py = specdec.decode(tm, dm, prompts, scheme="sd,rsd-c,mcsd", max_tokens=12, calibrate=2, threads=1,
                            seed=21, cost=cp)
        check("decode: ar tokens", py["ar"]["tokens"] == cli["ar"]["tokens"])
        check("decode: schemes", list(py["schemes"]) == [r["scheme"] for r in cli["results"]])
        for r in cli["results"]:
            got = py["schemes"][r["scheme"]]
            for key in ("tokens", "blocks", "accepted", "drafted", "accepted_per_position", "shape"):
                check("decode %s %s" % (r["scheme"], key), got[key] == r[key], "python %r, command %r" % (got[key], r[key]))
            for key in ("draft_acceptance_rate", "mean_acceptance_length", "block_efficiency"):
                close("decode %s %s" % (r["scheme"], key), got[key], r[key], rtol=1e-5)
            check("decode %s ints" % r["scheme"], type(got["tokens"]) is int and type(got["drafted"]) is int)
        # the runs' shift: the schemes' mean log(speedup / predicted_speedup), from Python's own figures
        ran = [v for v in py["schemes"].values() if "skipped" not in v]
        want = sum(math.log(v["speedup"] / v["predicted_speedup"]) for v in ran) / len(ran)
        close("decode: shift", py["shift"], want, rtol=1e-9)
        # its allowance holds the drift's part at least: z(0.95) drift_sd
        check("decode: shift_allowed", py["shift_allowed"] >= 1.6448536269514722 * py["costs"]["drift_sd"] * (1 - 1e-12)
              and py["shift_allowed"] > 0, "%r against drift_sd %r" % (py["shift_allowed"], py["costs"]["drift_sd"]))
        with open(cp) as f:
            m_t1 = float([l for l in f if not l.startswith("#")][0].split()[1])
        close("decode: the cost file's M_T(1)", py["costs"]["m_t1_ms"], m_t1, rtol=1e-12)
        # the drift: 2 calibration prompts make no batches, so --drift's alone; none: the calibration's
        for drift, want in (((2, 10), lambda c: 0.02), ("none", lambda c: c)):
            d = specdec.decode(tm, dm, prompts, scheme="sd", max_tokens=6, calibrate=2, threads=1, seed=21, cost=cp,
                               drift=drift)["costs"]
            close("decode: drift=%r" % (drift,), d["drift_sd"], want(d["drift_calibration_sd"]), rtol=1e-12)
        for drift in ((2, 1), (-1, 5), 3):
            try:
                specdec.decode(tm, dm, prompts, scheme="sd", drift=drift)
                check("decode: drift=%r raises" % (drift,), False)
            except ValueError as e:
                check("decode: drift=%r's message" % (drift,), "drift=" in str(e), str(e))
        # the drift record: drift_log appends each run's shift, drift=PATH takes their sample sd
        # (2 calibration prompts: no batches, so drift_sd is that alone), as decode --drift FILE
        dl = os.path.join(tmp, "drift.tsv")
        shifts = [specdec.decode(tm, dm, prompts, scheme="sd,rsd-s", max_tokens=6, calibrate=2, threads=1, seed=s,
                                 cost=cp, drift_log=dl)["shift"] for s in (31, 32, 33)]
        mean = sum(shifts) / 3
        want = math.sqrt(sum((x - mean) ** 2 for x in shifts) / 2)
        d = specdec.decode(tm, dm, prompts, scheme="sd", max_tokens=6, calibrate=2, threads=1, seed=21, cost=cp,
                           drift=dl)["costs"]
        close("decode: drift=PATH", d["drift_sd"], want, rtol=1e-5)
        p = run("decode", *M, "--prompts", pp, "--scheme", "sd", "--max-tokens", "6", "--calibrate", "2",
                "--threads", "1", "--cost", cp, "--drift", dl, "--json")
        close("decode: --drift FILE as Python's", json.loads(p.stdout)["costs"]["drift_prior"], want, rtol=1e-5)
        for bad, what in ((os.path.join(tmp, "none.tsv"), "cannot open"), (dl, "0 runs of machine")):
            try:
                specdec.decode(tm, dm, prompts, scheme="sd", max_tokens=6, threads=2 if bad == dl else 1, cost=cp,
                               drift=bad)
                check("decode: drift=%r raises" % bad, False)
            except specdec.Error as e:
                check("decode: drift=%r's message" % bad, what in str(e) and bad in str(e), str(e))
    try:
        specdec.decode(tm, dm, "x", scheme="nope")
        check("decode: an unknown scheme raises", False)
    except specdec.Error as e:
        check("decode: the unknown scheme's message", "unknown scheme 'nope'" in str(e), str(e))


for test in (test_version, test_accept, test_float32, test_mc, test_certify, test_certify_verdicts, test_certify_errors, test_tree,
             test_replay, test_errors, test_accept_more, test_certify_scheme, test_tree_more, test_replay_cost,
             test_decode):
    test()
print("python: %d passed, %d failed" % (passed, failed))
sys.exit(1 if failed else 0)
