/* specdec sweep: a grid of specdec commands (the cartesian product of a few axes), run
 * by a pool of worker processes that take the next cell as soon as one is free (cells
 * differ in cost by orders of magnitude), each finished cell appended to a results file
 * at once; a restart skips the cells already there. Under MPI (--mpi) rank 0 hands out
 * the cells and owns the results file, and the other ranks run the cells. */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "cli.h"
#include "mpi.h"
#include "sd_error.h"

static const char *const help =
    "usage: specdec sweep GRID --out RESULTS.jsonl [--jobs N] [--mpi] [--dry-run] [--quiet]\n"
    "\n"
    "Runs every cell of a grid of specdec commands with N worker processes (default: the\n"
    "machine's cores), handing out the next cell as soon as a worker is free, and appends\n"
    "each finished cell to RESULTS.jsonl as one JSON line:\n"
    "  {\"cell\": 7, \"values\": {\"V\": \"16\", ...}, \"rc\": 0, \"seconds\": 0.31,\n"
    "   \"output\": \"...the command's stdout...\", \"stderr\": \"...\"}\n"
    "Started again with the same GRID and RESULTS, it skips the cells already written: a\n"
    "killed sweep loses at most the cells in flight (a cut last line is dropped; after\n"
    "SIGKILL their workers' RESULTS.PID.cellN.out/.err files may be left beside it).\n"
    "SIGTERM, SIGINT or SIGHUP (scancel, a time limit, Ctrl-C) stop it cleanly: the cells\n"
    "in flight are stopped and not written, their files removed, exit status 128 + the\n"
    "signal. One sweep at a time writes a RESULTS file: a second waits for the first (a\n"
    "lock on the file).\n"
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
    "  --mpi        the cells over MPI ranks (build-mpi/specdec under mpirun or srun;\n"
    "               implied by such a launch): rank 0 hands out the cells and writes\n"
    "               RESULTS, every other rank runs one cell at a time (its own specdec,\n"
    "               the same binary path on every node; RESULTS on rank 0's disk); with\n"
    "               one rank, rank 0 runs them with --jobs workers. Launch N + 1 ranks\n"
    "               for N workers (rank 0 sleeps while it waits)\n"
    "  --dry-run    list the cells and their commands, run nothing\n"
    "  --quiet      no progress on stderr\n"
    "  --stop-after N  stop abruptly after N cells are written (tests of resuming)\n"
    "\n"
    "At the end (unless --quiet), on stderr: each worker's cells, busy and idle seconds,\n"
    "and a model of the speedup on 1 to 256 workers from the measured cell times (every\n"
    "cell in RESULTS): the next cell in grid order to the first free worker, as here,\n"
    "without the runner's overhead.\n";

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
                    if (!a->name) a->name = sd_xstrndup(t, k);
                    else if (a->n == MAX_VALUES) rc = sd_error(SD_EINVAL, "%s:%zu: more than %d values", path, line, MAX_VALUES);
                    else {
                        a->value = sd_xrealloc(a->value, (a->n + 1) * sizeof *a->value);
                        a->value[a->n++] = sd_xstrndup(t, k);
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
                    g->command = sd_xstrndup(t, k);
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

/* The cell's command line: the template with every {NAME} replaced (malloc'ed). */
static char *cell_command(const grid *g, size_t c)
{
    size_t longest = 0, holes = 0;
    for (size_t a = 0; a < g->naxes; a++)
        for (size_t i = 0; i < g->ax[a].n; i++)
            if (strlen(g->ax[a].value[i]) > longest) longest = strlen(g->ax[a].value[i]);
    for (const char *t = g->command; (t = strchr(t, '{')); t++) holes++;
    char *s = sd_xmalloc(strlen(g->command) + holes * longest + 1), *o = s;
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
    return s;
}

/* The argument vector: self, then the command line split at blanks (argv and its
 * strings in one block, freed with free(argv)). */
static char **split_argv(const char *self, const char *line)
{
    size_t n = 2, len = strlen(self) + 1 + strlen(line) + 1;
    for (const char *t = line; *t; t++) n += *t == ' ' || *t == '\t';
    char **argv = sd_xmalloc((n + 1) * sizeof *argv + len);
    char *buf = (char *)(argv + n + 1);
    snprintf(buf, len, "%s %s", self, line);
    size_t k = 0;
    argv[k++] = buf;
    buf[strlen(self)] = 0;
    for (char *tok = strtok(buf + strlen(self) + 1, " \t"); tok; tok = strtok(NULL, " \t")) argv[k++] = tok;
    argv[k] = NULL;
    return argv;
}

/* ---- the results file ---- */

typedef struct {
    FILE *f;                /* appends */
    unsigned char *done;    /* [cells] written */
    double *seconds;        /* [cells] their times (NaN: not written) */
    size_t ndone;
} results;

static char *read_fd(int fd, size_t *len)
{
    size_t cap = 1 << 16, n = 0;
    char *text = sd_xmalloc(cap + 1);
    ssize_t got;
    if (lseek(fd, 0, SEEK_SET) < 0) got = -1;
    else
        while ((got = read(fd, text + n, cap - n)) > 0)
            if ((n += (size_t)got) == cap) text = sd_xrealloc(text, (cap *= 2) + 1);
    text[n] = 0;
    *len = n;
    if (got < 0) {
        free(text);
        return NULL;
    }
    return text;
}

/* Opens RESULTS for appending under a write lock (a second sweep on it waits), and
 * reads which cells it holds; a last line without its newline (a killed writer) is cut
 * off so that the file stays one object per line. */
static int results_open(const char *path, size_t cells, int quiet, results *r)
{
    memset(r, 0, sizeof *r);
    int fd = open(path, O_RDWR | O_CREAT | O_APPEND, 0644);
    if (fd < 0) return sd_error(SD_EIO, "--out %s: cannot open: %s", path, strerror(errno));
    struct flock lk = {.l_type = F_WRLCK, .l_whence = SEEK_SET, .l_start = 0, .l_len = 0};
    if (fcntl(fd, F_SETLK, &lk) < 0) {
        struct flock who = lk;
        if (!quiet && fcntl(fd, F_GETLK, &who) == 0 && who.l_type != F_UNLCK)
            fprintf(stderr, "sweep: %s is being written by process %ld: waiting for it\n", path,
                    (long)who.l_pid);
        while (fcntl(fd, F_SETLKW, &lk) < 0 && errno == EINTR) continue;
    }
    size_t len;
    char *text = read_fd(fd, &len);
    if (!text) {
        close(fd);
        return sd_error(SD_EIO, "--out %s: cannot read: %s", path, strerror(errno));
    }
    r->done = sd_xcalloc(cells ? cells : 1, 1);
    r->seconds = sd_xmalloc((cells ? cells : 1) * sizeof *r->seconds);
    for (size_t c = 0; c < cells; c++) r->seconds[c] = NAN;
    size_t good = 0;
    for (char *line = text, *nl; (nl = strchr(line, '\n')); line = nl + 1) {
        size_t id;
        const char *at = strstr(line, "}, \"rc\": "); /* values are escaped: no raw '"' in them */
        double secs = NAN;
        *nl = 0;
        if (at && (at = strstr(at, "\"seconds\": "))) secs = strtod(at + 11, NULL);
        if (sscanf(line, "{\"cell\": %zu,", &id) == 1 && id < cells && !r->done[id])
            r->done[id] = 1, r->seconds[id] = secs, r->ndone++;
        good = (size_t)(nl + 1 - text);
    }
    free(text);
    if (len > good && ftruncate(fd, (off_t)good)) {
        close(fd);
        return sd_error(SD_EIO, "--out %s: cannot cut its unfinished last line", path);
    }
    if (!(r->f = fdopen(fd, "a"))) {
        close(fd);
        return sd_error(SD_EIO, "--out %s: cannot append: %s", path, strerror(errno));
    }
    return SD_OK;
}

static void results_close(results *r)
{
    if (r->f) fclose(r->f); /* and the lock goes */
    free(r->done), free(r->seconds);
    memset(r, 0, sizeof *r);
}

static void json_escaped(FILE *f, const char *s) { cli_json_string(f, s ? s : ""); }

/* Appends the cell's line and syncs it to disk; out loses its last newline. */
static int results_write(results *r, const grid *g, size_t cell, int code, double secs, char *out,
                         const char *err)
{
    size_t k = out ? strlen(out) : 0;
    if (k && out[k - 1] == '\n') out[k - 1] = 0;
    fprintf(r->f, "{\"cell\": %zu, \"values\": {", cell);
    for (size_t a = 0; a < g->naxes; a++) {
        fprintf(r->f, "%s", a ? ", " : "");
        json_escaped(r->f, g->ax[a].name);
        fprintf(r->f, ": ");
        json_escaped(r->f, g->ax[a].value[value_of(g, cell, a)]);
    }
    fprintf(r->f, "}, \"rc\": %d, \"seconds\": %.6f, \"output\": ", code, secs);
    json_escaped(r->f, out);
    fprintf(r->f, ", \"stderr\": ");
    json_escaped(r->f, err);
    fprintf(r->f, "}\n");
    if (fflush(r->f) || fsync(fileno(r->f))) return sd_error(SD_EIO, "cannot write the results file");
    r->done[cell] = 1;
    r->seconds[cell] = secs;
    r->ndone++;
    return SD_OK;
}

/* ---- running cells ---- */

/* What each worker did (local: per worker process; MPI: per rank, rank 0 none). */
typedef struct {
    size_t workers, written, failed;
    double wall, longest, *busy;
    size_t *cells;
} tally;

/* SIGTERM, SIGINT or SIGHUP (scancel, a time limit, mpirun or Ctrl-C passing one on): the
 * runner and the worker ranks stop their cells, remove the cells' temporary files, and
 * leave the results file as a resume wants it, without writing a cell the signal cut. */
static volatile sig_atomic_t stop_sig;

static void on_stop(int sig) { stop_sig = sig; }

static void catch_stop(void)
{
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_stop; /* no SA_RESTART: a blocking wait() returns at once */
    sigemptyset(&sa.sa_mask);
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGHUP, &sa, NULL);
}

