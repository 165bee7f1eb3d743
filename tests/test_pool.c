/* Tests of src/model/pool: every task of a loop runs once, on a thread the loop
 * allows; loops from inside a task, an OpenMP region or another caller's loop run on
 * their caller; the workers do take tasks; a forked child and its exit do not wait
 * for the parent's workers; and a forward pass on the pool's threads gives the bits
 * of one thread. */
#include "support.h"

#include <omp.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "model/pool.h"
#include "sd_error.h"

typedef struct {
    atomic_int *count; /* [n] times each task ran */
    atomic_int by[8];  /* tasks run by each thread */
    int threads;       /* the loop's */
    atomic_int bad;    /* a task saw a thread index past the loop's */
    long spin_ns;      /* each task's work */
} loop_ctx;

static void spin_for(long ns)
{
    struct timespec t0, t;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    do clock_gettime(CLOCK_MONOTONIC, &t);
    while ((t.tv_sec - t0.tv_sec) * 1000000000L + (t.tv_nsec - t0.tv_nsec) < ns);
}

static void count_task(void *ctx, size_t i, int thread)
{
    loop_ctx *c = ctx;
    atomic_fetch_add(&c->count[i], 1);
    if (thread < 0 || thread >= (c->threads > 1 ? c->threads : 1) || thread >= 8) atomic_store(&c->bad, 1);
    else atomic_fetch_add(&c->by[thread], 1);
    if (c->spin_ns) spin_for(c->spin_ns);
}

/* Runs a loop of n tasks on `threads`; returns whether each ran once on an allowed
 * thread (no assertion: it also runs inside tasks, on workers, where cmocka's
 * failures must not be raised). */
static int count_loop(int threads, size_t n, long spin_ns, int *by_workers)
{
    loop_ctx c;
    memset(&c, 0, sizeof c);
    c.count = calloc(n ? n : 1, sizeof *c.count);
    c.threads = threads, c.spin_ns = spin_ns;
    sd_pool_for(threads, n, count_task, &c);
    int ok = !atomic_load(&c.bad), total = 0;
    for (size_t i = 0; i < n; i++) ok &= atomic_load(&c.count[i]) == 1;
    for (int t = 0; t < 8; t++) total += atomic_load(&c.by[t]);
    ok &= total == (int)n;
    if (by_workers) *by_workers = total - atomic_load(&c.by[0]);
    free(c.count);
    return ok;
}

static void run_counted(int threads, size_t n, long spin_ns, int *by_workers)
{
    if (!count_loop(threads, n, spin_ns, by_workers))
        fail_msg("a loop of %zu tasks on %d threads: a task ran other than once, or on a thread past the loop's", n,
                 threads);
}

static void test_pool_each_task_once(void **state)
{
    (void)state;
    static const size_t ns[] = {0, 1, 2, 3, 7, 64, 1000, 100000, 600000}; /* the last: three loops of shares */
    static const int threads[] = {0, 1, 2, 3, 5};
    for (size_t a = 0; a < sizeof ns / sizeof *ns; a++)
        for (size_t b = 0; b < sizeof threads / sizeof *threads; b++) {
            int by_workers;
            run_counted(threads[b], ns[a], 0, &by_workers);
            if (threads[b] <= 1) assert_int_equal(by_workers, 0); /* the caller alone */
        }
}

/* With tasks long enough (20 us each), a worker takes some of a loop's: the pool runs
 * in parallel, it does not only fall back to its caller. */
static void test_pool_workers_take_tasks(void **state)
{
    (void)state;
    int by_workers = 0;
    for (int attempt = 0; attempt < 50 && !by_workers; attempt++) run_counted(2, 200, 20000, &by_workers);
    assert_true(by_workers > 0);
}

/* A loop from inside a task runs on the task's thread, as thread 0. The outer task
 * may run on a worker: it records what it saw (bad), the caller asserts. */
static void nested_task(void *ctx, size_t i, int thread)
{
    (void)thread;
    loop_ctx *outer = ctx;
    int by_workers = -1;
    if (!count_loop(2, 9, 0, &by_workers) || by_workers != 0) atomic_store(&outer->bad, 1);
    atomic_fetch_add(&outer->count[i], 1);
}

