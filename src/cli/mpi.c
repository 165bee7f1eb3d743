/* mpi: the MPI side of specdec (see mpi.h). Everything that calls MPI is between
 * #ifdef SD_MPI and its #else; the #else holds the stubs of the plain build. */
#include "mpi.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "sd_error.h"

void cli_mpi_range(const cli_mpi *m, size_t n, size_t *first, size_t *end)
{
    size_t r = m->on ? (size_t)m->rank : 0, s = m->on ? (size_t)m->size : 1;
    /* floor(n r / s), without overflowing n r */
    *first = n / s * r + n % s * r / s;
    *end = n / s * (r + 1) + n % s * (r + 1) / s;
}

/* Launched by mpirun or srun as one of several processes (the variables Open MPI,
 * PMIx and PMI-2 set), and not a sweep's cell. */
static int launched(void)
{
    if (getenv("SPECDEC_NO_MPI")) return 0;
    return getenv("OMPI_COMM_WORLD_SIZE") || getenv("PMIX_RANK") || getenv("PMI_RANK");
}

int cli_mpi_launch_rank(void)
{
#ifdef SD_MPI
    if (!launched()) return -1;
    const char *const vars[] = {"OMPI_COMM_WORLD_RANK", "PMIX_RANK", "PMI_RANK"};
    for (size_t i = 0; i < sizeof vars / sizeof *vars; i++)
        if (getenv(vars[i])) return atoi(getenv(vars[i]));
#endif
    return -1; /* a build without MPI: each rank is on its own, and says why it stops */
}

static int refuse_in_cell(int want, const char *cmd)
{
    if (want && getenv("SPECDEC_NO_MPI"))
        return cli_usage(cmd, "--mpi in a sweep's cell: cells run as single processes (give "
                              "--mpi to the sweep)");
    return CLI_OK;
}

#ifdef SD_MPI

#include <limits.h>
#include <mpi.h>
#ifdef _OPENMP
#include <omp.h>
#endif

static const char *mpi_cmd = "mpi";

int cli_mpi_start(cli_mpi *m, int want, const char *cmd)
{
    memset(m, 0, sizeof *m);
    m->size = 1;
    int rc = refuse_in_cell(want, cmd);
    if (rc || (!want && !launched())) return rc;
    int provided, inited;
    MPI_Initialized(&inited);
    /* OpenMP threads compute; only the main thread calls MPI */
    if (!inited && MPI_Init_thread(NULL, NULL, MPI_THREAD_FUNNELED, &provided) != MPI_SUCCESS)
        return cli_fail(cmd, "MPI_Init failed");
    MPI_Comm_rank(MPI_COMM_WORLD, &m->rank);
    MPI_Comm_size(MPI_COMM_WORLD, &m->size);
    m->on = 1;
    mpi_cmd = cmd;
    if (m->rank > 0) { /* rank 0 prints, for every rank */
        cli_quiet = 1;
        if (!freopen("/dev/null", "w", stdout)) { /* then stdout is closed: as quiet */ }
    }
    return CLI_OK;
}

/* Status: SD codes are negative, CLI codes positive; the message goes with it. */
typedef struct {
    int code;
    char msg[1000];
} failure;

