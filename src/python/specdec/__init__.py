"""specdec from Python: the library of the `specdec` command, called in process.

Over libspecdec.so's flat interface (src/api/specdec.h) through ctypes and NumPy: no
compiler is needed. Each function calls the C functions its command calls, so a number
here is the command's number for the same input (tests/python/test_api.py holds them
to it).

    import numpy as np, specdec
    draft, target = specdec.pair("dirichlet:1000,1,7")
    specdec.accept(draft, target, k=4, scheme="rrs")        # exact, a float
    specdec.accept(np.stack([draft, target]), np.stack([target, draft]), scheme="all")
    specdec.accept(draft_logits, target_logits, logits=True, temperature=0.7, top_p=0.9)
    specdec.mc(draft, target, "specinfer", k=4, samples=1e6)["ci_low"]
    specdec.certify("rrs", draft, target, k=2)["verdict"]            # a built-in scheme
    specdec.certify(my_sampler, draft, target, k=2, scheme="specinfer")["pass"]
    specdec.tree("markov:8,1,0.5,3,0.5", "rrs", "kconfig:3,2")["block_efficiency"]
    specdec.tree(ranks=[0.6, 0.2, 0.1], scheme="rrs", optimize="throughput",
                 cost_draft=0.05)["shape"]                            # your own rank acceptance
    specdec.tree(draft=draft, target=target, scheme="rrs", shape="kconfig:2,2")["speedup"]
    specdec.speed(3.2, draft_calls=4, nodes=4, cost_draft=0.05)["speedup"]
    specdec.replay(draft_logits, target_logits, k=4, cost="costs.tsv")["chain"][3]["speedup"]
    specdec.decode("target.gguf", "draft.gguf", ["Call me", "Some years ago"], scheme="sd,rsd-s")
    specdec.decode("target.gguf", "draft.gguf", "Call me", scheme="sd", ids=True)   # token ids

Errors raise specdec.Error with the library's message (sd_errmsg). The library is
found at $SPECDEC_LIB, beside this file (`pip install .`), where `make install` put it,
in the repository's build-shared/ (`make shared`), or by the system's loader.
"""
import ctypes
import math
import os
import warnings

import numpy as np

__all__ = ["Error", "pair", "accept", "mc", "certify", "tree", "speed", "replay", "decode", "SCHEMES",
           "DECODE_SCHEMES", "__version__"]

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
    here = os.path.dirname(os.path.abspath(__file__))
    yield os.path.join(here, "libspecdec.so")  # pip install . puts it beside the package
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
    "sd_api_laws": [_c_double_p, _S, _S, _D, _I, _D, _S, _D, _I, _P],
    "sd_api_accept": [_P, _c_double_p, _c_double_p, _S, _S, _S, _D, _c_double_p, _c_double_p,
                      _c_double_p],
    "sd_api_mc": [_P, _c_double_p, _c_double_p, _S, _S, _D, _D, _U, _I, _S, _S, _c_double_p,
                  _c_double_p],
    "sd_api_certify": [START_FN, CASES_FN, _P, _I, _c_double_p, _c_double_p, _S, _S, _D, _U, _P,
                       _D, _S, _c_double_p, _c_double_p],
    "sd_api_certify_scheme": [_P, _c_double_p, _c_double_p, _S, _S, _D, _D, _U, _I, _S, _S, _D, _c_double_p,
                              _c_double_p],
    "sd_api_tree": [_P, _c_double_p, _c_double_p, _S, _c_double_p, _S, _P, _P, _P, _D, _P, _P, _D, _D, _S, _S,
                    _S, _D, _I, _D, _U, _I, _c_double_p, _P, _S, _c_double_p, _c_size_p],
    "sd_api_speed": [_D, _D, _D, _D, _P, _D, _D, _c_double_p],
    "sd_api_replay": [_c_double_p, _c_double_p, _S, _S, _S, _P, _S, _D, _S, _D, _D, _P, _D, _U,
                      _c_double_p, _c_double_p, _c_double_p],
    "sd_api_decode": [_P, _P, _P, _I, _S, _P, _P, _P, _S, _D, _S, _D, _D, _U, _I, _I, _S, _D, _D, _S, _P, _P, _P,
                      _c_double_p, _c_double_p, _c_double_p, _P, _S, _c_size_p],
    "sd_api_decode_ids": [_P, _P, _P, _P, _P, _S, _D, _S, _D, _D, _U, _I, _I, _c_size_p, _S, _c_size_p],
}.items():
    getattr(_lib, _name).argtypes = _args
    getattr(_lib, _name).restype = _I
