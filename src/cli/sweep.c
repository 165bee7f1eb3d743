/* specdec sweep: a grid of specdec commands (the cartesian product of a few axes), run
 * by a pool of worker processes that take the next cell as soon as one is free (cells
 * differ in cost by orders of magnitude), each finished cell appended to a results file
 * at once; a restart skips the cells already there. */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cli.h"
#include "sd_error.h"

static const char *const help =
    "usage: specdec sweep GRID --out RESULTS.jsonl [--jobs N] [--dry-run] [--quiet]\n"
    "\n"
    "Runs every cell of a grid of specdec commands with N worker processes (default: the\n"
    "machine's cores), handing out the next cell as soon as a worker is free, and appends\n"
    "each finished cell to RESULTS.jsonl as one JSON line:\n"
    "  {\"cell\": 7, \"values\": {\"V\": \"16\", ...}, \"rc\": 0, \"seconds\": 0.31,\n"
    "   \"output\": \"...the command's stdout...\", \"stderr\": \"...\"}\n"
    "Started again with the same GRID and RESULTS, it skips the cells already written: a\n"
    "killed sweep loses at most the cells in flight (a cut last line is dropped; their\n"
    "workers' RESULTS.PID.cellN.out/.err files may be left beside it).\n"
    "\n"
    "GRID is a text file:\n"
    "  # comment\n"
    "  axis V 4 16 64                 an axis: a name and its values\n"
    "  axis scheme sd rrs kseq\n"
    "  command accept --pair dirichlet:{V},0.5,7 -k 2 --scheme {scheme} --json\n"
    "Cells are the product of the axes in file order, the last axis varying fastest; the\n"
    "command is a specdec command (no shell), {NAME} replaced by the cell's value.\n"
    "\n"
    "  --jobs N     worker processes (each cell runs with OMP_NUM_THREADS=1 unless the\n"
    "               environment sets it; specdec's results do not depend on threads)\n"
    "  --dry-run    list the cells and their commands, run nothing\n"
    "  --quiet      no progress on stderr\n"
    "  --stop-after N  stop abruptly after N cells are written (tests of resuming)\n";

#define MAX_AXES 16
#define MAX_VALUES 4096

typedef struct {
    char *name;
    char **value;
    size_t n;
} axis;

typedef struct {
    axis ax[MAX_AXES];
    size_t naxes;
    char *command; /* the template */
    size_t cells;
} grid;

static void grid_free(grid *g)
{
    for (size_t a = 0; a < g->naxes; a++) {
        for (size_t i = 0; i < g->ax[a].n; i++) free(g->ax[a].value[i]);
        free(g->ax[a].value);
        free(g->ax[a].name);
    }
    free(g->command);
}

static char *dup_n(const char *s, size_t n)
{
    char *d = sd_xmalloc(n + 1);
    memcpy(d, s, n);
    d[n] = 0;
    return d;
}

