/* A speculative sampler for `specdec certify --exec`, written without specdec: it
 * shows the protocol (CERTIFY.md, "The protocol") in plain C and is the
 * C adapter the tests and the throughput bench run.
 *
 *   adapter sd          one draft: accept x with min(1, target/draft), else draw the
 *                       correction from norm(max(target - draft, 0))
 *   adapter specinfer   k i.i.d. drafts, multi-round rejection: round i accepts x_i with
 *                       min(1, r_i(x)/draft(x)), r_0 = target,
 *                       r_{i+1} = norm(max(r_i - draft, 0)); after k rejections draw r_k
 *
 * Its random numbers come from a splitmix64 generator seeded with the pair's seed. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static uint64_t rng_state;

static double uniform01(void)
{
    uint64_t z = (rng_state += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    z ^= z >> 31;
    return (double)(z >> 11) * 0x1.0p-53;
}

/* r_next = norm(max(r - draft, 0)); r itself if that has no mass. */
static void residual(const double *r, const double *draft, size_t V, double *out)
{
    double mass = 0;
    for (size_t i = 0; i < V; i++) {
        out[i] = r[i] > draft[i] ? r[i] - draft[i] : 0;
        mass += out[i];
    }
    for (size_t i = 0; i < V; i++) out[i] = mass > 0 ? out[i] / mass : r[i];
}

static size_t sample(const double *law, size_t V)
{
    double u = uniform01(), c = 0;
    for (size_t i = 0; i < V; i++) {
        c += law[i];
        if (u < c) return i;
    }
    for (size_t i = V; i-- > 0;) /* rounding: the last token of positive mass */
        if (law[i] > 0) return i;
    return 0;
}

static int fail(const char *msg)
{
    fprintf(stderr, "adapter: %s\n", msg);
    return 1;
}

int main(int argc, char **argv)
{
    if (argc != 2 || (strcmp(argv[1], "sd") && strcmp(argv[1], "specinfer")))
        return fail("usage: adapter sd|specinfer");
    int multi = !strcmp(argv[1], "specinfer");
    size_t V = 0, k = 0, cap = 1 << 16;
    double *draft = NULL, *rounds = NULL; /* rounds: r_0 .. r_k, V each */
    char *line = malloc(cap);
    size_t x[64];
    while (fgets(line, (int)cap, stdin)) {
        while (!strchr(line, '\n') && !feof(stdin)) { /* a long pair line */
            line = realloc(line, cap * 2);
            if (!fgets(line + cap - 1, (int)cap + 1, stdin)) break;
            cap *= 2;
        }
        char *s = line, *end;
        if (!strncmp(s, "case", 4)) {
            s += 4;
            for (size_t i = 0; i < k; i++) x[i] = strtoul(s, &s, 10);
            size_t out = 0, accepted = 0, rounds_run = multi ? k : 1;
            for (size_t i = 0; i < rounds_run && !accepted; i++) {
                double d = draft[x[i]], r = rounds[i * V + x[i]];
                if (d > 0 ? uniform01() * d < r : r > 0) out = x[i], accepted = 1;
            }
            if (!accepted) out = sample(rounds + rounds_run * V, V);
            printf("%zu %zu\n", out, accepted);
        } else if (!strncmp(s, "flush", 5)) {
            fflush(stdout);
        } else if (!strncmp(s, "pair", 4)) {
            V = strtoul(s + 4, &end, 10);
            k = strtoul(end, &end, 10);
            while (*end == ' ') end++;
            while (*end && *end != ' ') end++; /* the scheme's name: this adapter has its own */
            rng_state = strtoull(end, &end, 10);
            if (V < 1 || k < 1 || k > 64) return fail("bad pair line");
            if (!multi && k != 1) return fail("sd takes one draft");
            draft = realloc(draft, V * sizeof *draft);
            rounds = realloc(rounds, (k + 1) * V * sizeof *rounds);
        } else if (!strncmp(s, "draft", 5) || !strncmp(s, "target", 6)) {
            int is_draft = s[0] == 'd';
            double *dst = is_draft ? draft : rounds;
            s += is_draft ? 5 : 6;
            for (size_t i = 0; i < V; i++) dst[i] = strtod(s, &s);
            if (!is_draft)
                for (size_t i = 1; i <= k; i++) residual(rounds + (i - 1) * V, draft, V, rounds + i * V);
        } /* the greeting "specdec-exec 1" and unknown lines: ignored */
    }
    free(line), free(draft), free(rounds);
    return 0;
}