_lib.sd_api_errmsg.restype = _P
_lib.sd_api_fields.argtypes = [_P]
_lib.sd_api_fields.restype = _P
_lib.sd_api_schemes.restype = _P
_lib.sd_api_version.restype = _I
_lib.sd_api_version_string.restype = _P
if _lib.sd_api_version() != 2:
    raise ImportError("specdec: %s speaks interface %d, this package 2 (rebuild: make shared)"
                      % (_lib._name, _lib.sd_api_version()))

__version__ = _lib.sd_api_version_string().decode()
SCHEMES = tuple(_lib.sd_api_schemes().decode().split(","))
# decode's scheme names (specdec decode --scheme): presets; "all" runs the first ten
DECODE_SCHEMES = ("sd", "spectr", "spectr-otm", "mcsd", "mcsd-wor", "rsd-c", "rsd-s", "gt", "gt-dynamic",
                  "throughput", "parallel", "parallel-tree")
_FIELDS = {f: tuple(_lib.sd_api_fields(f.encode()).decode().split(","))
           for f in ("mc", "certify", "certify_scheme", "tree", "speed", "replay", "replay_scheme",
                     "replay_chain", "decode", "decode_run")}
_SD_ERANGE = -2
_DECODE_MAX_ARMS, _DECODE_POSITIONS = 64, 64


def _check(status):
    if status != 0:
        raise Error(_lib.sd_api_errmsg().decode(errors="replace"), status)


def _ptr(a):
    return a.ctypes.data_as(_c_double_p)


def _law(x, what, logits=False, temperature=1.0, top_k=0, top_p=1.0, normalize=False):
    """Laws as C-order float64, as the command line reads --draft and --target (the
    library's sd_dist_prepare): logits=True a softmax at temperature with top_k and top_p
    (--logits); normalize=True rescaled (--normalize); else each row held to 1, within
    float32's or float16's own precision for such arrays and rescaled in double."""
    narrow = np.asarray(x)
    a = np.array(narrow, dtype=np.float64, order="C")
    if a.ndim == 0:
        raise ValueError("%s: an array of probabilities, not a scalar" % what)
    if a.size:
        u = float(np.finfo(narrow.dtype).eps) / 2 if narrow.dtype in (np.float32, np.float16) else 0.0
        _check(_lib.sd_api_laws(_ptr(a), a.size // a.shape[-1], a.shape[-1], u, int(bool(logits)),
                                float(temperature), int(top_k), float(top_p), int(bool(normalize)),
                                what.encode()))
    return a


_COUNTS = {"k", "cases", "accepted", "cells", "bins", "samples", "k_used", "seed", "positions",
           "skipped", "depth", "draft_calls", "tokens", "blocks", "drafted", "mismatch", "power_na",
           "too_good", "ar_tokens", "prompts", "calibration_prompts", "power_runs"}


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
    return (acc, used.astype(np.int64)) if drafts else acc