/* A cell ended by one of those signals was stopped from outside (the signal reaches the
 * cells too, maybe before this process): not a result to write, the sweep stops. */
static int cut_by_signal(int status)
{
    return WIFSIGNALED(status) &&
           (WTERMSIG(status) == SIGTERM || WTERMSIG(status) == SIGINT || WTERMSIG(status) == SIGHUP);
}

static void nap(void)
{
    struct timespec ts = {0, 1000000}; /* 1 ms: nothing to notice beside a cell */
    nanosleep(&ts, NULL);
}

/* fork and exec self with argv, stdout and stderr into the two descriptors. */
static pid_t spawn(const char *self, char **av, int fo, int fe)
{
    pid_t pid = fork();
    if (pid == 0) {
        if (fo < 0 || fe < 0 || dup2(fo, 1) < 0 || dup2(fe, 2) < 0) _exit(127);
        execv(self, av);
        _exit(127);
    }
    return pid;
}

static int exit_code(int status)
{
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + (WIFSIGNALED(status) ? WTERMSIG(status) : 0);
}

static char *slurp_and_remove(const char *path)
{
    char *text = NULL;
    size_t len;
    if (cli_read_file(path, &text, &len)) text = NULL;
    remove(path);
    return text;
}

typedef struct {
    pid_t pid;
    size_t cell;
    double t0;
    char out[4200], err[4200];
} slot;

