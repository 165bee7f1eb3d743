/* pool: worker threads that take a loop's tasks as they come (pool.h).
 *
 * A loop's tasks are cut into one share a thread: thread t's is the t-th run of
 * consecutive tasks. A thread takes its own share from the front, in order, then what
 * is left of the others' from their backs. So each thread works down a run of
 * neighbouring tasks (for the matrix products, rows next to each other: one stream
 * from memory, which the hardware prefetcher follows), and a thread that is off its
 * core or has not woken holds up at most the task it is in: the others take the rest
 * of its share (handed out one task at a time in turn, two threads' chunks alternated
 * and each thread's reads jumped: KERNELS.md, "Pool: shares").
 *
 * Each share is one word: the loop's sequence number, and the first and the end of
 * the share's tasks not yet claimed. A thread claims a task by moving that word one
 * task on (compare and swap), so the word alone decides who may take what, and a
 * thread reads the loop's function only after a claim has succeeded: until that task
 * is done the caller is waiting and cannot start another loop. A thread that looked
 * at an earlier loop claims nothing from this one: its sequence number differs. The
 * caller waits for the count of tasks done, never for the threads. */
#include "pool.h"

#include <omp.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <time.h>

enum { POOL_MAX = 64 };

/* A worker spins this long for the next loop, then sleeps: the loops of one pass come
 * within microseconds of each other, and the next pass after a sample is drawn or a
 * tree built; a sleeping worker takes a wake-up to come back. After POOL_YIELD_NS
 * the spin yields its core every few microseconds: beside a busy process, a worker that
 * spun for the next loop took the core the caller's serial work needed, and on a quiet
 * machine a yield with nothing else to run returns at once (KERNELS.md, "Pool: spin"). */
#define POOL_SPIN_NS 100000
#define POOL_YIELD_NS 5000
/* The caller, done with its share, spins this long for the tasks still running, then
 * yields its core at each look (the thread it waits for may need it). */
#define POOL_WAIT_NS 20000

/* A share's word: seq (28 bits) | first (18 bits) | end (18 bits), the unclaimed tasks
 * [first, end) of loop seq. A loop of more than TASKS_MAX tasks runs as several.
 * A claim compares the whole word: a thread stopped between its look and its claim
 * for 2^28 loops (minutes) could take a task of a later loop, nothing less can. */
#define SEQ_BITS 28
#define TASK_BITS 18
#define TASK_MASK ((UINT64_C(1) << TASK_BITS) - 1)
#define SEQ_MASK ((UINT64_C(1) << SEQ_BITS) - 1)
#define TASKS_MAX ((size_t)TASK_MASK)

/* Each share's word on a cache line of its own, and the count of tasks done on
 * another: side by side, each claim a thread made of its own share found the line last
 * written by the other thread's claim of its share, and waited for it to come across
 * (KERNELS.md, "Pool: a line a share"). */
typedef struct {
    _Alignas(64) _Atomic uint64_t w;
} share_word;
#define SHARE(s) (P.share[s].w)

static struct {
    _Atomic uint64_t loop; /* the current loop: seq << 8 | threads; the workers wait for it to change */
    share_word share[POOL_MAX];
    _Alignas(64) atomic_size_t done; /* tasks of the current loop that have run */
    atomic_size_t by_workers; /* tasks the workers have run, all loops (sd_pool_worker_tasks) */
    atomic_int sleepers; /* workers asleep (or about to be) on wake */
    atomic_int stop;
    atomic_flag busy;    /* a caller's loop holds the pool */
    sd_pool_task task;   /* the current loop: read only after a claim */
    void *ctx;
    size_t base;
    uint64_t seq;        /* the last loop's number (the caller's, under busy) */
    int n_workers;
    pthread_t tid[POOL_MAX];
    pthread_mutex_t lock;
    pthread_cond_t wake;
} P = {.busy = ATOMIC_FLAG_INIT, .lock = PTHREAD_MUTEX_INITIALIZER, .wake = PTHREAD_COND_INITIALIZER};

static uint64_t share_make(uint64_t seq, size_t first, size_t end)
{
    return (seq & SEQ_MASK) << (2 * TASK_BITS) | (uint64_t)first << TASK_BITS | (uint64_t)end;
}

/* Whether thread `me` takes part in the loop the word describes. */
static int loop_for(uint64_t loop, int me) { return (int)(loop & 0xFF) > me; }

static void cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#endif
}

static int64_t now_ns(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (int64_t)t.tv_sec * 1000000000 + t.tv_nsec;
}

/* Claims a task of share s of loop seq: its first (front) or its last; returns the
 * task, or -1 when the share has none left for that loop. */
static long claim(int s, uint64_t seq, int front)
{
    uint64_t w = atomic_load_explicit(&SHARE(s), memory_order_acquire);
    for (;;) {
        size_t first = (size_t)(w >> TASK_BITS & TASK_MASK), end = (size_t)(w & TASK_MASK);
        if (w >> (2 * TASK_BITS) != (seq & SEQ_MASK) || first >= end) return -1;
        uint64_t to = front ? share_make(seq, first + 1, end) : share_make(seq, first, end - 1);
        if (atomic_compare_exchange_weak_explicit(&SHARE(s), &w, to, memory_order_acq_rel, memory_order_acquire))
            return (long)(front ? first : end - 1);
    }
}

/* Runs tasks of loop `loop` while any is left to thread me: its own share from the
 * front, then the others' from their backs; adds the tasks it ran to done once, when
 * none is left (one atomic a task, not two: the caller waits for the count either
 * way, and a task claimed is run before it). */
