/* progress: how a long run tells how far it is, without printing (only main prints).
 *
 * An engine keeps an sd_progress, calls sd_progress_add() as work is done (under a
 * lock if its threads share it) and sd_progress_end() once. For runs over a second,
 * at most once a second and once at the end, the report goes to the callback set
 * with sd_progress_set_callback(); with none set, nothing happens.
 *
 *   sd_progress_set_callback(print_progress_line, NULL);   // in main
 *   sd_progress p;
 *   sd_progress_start(&p, 1, "mc", "trials", 1e9);
 *   ... sd_progress_add(&p, n) ...
 *   sd_progress_end(&p);
 */
#ifndef SD_PROGRESS_H
#define SD_PROGRESS_H

typedef struct {
    int on;                   /* 0: this run reports nothing */
    const char *what, *unit;  /* "mc", "trials" */
    double total, done;       /* units of work */
    double t0, last;          /* sd_seconds() at start and at the last report */
} sd_progress;

/* A report: done of total units after seconds; final is 1 for the closing one. */
typedef void (*sd_progress_fn)(const sd_progress *p, double seconds, int final, void *ctx);

/* The process's receiver of reports (NULL: none). Set once, before runs start. */
void sd_progress_set_callback(sd_progress_fn fn, void *ctx);

void sd_progress_start(sd_progress *p, int on, const char *what, const char *unit, double total);
void sd_progress_add(sd_progress *p, double n);
void sd_progress_end(sd_progress *p);

#endif