/* A child to reap. Under MPI (ppid0 set) it polls, and ends this sweep and its cells
 * when the launcher is gone (mpirun killed): an orphan must not go on writing. */
static pid_t reap(int *status, pid_t ppid0, const slot *slots, size_t jobs)
{
    if (!ppid0) return wait(status);
    for (;;) {
        pid_t pid = waitpid(-1, status, WNOHANG);
        if (pid != 0) return pid;
        if (stop_sig) {
            errno = EINTR;
            return -1;
        }
        if (getppid() != ppid0) {
            for (size_t w = 0; w < jobs; w++)
                if (slots[w].pid) kill(slots[w].pid, SIGKILL);
            _exit(1);
        }
        nap();
    }
}

/* The local runner: jobs worker processes on this machine. */
static int run_local(const grid *g, results *r, const char *self, const char *out, size_t jobs,
                     size_t stop_after, int quiet, pid_t ppid0, tally *t)
{
    slot *slots = sd_xcalloc(jobs, sizeof *slots);
    size_t next = 0, running = 0, todo = g->cells - r->ndone;
    double t0 = sd_seconds(), last_note = t0;
    int rc = CLI_OK;
    catch_stop();
    for (;;) {
        if (stop_sig) break;
        /* fill the free workers with the next cells not done */
        for (size_t w = 0; w < jobs && rc == CLI_OK; w++) {
            if (slots[w].pid) continue;
            while (next < g->cells && r->done[next]) next++;
            if (next == g->cells) break;
            slot *s = &slots[w];
            s->cell = next++;
            /* named by this sweep's pid: the workers of a killed sweep may still be writing
             * theirs */
            snprintf(s->out, sizeof s->out, "%s.%ld.cell%zu.out", out, (long)getpid(), s->cell);
            snprintf(s->err, sizeof s->err, "%s.%ld.cell%zu.err", out, (long)getpid(), s->cell);
            char *line = cell_command(g, s->cell), **av = split_argv(self, line);
            int fo = open(s->out, O_WRONLY | O_CREAT | O_TRUNC, 0644), fe = open(s->err, O_WRONLY | O_CREAT | O_TRUNC, 0644);
            s->t0 = sd_seconds();
            pid_t pid = spawn(self, av, fo, fe);
            if (fo >= 0) close(fo);
            if (fe >= 0) close(fe);
            free(av), free(line);
            if (pid < 0) {
                rc = cli_fail("sweep", "cannot start a worker process (fork failed)");
                break;
            }
            s->pid = pid;
            running++;
        }
        if (!running) break;
        int status;
        pid_t pid = reap(&status, ppid0, slots, jobs);
        if (pid < 0) {
            if (stop_sig) break;
            if (errno == EINTR) continue;
            rc = cli_fail("sweep", "lost track of the worker processes");
            break;
        }
        size_t w = 0;
        while (w < jobs && slots[w].pid != pid) w++;
        if (w == jobs) continue; /* not ours */
        slot *s = &slots[w];
        s->pid = 0;
        running--;
        if (stop_sig || cut_by_signal(status)) { /* stopped: this cell is not a result */
            remove(s->out), remove(s->err);
            if (!stop_sig) stop_sig = WTERMSIG(status);
            break;
        }
        double secs = sd_seconds() - s->t0;
        int code = exit_code(status);
        char *o = slurp_and_remove(s->out), *e = slurp_and_remove(s->err);
        int wrc = results_write(r, g, s->cell, code, secs, o, e);
        free(o), free(e);
        if (wrc) {
            rc = cli_fail("sweep", sd_errmsg());
            break;
        }
        t->busy[w] += secs;
        t->cells[w]++;
        if (secs > t->longest) t->longest = secs;
        t->written++;
        t->failed += code != 0;
        if (stop_after && t->written == stop_after) _exit(3); /* as if killed: children left running */
        if (!quiet && sd_seconds() - last_note > 1.0) {
            fprintf(stderr, "\rsweep: %zu/%zu cells, %.1f s", t->written, todo, sd_seconds() - t0);
            last_note = sd_seconds();
        }
    }
    for (size_t w = 0; w < jobs; w++)
        if (slots[w].pid) {
            kill(slots[w].pid, SIGTERM), waitpid(slots[w].pid, NULL, 0);
            remove(slots[w].out), remove(slots[w].err);
        }
    if (stop_sig && rc == CLI_OK) rc = 128 + stop_sig;
    t->wall = sd_seconds() - t0;
    free(slots);
    return rc;
}

