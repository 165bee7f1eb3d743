"""specdec from Python: the library of the `specdec` command, called in process.

Over libspecdec.so's flat interface (src/api/specdec.h) through ctypes and NumPy: no
compiler is needed. Each function calls the C functions its command calls, so a number
here is the command's number for the same input (tests/python/test_api.py holds them
to it).

    import numpy as np, specdec
    draft, target = specdec.pair("dirichlet:1000,1,7")
    specdec.accept(draft, target, k=4, scheme="rrs")        # exact, a float
    specdec.accept(np.stack([draft, target]), np.stack([target, draft]), scheme="all")
    specdec.mc(draft, target, "specinfer", k=4, samples=1e6)["ci_low"]
    specdec.certify(my_sampler, draft, target, k=2, scheme="specinfer")["pass"]
    specdec.tree("markov:8,1,0.5,3,0.5", "rrs", "kconfig:3,2")["block_efficiency"]
    specdec.replay(draft_logits, target_logits, k=4)["schemes"]["rrs"]["mean_acceptance"]

Errors raise specdec.Error with the library's message (sd_errmsg). The library is
found at $SPECDEC_LIB, where `make install` put it, in the repository's build-shared/
(`make shared`), or by the system's loader.
"""
import ctypes
import math
import os

import numpy as np

__all__ = ["Error", "pair", "accept", "mc", "certify", "tree", "replay", "SCHEMES"]

_c_double_p = ctypes.POINTER(ctypes.c_double)
_c_size_p = ctypes.POINTER(ctypes.c_size_t)
_c_uchar_p = ctypes.POINTER(ctypes.c_ubyte)
START_FN = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_size_t, ctypes.c_size_t, ctypes.c_ulong)
CASES_FN = ctypes.CFUNCTYPE(ctypes.c_int, _c_size_p, ctypes.c_size_t, ctypes.c_size_t, _c_size_p,
                            _c_uchar_p)


class Error(RuntimeError):
    """A failure of the library: str(e) is its message, e.status its code (< 0)."""

    def __init__(self, message, status):
        super().__init__(message)
        self.status = status


def _candidates():
    env = os.environ.get("SPECDEC_LIB")
    if env:
        yield env
    try:
        from . import _installed  # written by `make install`
        yield _installed.LIBRARY
    except ImportError:
        pass
    here = os.path.dirname(os.path.abspath(__file__))  # src/python/specdec in the repository
    yield os.path.join(here, "..", "..", "..", "build-shared", "libspecdec.so")
    yield "libspecdec.so"


def _load():
    tried = []
    for path in _candidates():
        if os.sep in path and not os.path.exists(path):
            tried.append(path)
            continue
        try:
            return ctypes.CDLL(path)
        except OSError as e:
            tried.append("%s (%s)" % (path, e))
    raise ImportError("specdec: libspecdec.so not found (run `make shared` in the repository, "
                      "`make install`, or set SPECDEC_LIB); tried: " + ", ".join(tried))


_lib = _load()
_S, _D, _I, _U, _P = ctypes.c_size_t, ctypes.c_double, ctypes.c_int, ctypes.c_ulong, ctypes.c_char_p
for _name, _args in {
    "sd_api_pair": [_P, _c_double_p, _c_double_p, _S, _c_size_p],
    "sd_api_laws": [_c_double_p, _S, _S, _D, _P],
    "sd_api_accept": [_P, _c_double_p, _c_double_p, _S, _S, _S, _D, _c_double_p, _c_double_p,
                      _c_double_p],
    "sd_api_mc": [_P, _c_double_p, _c_double_p, _S, _S, _D, _D, _U, _I, _S, _S, _c_double_p,
                  _c_double_p],
    "sd_api_certify": [START_FN, CASES_FN, _P, _I, _c_double_p, _c_double_p, _S, _S, _D, _U, _P,
                       _D, _S, _c_double_p, _c_double_p],
    "sd_api_tree": [_P, _P, _P, _I, _D, _U, _I, _c_double_p],
    "sd_api_replay": [_c_double_p, _c_double_p, _S, _S, _S, _P, _S, _D, _S, _D, _D, _D, _U,
                      _c_double_p, _c_double_p, _c_double_p],
}.items():
    getattr(_lib, _name).argtypes = _args
    getattr(_lib, _name).restype = _I