static void test_pool_nested_and_openmp(void **state)
{
    (void)state;
    atomic_int count[16];
    loop_ctx c;
    memset(&c, 0, sizeof c);
    for (int i = 0; i < 16; i++) atomic_init(&count[i], 0);
    c.count = count;
    sd_pool_for(2, 16, nested_task, &c);
    for (int i = 0; i < 16; i++) assert_int_equal(atomic_load(&count[i]), 1);
    if (atomic_load(&c.bad)) fail_msg("a loop from inside a task was not whole, or not on the task's thread");
    /* from every thread of an OpenMP region: each loop on its caller */
    int failed = 0;
#pragma omp parallel num_threads(2) reduction(+ : failed)
    {
        loop_ctx d;
        memset(&d, 0, sizeof d);
        d.count = calloc(300, sizeof *d.count);
        d.threads = 1; /* only thread 0 may appear */
        sd_pool_for(2, 300, count_task, &d);
        for (int i = 0; i < 300; i++) failed += atomic_load(&d.count[i]) != 1;
        failed += atomic_load(&d.bad);
        free(d.count);
    }
    assert_int_equal(failed, 0);
}

/* Two callers at once: one holds the pool, the other runs its loops itself; every
 * loop of both is whole. */
static void *caller(void *arg)
{
    atomic_int *failed = arg;
    for (int rep = 0; rep < 300; rep++) {
        loop_ctx c;
        memset(&c, 0, sizeof c);
        c.count = calloc(257, sizeof *c.count);
        c.threads = 3;
        sd_pool_for(3, 257, count_task, &c);
        for (int i = 0; i < 257; i++)
            if (atomic_load(&c.count[i]) != 1) atomic_store(failed, 1);
        if (atomic_load(&c.bad)) atomic_store(failed, 1);
        free(c.count);
    }
    return NULL;
}

static void test_pool_two_callers(void **state)
{
    (void)state;
    atomic_int failed;
    atomic_init(&failed, 0);
    pthread_t t[2];
    for (int i = 0; i < 2; i++) assert_int_equal(pthread_create(&t[i], NULL, caller, &failed), 0);
    for (int i = 0; i < 2; i++) pthread_join(t[i], NULL);
    assert_int_equal(atomic_load(&failed), 0);
}

/* A child forked after the workers started (some asleep) has none of them: its
 * loops run whole (on workers of its own), and neither its wake-ups nor its exit
 * (which stops the pool) wait for the parent's threads. */
static void test_pool_fork(void **state)
{
    (void)state;
    if (getenv("SPECDEC_TEST_QEMU")) { /* set by tests/run-arm.sh */
        print_message("test_pool_fork: skipped: qemu-user (7.2) aborts on its own assertion when a forked "
                      "child of a threaded program starts threads\n");
        skip();
    }
    run_counted(2, 100, 0, NULL); /* the workers exist */
    struct timespec nap = {0, 3000000};
    nanosleep(&nap, NULL); /* and are asleep (after 0.1 ms without a loop) */
    pid_t p = fork();
    assert_true(p >= 0);
    if (p == 0) {
        alarm(5);
        loop_ctx c;
        memset(&c, 0, sizeof c);
        c.count = calloc(500, sizeof *c.count);
        c.threads = 2;
        sd_pool_for(2, 500, count_task, &c);
        int ok = !atomic_load(&c.bad);
        for (int i = 0; i < 500; i++) ok &= atomic_load(&c.count[i]) == 1;
        exit(ok ? 0 : 3);
    }
    int st;
    assert_int_equal(waitpid(p, &st, 0), p);
    if (!WIFEXITED(st)) fail_msg("the child did not exit (signal %d)", WIFSIGNALED(st) ? WTERMSIG(st) : 0);
    assert_int_equal(WEXITSTATUS(st), 0);
}

/* A prompt of 34 (its attention: 34 x 4 heads x 34 keys, past the 4096 at which it
 * goes to the pool), then 6 tokens one at a time, on `threads`; returns the tasks the
 * pool's workers ran meanwhile. */