/* ---- over MPI: rank 0 coordinates, the other ranks run cells ---- */

enum { TAG_READY = 1, TAG_CELL, TAG_STOP, TAG_RESULT };

/* The coordinator and the workers talk point to point, outside any collective step: a
 * rank that cannot go on ends them all (and says so itself: ranks > 0 are quiet). */
_Noreturn static void die(cli_mpi *m, const char *why)
{
    fprintf(stderr, "specdec sweep: rank %d: %s\n", m->rank, why);
    cli_mpi_abort(m, CLI_FAIL);
}

/* A worker rank: asks for a cell, runs it (fork and exec, output in temporary files),
 * sends back "cell rc seconds\n" stdout NUL stderr NUL, until told to stop. */
static int worker(cli_mpi *m, const char *self, pid_t ppid0)
{
    const char *tmp = getenv("TMPDIR");
    if (!tmp || !*tmp) tmp = "/tmp";
    catch_stop();
    if (cli_mpi_send(m, 0, TAG_READY, "", 0)) die(m, sd_errmsg());
    for (;;) {
        int src, tag;
        size_t len;
        while (!cli_mpi_poll(m, 0, &src, &tag, &len)) {
            if (getppid() != ppid0) _exit(1); /* the launcher is gone */
            if (stop_sig) _exit(128 + stop_sig);
            nap();
        }
        char *msg = sd_xmalloc(len + 1), *line;
        if (cli_mpi_recv(m, 0, tag, msg, len)) die(m, sd_errmsg());
        msg[len] = 0;
        if (tag == TAG_STOP) {
            free(msg);
            return CLI_OK;
        }
        size_t cell = (size_t)strtoull(msg, &line, 10);
        char po[4200], pe[4200];
        snprintf(po, sizeof po, "%s/specdec-sweep-%ld-XXXXXX", tmp, (long)getpid());
        snprintf(pe, sizeof pe, "%s/specdec-sweep-%ld-XXXXXX", tmp, (long)getpid());
        int fo = mkstemp(po), fe = mkstemp(pe), status = 0, code = 127;
        char **av = split_argv(self, line + 1);
        double t0 = sd_seconds();
        pid_t pid = fo >= 0 && fe >= 0 ? spawn(self, av, fo, fe) : -1;
        while (pid > 0 && waitpid(pid, &status, WNOHANG) == 0) {
            if (getppid() != ppid0 || stop_sig) {
                kill(pid, SIGKILL);
                waitpid(pid, &status, 0);
                unlink(po), unlink(pe);
                _exit(stop_sig ? 128 + stop_sig : 1);
            }
            nap();
        }
        if (stop_sig || (pid > 0 && cut_by_signal(status))) { /* not a result: stop */
            unlink(po), unlink(pe);
            _exit(128 + (stop_sig ? stop_sig : WTERMSIG(status)));
        }
        if (pid > 0) code = exit_code(status);
        double secs = sd_seconds() - t0;
        size_t lo = 0, le = 0;
        char *o = fo >= 0 ? read_fd(fo, &lo) : NULL, *e = fe >= 0 ? read_fd(fe, &le) : NULL;
        if (fo >= 0) close(fo), unlink(po);
        if (fe >= 0) close(fe), unlink(pe);
        if (pid < 0 && !e) e = sd_xstrdup("sweep: cannot start the cell (fork or temporary file failed)");
        lo = o ? strlen(o) : 0, le = e ? strlen(e) : 0;
        char head[96];
        int hl = snprintf(head, sizeof head, "%zu %d %.6f\n", cell, code, secs);
        char *reply = sd_xmalloc((size_t)hl + lo + le + 2);
        memcpy(reply, head, (size_t)hl);
        memcpy(reply + hl, o ? o : "", lo + 1);
        memcpy(reply + hl + lo + 1, e ? e : "", le + 1);
        int rc = cli_mpi_send(m, 0, TAG_RESULT, reply, (size_t)hl + lo + le + 2);
        free(reply), free(o), free(e), free(av), free(msg);
        if (rc) die(m, sd_errmsg());
    }
}