static void take(int me, uint64_t loop)
{
    size_t ran = 0;
    uint64_t seq = loop >> 8;
    int threads = (int)(loop & 0xFF);
    for (int k = 0; k < threads; k++) {
        int s = (me + k) % threads;
        for (long i; (i = claim(s, seq, k == 0)) >= 0; ran++) P.task(P.ctx, P.base + (size_t)i, me);
    }
    if (!ran) return;
    /* counted before done: a caller that has seen its loop done sees the count */
    if (me) atomic_fetch_add_explicit(&P.by_workers, ran, memory_order_relaxed);
    atomic_fetch_add_explicit(&P.done, ran, memory_order_release);
}

static void *worker(void *arg)
{
    int me = (int)(intptr_t)arg;
    uint64_t seen = atomic_load(&P.loop), loop = seen; /* a loop begun before this worker is not its */
    for (;;) {
        int64_t t0 = now_ns();
#define NEW_LOOP() ((loop = atomic_load(&P.loop)) != seen && loop_for(loop, me))
        for (unsigned k = 1; !NEW_LOOP() && !atomic_load(&P.stop); k++) {
            if (k % 256) {
                cpu_relax();
                continue;
            }
            int64_t spun = now_ns() - t0;
            if (spun <= POOL_SPIN_NS) {
                if (spun > POOL_YIELD_NS) sched_yield();
                continue;
            }
            pthread_mutex_lock(&P.lock); /* no loop came: sleep until one does */
            atomic_fetch_add(&P.sleepers, 1); /* before the look below: see sd_pool_for */
            while (!NEW_LOOP() && !atomic_load(&P.stop)) pthread_cond_wait(&P.wake, &P.lock);
            atomic_fetch_sub(&P.sleepers, 1);
            pthread_mutex_unlock(&P.lock);
        }
#undef NEW_LOOP
        if (atomic_load(&P.stop)) return NULL;
        seen = loop;
        take(me, loop);
    }
}

static void pool_stop(void)
{
    atomic_store(&P.stop, 1);
    pthread_mutex_lock(&P.lock);
    pthread_cond_broadcast(&P.wake);
    pthread_mutex_unlock(&P.lock);
    for (int i = 0; i < P.n_workers; i++) pthread_join(P.tid[i], NULL);
    P.n_workers = 0;
}

/* Around a fork the caller holds the lock (a worker going to sleep holds it for a
 * moment, and a child would find it held forever). The child has the caller's
 * thread only: no workers, and none asleep on the condition variable (a broadcast
 * to the parent's sleepers waited for them forever). */
static void pool_fork_prepare(void) { pthread_mutex_lock(&P.lock); }

static void pool_fork_parent(void) { pthread_mutex_unlock(&P.lock); }

static void pool_fork_child(void)
{
    pthread_mutex_unlock(&P.lock);
    pthread_cond_init(&P.wake, NULL);
    atomic_store(&P.sleepers, 0);
    P.n_workers = 0;
    atomic_flag_clear(&P.busy);
}

/* Starts workers until `threads` threads (the caller's counted) can run a loop;
 * returns how many can. */
static int pool_grow(int threads)
{
    if (!P.n_workers && threads > 1) {
        atexit(pool_stop);
        pthread_atfork(pool_fork_prepare, pool_fork_parent, pool_fork_child);
    }
    while (P.n_workers + 1 < threads &&
           !pthread_create(&P.tid[P.n_workers], NULL, worker, (void *)(intptr_t)(P.n_workers + 1)))
        P.n_workers++;
    return P.n_workers + 1 < threads ? P.n_workers + 1 : threads;
}

void sd_pool_for(int threads, size_t n, sd_pool_task task, void *ctx)
{
    if (threads > POOL_MAX) threads = POOL_MAX;
    if (threads <= 1 || n <= 1 || omp_in_parallel() || atomic_flag_test_and_set(&P.busy)) {
        for (size_t i = 0; i < n; i++) task(ctx, i, 0);
        return;
    }
    threads = pool_grow(threads);
    for (size_t base = 0; base < n; base += TASKS_MAX) {
        size_t m = n - base < TASKS_MAX ? n - base : TASKS_MAX;
        P.task = task, P.ctx = ctx, P.base = base;
        atomic_store_explicit(&P.done, 0, memory_order_relaxed);
        uint64_t seq = ++P.seq, loop = seq << 8 | (uint64_t)threads;
        for (int t = 0; t < threads; t++)
            atomic_store_explicit(&SHARE(t), share_make(seq, m * (size_t)t / (size_t)threads, m * (size_t)(t + 1) / (size_t)threads),
                                  memory_order_release);
        /* publish, then look for sleepers: a worker counts itself asleep before its
         * last look at the loop, so one of the two sees the other */
        atomic_store(&P.loop, loop);
        if (atomic_load(&P.sleepers)) {
            pthread_mutex_lock(&P.lock);
            pthread_cond_broadcast(&P.wake);
            pthread_mutex_unlock(&P.lock);
        }
        take(0, loop);
        int64_t t0 = 0;
        for (unsigned k = 1; atomic_load_explicit(&P.done, memory_order_acquire) < m; k++)
            if (k % 64) cpu_relax();
            else if (!t0) t0 = now_ns();
            else if (now_ns() - t0 > POOL_WAIT_NS) sched_yield();
    }
    atomic_flag_clear(&P.busy);
}

size_t sd_pool_worker_tasks(void) { return atomic_load(&P.by_workers); }
