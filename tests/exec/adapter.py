#!/usr/bin/env python3
"""A speculative sampler in Python with NumPy for `specdec certify --exec`.

Speaks the protocol of CERTIFY.md ("The protocol"): specdec writes
"pair V K SCHEME SEED", "draft ...", "target ...", then "case x_1 ... x_K" lines and
"flush"; this program answers each case with "TOKEN ACCEPTED".

    adapter.py sd|specinfer|rrs|kseq [--bug NAME] [--die-after N] [--hang-after N]

Correct verifiers:
    sd         one draft (Leviathan et al.): accept x with min(1, target/draft)
    specinfer  k i.i.d. drafts, multi-round rejection (residual r_i updated every round)
    rrs        k drafts without replacement, recursive rejection sampling: on rejecting
               x the residual is formed from the current draft law, then x leaves it
    kseq       SpecTr's K-SEQ at gamma* (each draft accepted with min(1, target/(gamma
               draft)), correction from the K-SEQ residual)
Planted bugs (tests/planted.c, written again here), each one step of a real scheme:
    rrs-remove-first        rrs: x leaves the draft law before the residual is formed
    ratio-inverted          specinfer: acceptance min(1, draft/residual)
    residual-unnormalised   specinfer: max(r - draft, 0) never renormalised
    correction-from-target  specinfer: the correction drawn from the target
    kseq-low-gamma          kseq at gamma = 1, below its lossless range
    specinfer-last-round    specinfer: the correction from round k-1's residual
Planted bugs that only some pairs expose (the default plan's families catch them, the
old default pairs with full supports and k <= 3 do not; tests/planted.c's
sd_planted_family_bugs):
    residual-draft-support  specinfer: residuals formed on the draft's support only
    zero-target-accepted    specinfer: a draft of target probability 0 accepted
    rounds-capped           specinfer: residuals kept for 4 rounds, rounds 5..k reuse the 4th
--die-after N and --hang-after N exit (status 3) or stop answering after N cases: the
harness's own tests use them.
"""
import bisect
import sys
import time

import numpy as np

BUGS = {
    "rrs-remove-first": "rrs",
    "ratio-inverted": "specinfer",
    "residual-unnormalised": "specinfer",
    "correction-from-target": "specinfer",
    "kseq-low-gamma": "kseq",
    "specinfer-last-round": "specinfer",
    "residual-draft-support": "specinfer",
    "zero-target-accepted": "specinfer",
    "rounds-capped": "specinfer",
}


def residual(r, draft):
    """norm(max(r - draft, 0)); r itself when that has no mass."""
    out = np.maximum(r - draft, 0.0)
    mass = out.sum()
    return out / mass if mass > 0 else r.copy()


def cdf_of(law):
    return np.cumsum(law).tolist()


def kseq_beta(draft, target, gamma):
    return np.minimum(draft, target / gamma).sum()


def kseq_gamma_star(draft, target, k):
    """Smallest gamma in [1, k] with 1 - (1 - beta)^k <= gamma beta (bisection)."""
    f = lambda g: 1 - (1 - kseq_beta(draft, target, g)) ** k - g * kseq_beta(draft, target, g)
    if k <= 1 or f(1.0) <= 0:
        return 1.0
    lo, hi = 1.0, float(k)
    for _ in range(200):
        mid = 0.5 * (lo + hi)
        if f(mid) > 0:
            lo = mid
        else:
            hi = mid
    return hi