/* Rank 0: the next cell to whichever worker asks, each result written as it comes. */
static int coordinate(cli_mpi *m, const grid *g, results *r, size_t stop_after, int quiet,
                      pid_t ppid0, tally *t)
{
    size_t next = 0, active = (size_t)m->size - 1, todo = g->cells - r->ndone;
    double t0 = sd_seconds(), last_note = t0;
    while (active) {
        int src, tag;
        size_t len;
        if (!cli_mpi_poll(m, -1, &src, &tag, &len)) {
            if (getppid() != ppid0) _exit(1); /* the launcher is gone */
            nap();
            continue;
        }
        char *msg = sd_xmalloc(len + 1);
        if (cli_mpi_recv(m, src, tag, msg, len)) die(m, sd_errmsg());
        msg[len] = 0;
        if (tag == TAG_RESULT) {
            size_t cell;
            int code, used = 0;
            double secs;
            if (sscanf(msg, "%zu %d %lf\n%n", &cell, &code, &secs, &used) != 3 || !used || cell >= g->cells)
                die(m, "a worker sent a malformed result");
            char *o = msg + used, *e = o + strlen(o) + 1;
            if (e > msg + len) e = msg + len; /* no stderr part */
            if (results_write(r, g, cell, code, secs, o, e)) die(m, sd_errmsg());
            t->busy[src] += secs;
            t->cells[src]++;
            if (secs > t->longest) t->longest = secs;
            t->written++;
            t->failed += code != 0;
            if (stop_after && t->written == stop_after) _exit(3); /* as if killed */
            if (!quiet && sd_seconds() - last_note > 1.0) {
                fprintf(stderr, "\rsweep: %zu/%zu cells, %.1f s", t->written, todo, sd_seconds() - t0);
                last_note = sd_seconds();
            }
        }
        free(msg);
        while (next < g->cells && r->done[next]) next++;
        int rc;
        if (next < g->cells) {
            char *line = cell_command(g, next), *job = sd_xmalloc(strlen(line) + 32);
            int n = sprintf(job, "%zu\n%s", next++, line);
            rc = cli_mpi_send(m, src, TAG_CELL, job, (size_t)n);
            free(line), free(job);
        } else {
            rc = cli_mpi_send(m, src, TAG_STOP, "", 0);
            active--;
        }
        if (rc) die(m, sd_errmsg());
    }
    t->wall = sd_seconds() - t0;
    return CLI_OK;
}

