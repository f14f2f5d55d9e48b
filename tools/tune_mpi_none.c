/* drkc tune --mpi in a drkc built without MPI (CMake DRK_MPI=OFF, or no MPI found): init says
 * so and fails, so nothing else here is ever reached. */
#include "tools/tune_mpi.h"

#include <stdlib.h>

bool drk_tune_mpi_init(int *argc, char ***argv, drk_tune_mpi_t **out, char *msg, size_t n) {
  *out = NULL;
  snprintf(msg, n, "--mpi needs a drkc built with MPI (this one was configured without it: install Open MPI, "
                   "e.g. Debian's libopenmpi-dev and openmpi-bin, and configure with -DDRK_MPI=ON)");
  return false;
}
int drk_tune_mpi_rank(const drk_tune_mpi_t *m) { return 0; }
int drk_tune_mpi_size(const drk_tune_mpi_t *m) { return 1; }
bool drk_tune_mpi_roles(drk_tune_mpi_t *m, const drk_tune_mpi_options_t *o, uint64_t ref_hash, double hello_timeout_s,
                        FILE *report, char *msg, size_t n) {
  snprintf(msg, n, "no MPI in this drkc");
  return false;
}
drk_tune_mpi_role_t drk_tune_mpi_role(const drk_tune_mpi_t *m, int *out_device) { return DRK_TUNE_MPI_IDLE; }
int drk_tune_mpi_serve(drk_tune_mpi_t *m, const drk_tune_mpi_hooks_t *h) { return 1; }
void drk_tune_mpi_alive(drk_tune_mpi_t *m) {}
void drk_tune_mpi_local(drk_tune_mpi_t *m, const drk_tune_mpi_hooks_t *h) {}
uint64_t drk_tune_mpi_submit(drk_tune_mpi_t *m, const drk_tune_mpi_cand_t *c) { return 0; }
bool drk_tune_mpi_wait(drk_tune_mpi_t *m, uint64_t id, drk_tune_mpi_outcome_t *out, char *msg, size_t n) {
  snprintf(msg, n, "no MPI in this drkc");
  return false;
}
void drk_tune_mpi_drop(drk_tune_mpi_t *m) {}
bool drk_tune_mpi_measure_module(drk_tune_mpi_t *m, const void *bytes, size_t size, const drk_tune_mpi_cand_t *c,
                                 drk_tune_result_t *out, char *msg, size_t n) {
  snprintf(msg, n, "no MPI in this drkc");
  return false;
}
bool drk_tune_mpi_device(drk_tune_mpi_t *m, drk_tune_device_t *out, char *msg, size_t n) {
  snprintf(msg, n, "no MPI in this drkc");
  return false;
}
bool drk_tune_mpi_profile(drk_tune_mpi_t *m, double *out_ms, size_t n, int iters, char *msg, size_t msg_size) {
  snprintf(msg, msg_size, "no MPI in this drkc");
  return false;
}
double drk_tune_mpi_measure_s(const drk_tune_mpi_t *m) { return 0; }
void drk_tune_mpi_report(const drk_tune_mpi_t *m, FILE *out, FILE *log) {}
void drk_tune_mpi_finish(drk_tune_mpi_t *m, int rc) {}