def accept(draft, target, k=2, scheme="all", gamma=0.0, drafts=False, logits=False, temperature=1.0,
           top_k=0, top_p=1.0, normalize=False):
    """Exact acceptance of scheme (sd, specinfer, rrs, kseq, otm, otm-lp, otm-setlp) with k
    drafts, as `specdec accept`, for each row of draft and target ([..., V], the same
    shape): an array of the leading shape (a float for 1-D laws). scheme "all" or a list:
    a dict by scheme; under "all", a scheme beyond its exact method's reach (rrs at large
    V and k) is None with a warning, as the command skips it. k a list: a dict by k.
    gamma: kseq's division factor (0: gamma*). drafts=True: (acceptance, drafts used, an
    int). logits=True: the rows are logits, at temperature with top_k and top_p
    (--logits); normalize=True rescales rows that do not sum to 1 (--normalize)."""
    if not isinstance(k, (int, np.integer)):
        return {int(kk): accept(draft, target, int(kk), scheme, gamma, drafts, logits, temperature, top_k,
                                top_p, normalize) for kk in k}
    law = dict(logits=logits, temperature=temperature, top_k=top_k, top_p=top_p, normalize=normalize)
    d, t = _law(draft, "draft", **law), _law(target, "target", **law)
    if d.shape != t.shape:
        raise ValueError("draft %s and target %s differ in shape" % (d.shape, t.shape))
    lead = d.shape[:-1]
    d2, t2 = d.reshape(-1, d.shape[-1]), t.reshape(-1, t.shape[-1])

    def shaped(a):
        if not lead:
            return a[0].item()
        return a.reshape(lead)

    def one(s):
        r = _accept_one(s, d2, t2, int(k), float(gamma), drafts)
        return (shaped(r[0]), shaped(r[1])) if drafts else shaped(r)

    if isinstance(scheme, str) and scheme != "all":
        return one(scheme)
    if scheme != "all":
        return {s: one(s) for s in scheme}
    out = {}
    for s in SCHEMES:  # the command's 'all': beyond an exact method's reach is skipped, not an error
        try:
            out[s] = one(s)
        except Error as e:
            if e.status != _SD_ERANGE:
                raise
            warnings.warn("specdec.accept: %s skipped: %s" % (s, e), stacklevel=2)
            out[s] = (None, None) if drafts else None
    return out


