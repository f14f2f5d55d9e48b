/* drkc tune --mpi: the tune spread over the ranks of an MPI job (docs/distributed.md).
 *
 * Rank 0 runs the search (drk_search_tune, the database, the log) and hands out work; compile
 * ranks turn candidates (a kernel's knobs) into modules; measure ranks (one per GPU) check and
 * time modules in their tune worker (tune_worker.h). Every rank builds the reference module
 * itself from the same command line; a rank whose reference differs from rank 0's (another
 * model file, another drkc) is refused at the start.
 *
 * Nothing waits on one rank forever: every request has a deadline, every receive is
 * nonblocking (MPI_Improbe/MPI_Imrecv polled against a clock), MPI errors return
 * (MPI_ERRORS_RETURN). A rank that misses a deadline is lost: its in-flight candidate is
 * handed out again (DRK_TUNE_MPI_ATTEMPTS times at most, then it is invalid), and an answer
 * that comes late puts the rank back to work. With no compile rank left, rank 0 compiles; with
 * no measure rank left, measuring stops (as when the local worker cannot be started). A busy
 * compile rank sends a heartbeat (drk_tune_mpi_alive), so its death is noticed in seconds. Ranks
 * other than 0 exit when rank 0 has said nothing for DRK_TUNE_MPI_IDLE_S seconds (it pings
 * every few seconds while it runs).
 *
 * Messages are one fixed header (a C struct: every rank runs the same drkc build) plus a
 * payload (a module, a profile). The MPI code is all in tune_mpi.c; a drkc built without MPI
 * (CMake DRK_MPI=OFF, or no MPI found) links tune_mpi_none.c, whose init says so. */
#ifndef DRKC_TUNE_MPI_H
#define DRKC_TUNE_MPI_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "tools/tune_worker.h"

#define DRK_TUNE_MPI_ATTEMPTS 3
#define DRK_TUNE_MPI_IDLE_S 600.0

typedef struct drk_tune_mpi drk_tune_mpi_t;

typedef enum drk_tune_mpi_role {
  DRK_TUNE_MPI_POLICY,  /* rank 0 */
  DRK_TUNE_MPI_COMPILE,
  DRK_TUNE_MPI_MEASURE,
  DRK_TUNE_MPI_IDLE,    /* not needed (more ranks than --ranks asks for) or refused */
} drk_tune_mpi_role_t;

typedef struct drk_tune_mpi_options {
  int compile_ranks, measure_ranks; /* --ranks=compile:K,measure:G; -1: detect */
  double compile_timeout_s;         /* a compile rank that has not answered by then is lost */
  double measure_timeout_s;         /* likewise a measure rank */
  bool fake;                        /* DRKC_TUNE_FAKE_MEASURE: every host counts one GPU */
  int device;                       /* --device: a host's measure ranks take devices from here up */
} drk_tune_mpi_options_t;

/* A candidate: the kernel (its --schedules line's name, node and workload key) at a point (the
 * knobs as text), and how to measure it. */
typedef struct drk_tune_mpi_cand {
  char kernel[128];
  uint64_t node;
  char wl[33];
  char point[512];
  int warmup, iters;
  uint64_t seed;
} drk_tune_mpi_cand_t;

/* What ranks other than 0 do, given by drkc tune (tune.c). */
typedef struct drk_tune_mpi_hooks {
  void *ctx;
  /* compile rank: the candidate's module into *out (malloc'd; freed by the caller), within
   * timeout_s; false with msg ("compile: ...") when it does not compile */
  bool (*compile)(void *ctx, const drk_tune_mpi_cand_t *c, double timeout_s, void **out, size_t *out_size, char *msg,
                  size_t n);
  /* measure rank: the module at path, as drk_tune_worker_measure */
  drk_tune_result_t (*measure)(void *ctx, const char *path, const drk_tune_mpi_cand_t *c);
  bool (*device)(void *ctx, drk_tune_device_t *out, char *msg, size_t n);
  bool (*profile)(void *ctx, double *out_ms, size_t n, int iters, char *msg, size_t msg_size);
} drk_tune_mpi_hooks_t;

/* What became of a submitted candidate. */
typedef struct drk_tune_mpi_outcome {
  bool compiled;        /* false: msg says why (the compiler's message, or lost ranks) */
  char msg[256];
  double compile_s;     /* the compile rank's time on it */
  double measure_s;     /* the measure rank's time on it */
  drk_tune_result_t r;  /* when compiled */
} drk_tune_mpi_outcome_t;

