/* Interpreter: the worker pool that the heavy ops (GEMM, Conv, batched MatMul, the big
 * normalizations and reductions) spread their work over.
 *
 * Determinism: a parallel loop hands out disjoint index ranges; each op makes every index
 * compute its own outputs completely (no reduction is ever split across threads), so the
 * results do not depend on how many threads ran, nor on which thread took which range.
 *
 * One job at a time: a parallel loop started while another is running (from a worker, or from
 * a second application thread using the interpreter) runs serially on the calling thread. The
 * workers are started on first use and live until the process exits. */
#include <pthread.h>
#include <stdatomic.h>
#include <unistd.h>
#if defined(__linux__)
#include <sched.h>
#endif

#include "interp_internal.h"

enum { MAX_THREADS = 256 };

static pthread_mutex_t pool_mu = PTHREAD_MUTEX_INITIALIZER;   /* the fields below */
static pthread_mutex_t pool_busy = PTHREAD_MUTEX_INITIALIZER; /* held while a job runs */
static pthread_cond_t cv_work = PTHREAD_COND_INITIALIZER, cv_done = PTHREAD_COND_INITIALIZER;
static int n_started;      /* worker threads running (tids 1..n_started) */
static int want = 0;       /* threads to use, 0: not decided yet */
static uint64_t job_gen;   /* bumped for each job */
static int job_threads;    /* threads of the current job, the caller (tid 0) included */
static int job_pending;    /* workers of the current job still running */
static drk_ipar_fn job_fn;
static void *job_ctx;
static int64_t job_n, job_grain;
static atomic_llong job_next;
static uint64_t start_gen[MAX_THREADS]; /* job_gen when worker tid was created */
static _Thread_local bool in_pool; /* this thread runs a job (worker, or the caller) */

/* fork(): the child has none of the workers (drkc tune compiles candidates in forked
 * children, whose constant folding may run here): it starts over with no threads and fresh
 * locks (one may have been held by another parent thread at the fork). */
static void atfork_child(void) {
  pthread_mutex_t m0 = PTHREAD_MUTEX_INITIALIZER, m1 = PTHREAD_MUTEX_INITIALIZER;
  pthread_cond_t c0 = PTHREAD_COND_INITIALIZER, c1 = PTHREAD_COND_INITIALIZER;
  pool_mu = m0, pool_busy = m1, cv_work = c0, cv_done = c1;
  n_started = 0;
  job_pending = 0;
  job_threads = 0;
  in_pool = false;
  drk_iscratch_atfork_child();
}

static pthread_once_t atfork_once = PTHREAD_ONCE_INIT;
static void register_atfork(void) { pthread_atfork(NULL, NULL, atfork_child); }
void drk_ipar_register_atfork(void) { pthread_once(&atfork_once, register_atfork); }

static int cpu_count(void) {
  long n = sysconf(_SC_NPROCESSORS_ONLN);
#if defined(__linux__) && defined(CPU_COUNT)
  cpu_set_t set;
  if (sched_getaffinity(0, sizeof set, &set) == 0) {
    int a = CPU_COUNT(&set);
    if (a > 0 && (n <= 0 || a < n)) n = a;
  }
#endif
  return n > 0 ? (int)n : 1;
}

static int default_threads(void) {
  const char *e = getenv("DRK_INTERP_THREADS");
  if (e && *e) {
    char *end;
    long v = strtol(e, &end, 10);
    if (!*end && v >= 1) return v > MAX_THREADS ? MAX_THREADS : (int)v;
    fprintf(stderr, "drkc: ignoring DRK_INTERP_THREADS='%s' (not a number >= 1)\n", e);
  }
  int n = cpu_count();
  return n > MAX_THREADS ? MAX_THREADS : n;
}

void drk_interp_set_threads(int n) {
  pthread_mutex_lock(&pool_busy);
  pthread_mutex_lock(&pool_mu);
  want = n >= 1 ? (n > MAX_THREADS ? MAX_THREADS : n) : default_threads();
  pthread_mutex_unlock(&pool_mu);
  pthread_mutex_unlock(&pool_busy);
}

int drk_interp_threads(void) {
  drk_ipar_register_atfork();
  pthread_mutex_lock(&pool_mu);
  if (!want) want = default_threads();
  int n = want;
  pthread_mutex_unlock(&pool_mu);
  return n;
}

static void run_chunks(int tid) {
  for (;;) {
    int64_t i0 = (int64_t)atomic_fetch_add_explicit(&job_next, (long long)job_grain, memory_order_relaxed);
    if (i0 >= job_n) return;
    int64_t i1 = i0 + job_grain < job_n ? i0 + job_grain : job_n;
    job_fn(job_ctx, i0, i1, tid);
  }
}

static void *worker(void *arg) {
  int tid = (int)(intptr_t)arg;
  in_pool = true;
  pthread_mutex_lock(&pool_mu);
  uint64_t seen = start_gen[tid]; /* a job posted since then is this worker's too */
  for (;;) {
    while (job_gen == seen) pthread_cond_wait(&cv_work, &pool_mu);
    seen = job_gen;
    if (tid >= job_threads) continue;
    pthread_mutex_unlock(&pool_mu);
    run_chunks(tid);
    pthread_mutex_lock(&pool_mu);
    if (--job_pending == 0) pthread_cond_signal(&cv_done);
  }
  return NULL;
}

void drk_ipar_for(int64_t n, int64_t grain, drk_ipar_fn fn, void *ctx) {
  if (n <= 0) return;
  if (grain < 1) grain = 1;
  int nt = drk_interp_threads();
  int64_t chunks = (n + grain - 1) / grain;
  if (nt > chunks) nt = (int)chunks;
  if (nt <= 1 || in_pool || pthread_mutex_trylock(&pool_busy) != 0) {
    fn(ctx, 0, n, 0);
    return;
  }
  pthread_mutex_lock(&pool_mu);
  while (n_started < nt - 1) {
    pthread_t th;
    start_gen[n_started + 1] = job_gen;
    if (pthread_create(&th, NULL, worker, (void *)(intptr_t)(n_started + 1)) != 0) break;
    pthread_detach(th);
    n_started++;
  }
  if (nt > n_started + 1) nt = n_started + 1;
  job_fn = fn;
  job_ctx = ctx;
  job_n = n;
  job_grain = grain;
  atomic_store(&job_next, 0);
  job_threads = nt;
  job_pending = nt - 1;
  job_gen++;
  pthread_cond_broadcast(&cv_work);
  pthread_mutex_unlock(&pool_mu);
  in_pool = true;
  run_chunks(0);
  in_pool = false;
  pthread_mutex_lock(&pool_mu);
  while (job_pending > 0) pthread_cond_wait(&cv_done, &pool_mu);
  pthread_mutex_unlock(&pool_mu);
  pthread_mutex_unlock(&pool_busy);
}

int64_t drk_ipar_grain(int64_t n, int64_t min_grain) {
  int64_t g = n / (4 * (int64_t)drk_interp_threads());
  if (g < min_grain) g = min_grain;
  return g < 1 ? 1 : g;
}