/* ---- the summary: load balance and modelled speedup ---- */

static void print_balance(const tally *t, int mpi)
{
    size_t w0 = mpi ? 1 : 0, n = t->workers - w0;
    if (!n) return;
    double busy = 0, idle_max = 0;
    fprintf(stderr, "sweep: load balance over %zu %s, %.2f s wall%s:\n  %6s %6s %9s %9s %7s\n", n,
            mpi ? "worker ranks" : "workers", t->wall,
            mpi ? " (rank 0 hands out the cells and writes RESULTS)" : "", mpi ? "rank" : "worker",
            "cells", "busy s", "idle s", "idle");
    for (size_t w = w0; w < t->workers; w++) {
        double idle = t->wall - t->busy[w] > 0 ? t->wall - t->busy[w] : 0;
        busy += t->busy[w];
        if (idle > idle_max) idle_max = idle;
        if (n <= 64 || w < w0 + 8 || w + 8 >= t->workers)
            fprintf(stderr, "  %6zu %6zu %9.3f %9.3f %6.1f%%\n", w, t->cells[w], t->busy[w], idle,
                    t->wall > 0 ? 100 * idle / t->wall : 0);
        else if (w == w0 + 8)
            fprintf(stderr, "  %6s\n", "...");
    }
    double idle = t->wall * (double)n - busy;
    fprintf(stderr, "  all    %6zu %9.3f %9.3f %6.1f%%  (most idle: %.3f s)\n", t->written, busy,
            idle > 0 ? idle : 0, t->wall > 0 ? 100 * (idle > 0 ? idle : 0) / (t->wall * (double)n) : 0,
            idle_max);
}