/* Starts MPI (errors return); every rank calls it. False with msg when this drkc has no MPI
 * or MPI cannot start. */
bool drk_tune_mpi_init(int *argc, char ***argv, drk_tune_mpi_t **out, char *msg, size_t n);
int drk_tune_mpi_rank(const drk_tune_mpi_t *m);
int drk_tune_mpi_size(const drk_tune_mpi_t *m);
/* Every rank once its reference module is built (ref_hash: a hash of its bytes): rank 0
 * gathers the others' hellos (reference, GPUs seen, host) within hello_timeout_s, assigns the
 * roles (o) and tells each rank its own; the others say hello and wait for their role. Rank 0
 * prints the roles to `report`. False with msg when the job cannot work (no measure rank, a
 * --ranks that does not fit). */
bool drk_tune_mpi_roles(drk_tune_mpi_t *m, const drk_tune_mpi_options_t *o, uint64_t ref_hash, double hello_timeout_s,
                        FILE *report, char *msg, size_t n);
/* This rank's role, and for a measure rank its device. */
drk_tune_mpi_role_t drk_tune_mpi_role(const drk_tune_mpi_t *m, int *out_device);
/* A rank other than 0: serves rank 0 with the hooks until it says stop (or has been silent for
 * DRK_TUNE_MPI_IDLE_S). Returns 0, or 1 when rank 0 went silent. */
int drk_tune_mpi_serve(drk_tune_mpi_t *m, const drk_tune_mpi_hooks_t *h);

/* A compile rank busy on a candidate (called from the compile hook's wait): tells rank 0 it is
 * alive, at most every 2 s. Rank 0 loses a busy compile rank that has been silent for 20 s,
 * long before its compile deadline: a dead rank is noticed in seconds. No-op on rank 0. */
void drk_tune_mpi_alive(drk_tune_mpi_t *m);
/* Rank 0: its own compile (h->compile), used when no compile rank is left. */
void drk_tune_mpi_local(drk_tune_mpi_t *m, const drk_tune_mpi_hooks_t *h);
/* Rank 0. Queues a candidate: compiled by a compile rank, then measured by a measure rank as
 * soon as one is free (in submission order). Returns its id (> 0). */
uint64_t drk_tune_mpi_submit(drk_tune_mpi_t *m, const drk_tune_mpi_cand_t *c);
/* Waits for candidate id. False with msg when it cannot be measured: no measure rank is left
 * (the tune must stop), or id is unknown. Compile failures are outcomes (compiled = false). */
bool drk_tune_mpi_wait(drk_tune_mpi_t *m, uint64_t id, drk_tune_mpi_outcome_t *out, char *msg, size_t n);
/* Forgets every queued or unfinished candidate (a kernel's search ended); late answers to
 * them are dropped. */
void drk_tune_mpi_drop(drk_tune_mpi_t *m);
/* Measures a module compiled by rank 0 (the tuned model's check) on a measure rank. */
bool drk_tune_mpi_measure_module(drk_tune_mpi_t *m, const void *bytes, size_t size, const drk_tune_mpi_cand_t *c,
                                 drk_tune_result_t *out, char *msg, size_t n);
/* The first measure rank's GPU; measure ranks whose GPU differs (name, SMs) are left out. */
bool drk_tune_mpi_device(drk_tune_mpi_t *m, drk_tune_device_t *out, char *msg, size_t n);
/* The reference's per-kernel profile (drk_tune_worker_profile_reference) on a measure rank. */
bool drk_tune_mpi_profile(drk_tune_mpi_t *m, double *out_ms, size_t n, int iters, char *msg, size_t msg_size);
/* Seconds the measure ranks spent measuring, summed (the GPU busy time). */
double drk_tune_mpi_measure_s(const drk_tune_mpi_t *m);
/* One line per rank to `out` (role, host, candidates, busy seconds, lost) and, when log is
 * not NULL, one "mpi_rank" JSON event per rank. */
void drk_tune_mpi_report(const drk_tune_mpi_t *m, FILE *out, FILE *log);
/* Rank 0 tells every rank to stop; then every rank frees m and calls MPI_Finalize. When a rank
 * was lost (it may be hung, and would never finalize) or rc is not 0, rank 0 ends the job with
 * MPI_Abort(rc) instead: mpirun then exits with rc (under `--mca orte_abort_on_non_zero_status
 * 0` it would otherwise exit 0 whatever rank 0 returned). */
void drk_tune_mpi_finish(drk_tune_mpi_t *m, int rc);

#endif
