/* mpi: specdec over many processes with MPI (Open MPI), for mc, certify, replay and
 * sweep. The one file that includes <mpi.h>, and only when built with -DSD_MPI
 * (`make mpi`, build-mpi/specdec); in the plain build these functions are stubs and
 * --mpi is refused. The library (src/, sim/) knows nothing of MPI: the Monte-Carlo
 * engines take a chunk split and a reduce hook (sim/mc.h), replay computes rows of
 * positions that are put together (sim/replay.h).
 *
 *   cli_mpi m;
 *   if ((rc = cli_mpi_start(&m, want_mpi, "mc"))) return rc;   after the options
 *   cli_mpi_mc(&m, &mp);            this rank's chunks, the sum over ranks as the hook
 *   rc = ...run, print (only rank 0's stdout goes anywhere)...;
 *   return cli_mpi_finish(&m, rc);  every rank exits non-zero if one failed
 *
 * Bit-identical to one process: chunk c of a run is the same work (its generator is
 * seeded from (seed, c)) whichever rank computes it; the counts summed over ranks are
 * whole numbers below 2^53, so the sum is exact in any order; replay's rows are put in
 * position order before the one reduction.
 *
 * Failures: every collective step starts by agreeing on the status, so a rank that
 * fails (anywhere: input, a file another node cannot read, a failing chunk) makes the
 * others stop at their next step instead of hanging; rank 0 reports the failing
 * rank's message, and every rank exits non-zero.
 *
 * MPI starts when --mpi is given or the process was launched by mpirun or srun
 * (OMPI_COMM_WORLD_SIZE, PMIX_RANK or PMI_RANK in the environment), unless
 * SPECDEC_NO_MPI is set: the sweep sets it for its cells, which are single
 * processes. */
#ifndef SD_CLI_MPI_H
#define SD_CLI_MPI_H

#include <stddef.h>

#include "mc.h"

typedef struct {
    int on;          /* MPI started */
    int rank, size;  /* 0 and 1 when off */
    int ended;       /* a failure was agreed on: no more collective steps */
} cli_mpi;

/* Starts MPI if asked (want) or launched so; ranks > 0 then print nothing (stdout to
 * /dev/null, cli_quiet). CLI_OK, or CLI_USAGE after a message: --mpi in a build without
 * MPI, or a launch of several ranks of a build without MPI. */
int cli_mpi_start(cli_mpi *m, int want, const char *cmd);
/* This process's rank in an mpirun or srun launch of several (from the environment: Open
 * MPI, PMIx, PMI-2), before MPI starts; -1 when not so launched or built without MPI
 * (where each process runs alone and says why it stops). main silences the ranks
 * above 0 at once (cli_quiet), so that a usage error, found before MPI starts, is printed
 * by rank 0 alone. */
int cli_mpi_launch_rank(void);
/* Agrees on the exit status (rc of this rank) and ends MPI. Returns the status to exit
 * with: rc, or CLI_FAIL if another rank failed. */
int cli_mpi_finish(cli_mpi *m, int rc);

/* The Monte-Carlo split: this rank computes chunks rank, rank + size, ...; the hook sums
 * the results over the ranks (every rank ends with the whole run's result). Progress
 * lines only on rank 0. No change when MPI is off. */
void cli_mpi_mc(cli_mpi *m, sd_mc_params *mp);

/* Rank r's share of n items, [n r / size, n (r + 1) / size). */
void cli_mpi_range(const cli_mpi *m, size_t n, size_t *first, size_t *end);
/* Puts every rank's items together, in rank order: mine holds this rank's items of its
 * cli_mpi_range (width doubles each), all receives the n items. status is this
 * rank's (a failure's message in sd_errmsg()); the return is SD_OK if every rank
 * succeeded, else the failure of the lowest failing rank with its message. */
int cli_mpi_allgather(cli_mpi *m, const double *mine, double *all, size_t n, size_t width,
                      int status);

/* Point to point, for the sweep's coordinator (rank 0) and workers: a message of
 * len bytes with a tag. cli_mpi_poll returns 1 and the source, tag and length when a
 * message waits (from `from`, or any rank if -1), 0 when none. */
int cli_mpi_send(cli_mpi *m, int to, int tag, const void *buf, size_t len);
int cli_mpi_poll(cli_mpi *m, int from, int *src, int *tag, size_t *len);
int cli_mpi_recv(cli_mpi *m, int src, int tag, void *buf, size_t len);
/* Agrees on a status (SD or CLI code): SD_OK if every rank passed SD_OK; else the
 * failing rank gets its status back, the others a negative code and its message
 * ("rank R: ...") in sd_errmsg(), and no collective step follows. */
int cli_mpi_agree(cli_mpi *m, int status);
/* Ends every rank at once (a coordinator that cannot go on). */
_Noreturn void cli_mpi_abort(cli_mpi *m, int code);

#endif