/* Makespan of the cells' times on w workers, each free worker taking the next cell in
 * order; heap[w] is scratch (a binary min-heap of the workers' finishing times). */
static double makespan(const double *secs, size_t n, size_t w, double *heap)
{
    for (size_t i = 0; i < w; i++) heap[i] = 0;
    for (size_t c = 0; c < n; c++) {
        if (isnan(secs[c])) continue;
        double v = heap[0] + secs[c]; /* the first free worker takes it */
        size_t i = 0;
        for (;;) { /* sift down */
            size_t l = 2 * i + 1, rr = l + 1, m = i;
            double at = v;
            if (l < w && heap[l] < at) m = l, at = heap[l];
            if (rr < w && heap[rr] < at) m = rr;
            if (m == i) break;
            heap[i] = heap[m];
            i = m;
        }
        heap[i] = v;
    }
    double most = 0;
    for (size_t i = 0; i < w; i++)
        if (heap[i] > most) most = heap[i];
    return most;
}

static void print_model(const results *r, size_t cells, int mpi)
{
    size_t n = 0;
    double total = 0, longest = 0;
    for (size_t c = 0; c < cells; c++)
        if (!isnan(r->seconds[c])) {
            n++, total += r->seconds[c];
            if (r->seconds[c] > longest) longest = r->seconds[c];
        }
    if (n < 2 || !(total > 0)) return;
    double *heap = sd_xmalloc(256 * sizeof *heap), one = makespan(r->seconds, cells, 1, heap);
    const char *head = mpi ? "workers (ranks)" : "workers";
    int wid = (int)strlen(head);
    fprintf(stderr, "sweep: speedup model from the %zu measured cell times (%.3f s in all, the "
                    "longest %.3f s): the next cell in grid order to the first free worker, no "
                    "overhead\n  %*s %11s %8s %10s\n", n, total, longest, wid, head, "makespan s",
            "speedup", "efficiency");
    for (size_t w = 1; w <= 256; w *= 2) {
        double ms = makespan(r->seconds, cells, w, heap);
        char col[48];
        if (mpi) snprintf(col, sizeof col, "%zu (%zu)", w, w + 1);
        else snprintf(col, sizeof col, "%zu", w);
        fprintf(stderr, "  %*s %11.3f %8.2f %9.1f%%\n", wid, col, ms, one / ms, 100 * one / ms / (double)w);
    }
    fprintf(stderr, "  the bound: speedup <= %.2f (all the time / the longest cell)\n", total / longest);
    free(heap);
}