static int parse_grid(const char *path, grid *g)
{
    memset(g, 0, sizeof *g);
    char *text;
    size_t len;
    if (cli_read_file(path, &text, &len)) return sd_error(SD_EIO, "grid %s: %s", path, sd_errmsg());
    int rc = SD_OK;
    size_t line = 0;
    for (char *p = text; *p && !rc;) {
        char *e = p + strcspn(p, "\n"), *q = p;
        line++;
        while (q < e && (*q == ' ' || *q == '\t')) q++;
        if (q < e && *q != '#') {
            size_t w = strcspn(q, " \t\n");
            if (w == 4 && !strncmp(q, "axis", 4)) {
                if (g->naxes == MAX_AXES) {
                    rc = sd_error(SD_EINVAL, "%s:%zu: more than %d axes", path, line, MAX_AXES);
                    break;
                }
                axis *a = &g->ax[g->naxes];
                for (char *t = q + w; t < e && !rc;) {
                    while (t < e && (*t == ' ' || *t == '\t' || *t == '\r')) t++;
                    size_t k = strcspn(t, " \t\r\n");
                    if (!k) break;
                    if (!a->name) a->name = dup_n(t, k);
                    else if (a->n == MAX_VALUES) rc = sd_error(SD_EINVAL, "%s:%zu: more than %d values", path, line, MAX_VALUES);
                    else {
                        a->value = sd_xrealloc(a->value, (a->n + 1) * sizeof *a->value);
                        a->value[a->n++] = dup_n(t, k);
                    }
                    t += k;
                }
                g->naxes++;
                if (!rc && (!a->name || !a->n))
                    rc = sd_error(SD_EINVAL, "%s:%zu: an axis needs a name and at least one value", path, line);
                for (size_t b = 0; !rc && b + 1 < g->naxes; b++)
                    if (!strcmp(g->ax[b].name, a->name))
                        rc = sd_error(SD_EINVAL, "%s:%zu: axis '%s' given twice", path, line, a->name);
            } else if (w == 7 && !strncmp(q, "command", 7)) {
                if (g->command) rc = sd_error(SD_EINVAL, "%s:%zu: a second command line", path, line);
                else {
                    char *t = q + w;
                    while (t < e && (*t == ' ' || *t == '\t')) t++;
                    size_t k = (size_t)(e - t);
                    while (k && (t[k - 1] == '\r' || t[k - 1] == ' ')) k--;
                    g->command = dup_n(t, k);
                }
            } else {
                rc = sd_error(SD_EINVAL, "%s:%zu: expected 'axis NAME VALUES...' or 'command ARGS...', not '%.*s'",
                              path, line, (int)w, q);
            }
        }
        p = *e ? e + 1 : e;
    }
    free(text);
    if (!rc && !g->command) rc = sd_error(SD_EINVAL, "grid %s has no 'command' line", path);
    if (!rc && (!strncmp(g->command, "sweep", 5) || !g->command[0]))
        rc = sd_error(SD_EINVAL, "grid %s: the command must be a specdec command other than sweep", path);
    /* every {NAME} names an axis */
    for (const char *c = g->command; !rc && c && (c = strchr(c, '{')); c++) {
        const char *end = strchr(c, '}');
        size_t a = 0, k = end ? (size_t)(end - c - 1) : 0;
        while (end && a < g->naxes && (strlen(g->ax[a].name) != k || strncmp(g->ax[a].name, c + 1, k))) a++;
        if (!end || a == g->naxes)
            rc = sd_error(SD_EINVAL, "grid %s: '%.*s' in the command names no axis", path,
                          end ? (int)(end - c + 1) : (int)strlen(c), c);
    }
    double cells = 1;
    for (size_t a = 0; a < g->naxes; a++) cells *= (double)g->ax[a].n;
    if (!rc && cells > 1e7) rc = sd_error(SD_ERANGE, "grid %s has %.3g cells (limit 1e7)", path, cells);
    g->cells = (size_t)cells;
    if (rc) grid_free(g);
    return rc;
}

/* The value index of axis a in cell c (the last axis fastest). */
static size_t value_of(const grid *g, size_t c, size_t a)
{
    for (size_t b = g->naxes; b-- > a + 1;) c /= g->ax[b].n;
    return c % g->ax[a].n;
}

/* The cell's argument vector: "specdec" then the command split at blanks, placeholders
 * filled (argv and its strings in one block, freed with free(argv)). */
static char **cell_argv(const grid *g, size_t c, const char *self)
{
    size_t cap = strlen(g->command) + strlen(self) + 2;
    for (size_t a = 0; a < g->naxes; a++) {
        size_t longest = 0;
        for (size_t i = 0; i < g->ax[a].n; i++)
            if (strlen(g->ax[a].value[i]) > longest) longest = strlen(g->ax[a].value[i]);
        cap += longest * 64;
    }
    char *s = sd_xmalloc(cap), *o = s;
    o += sprintf(o, "%s ", self);
    for (const char *t = g->command; *t;) {
        if (*t == '{') {
            const char *end = strchr(t, '}');
            for (size_t a = 0; a < g->naxes; a++)
                if (strlen(g->ax[a].name) == (size_t)(end - t - 1) && !strncmp(g->ax[a].name, t + 1, (size_t)(end - t - 1))) {
                    o += sprintf(o, "%s", g->ax[a].value[value_of(g, c, a)]);
                    break;
                }
            t = end + 1;
        } else {
            *o++ = *t++;
        }
    }
    *o = 0;
    size_t n = 1;
    for (char *t = s; *t; t++) n += *t == ' ' || *t == '\t';
    char **argv = sd_xmalloc((n + 2) * sizeof *argv + (size_t)(o - s) + 1);
    char *buf = (char *)(argv + n + 2);
    memcpy(buf, s, (size_t)(o - s) + 1);
    free(s);
    size_t k = 0;
    for (char *tok = strtok(buf, " \t"); tok; tok = strtok(NULL, " \t")) argv[k++] = tok;
    argv[k] = NULL;
    return argv;
}

/* Which cells RESULTS holds already; a last line without its newline (a killed
 * writer) is cut off so that the file stays one object per line. */
