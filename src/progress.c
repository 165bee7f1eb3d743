/* progress: reports of long runs, to a callback the program supplies. */
#include "progress.h"

#include <stddef.h>

#include "sd_error.h"

static sd_progress_fn report_fn;
static void *report_ctx;

void sd_progress_set_callback(sd_progress_fn fn, void *ctx)
{
    report_fn = fn, report_ctx = ctx;
}

void sd_progress_start(sd_progress *p, int on, const char *what, const char *unit, double total)
{
    p->on = on, p->what = what, p->unit = unit, p->total = total, p->done = 0;
    p->t0 = p->last = sd_seconds();
}

void sd_progress_add(sd_progress *p, double n)
{
    p->done += n;
    if (!p->on || !report_fn) return;
    double t = sd_seconds();
    if (t - p->last > 1.0) {
        report_fn(p, t - p->t0, 0, report_ctx);
        p->last = t;
    }
}

void sd_progress_end(sd_progress *p)
{
    if (!p->on || !report_fn) return;
    double t = sd_seconds();
    if (t - p->t0 > 1.0) report_fn(p, t - p->t0, 1, report_ctx);
}