int cmd_sweep(int argc, char **argv)
{
    const char *cmd = "sweep", *out = NULL;
    size_t jobs = 0, stop_after = 0;
    int dry = 0, quiet = 0, want_mpi = 0, opt, rc;
    enum { S_OUT = 256, S_JOBS, S_DRY, S_QUIET, S_STOP, S_MPI };
    static const struct option longopts[] = {
        {"out", required_argument, 0, S_OUT}, {"jobs", required_argument, 0, S_JOBS},
        {"dry-run", no_argument, 0, S_DRY}, {"quiet", no_argument, 0, S_QUIET},
        {"stop-after", required_argument, 0, S_STOP}, {"mpi", no_argument, 0, S_MPI},
        {"help", no_argument, 0, 'h'}, {0, 0, 0, 0},
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
        case S_MPI: want_mpi = 1; break;
        case 'h': fputs(help, stdout); return CLI_OK;
        default: return cli_bad_option(cmd, argv, longopts, "h");
        }
    }
    if (optind + 1 != argc) return cli_usage(cmd, "give one GRID file");
    if (!out && !dry) return cli_usage(cmd, "--out RESULTS.jsonl is required");
    cli_mpi m;
    if ((rc = cli_mpi_start(&m, want_mpi, cmd))) return rc;
    setenv("SPECDEC_NO_MPI", "1", 1); /* the cells are single processes */
    if (!getenv("OMP_NUM_THREADS")) setenv("OMP_NUM_THREADS", "1", 1);
    pid_t ppid0 = m.on ? getppid() : 0;
    char self[4096];
    ssize_t sl = readlink("/proc/self/exe", self, sizeof self - 1);
    if (sl <= 0) return cli_mpi_finish(&m, cli_fail(cmd, "cannot find the specdec binary (/proc/self/exe)"));
    self[sl] = 0;
    if (m.rank > 0) { /* a worker: rank 0 says whether the sweep starts, then hands out cells */
        if (dry || cli_mpi_agree(&m, SD_OK)) return cli_mpi_finish(&m, dry ? CLI_OK : CLI_FAIL);
        return cli_mpi_finish(&m, worker(&m, self, ppid0));
    }
    grid g;
    if (parse_grid(argv[optind], &g)) {
        rc = cli_fail(cmd, sd_errmsg());
        if (!dry) cli_mpi_agree(&m, rc);
        return cli_mpi_finish(&m, rc);
    }
    if (dry) {
        for (size_t c = 0; c < g.cells; c++) {
            char *line = cell_command(&g, c), **av = split_argv("specdec", line);
            printf("%zu:", c);
            for (char **a = av; *a; a++) printf(" %s", *a);
            printf("\n");
            free(av), free(line);
        }
        grid_free(&g);
        return cli_mpi_finish(&m, CLI_OK);
    }
    if (!jobs) {
        long n = sysconf(_SC_NPROCESSORS_ONLN);
        jobs = n > 0 ? (size_t)n : 1;
    }
    results r;
    rc = results_open(out, g.cells, quiet, &r) ? cli_fail(cmd, sd_errmsg()) : CLI_OK;
    if (cli_mpi_agree(&m, rc)) {
        grid_free(&g);
        return cli_mpi_finish(&m, rc);
    }
    int ranks = m.on && m.size > 1;
    tally t = {ranks ? (size_t)m.size : jobs, 0, 0, 0, 0, NULL, NULL};
    t.busy = sd_xcalloc(t.workers, sizeof *t.busy);
    t.cells = sd_xcalloc(t.workers, sizeof *t.cells);
    if (!quiet)
        fprintf(stderr, "sweep: %zu cell%s, %zu already in %s, %zu %s%s\n", g.cells, CLI_S(g.cells), r.ndone, out,
                ranks ? t.workers - 1 : jobs, ranks ? "worker rank" : "worker", CLI_S(ranks ? t.workers - 1 : jobs));
    size_t skipped = r.ndone;
    rc = ranks ? coordinate(&m, &g, &r, stop_after, quiet, ppid0, &t)
               : run_local(&g, &r, self, out, jobs, stop_after, quiet, ppid0, &t);
    if (stop_sig) {
        char msg[200];
        snprintf(msg, sizeof msg, "stopped by signal %d after %zu cells (the same command resumes)",
                 (int)stop_sig, t.written);
        cli_fail(cmd, msg);
    }
    if (!quiet && rc == CLI_OK) {
        double busy = 0;
        for (size_t w = 0; w < t.workers; w++) busy += t.busy[w];
        size_t nw = ranks ? t.workers - 1 : t.workers;
        fprintf(stderr, "\rsweep: %zu cells run (%zu failed), %zu skipped as done; %.2f s wall, %.2f s in cells, "
                "workers busy %.0f%% of the time, longest cell %.2f s\n", t.written, t.failed, skipped,
                t.wall, busy, t.wall > 0 && nw ? 100 * busy / (t.wall * (double)nw) : 100, t.longest);
        if (t.written) print_balance(&t, ranks);
        print_model(&r, g.cells, ranks);
    }
    results_close(&r);
    free(t.busy), free(t.cells);
    grid_free(&g);
    if (rc == CLI_OK && t.failed) {
        char msg[200];
        snprintf(msg, sizeof msg, "%zu cell%s failed (their rc and stderr are in %s)", t.failed, CLI_S(t.failed), out);
        rc = cli_fail(cmd, msg);
    }
    return cli_mpi_finish(&m, rc);
}