static int load_done(const char *path, unsigned char *done, size_t cells, size_t *ndone)
{
    *ndone = 0;
    FILE *f = fopen(path, "r");
    if (!f) return errno == ENOENT ? SD_OK : sd_error(SD_EIO, "--out %s: cannot read: %s", path, strerror(errno));
    char *line = NULL;
    size_t cap = 0;
    ssize_t n;
    long good = 0;
    while ((n = getline(&line, &cap, f)) > 0) {
        if (line[n - 1] != '\n') break;
        size_t id;
        if (sscanf(line, "{\"cell\": %zu,", &id) == 1 && id < cells && !done[id]) done[id] = 1, (*ndone)++;
        good += (long)n;
    }
    free(line);
    fclose(f);
    struct stat st;
    if (!stat(path, &st) && st.st_size > good && truncate(path, good))
        return sd_error(SD_EIO, "--out %s: cannot cut its unfinished last line", path);
    return SD_OK;
}

static char *slurp_and_remove(const char *path)
{
    char *text = NULL;
    size_t len;
    if (cli_read_file(path, &text, &len)) text = NULL;
    remove(path);
    return text;
}

static void json_escaped(FILE *f, const char *s) { cli_json_string(f, s ? s : ""); }

typedef struct {
    pid_t pid;
    size_t cell;
    double t0;
    char out[4200], err[4200];
} slot;

