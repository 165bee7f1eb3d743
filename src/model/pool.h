/* pool: the CPU decoder's worker threads, for the parallel loops of a forward pass.
 *
 * An OpenMP region ends when every thread of its team has reached its end. Beside a
 * busy process one of two threads is often off its core, and a region then waits a
 * scheduler slice for a thread that may have had nothing to do: 2 threads ran a
 * pass slower than 1. A loop of this pool ends when its tasks are done, whoever did
 * them: the caller takes tasks like any worker, and a worker that has not woken by
 * then is not waited for. Workers spin briefly after a loop (the next loop of a pass
 * comes within microseconds), then sleep.
 *
 *     static void task(void *ctx, size_t i, int thread) { ... item i, scratch of thread ... }
 *     sd_pool_for(2, n, task, &ctx);   // returns when task(ctx, i, .) has run for every i < n
 */
#ifndef SD_POOL_H
#define SD_POOL_H

#include <stddef.h>

/* Task i of a loop, run by thread `thread` (0 .. threads - 1 of the loop; 0 is the
 * caller): a thread's scratch can be indexed by it. */
typedef void (*sd_pool_task)(void *ctx, size_t i, int thread);

/* Runs task(ctx, i, .) for i = 0 .. n - 1 on up to `threads` threads, the caller
 * among them; returns when all have run. Thread t takes the t-th of `threads` equal
 * runs of consecutive tasks, in order, then helps with the others' from their ends
 * (a thread that is late or off its core holds up only the task it is in). With threads <= 1, from inside an OpenMP region or a task of a
 * loop, or while another caller's loop holds the pool, the caller runs every task
 * itself, in order. Tasks of one loop must not depend on each other. */
void sd_pool_for(int threads, size_t n, sd_pool_task task, void *ctx);

/* Tasks run by the workers (threads 1 and up, not a caller) since the process
 * started: a test reads it to know that a loop did go to the pool. */
size_t sd_pool_worker_tasks(void);

#endif