enum { FWD_N = 40, FWD_PROMPT = 34, FWD_VOCAB = 300 };
static size_t forward_on(const sd_llama *w, const int32_t *seq, int threads, float *out)
{
    sd_kv *kv;
    assert_int_equal(sd_kv_alloc(w, FWD_N, &kv), SD_OK);
    omp_set_num_threads(threads);
    size_t before = sd_pool_worker_tasks();
    assert_int_equal(sd_llama_forward(w, kv, seq, FWD_PROMPT, NULL, NULL, out, NULL), SD_OK);
    for (size_t t = FWD_PROMPT; t < FWD_N; t++)
        assert_int_equal(sd_llama_forward(w, kv, seq + t, 1, NULL, NULL, out + t * FWD_VOCAB, NULL), SD_OK);
    sd_kv_free(kv);
    return sd_pool_worker_tasks() - before;
}

/* A forward pass whose products and attention are large enough for the pool (2^18
 * multiply-adds and more) gives, on 2 threads, the bits of 1 thread, for every weight
 * type (BF16's rows are expanded into each thread's own scratch row). On a busy
 * machine a worker may wake too late to take any task of a pass: the 2-thread passes
 * run again (each compared) until the workers have run 2000 of their tasks, 200 times
 * at most, and fail if they ran none. */
static void test_pool_forward_bits(void **state)
{
    (void)state;
    sd_llama_config c = {.n_vocab = FWD_VOCAB, .dim = 128, .n_layer = 2, .n_head = 4, .n_head_kv = 2,
                         .head_dim = 32, .ffn_dim = 384, .ctx_len = 128, .rms_eps = 1e-5f, .rope_base = 10000.0f};
    sd_llama *m;
    assert_int_equal(sd_llama_alloc(&c, 0, &m), SD_OK);
    unsigned long s = 2385;
    for (size_t i = 0; i < m->n_params; i++) {
        s = s * 6364136223846793005ul + 1442695040888963407ul;
        m->params[i] = (float)((double)(s >> 11) / 9007199254740992.0 - 0.5) * 0.2f;
    }
    int32_t seq[FWD_N];
    for (size_t i = 0; i < FWD_N; i++) seq[i] = (int32_t)((i * 37 + 11) % FWD_VOCAB);
    static float one[FWD_N * FWD_VOCAB], two[FWD_N * FWD_VOCAB];
    static const sd_ttype types[] = {SD_T_F32, SD_T_F16, SD_T_BF16, SD_T_Q8_0, SD_T_Q4_0, SD_T_Q5_1};
    for (size_t k = 0; k < sizeof types / sizeof *types; k++) {
        sd_llama *w = m;
        const char *name = sd_ttype_name(types[k]);
        if (types[k] != SD_T_F32) assert_int_equal(sd_llama_convert(m, types[k], &w), SD_OK);
        assert_int_equal(forward_on(w, seq, 1, one), 0);
        size_t by_workers = 0;
        for (int attempt = 0; attempt < 200 && by_workers < 2000; attempt++) {
            by_workers += forward_on(w, seq, 2, two);
            if (memcmp(one, two, sizeof one)) fail_msg("%s: 2 threads' logits differ from 1 thread's", name);
        }
        print_message("%s: %zu tasks ran on a worker\n", name, by_workers);
        if (!by_workers) fail_msg("%s on 2 threads: no task of 200 forward passes ran on a worker", name);
        if (w != m) sd_llama_free(w);
    }
    sd_llama_free(m);
}

int main(void)
{
    /* every pass on all the threads asked for: no timing policy in between */
    setenv("SPECDEC_FIXED_THREADS", "1", 1);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_pool_each_task_once),
        cmocka_unit_test(test_pool_workers_take_tasks),
        cmocka_unit_test(test_pool_nested_and_openmp),
        cmocka_unit_test(test_pool_two_callers),
        cmocka_unit_test(test_pool_fork),
        cmocka_unit_test(test_pool_forward_bits),
    };
    return cmocka_run_group_tests_name("pool", tests, NULL, NULL);
}