int cli_mpi_agree(cli_mpi *m, int status)
{
    if (!m->on || m->ended) return status;
    int mine = status ? m->rank : m->size, lowest;
    MPI_Allreduce(&mine, &lowest, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
    if (lowest == m->size) return SD_OK;
    failure f;
    memset(&f, 0, sizeof f);
    if (m->rank == lowest) {
        f.code = status;
        snprintf(f.msg, sizeof f.msg, "%s", status < 0 ? sd_errmsg() : cli_last_error());
    }
    MPI_Bcast(&f, (int)sizeof f, MPI_BYTE, lowest, MPI_COMM_WORLD);
    m->ended = 1;
    if (m->rank == lowest) return status; /* its own message stands */
    return sd_error(f.code < 0 ? f.code : SD_EINVAL, "rank %d: %s", lowest, f.msg);
}

int cli_mpi_finish(cli_mpi *m, int rc)
{
    if (!m->on) return rc;
    int was_ended = m->ended, all = cli_mpi_agree(m, rc);
    if (all && !rc) { /* another rank failed: rank 0 says which and why */
        if (!was_ended) cli_fail(mpi_cmd, sd_errmsg());
        rc = CLI_FAIL;
    }
    fflush(stdout);
    MPI_Finalize();
    m->on = 0;
    return rc;
}

static int reduce_sum(void *ctx, double *sums, size_t n, int status)
{
    cli_mpi *m = ctx;
    int rc = cli_mpi_agree(m, status);
    if (rc) return rc;
    /* whole numbers below 2^53: the sum is exact whatever order MPI adds in */
    for (size_t at = 0; at < n;) {
        int part = n - at > (size_t)1 << 28 ? 1 << 28 : (int)(n - at);
        MPI_Allreduce(MPI_IN_PLACE, sums + at, part, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
        at += (size_t)part;
    }
    return SD_OK;
}

void cli_mpi_mc(cli_mpi *m, sd_mc_params *mp)
{
    if (!m->on) return;
    mp->chunk_first = (size_t)m->rank;
    mp->chunk_step = (size_t)m->size;
    mp->reduce = reduce_sum;
    mp->reduce_ctx = m;
    if (m->rank > 0) mp->progress = 0;
#ifdef _OPENMP
    /* mpirun binds each rank to one core by default (up to 2 ranks; to a socket beyond):
     * threads beyond the cores a rank may use only take turns */
    if (m->rank == 0 && mp->threads > omp_get_num_procs())
        fprintf(stderr, "specdec: --threads %d on %d core%s (this rank's binding): give mpirun "
                        "--bind-to none or --map-by slot:PE=%d\n", mp->threads,
                omp_get_num_procs(), omp_get_num_procs() == 1 ? "" : "s", mp->threads);
#endif
}

int cli_mpi_allgather(cli_mpi *m, const double *mine, double *all, size_t n, size_t width,
                      int status)
{
    size_t first, end;
    cli_mpi_range(m, n, &first, &end);
    if (!m->on) {
        if (status == SD_OK) memcpy(all, mine, (end - first) * width * sizeof *all);
        return status;
    }
    int rc = cli_mpi_agree(m, status);
    if (rc) return rc;
    if (n > INT_MAX || width > INT_MAX) return sd_error(SD_ERANGE, "%zu items are too many for MPI", n);
    MPI_Datatype item;
    MPI_Type_contiguous((int)width, MPI_DOUBLE, &item);
    MPI_Type_commit(&item);
    int *counts = sd_xmalloc(2 * (size_t)m->size * sizeof *counts), *displs = counts + m->size;
    cli_mpi tmp = *m;
    for (int r = 0; r < m->size; r++) {
        size_t f, e;
        tmp.rank = r;
        cli_mpi_range(&tmp, n, &f, &e);
        counts[r] = (int)(e - f), displs[r] = (int)f;
    }
    MPI_Allgatherv(mine, counts[m->rank], item, all, counts, displs, item, MPI_COMM_WORLD);
    MPI_Type_free(&item);
    free(counts);
    return SD_OK;
}

int cli_mpi_send(cli_mpi *m, int to, int tag, const void *buf, size_t len)
{
    (void)m;
    if (len > INT_MAX) return sd_error(SD_ERANGE, "a message of %zu bytes is too long", len);
    return MPI_Send(buf, (int)len, MPI_BYTE, to, tag, MPI_COMM_WORLD) == MPI_SUCCESS
               ? SD_OK : sd_error(SD_EIO, "MPI_Send to rank %d failed", to);
}

int cli_mpi_poll(cli_mpi *m, int from, int *src, int *tag, size_t *len)
{
    (void)m;
    int flag = 0, count;
    MPI_Status st;
    MPI_Iprobe(from < 0 ? MPI_ANY_SOURCE : from, MPI_ANY_TAG, MPI_COMM_WORLD, &flag, &st);
    if (!flag) return 0;
    MPI_Get_count(&st, MPI_BYTE, &count);
    *src = st.MPI_SOURCE, *tag = st.MPI_TAG, *len = (size_t)count;
    return 1;
}

int cli_mpi_recv(cli_mpi *m, int src, int tag, void *buf, size_t len)
{
    (void)m;
    return MPI_Recv(buf, (int)len, MPI_BYTE, src, tag, MPI_COMM_WORLD, MPI_STATUS_IGNORE) == MPI_SUCCESS
               ? SD_OK : sd_error(SD_EIO, "MPI_Recv from rank %d failed", src);
}

_Noreturn void cli_mpi_abort(cli_mpi *m, int code)
{
    if (m->on) MPI_Abort(MPI_COMM_WORLD, code);
    exit(code);
}

#else /* the plain build: no MPI */

static long env_long(const char *name)
{
    const char *v = getenv(name);
    return v && *v ? strtol(v, NULL, 10) : -1;
}

int cli_mpi_start(cli_mpi *m, int want, const char *cmd)
{
    memset(m, 0, sizeof *m);
    m->size = 1;
    int rc = refuse_in_cell(want, cmd);
    if (rc) return rc;
    if (want) return cli_usage(cmd, "this specdec was built without MPI: make mpi (build-mpi/specdec)");
    if (launched() && (env_long("OMPI_COMM_WORLD_SIZE") > 1 || env_long("PMI_SIZE") > 1 ||
                       env_long("OMPI_COMM_WORLD_RANK") > 0 || env_long("PMIX_RANK") > 0 ||
                       env_long("PMI_RANK") > 0))
        return cli_usage(cmd, "launched as one of several MPI processes, but this specdec was "
                              "built without MPI: make mpi (build-mpi/specdec)");
    return CLI_OK;
}

int cli_mpi_finish(cli_mpi *m, int rc)
{
    (void)m;
    return rc;
}

void cli_mpi_mc(cli_mpi *m, sd_mc_params *mp) { (void)m, (void)mp; }

int cli_mpi_allgather(cli_mpi *m, const double *mine, double *all, size_t n, size_t width,
                      int status)
{
    (void)m;
    if (status == SD_OK) memcpy(all, mine, n * width * sizeof *all);
    return status;
}

int cli_mpi_agree(cli_mpi *m, int status)
{
    (void)m;
    return status;
}

int cli_mpi_send(cli_mpi *m, int to, int tag, const void *buf, size_t len)
{
    (void)m, (void)to, (void)tag, (void)buf, (void)len;
    return sd_error(SD_EUNSUP, "built without MPI");
}

int cli_mpi_poll(cli_mpi *m, int from, int *src, int *tag, size_t *len)
{
    (void)m, (void)from, (void)src, (void)tag, (void)len;
    return 0;
}

int cli_mpi_recv(cli_mpi *m, int src, int tag, void *buf, size_t len)
{
    (void)m, (void)src, (void)tag, (void)buf, (void)len;
    return sd_error(SD_EUNSUP, "built without MPI");
}

_Noreturn void cli_mpi_abort(cli_mpi *m, int code)
{
    (void)m;
    exit(code);
}

#endif