def mc(draft, target, scheme, k=2, samples=1e6, seed=2385, threads=0, chunks=64, gamma=0.0,
       bins=64, counts=False, logits=False, temperature=1.0, top_k=0, top_p=1.0, normalize=False):
    """Monte Carlo of scheme on one pair, as `specdec mc`: a dict of acceptance, ci_low,
    ci_high (99.9% Wilson), exact, z, chi2, chi2_p, g, g_p, cells, bins, samples, rate,
    k_used (and "counts", the output tokens, with counts=True). The same for any threads.
    logits, temperature, top_k, top_p, normalize: as for accept."""
    law = dict(logits=logits, temperature=temperature, top_k=top_k, top_p=top_p, normalize=normalize)
    d, t = _law(draft, "draft", **law), _law(target, "target", **law)
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
    verdict == "PASS". An exception in the sampler ends the run and is raised again.

    sampler a scheme's name (sd, specinfer, rrs, kseq, otm): specdec's own scheme,
    certified as `specdec certify --scheme NAME` certifies it at the token level
    (_certify_scheme: samples default 3e6 there)."""
    if isinstance(sampler, str):
        return _certify_scheme(sampler, draft, target, k=k, samples=samples if samples != 2e5 else 3e6,
                               seed=seed, alpha=alpha, counts=counts)
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


_VERDICTS = ("PASS", "FAIL", "INCONCLUSIVE", "TOO-GOOD")


def _certify_scheme(scheme, draft, target, k=2, samples=3e6, seed=2385, alpha=1e-6, gamma=0.0, threads=0,
                    chunks=64, bins=64, counts=False):
    """specdec certify --scheme NAME's token level on one pair: the fields of mc, and
    tail_p, too_good (bool), power (NaN, power_na True, where the planted bug leaves the
    pair's law as it is), power_runs (the samples that give 0.9), verdict ("PASS",
    "FAIL", "INCONCLUSIVE", "TOO-GOOD") and pass (verdict == "PASS")."""
    d, t = _law(draft, "draft"), _law(target, "target")
    if d.ndim != 1 or d.shape != t.shape:
        raise ValueError("certify: draft and target must be 1-D arrays of one length")
    out, cnt = np.empty(len(_FIELDS["certify_scheme"])), np.empty(d.size)
    _check(_lib.sd_api_certify_scheme(scheme.encode(), _ptr(d), _ptr(t), d.size, int(k), float(gamma),
                                      float(samples), int(seed), int(threads), int(chunks), int(bins),
                                      float(alpha), _ptr(out), _ptr(cnt)))
    r = _fields("certify_scheme", out)
    r["too_good"], r["power_na"] = bool(r["too_good"]), bool(r["power_na"])
    r["verdict"] = _VERDICTS[int(r["verdict"])]
    r["pass"] = r["verdict"] == "PASS"
    if counts:
        r["counts"] = cnt
    return r


def tree(lm=None, scheme=None, shape=None, exact=None, samples=1e5, seed=2385, threads=0, optimize=None,
         draft=None, target=None, ranks=None, cost_draft=0.1, cost_target="const:1", cost_parallel=None,
         overhead=0.0, size_ratio=None, budget=30, max_depth=16, max_rank=8, threshold=None):
    """A draft tree, as `specdec tree`: its block efficiency and speed on a model pair.
    The pair: lm (const:ALPHA, markov:V,ORDER,ALPHA,SEED,MIX[,TEMP], gguf:D,T[,TEMP]), or
    draft and target (two laws, the same at every position: tree --draft D --target T),
    or none with ranks (each candidate rank's acceptance: a static tree's efficiency is
    predicted, tree --ranks). scheme at every node; shape (chain:G, kconfig:K1,...,
    parents:..., spectr:K,L, beam:W,L, dynamic:C,B,D,R, ...) or optimize ("gt" or
    "throughput": the tree grown from rank acceptance, estimated on the pair or given).
    The cost model: cost_draft M_D, cost_target M_T(n)'s spec, cost_parallel M_P(n)'s,
    overhead, size_ratio (MBSU; None: cost_draft); budget, max_depth, max_rank, threshold
    (None: M_D / M_T(1)) bound the grown trees. exact: None (when small enough), True
    (insist), False (skip); samples Monte-Carlo blocks (0: none). A dict of
    block_efficiency, exact, mc, ci_low, ci_high (99.9%), predicted_efficiency, nodes,
    depth, draft_calls, iteration_time, token_rate, speedup, mbsu, samples (NaN for what
    was not computed), shape (parents form) and, with optimize, rank_acceptance, and with
    optimize="gt" the throughput-optimal tree as "throughput" (the same fields)."""
    if scheme is None:
        raise ValueError("tree: scheme is required")
    ex = 0 if exact is None else (1 if exact else -1)
    vocab, dp, tp = 0, None, None
    if draft is not None or target is not None:
        d, t = _law(draft, "draft"), _law(target, "target")
        if d.ndim != 1 or d.shape != t.shape:
            raise ValueError("tree: draft and target must be 1-D arrays of one length")
        vocab, dp, tp = d.size, _ptr(d), _ptr(t)
    rk = None if ranks is None else np.ascontiguousarray(ranks, dtype=np.float64).ravel()
    n = len(_FIELDS["tree"])
    out, got = np.empty(2 * n), np.empty(64)
    shapes, ngot = ctypes.create_string_buffer(1 << 16), ctypes.c_size_t()
    enc = (lambda x: None if x is None else x.encode())
    _check(_lib.sd_api_tree(enc(lm), dp, tp, vocab, None if rk is None else _ptr(rk), 0 if rk is None else rk.size,
                            scheme.encode(), enc(shape), enc(optimize), float(cost_draft), enc(cost_target),
                            enc(cost_parallel), float(overhead), math.nan if size_ratio is None else float(size_ratio),
                            int(budget), int(max_depth), int(max_rank),
                            math.nan if threshold is None else float(threshold), ex, float(samples), int(seed),
                            int(threads), _ptr(out), shapes, len(shapes), _ptr(got), ctypes.byref(ngot)))
    names = shapes.value.decode().split("\t")
    r = _fields("tree", out[:n])
    r["shape"] = names[0]
    if optimize:
        r["rank_acceptance"] = [float(x) for x in got[:ngot.value]]
    if optimize == "gt":
        r["throughput"] = dict(_fields("tree", out[n:]), shape=names[1])
    return r


def speed(block_efficiency, draft_calls, nodes, cost_draft=0.1, cost_target="const:1", overhead=0.0,
          size_ratio=None):
    """The one speed formula of `specdec tree` (and decode's prediction): a block of
    block_efficiency tokens costs draft_calls x cost_draft + M_T(nodes + 1) (cost_target's
    spec: const:T, affine:A,B, linear-after:T,K,B, table:t1,...) + overhead, against
    M_T(1) + overhead per token without drafts. A dict of iteration_time, token_rate,
    speedup and mbsu (RSD's memory-bound speedup at size_ratio, None: cost_draft)."""
    out = np.empty(len(_FIELDS["speed"]))
    _check(_lib.sd_api_speed(float(block_efficiency), float(draft_calls), float(nodes), float(cost_draft),
                             cost_target.encode(), float(overhead),
                             math.nan if size_ratio is None else float(size_ratio), _ptr(out)))
    return _fields("speed", out)


def replay(draft_logits, target_logits, schemes="all", k=4, temperature=1.0, top_k=0, top_p=1.0,
           cost_ratio=None, samples=2000, seed=2385, cost=None):
    """Every scheme on logits held in arrays ([positions, V] or [sequences, positions, V]),
    as `specdec replay` on a log of them: {"positions", "skipped", "tv": {mean, min, p10,
    median, p90, max}, "schemes": {name: {k, mean_acceptance, ci_low, ci_high,
    mc_positions, min, p10, median, p90, max}}, "chain": [{gamma, block_efficiency,
    speedup, iid_block_efficiency}, gamma = 1..8]}. The chain's speedups priced by
    cost_ratio (M_D / M_T, None: 0.1) with M_T(n) = M_T(1), or by cost, a file of measured
    costs (what `specdec decode --cost-out` wrote: replay --cost)."""
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
                              float(temperature), int(top_k), float(top_p),
                              0.0 if cost_ratio is None else float(cost_ratio),
                              None if cost is None else os.fsencode(cost), float(samples), int(seed),
                              _ptr(out), _ptr(per), _ptr(chain)))
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