_lib.sd_api_errmsg.restype = _P
_lib.sd_api_fields.argtypes = [_P]
_lib.sd_api_fields.restype = _P
_lib.sd_api_schemes.restype = _P
_lib.sd_api_version.restype = _I

SCHEMES = tuple(_lib.sd_api_schemes().decode().split(","))
_FIELDS = {f: tuple(_lib.sd_api_fields(f.encode()).decode().split(","))
           for f in ("mc", "certify", "tree", "replay", "replay_scheme", "replay_chain")}


def _check(status):
    if status != 0:
        raise Error(_lib.sd_api_errmsg().decode(errors="replace"), status)


def _ptr(a):
    return a.ctypes.data_as(_c_double_p)


def _law(x, what):
    """Laws as C-order float64; float32 and float16 ones held to their own precision and
    rescaled in double, by the library, as the command line does with such a .npy."""
    narrow = np.asarray(x)
    a = np.array(narrow, dtype=np.float64, order="C")
    if a.ndim == 0:
        raise ValueError("%s: an array of probabilities, not a scalar" % what)
    if narrow.dtype in (np.float32, np.float16) and a.size:
        u = float(np.finfo(narrow.dtype).eps) / 2  # unit roundoff
        _check(_lib.sd_api_laws(_ptr(a), a.size // a.shape[-1], a.shape[-1], u, what.encode()))
    return a


_COUNTS = {"k", "cases", "accepted", "cells", "bins", "samples", "k_used", "seed", "positions",
           "skipped", "depth"}


def _fields(name, values):
    """The out array of a C function as a dict by the names the library gives them."""
    return {key: int(v) if key in _COUNTS and math.isfinite(v) else float(v)
            for key, v in zip(_FIELDS[name], values)}


def pair(spec):
    """A synthetic pair (bernoulli:P,Q, uniform:V,R, dirichlet:V,ALPHA,SEED, zipf:V,S,T[,K]),
    as the command line's --pair SPEC makes it: (draft, target), two arrays of V."""
    vocab = ctypes.c_size_t()
    _check(_lib.sd_api_pair(spec.encode(), None, None, 0, ctypes.byref(vocab)))
    draft, target = np.empty(vocab.value), np.empty(vocab.value)
    _check(_lib.sd_api_pair(spec.encode(), _ptr(draft), _ptr(target), vocab.value, ctypes.byref(vocab)))
    return draft, target


def _accept_one(scheme, d, t, k, gamma, drafts):
    rows, vocab = d.shape
    acc, used, gam = np.empty(rows), np.empty(rows), np.empty(rows)
    _check(_lib.sd_api_accept(scheme.encode(), _ptr(d), _ptr(t), rows, vocab, k, gamma, _ptr(acc),
                              _ptr(used), _ptr(gam)))
    return (acc, used) if drafts else acc


def accept(draft, target, k=2, scheme="all", gamma=0.0, drafts=False):
    """Exact acceptance of scheme (sd, specinfer, rrs, kseq, otm, otm-lp, otm-setlp) with k
    drafts, for each row of draft and target ([..., V], the same shape): an array of the
    leading shape (a float for 1-D laws). scheme "all" or a list: a dict by scheme.
    gamma: kseq's division factor (0: gamma*). drafts=True: (acceptance, drafts used)."""
    d, t = _law(draft, "draft"), _law(target, "target")
    if d.shape != t.shape:
        raise ValueError("draft %s and target %s differ in shape" % (d.shape, t.shape))
    lead = d.shape[:-1]
    d2, t2 = d.reshape(-1, d.shape[-1]), t.reshape(-1, t.shape[-1])

    def shaped(a):
        return float(a[0]) if not lead else a.reshape(lead)

    def one(s):
        r = _accept_one(s, d2, t2, int(k), float(gamma), drafts)
        return (shaped(r[0]), shaped(r[1])) if drafts else shaped(r)

    if isinstance(scheme, str) and scheme != "all":
        return one(scheme)
    names = SCHEMES if scheme == "all" else list(scheme)
    return {s: one(s) for s in names}


def mc(draft, target, scheme, k=2, samples=1e6, seed=2385, threads=0, chunks=64, gamma=0.0,
       bins=64, counts=False):
    """Monte Carlo of scheme on one pair, as `specdec mc`: a dict of acceptance, ci_low,
    ci_high (99.9% Wilson), exact, z, chi2, chi2_p, g, g_p, cells, bins, samples, rate,
    k_used (and "counts", the output tokens, with counts=True). The same for any threads."""
    d, t = _law(draft, "draft"), _law(target, "target")
    if d.ndim != 1 or d.shape != t.shape:
        raise ValueError("mc: draft and target must be 1-D arrays of one length")
    out, cnt = np.empty(len(_FIELDS["mc"])), np.empty(d.size)
    _check(_lib.sd_api_mc(scheme.encode(), _ptr(d), _ptr(t), d.size, int(k), float(gamma),
                          float(samples), int(seed), int(threads), int(chunks), int(bins),
                          _ptr(out), _ptr(cnt)))
    r = _fields("mc", out)
    if counts:
        r["counts"] = cnt
    return r


def certify(sampler, draft, target, k=2, scheme=None, samples=2e5, seed=2385, name="",
            alpha=1e-6, batch=1024, start=None, without_replacement=False, counts=False):
    """Certifies a speculative sampler written in Python, as `specdec certify --exec`
    certifies a program: cases of k drafts drawn as scheme draws them (None: i.i.d., or
    without replacement) go to sampler(drafts) (drafts: an int array [n, k]), which
    returns (tokens, accepted), two arrays of n; the output law and the acceptance
    rate (against scheme's exact value) are tested at p >= alpha. start(vocab, k, seed),
    if given, is called first with the seed certify --exec would send for --pair name.
    A dict of k, cases, accepted, acceptance, exact, z, acceptance_p, chi2, chi2_p, g,
    g_p, cells, binned, pass (bool), skipped (bool, with "note"), seed, tail_p, power
    (against the planted correction-from-target bug; NaN, its rule waived, where that bug
    changes nothing: draft = target, a one-hot target), power_runs (the cases that give 0.9),
    too_good (bool) and verdict: "PASS", "FAIL", "INCONCLUSIVE" (power below 0.9) or
    "TOO-GOOD" (a fit too good for independent draws), as certify --exec decides; pass is
    verdict == "PASS". An exception in the sampler ends the run and is raised again."""
    d, t = _law(draft, "draft"), _law(target, "target")
    if d.ndim != 1 or d.shape != t.shape:
        raise ValueError("certify: draft and target must be 1-D arrays of one length")
    raised = []

    def on_start(vocab, kk, s):
        try:
            if start is not None:
                start(vocab, kk, s)
            return 0
        except BaseException as e:  # noqa: B902 (handed back to the caller below)
            raised.append(e)
            return 1

    def on_cases(drafts_p, n, kk, tokens_p, accepted_p):
        try:
            cases = np.ctypeslib.as_array(drafts_p, shape=(n, kk)).astype(np.int64)
            tokens, accepted = sampler(cases)
            np.ctypeslib.as_array(tokens_p, shape=(n,))[:] = np.asarray(tokens, dtype=np.int64)
            np.ctypeslib.as_array(accepted_p, shape=(n,))[:] = np.asarray(accepted, dtype=np.uint8)
            return 0
        except BaseException as e:  # noqa: B902
            raised.append(e)
            return 1

    out, cnt = np.empty(len(_FIELDS["certify"])), np.empty(d.size)
    status = _lib.sd_api_certify(START_FN(on_start), CASES_FN(on_cases),
                                 scheme.encode() if scheme else None, int(without_replacement),
                                 _ptr(d), _ptr(t), d.size, int(k), float(samples), int(seed),
                                 name.encode(), float(alpha), int(batch), _ptr(out), _ptr(cnt))
    if raised:
        raise raised[0]
    _check(status)
    r = _fields("certify", out)
    for key in ("pass", "binned", "too_good"):
        r[key] = bool(r[key])
    r["verdict"] = ("PASS", "FAIL", "INCONCLUSIVE", "TOO-GOOD")[int(r["verdict"])]
    r["skipped"] = bool(r["skipped"])
    if r["skipped"]:
        r["note"] = _lib.sd_api_errmsg().decode(errors="replace")
    if counts:
        r["counts"] = cnt
    return r


def tree(lm, scheme, shape, exact=None, samples=1e5, seed=2385, threads=0):
    """Block efficiency of a draft tree, as `specdec tree`: lm a model pair (const:ALPHA,
    markov:V,ORDER,ALPHA,SEED,MIX[,TEMP], gguf:D,T[,TEMP]), scheme at every node, shape
    (chain:G, kconfig:K1,..., parents:..., spectr:K,L, beam:W,L, dynamic:C,B,D,R, ...).
    exact: None (when small enough), True (insist), False (skip); samples Monte-Carlo
    blocks (0: none). A dict of block_efficiency, exact, mc, ci_low, ci_high (99.9%),
    nodes, depth (NaN for what was not computed)."""
    ex = 0 if exact is None else (1 if exact else -1)
    out = np.empty(len(_FIELDS["tree"]))
    _check(_lib.sd_api_tree(lm.encode(), scheme.encode(), shape.encode(), ex, float(samples),
                            int(seed), int(threads), _ptr(out)))
    return _fields("tree", out)


def replay(draft_logits, target_logits, schemes="all", k=4, temperature=1.0, top_k=0, top_p=1.0,
           cost_ratio=0.1, samples=2000, seed=2385):
    """Every scheme on logits held in arrays ([positions, V] or [sequences, positions, V]),
    as `specdec replay` on a log of them: {"positions", "skipped", "tv": {mean, min, p10,
    median, p90, max}, "schemes": {name: {k, mean_acceptance, ci_low, ci_high,
    mc_positions, min, p10, median, p90, max}}, "chain": [{gamma, block_efficiency,
    speedup, iid_block_efficiency}, gamma = 1..8]}."""
    d = np.ascontiguousarray(draft_logits, dtype=np.float64)
    t = np.ascontiguousarray(target_logits, dtype=np.float64)
    if d.shape != t.shape or d.ndim not in (2, 3):
        raise ValueError("replay: draft and target logits must be [positions, V] or [sequences, "
                         "positions, V] of one shape, not %s and %s" % (d.shape, t.shape))
    seqs, length, vocab = (1,) + d.shape if d.ndim == 2 else d.shape
    names = schemes if isinstance(schemes, str) else ",".join(schemes)
    out = np.empty(len(_FIELDS["replay"]))
    per = np.empty((len(SCHEMES), len(_FIELDS["replay_scheme"])))
    chain = np.empty((8, len(_FIELDS["replay_chain"])))
    _check(_lib.sd_api_replay(_ptr(d), _ptr(t), seqs, length, vocab, names.encode(), int(k),
                              float(temperature), int(top_k), float(top_p), float(cost_ratio),
                              float(samples), int(seed), _ptr(out), _ptr(per), _ptr(chain)))
    o = _fields("replay", out)
    r = {"positions": int(o["positions"]), "skipped": int(o["skipped"]),
         "tv": {key[3:]: o[key] for key in _FIELDS["replay"] if key.startswith("tv_")}}
    r["schemes"] = {}
    for s, row in zip(SCHEMES, per):
        f = _fields("replay_scheme", row)
        if f.pop("ran"):
            f["k"] = int(f["k"])
            r["schemes"][s] = f
    r["chain"] = [dict(gamma=g + 1, **_fields("replay_chain", row)) for g, row in enumerate(chain)]
    return r