int cmd_sweep(int argc, char **argv)
{
    const char *cmd = "sweep", *out = NULL;
    size_t jobs = 0, stop_after = 0;
    int dry = 0, quiet = 0, opt;
    enum { S_OUT = 256, S_JOBS, S_DRY, S_QUIET, S_STOP };
    static const struct option longopts[] = {
        {"out", required_argument, 0, S_OUT}, {"jobs", required_argument, 0, S_JOBS},
        {"dry-run", no_argument, 0, S_DRY}, {"quiet", no_argument, 0, S_QUIET},
        {"stop-after", required_argument, 0, S_STOP}, {"help", no_argument, 0, 'h'}, {0, 0, 0, 0},
    };
    optind = 1;
    while ((opt = getopt_long(argc, argv, "h", longopts, NULL)) != -1) {
        switch (opt) {
        case S_OUT: out = optarg; break;
        case S_JOBS:
            if (cli_parse_size(optarg, "--jobs", cmd, &jobs)) return CLI_USAGE;
            if (!jobs || jobs > 1024) return cli_usage(cmd, "--jobs %s: need 1 to 1024", optarg);
            break;
        case S_DRY: dry = 1; break;
        case S_QUIET: quiet = 1; break;
        case S_STOP: if (cli_parse_size(optarg, "--stop-after", cmd, &stop_after)) return CLI_USAGE; break;
        case 'h': fputs(help, stdout); return CLI_OK;
        default: return cli_usage(cmd, "unknown option");
        }
    }
    if (optind + 1 != argc) return cli_usage(cmd, "give one GRID file");
    if (!out && !dry) return cli_usage(cmd, "--out RESULTS.jsonl is required");
    grid g;
    if (parse_grid(argv[optind], &g)) return cli_fail(cmd, sd_errmsg());
    char self[4096];
    ssize_t sl = readlink("/proc/self/exe", self, sizeof self - 1);
    if (sl <= 0) {
        grid_free(&g);
        return cli_fail(cmd, "cannot find the specdec binary (/proc/self/exe)");
    }
    self[sl] = 0;
    if (dry) {
        for (size_t c = 0; c < g.cells; c++) {
            char **av = cell_argv(&g, c, "specdec");
            printf("%zu:", c);
            for (char **a = av; *a; a++) printf(" %s", *a);
            printf("\n");
            free(av);
        }
        grid_free(&g);
        return CLI_OK;
    }
    if (!jobs) {
        long n = sysconf(_SC_NPROCESSORS_ONLN);
        jobs = n > 0 ? (size_t)n : 1;
    }
    unsigned char *done = sd_xcalloc(g.cells ? g.cells : 1, 1);
    size_t ndone;
    if (load_done(out, done, g.cells, &ndone)) {
        free(done), grid_free(&g);
        return cli_fail(cmd, sd_errmsg());
    }
    FILE *res = fopen(out, "a");
    if (!res) {
        char msg[600];
        snprintf(msg, sizeof msg, "--out %s: cannot append: %s", out, strerror(errno));
        free(done), grid_free(&g);
        return cli_fail(cmd, msg);
    }
    if (!getenv("OMP_NUM_THREADS")) setenv("OMP_NUM_THREADS", "1", 1);
    if (!quiet)
        fprintf(stderr, "sweep: %zu cells, %zu already in %s, %zu workers\n", g.cells, ndone, out, jobs);
    slot *slots = sd_xcalloc(jobs, sizeof *slots);
    size_t next = 0, running = 0, written = 0, failed = 0, todo = g.cells - ndone;
    double t0 = cli_seconds(), busy = 0, longest = 0, last_note = t0;
    int rc = CLI_OK;
    for (;;) {
        /* fill the free workers with the next cells not done */
        for (size_t w = 0; w < jobs && rc == CLI_OK; w++) {
            if (slots[w].pid) continue;
            while (next < g.cells && done[next]) next++;
            if (next == g.cells) break;
            slot *s = &slots[w];
            s->cell = next++;
            /* named by this sweep's pid: the workers of a killed sweep may still be writing
             * theirs */
            snprintf(s->out, sizeof s->out, "%s.%ld.cell%zu.out", out, (long)getpid(), s->cell);
            snprintf(s->err, sizeof s->err, "%s.%ld.cell%zu.err", out, (long)getpid(), s->cell);
            char **av = cell_argv(&g, s->cell, self);
            s->t0 = cli_seconds();
            pid_t pid = fork();
            if (pid == 0) {
                int fo = open(s->out, O_WRONLY | O_CREAT | O_TRUNC, 0644), fe = open(s->err, O_WRONLY | O_CREAT | O_TRUNC, 0644);
                if (fo < 0 || fe < 0 || dup2(fo, 1) < 0 || dup2(fe, 2) < 0) _exit(127);
                execv(self, av);
                _exit(127);
            }
            free(av);
            if (pid < 0) {
                rc = cli_fail(cmd, "cannot start a worker process (fork failed)");
                break;
            }
            s->pid = pid;
            running++;
        }
        if (!running) break;
        int status;
        pid_t pid = wait(&status);
        if (pid < 0) {
            if (errno == EINTR) continue;
            rc = cli_fail(cmd, "lost track of the worker processes");
            break;
        }
        size_t w = 0;
        while (w < jobs && slots[w].pid != pid) w++;
        if (w == jobs) continue; /* not ours */
        slot *s = &slots[w];
        s->pid = 0;
        running--;
        double secs = cli_seconds() - s->t0;
        busy += secs;
        if (secs > longest) longest = secs;
        int code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + (WIFSIGNALED(status) ? WTERMSIG(status) : 0);
        char *o = slurp_and_remove(s->out), *e = slurp_and_remove(s->err);
        if (o) { /* one line: the command's last newline dropped */
            size_t k = strlen(o);
            if (k && o[k - 1] == '\n') o[k - 1] = 0;
        }
        fprintf(res, "{\"cell\": %zu, \"values\": {", s->cell);
        for (size_t a = 0; a < g.naxes; a++) {
            fprintf(res, "%s", a ? ", " : "");
            json_escaped(res, g.ax[a].name);
            fprintf(res, ": ");
            json_escaped(res, g.ax[a].value[value_of(&g, s->cell, a)]);
        }
        fprintf(res, "}, \"rc\": %d, \"seconds\": %.6f, \"output\": ", code, secs);
        json_escaped(res, o);
        fprintf(res, ", \"stderr\": ");
        json_escaped(res, e);
        fprintf(res, "}\n");
        free(o), free(e);
        if (fflush(res) || fsync(fileno(res))) {
            rc = cli_fail(cmd, "cannot write the results file");
            break;
        }
        written++;
        failed += code != 0;
        if (stop_after && written == stop_after) _exit(3); /* as if killed: children left running */
        if (!quiet && cli_seconds() - last_note > 1.0) {
            fprintf(stderr, "\rsweep: %zu/%zu cells, %.1f s", written, todo, cli_seconds() - t0);
            last_note = cli_seconds();
        }
    }
    for (size_t w = 0; w < jobs; w++)
        if (slots[w].pid) kill(slots[w].pid, SIGTERM), waitpid(slots[w].pid, NULL, 0);
    double wall = cli_seconds() - t0;
    fclose(res);
    if (!quiet && rc == CLI_OK)
        fprintf(stderr, "\rsweep: %zu cells run (%zu failed), %zu skipped as done; %.2f s wall, %.2f s in cells, "
                "workers busy %.0f%% of the time, longest cell %.2f s\n", written, failed, ndone, wall, busy,
                wall > 0 ? 100 * busy / (wall * (double)jobs) : 100, longest);
    free(slots), free(done);
    grid_free(&g);
    if (rc == CLI_OK && failed) {
        char msg[200];
        snprintf(msg, sizeof msg, "%zu cells failed (their rc and stderr are in %s)", failed, out);
        return cli_fail(cmd, msg);
    }
    return rc;
}