def _data_file(name):
    """A file the project ships (data/NAME): $SPECDEC_DATA, the repository's data/ beside
    this package's source, or where `make install` put it."""
    here = os.path.dirname(os.path.abspath(__file__))
    for d in (os.environ.get("SPECDEC_DATA"), os.path.join(here, "..", "..", "..", "data"),
              os.path.join(here, "data"), "/usr/local/share/specdec/data", "/usr/share/specdec/data"):
        if d and os.path.exists(os.path.join(d, name)):
            return os.path.join(d, name)
    raise FileNotFoundError("specdec: data/%s not found (pass prompts, or set SPECDEC_DATA)" % name)


def decode(target, draft, prompts=None, scheme="all", shape=None, optimize=None, max_tokens=64, n_prompts=0,
           temperature=1.0, top_k=0, top_p=1.0, draft_temperature=None, seed=2385, threads=0,
           stop_at_eos=False, calibrate=20, level=0.9, drift=None, drift_log=None, cost=None, ids=False):
    """Speculative decoding end to end on two GGUF models, as `specdec decode`: the
    prompts decoded by the target alone and by each scheme in turns, after a calibration
    that predicts each one's speed. prompts: a str (one prompt), a list of str (one each),
    or None (the shipped data/prompts.txt); n_prompts the first N (0: all). scheme as
    decode --scheme ("all", sd, spectr, spectr-otm, mcsd, mcsd-wor, rsd-c, rsd-s, gt,
    gt-dynamic, throughput, a comma-separated list; or a token scheme with shape or
    optimize). cost: a file of measured costs (decode --cost-out) instead of measuring
    them. drift: the machine's drift known before the calibration, as decode --drift:
    (percent, runs), "none" (the calibration's estimate alone), a path (a drift record,
    decode --drift FILE: its runs of this machine and pair) or None (decode's default,
    4.05% over 66 runs). drift_log: a path, the run's shift appended to it (decode
    --drift-log FILE). Returns {"ar": {tokens, seconds, tokens_per_second}, "costs": {c,
    c_lo, c_hi, m_t1_ms, m_d1_ms, drift_sd, drift_calibration_sd}, "prompts", "calibration_prompts",
    "shift" (the schemes' mean log(speedup / predicted_speedup): the machine's drift as the
    run met it; None where none ran), "shift_allowed" (how far from 0 the intervals
    allowed it: beyond, the machine drifted more than drift said), "schemes": {name: {shape,
    tokens, blocks, accepted, drafted, seconds, tokens_per_second, speedup,
    block_efficiency, draft_acceptance_rate (vLLM's; llama.cpp's accept),
    mean_acceptance_length (vLLM's), accepted_per_position (vLLM's), predicted_*,
    vs_best} or {"skipped": why}}}. Times move from run to run; with fixed shapes the
    counts equal the command's for the same seed.
    ids=True: the first prompt decoded once by one scheme of fixed shape, its token ids
    (a list of int), as decode --ids prints them."""
    if prompts is None:
        with open(_data_file("prompts.txt")) as f:
            text, lines = f.read(), 1
    elif isinstance(prompts, str):
        text, lines = prompts, 0
    else:
        prompts = list(prompts)
        if any("\n" in p for p in prompts):
            raise ValueError("decode: a prompt of the list holds a newline (pass one str for that)")
        text, lines = "\n".join(prompts), 1
    dt = -1.0 if draft_temperature is None else float(draft_temperature)
    dfile = None
    if drift is None:
        dr, druns = -1.0, 0
    elif isinstance(drift, str) and drift == "none":
        dr, druns = 0.0, 0
    elif isinstance(drift, (str, os.PathLike)):
        dr, druns, dfile = -1.0, 0, drift
    else:
        try:
            pct, druns = float(drift[0]), int(drift[1])
        except (TypeError, ValueError, IndexError):
            raise ValueError("decode: drift=%r: want (percent, runs), 'none', a path or None" % (drift,)) from None
        if not (0 <= pct < 100) or druns < 2:
            raise ValueError("decode: drift=%r: want 0 <= percent < 100 over 2 or more runs" % (drift,))
        dr = pct / 100
    enc = (lambda x: None if x is None else os.fsencode(x) if isinstance(x, os.PathLike) else x.encode())
    if ids:
        if lines:
            text = text.split("\n")[0] if prompts is not None else next(l for l in text.split("\n") if l.strip())
        buf, n = (ctypes.c_size_t * int(max_tokens))(), ctypes.c_size_t()
        _check(_lib.sd_api_decode_ids(enc(target), enc(draft), text.encode(), scheme.encode(), enc(shape),
                                      int(max_tokens), float(temperature), int(top_k), float(top_p), dt, int(seed),
                                      int(threads), int(bool(stop_at_eos)), buf, int(max_tokens), ctypes.byref(n)))
        return [int(buf[i]) for i in range(n.value)]
    run = np.empty(len(_FIELDS["decode_run"]))
    arms = np.empty((_DECODE_MAX_ARMS, len(_FIELDS["decode"])))
    pos = np.empty((_DECODE_MAX_ARMS, _DECODE_POSITIONS))
    names, narms = ctypes.create_string_buffer(1 << 16), ctypes.c_size_t()
    _check(_lib.sd_api_decode(enc(target), enc(draft), text.encode(), lines, int(n_prompts), scheme.encode(),
                              enc(shape), enc(optimize), int(max_tokens), float(temperature), int(top_k),
                              float(top_p), dt, int(seed), int(threads), int(bool(stop_at_eos)), int(calibrate),
                              float(level), dr, druns, enc(dfile), enc(drift_log), enc(cost), _ptr(run),
                              arms.ctypes.data_as(_c_double_p), pos.ctypes.data_as(_c_double_p), names, len(names),
                              ctypes.byref(narms)))
    g = _fields("decode_run", run)
    r = {"ar": {"tokens": g["ar_tokens"], "seconds": g["ar_seconds"], "tokens_per_second": g["ar_tokens_per_second"]},
         "costs": {key: g[key] for key in ("c", "c_lo", "c_hi", "m_t1_ms", "m_d1_ms", "drift_sd",
                                            "drift_calibration_sd")},
         "prompts": g["prompts"], "calibration_prompts": g["calibration_prompts"],
         "shift": None if math.isnan(g["shift"]) else g["shift"],
         "shift_allowed": None if math.isnan(g["shift_allowed"]) else g["shift_allowed"], "schemes": {}}
    for i, line in enumerate(names.value.decode().split("\n")[:narms.value]):
        name, shp, why = line.split("\t")
        f = _fields("decode", arms[i])
        if f.pop("skipped"):
            r["schemes"][name] = {"shape": shp, "skipped": why}
            continue
        f["accepted_per_position"] = [int(x) for x in pos[i, :f.pop("positions")]]
        f["mismatch"] = bool(f["mismatch"])
        r["schemes"][name] = dict(shape=shp, **f)
    return r
