/* `drkc tune`: the schedule search over a model's kernels on the local GPU (docs/tuning.md).
 *
 * The model is compiled once with the heuristic's schedules (the reference module); its
 * kernels are profiled and tuned in order of their share of the model's time, each by
 * drk_search_tune (search/tune.h) with the chosen policy, every measurement committed to the
 * kernel database (--db). A candidate is the model compiled with one kernel's knobs pinned (a
 * --schedules line; a round's candidates in forked processes); the measurement worker
 * (tune_worker.h) checks it against the reference on fresh inputs and times it. */
#ifndef DRKC_TUNE_H
#define DRKC_TUNE_H

/* argv[1] is "tune". Exit status: 0 done, 1 error, 2 usage. */
int drkc_tune_main(int argc, char **argv);

#endif
