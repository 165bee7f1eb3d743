#include "exec.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "sd_error.h"

struct sd_exec {
    pid_t pid;
    int to_child, from_child; /* our ends: write, read (non-blocking) */
    double timeout;
    size_t vocab, k;
    char *out;                /* pending bytes to write */
    size_t out_len, out_cap, out_pos;
    char in[65536];           /* bytes read, not yet a whole line */
    size_t in_len;
    char status[160];         /* how the program ended */
};

static void out_reserve(sd_exec *x, size_t more)
{
    if (x->out_len + more <= x->out_cap) return;
    size_t cap = x->out_cap ? x->out_cap : 4096;
    while (cap < x->out_len + more) cap *= 2;
    x->out = sd_xrealloc(x->out, cap);
    x->out_cap = cap;
}

static void out_printf(sd_exec *x, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void out_printf(sd_exec *x, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    out_reserve(x, 64);
    int n = vsnprintf(x->out + x->out_len, x->out_cap - x->out_len, fmt, ap);
    va_end(ap);
    if (n >= 0 && (size_t)n >= x->out_cap - x->out_len) {
        out_reserve(x, (size_t)n + 1);
        va_start(ap, fmt);
        vsnprintf(x->out + x->out_len, x->out_cap - x->out_len, fmt, ap);
        va_end(ap);
    }
    if (n > 0) x->out_len += (size_t)n;
}

/* Records how the program ended (reaps it if it did). */
static void note_exit(sd_exec *x)
{
    int st;
    if (x->pid <= 0 || x->status[0]) return;
    for (int i = 0; i < 50; i++) { /* up to 0.5 s for a closed pipe to become an exit */
        pid_t r = waitpid(x->pid, &st, WNOHANG);
        if (r == x->pid) {
            x->pid = -1;
            if (WIFEXITED(st)) snprintf(x->status, sizeof x->status, "exited with status %d", WEXITSTATUS(st));
            else if (WIFSIGNALED(st))
                snprintf(x->status, sizeof x->status, "killed by signal %d (%s)", WTERMSIG(st),
                         strsignal(WTERMSIG(st)));
            return;
        }
        if (r < 0) break;
        struct timespec ts = {0, 10000000};
        nanosleep(&ts, NULL);
    }
    snprintf(x->status, sizeof x->status, "still running");
}

/* write() with SIGPIPE blocked and any pending SIGPIPE consumed: a program that closed
 * its input gives EPIPE here, not a signal that ends specdec. */
static ssize_t write_nosig(int fd, const void *buf, size_t len)
{
    sigset_t pipe_set, old;
    sigemptyset(&pipe_set);
    sigaddset(&pipe_set, SIGPIPE);
    pthread_sigmask(SIG_BLOCK, &pipe_set, &old);
    ssize_t w = write(fd, buf, len);
    int err = errno;
    if (w < 0 && err == EPIPE) {
        struct timespec zero = {0, 0};
        while (sigtimedwait(&pipe_set, NULL, &zero) > 0) {}
    }
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    errno = err;
    return w;
}

int sd_exec_start(sd_exec **out, const char *command, double timeout_s)
{
    *out = NULL;
    if (!command || !*command) return sd_error(SD_EINVAL, "--exec: empty command");
    if (!(timeout_s > 0)) return sd_error(SD_EINVAL, "exec: time limit %g is not positive", timeout_s);
    int in_pipe[2], out_pipe[2];
    if (pipe(in_pipe)) return sd_error(SD_EIO, "exec: pipe: %s", strerror(errno));
    if (pipe(out_pipe)) {
        close(in_pipe[0]), close(in_pipe[1]);
        return sd_error(SD_EIO, "exec: pipe: %s", strerror(errno));
    }
    fflush(NULL); /* the child must not write our buffered output again */
    pid_t pid = fork();
    if (pid < 0) {
        close(in_pipe[0]), close(in_pipe[1]), close(out_pipe[0]), close(out_pipe[1]);
        return sd_error(SD_EIO, "exec: fork: %s", strerror(errno));
    }
    if (pid == 0) {
        setpgid(0, 0);
        dup2(in_pipe[0], 0);
        dup2(out_pipe[1], 1);
        close(in_pipe[0]), close(in_pipe[1]), close(out_pipe[0]), close(out_pipe[1]);
        signal(SIGPIPE, SIG_DFL);
        execl("/bin/sh", "sh", "-c", command, (char *)NULL);
        _exit(127);
    }
    setpgid(pid, pid); /* both sides, whichever runs first */
    close(in_pipe[0]);
    close(out_pipe[1]);
    sd_exec *x = sd_xcalloc(1, sizeof *x);
    x->pid = pid;
    x->to_child = in_pipe[1];
    x->from_child = out_pipe[0];
    x->timeout = timeout_s;
    fcntl(x->to_child, F_SETFL, fcntl(x->to_child, F_GETFL) | O_NONBLOCK);
    fcntl(x->from_child, F_SETFL, fcntl(x->from_child, F_GETFL) | O_NONBLOCK);
    fcntl(x->to_child, F_SETFD, FD_CLOEXEC);
    fcntl(x->from_child, F_SETFD, FD_CLOEXEC);
    out_printf(x, "specdec-exec %d\n", SD_EXEC_VERSION);
    *out = x;
    return SD_OK;
}

int sd_exec_pair(sd_exec *x, size_t vocab, size_t k, const char *scheme, unsigned long seed,
                 const double *draft, const double *target)
{
    x->vocab = vocab;
    x->k = k;
    out_printf(x, "pair %zu %zu %s %lu\ndraft", vocab, k, scheme, seed);
    for (size_t i = 0; i < vocab; i++) out_printf(x, " %.17g", draft[i]);
    out_printf(x, "\ntarget");
    for (size_t i = 0; i < vocab; i++) out_printf(x, " %.17g", target[i]);
    out_printf(x, "\n");
    return SD_OK; /* sent with the next cases */
}

/* Parses one answer line for case c; SD_EFORMAT naming it on garbage. */
static int parse_answer(sd_exec *x, const char *line, const size_t *drafts, size_t c,
                        size_t *token, unsigned char *accepted)
{
    char *end;
    errno = 0;
    long long t = strtoll(line, &end, 10);
    int ok = end != line && errno == 0 && t >= 0 && (size_t)t < x->vocab && *end == ' ';
    long a = ok ? strtol(end + 1, &end, 10) : -1;
    while (ok && (*end == ' ' || *end == '\r')) end++;
    if (!ok || !(a == 0 || a == 1) || *end)
        return sd_error(SD_EFORMAT,
                        "the program answered '%.60s' to case %zu: expected 'TOKEN ACCEPTED' with "
                        "TOKEN in 0..%zu and ACCEPTED 0 or 1", line, c + 1, x->vocab - 1);
    if (a == 1) {
        size_t j = 0;
        while (j < x->k && drafts[c * x->k + j] != (size_t)t) j++;
        if (j == x->k)
            return sd_error(SD_EFORMAT,
                            "the program answered '%.60s' to case %zu: token %lld is marked "
                            "accepted but is none of the case's %zu drafts", line, c + 1, t, x->k);
    }
    *token = (size_t)t;
    *accepted = (unsigned char)a;
    return SD_OK;
}

/* Takes whole lines out of x->in as answers; returns a status. */
static int take_lines(sd_exec *x, const size_t *drafts, size_t n, size_t *tokens,
                      unsigned char *accepted, size_t *done)
{
    size_t start = 0;
    for (;;) {
        char *nl = memchr(x->in + start, '\n', x->in_len - start);
        if (!nl) break;
        *nl = 0;
        if (*done >= n)
            return sd_error(SD_EFORMAT, "the program wrote '%.60s' after its %zu answers: one "
                            "line per case, nothing else", x->in + start, n);
        int rc = parse_answer(x, x->in + start, drafts, *done, &tokens[*done], &accepted[*done]);
        if (rc) return rc;
        ++*done;
        start = (size_t)(nl - x->in) + 1;
    }
    memmove(x->in, x->in + start, x->in_len - start);
    x->in_len -= start;
    if (x->in_len == sizeof x->in) {
        x->in[40] = 0;
        return sd_error(SD_EFORMAT, "the program wrote a line over %zu bytes ('%s...') for case "
                        "%zu", sizeof x->in, x->in, *done + 1);
    }
    return SD_OK;
}

static int ended(sd_exec *x, size_t done, size_t n, const char *what)
{
    note_exit(x);
    return sd_error(SD_EIO, "the program %s after %zu of %zu answers (%s)", what, done, n,
                    x->status);
}

int sd_exec_cases(sd_exec *x, const size_t *drafts, size_t n, size_t *tokens,
                  unsigned char *accepted, size_t *done)
{
    *done = 0;
    for (size_t c = 0; c < n; c++) {
        out_reserve(x, 8 + 21 * x->k);
        memcpy(x->out + x->out_len, "case", 4);
        x->out_len += 4;
        for (size_t j = 0; j < x->k; j++)
            x->out_len += (size_t)sprintf(x->out + x->out_len, " %zu", drafts[c * x->k + j]);
        x->out[x->out_len++] = '\n';
    }
    out_printf(x, "flush\n");
    double last = sd_seconds();
    while (*done < n) {
        struct pollfd fds[2] = {{x->from_child, POLLIN, 0}, {x->to_child, POLLOUT, 0}};
        int nfds = x->out_pos < x->out_len ? 2 : 1;
        double left = x->timeout - (sd_seconds() - last);
        if (left <= 0) {
            if (x->pid > 0) kill(-x->pid, SIGKILL);
            return sd_error(SD_EIO, "the program gave no answer for %g s (the time limit per "
                            "answer) after %zu of %zu answers: killed", x->timeout, *done, n);
        }
        int pr = poll(fds, (nfds_t)nfds, (int)(left * 1000) + 1);
        if (pr < 0 && errno == EINTR) continue;
        if (pr < 0) return sd_error(SD_EIO, "exec: poll: %s", strerror(errno));
        if (nfds == 2 && (fds[1].revents & (POLLOUT | POLLERR | POLLHUP))) {
            ssize_t w = write_nosig(x->to_child, x->out + x->out_pos, x->out_len - x->out_pos);
            if (w < 0 && errno == EPIPE) return ended(x, *done, n, "closed its input");
            if (w < 0 && errno != EAGAIN && errno != EINTR)
                return sd_error(SD_EIO, "exec: write: %s", strerror(errno));
            if (w > 0) x->out_pos += (size_t)w;
            if (x->out_pos == x->out_len) x->out_pos = x->out_len = 0;
        }
        if (fds[0].revents & (POLLIN | POLLHUP | POLLERR)) {
            ssize_t r = read(x->from_child, x->in + x->in_len, sizeof x->in - x->in_len);
            if (r == 0) return ended(x, *done, n, "closed its output");
            if (r < 0 && errno != EAGAIN && errno != EINTR)
                return sd_error(SD_EIO, "exec: read: %s", strerror(errno));
            if (r > 0) {
                size_t before = *done;
                x->in_len += (size_t)r;
                int rc = take_lines(x, drafts, n, tokens, accepted, done);
                if (rc) return rc;
                if (*done > before) last = sd_seconds();
            }
        }
    }
    return SD_OK;
}


void sd_exec_stop(sd_exec *x)
{
    if (!x) return;
    close(x->to_child);
    close(x->from_child);
    if (x->pid > 0) {
        int st;
        pid_t r = 0;
        for (int i = 0; i < 100 && (r = waitpid(x->pid, &st, WNOHANG)) == 0; i++) {
            struct timespec ts = {0, 10000000};
            nanosleep(&ts, NULL);
        }
        if (r == 0) {
            kill(-x->pid, SIGKILL);
            waitpid(x->pid, &st, 0);
        }
    }
    free(x->out);
    free(x);
}