class Sampler:
    def __init__(self, scheme, bug):
        self.scheme, self.bug = scheme, bug
        self.u, self.ui = [], 0

    def uniform(self):
        if self.ui == len(self.u):
            self.u, self.ui = self.rng.random(65536).tolist(), 0
        self.ui += 1
        return self.u[self.ui - 1]

    def sample(self, cdf):
        i = bisect.bisect_right(cdf, self.uniform() * cdf[-1])
        return min(i, len(cdf) - 1)

    def pair(self, V, k, seed, draft, target):
        self.V, self.k = V, k
        self.rng = np.random.default_rng(seed)
        self.u, self.ui = [], 0
        self.draft, self.target = draft, target
        bug, safe = self.bug, np.where(draft > 0, draft, 1.0)
        if self.scheme == "rrs":
            self.pair_rrs(draft, target)
            return
        if self.scheme == "kseq":
            gamma = 1.0 if bug == "kseq-low-gamma" else kseq_gamma_star(draft, target, k)
            beta = kseq_beta(draft, target, gamma)
            pacc = 1 - (1 - beta) ** k
            res = target - (np.minimum(draft, target / gamma) * pacc / beta if beta > 0 else 0)
            res = np.maximum(res, 0.0)
            res = res / res.sum() if res.sum() > 0 else target.copy()
            ratio = np.where(draft > 0, np.minimum(1.0, target / gamma / safe), 1.0)
            self.accept = [ratio.tolist()] * k
            self.final = cdf_of(res)
            return
        rounds = [target]  # sd and specinfer: r_0 .. r_k
        for i in range(k):
            if bug == "residual-unnormalised":
                nxt = np.maximum(rounds[-1] - draft, 0.0)
                rounds.append(nxt if nxt.sum() > 0 else rounds[-1].copy())
            elif bug == "residual-draft-support":
                nxt = np.where(draft > 0, np.maximum(rounds[-1] - draft, 0.0), 0.0)
                rounds.append(nxt / nxt.sum() if nxt.sum() > 0 else rounds[-1].copy())
            elif bug == "rounds-capped" and i >= 4:
                rounds.append(rounds[4])
            else:
                rounds.append(residual(rounds[-1], draft))
        if bug == "ratio-inverted":
            acc = [np.where(r > 0, np.minimum(1.0, draft / np.where(r > 0, r, 1.0)), 1.0) for r in rounds[:k]]
        else:
            acc = [np.where(draft > 0, np.minimum(1.0, r / safe), (r > 0) * 1.0) for r in rounds[:k]]
        if bug == "zero-target-accepted":
            acc = [np.where(target > 0, a, 1.0) for a in acc]
        self.accept = [a.tolist() for a in acc]
        final = {"correction-from-target": target, "specinfer-last-round": rounds[k - 1]}.get(bug, rounds[k])
        self.final = cdf_of(final)

    def case(self, xs):
        if self.scheme == "rrs":
            return self.case_rrs(xs)
        for i, x in enumerate(xs):
            if self.uniform() < self.accept[i][x]:
                return x, 1
        return self.sample(self.final), 0

    def pair_rrs(self, draft, target):
        """rrs keeps each residual on the draft's support D, explicit, and c * target off
        it: drafts never leave D, so max(r - draft, 0) = r off D and a case costs O(|D|),
        not O(V) (a top-40 draft over 150k tokens)."""
        self.D = np.flatnonzero(draft > 0)
        self.pos = {int(t): i for i, t in enumerate(self.D)}
        self.dD, self.tD = draft[self.D], target[self.D]
        off = target.copy()
        off[self.D] = 0.0
        self.t_off = off.sum()
        self.off_cdf = np.cumsum(off)

    def case_rrs(self, xs):
        rD, c, dD = self.tD, 1.0, self.dD  # r = rD on D, c * target off D

        def residual_D(rD, c, dD):
            new = np.maximum(rD - dD, 0.0)
            mass = new.sum() + c * self.t_off
            return (new / mass, c / mass) if mass > 0 else (rD, c)

        for x in xs:
            i = self.pos[x]
            dx = dD[i]
            if dx > 0 and self.uniform() * dx < rD[i]:
                return x, 1
            if self.bug == "rrs-remove-first":
                dD = dD.copy()
                dD[i] = 0.0
                dD = dD / dD.sum()
                rD, c = residual_D(rD, c, dD)
            else:
                rD, c = residual_D(rD, c, dD)
                dD = dD.copy()
                dD[i] = 0.0
                dD = dD / dD.sum()
        off = c * self.t_off
        u = self.uniform() * (rD.sum() + off)
        if u < off:  # a token off D, drawn from the target there
            j = int(np.searchsorted(self.off_cdf, u / c, side="right"))
            return min(j, self.V - 1), 0
        cum = np.cumsum(rD)
        j = int(np.searchsorted(cum, u - off, side="right"))
        return int(self.D[min(j, len(self.D) - 1)]), 0


def main(argv):
    args = list(argv[1:])
    die = hang = None
    bug = None
    while len(args) > 1 and args[-2] in ("--bug", "--die-after", "--hang-after"):
        opt, val = args[-2], args[-1]
        del args[-2:]
        if opt == "--bug":
            bug = val
        elif opt == "--die-after":
            die = int(val)
        else:
            hang = int(val)
    if len(args) != 1 or args[0] not in ("sd", "specinfer", "rrs", "kseq"):
        sys.stderr.write(__doc__)
        return 2
    scheme = args[0]
    if bug is not None and BUGS.get(bug) != scheme:
        sys.stderr.write("adapter.py: bug %s is not a bug of %s\n" % (bug, scheme))
        return 2
    s = Sampler(scheme, bug)
    out, done = sys.stdout, 0
    V = k = seed = 0
    draft = None
    for line in sys.stdin:
        if line.startswith("case"):
            t, a = s.case([int(x) for x in line.split()[1:]])
            out.write("%d %d\n" % (t, a))
            done += 1
            if die is not None and done >= die:
                out.flush()
                return 3
            if hang is not None and done >= hang:
                out.flush()
                time.sleep(3600)
        elif line.startswith("flush"):
            out.flush()
        elif line.startswith("pair"):
            f = line.split()
            V, k, seed = int(f[1]), int(f[2]), int(f[4])
            if scheme == "sd" and k != 1:
                sys.stderr.write("adapter.py: sd takes one draft, not %d\n" % k)
                return 2
        elif line.startswith("draft"):
            draft = np.array(line.split()[1:], dtype=float)
        elif line.startswith("target"):
            target = np.array(line.split()[1:], dtype=float)
            if draft is None or len(draft) != V or len(target) != V:
                sys.stderr.write("adapter.py: draft and target must have V = %d numbers\n" % V)
                return 2
            s.pair(V, k, seed, draft, target)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
