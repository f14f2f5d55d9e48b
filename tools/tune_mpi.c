/* drkc tune --mpi (tune_mpi.h): the ranks, their roles, and the candidates handed out to them.
 *
 * Rank 0 keeps a queue of jobs (candidates). A job is QUEUED, then COMPILING on a compile rank,
 * COMPILED (the module's bytes at rank 0), MEASURING on a measure rank, DONE. Each rank holds
 * at most one job; progress() hands out work, takes in answers and retires ranks whose
 * deadline passed (their job goes back to the queue). Every receive is an MPI_Improbe +
 * MPI_Imrecv polled against a deadline, every send to a rank that may be gone is an MPI_Isend
 * never waited on without a deadline: a dead or hung rank costs its job, never the tune. */
#include "tools/tune_mpi.h"

#include <dirent.h>
#include <errno.h>
#include <mpi.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define WIRE_MAGIC 0x64726b6dU /* "drkm" */
#define PING_EVERY_S 5.0
#define ALIVE_EVERY_S 2.0 /* a busy compile rank's heartbeat */
#define ALIVE_LOST_S 20.0 /* a busy compile rank silent this long is lost (dead before its deadline) */
#define TRANSFER_S 120.0 /* a message whose envelope has come gets this long to arrive whole */

enum { /* message kinds, also the MPI tags */
  M_HELLO = 1, M_ROLE, M_COMPILE, M_COMPILED, M_MEASURE, M_MEASURED, M_DEVICE, M_DEVICE_ANS, M_PROFILE,
  M_PROFILE_ANS, M_PING, M_STOP, M_ALIVE,
};

/* one header for every message; a payload (module bytes, profile) follows it */
typedef struct wire {
  uint32_t magic, kind;
  uint64_t id;          /* the job (M_COMPILE..M_MEASURED), 0 otherwise */
  int32_t ok, role, device, gpus, warmup, iters;
  uint64_t node, seed, ref_hash, payload, n, pid;
  double secs;          /* the answering rank's time on the request */
  char host[64], kernel[128], wl[33], point[512], msg[256];
  drk_tune_result_t r;
  drk_tune_device_t dev;
} wire_t;

typedef enum jstate { J_QUEUED, J_COMPILING, J_COMPILED, J_MEASURING, J_DONE } jstate_t;

typedef struct job {
  uint64_t id;
  drk_tune_mpi_cand_t c;
  jstate_t st;
  int rank;           /* the rank working on it (COMPILING, MEASURING) */
  int compile_tries, measure_tries;
  void *bytes;        /* the module (COMPILED, MEASURING) */
  size_t size;
  drk_tune_mpi_outcome_t out;
} job_t;

typedef struct rank_info {
  drk_tune_mpi_role_t role;
  int device, gpus;
  char host[64];
  uint64_t pid;
  bool hello;         /* said hello with rank 0's reference */
  bool lost;          /* missed a deadline (may come back with a late answer) */
  bool stopped;       /* told to stop */
  bool ever_lost;
  uint64_t job;       /* the job it works on (0: idle) */
  int kind;           /* what it was asked (M_COMPILE...) */
  double deadline, limit_s; /* when its answer is due; how long it was given */
  double last_alive;        /* its last heartbeat (compile ranks) */
  double last_ping;
  int jobs;           /* answers */
  double busy_s;      /* its own time on them */
  char why[256];      /* why it is idle or lost */
} rank_info_t;

/* a send that may never complete (its receiver gone): kept until it does or finish */
typedef struct pending_send {
  MPI_Request rq;
  void *buf;
} pending_send_t;

struct drk_tune_mpi {
  int rank, size;
  rank_info_t *ranks;
  drk_tune_mpi_options_t o;
  double t_roles;
  /* rank 0 */
  job_t *jobs;
  size_t n_jobs, cap_jobs;
  uint64_t next_id;
  pending_send_t *sends;
  size_t n_sends, cap_sends;
  double measure_s;
  drk_tune_mpi_hooks_t local; /* rank 0 compiling itself when no compile rank is left */
  bool have_local;
  /* other ranks */
  drk_tune_mpi_role_t role;
  int device;
  double last_heard, last_alive_sent;
  char dir[256];
};

static double mono_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static void nap(void) {
  struct timespec ts = {0, 1000000}; /* 1 ms: latency well below a compile or a measurement */
  nanosleep(&ts, NULL);
}

static void say(char *msg, size_t n, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void say(char *msg, size_t n, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, n, fmt, ap);
  va_end(ap);
}

static void mpi_error_text(int code, char *buf, size_t n) {
  char s[MPI_MAX_ERROR_STRING];
  int len = 0;
  if (MPI_Error_string(code, s, &len) != MPI_SUCCESS) len = 0;
  s[len < MPI_MAX_ERROR_STRING ? len : MPI_MAX_ERROR_STRING - 1] = 0;
  snprintf(buf, n, "%s", len ? s : "unknown MPI error");
}

static void wire_init(wire_t *w, int kind) {
  memset(w, 0, sizeof *w);
  w->magic = WIRE_MAGIC;
  w->kind = (uint32_t)kind;
}

/* ---- sending ---- */
static void track_send(drk_tune_mpi_t *m, MPI_Request rq, void *buf) {
  if (m->n_sends == m->cap_sends) {
    size_t cap = m->cap_sends ? 2 * m->cap_sends : 16;
    pending_send_t *s = realloc(m->sends, cap * sizeof *s);
    if (!s) { /* cannot track it: the buffer stays (leaked) so the send stays valid */
      MPI_Request_free(&rq);
      return;
    }
    m->sends = s, m->cap_sends = cap;
  }
  m->sends[m->n_sends++] = (pending_send_t){rq, buf};
}

static void reap_sends(drk_tune_mpi_t *m) {
  for (size_t i = 0; i < m->n_sends;) {
    int done = 0;
    if (MPI_Test(&m->sends[i].rq, &done, MPI_STATUS_IGNORE) != MPI_SUCCESS) done = 0;
    if (done) {
      free(m->sends[i].buf);
      m->sends[i] = m->sends[--m->n_sends];
    } else {
      i++;
    }
  }
}

/* Sends header + payload to `to` without waiting (the buffer is freed once the send is done). */
static bool send_msg(drk_tune_mpi_t *m, int to, const wire_t *w, const void *payload, size_t size) {
  char *buf = malloc(sizeof *w + size);
  if (!buf) return false;
  memcpy(buf, w, sizeof *w);
  ((wire_t *)buf)->payload = size;
  if (size) memcpy(buf + sizeof *w, payload, size);
  if (sizeof *w + size > (size_t)INT32_MAX) {
    free(buf);
    return false;
  }
  MPI_Request rq;
  if (MPI_Isend(buf, (int)(sizeof *w + size), MPI_BYTE, to, (int)w->kind, MPI_COMM_WORLD, &rq) != MPI_SUCCESS) {
    free(buf);
    return false;
  }
  track_send(m, rq, buf);
  return true;
}

/* ---- receiving ---- */
/* The next message from `from` (MPI_ANY_SOURCE: anyone), waiting until `until` (mono_s) for
 * one to start. 1: a message in *out_w (payload malloc'd in *out_payload, NULL when none;
 * *out_src its sender); 0: none by then; -1: an error or a message that did not arrive whole
 * within TRANSFER_S (msg says which). */
static int recv_msg(int from, double until, wire_t *out_w, void **out_payload, int *out_src, char *msg, size_t n) {
  *out_payload = NULL;
  for (;;) {
    int flag = 0;
    MPI_Message mm;
    MPI_Status st;
    int e = MPI_Improbe(from, MPI_ANY_TAG, MPI_COMM_WORLD, &flag, &mm, &st);
    if (e != MPI_SUCCESS) {
      char t[256];
      mpi_error_text(e, t, sizeof t);
      say(msg, n, "MPI_Improbe: %s", t);
      return -1;
    }
    if (!flag) {
      if (mono_s() >= until) return 0;
      nap();
      continue;
    }
    int count = 0;
    MPI_Get_count(&st, MPI_BYTE, &count);
    char *buf = malloc(count > 0 ? (size_t)count : 1);
    MPI_Request rq;
    if (!buf || MPI_Imrecv(buf, count, MPI_BYTE, &mm, &rq) != MPI_SUCCESS) {
      free(buf);
      say(msg, n, "cannot receive a message of %d bytes from rank %d", count, st.MPI_SOURCE);
      return -1;
    }
    double t_end = mono_s() + TRANSFER_S;
    int done = 0;
    while (!done) {
      if (MPI_Test(&rq, &done, MPI_STATUS_IGNORE) != MPI_SUCCESS) break;
      if (!done && mono_s() > t_end) break;
      if (!done) nap();
    }
    if (!done) { /* the sender is gone mid-message: the buffer stays with the request */
      say(msg, n, "a message from rank %d did not arrive whole within %.0f s", st.MPI_SOURCE, TRANSFER_S);
      return -1;
    }
    *out_src = st.MPI_SOURCE;
    wire_t *w = (wire_t *)buf;
    if ((size_t)count < sizeof *w || w->magic != WIRE_MAGIC || w->kind != (uint32_t)st.MPI_TAG ||
        w->payload != (uint64_t)count - sizeof *w) {
      free(buf);
      say(msg, n, "a malformed message (%d bytes, tag %d) from rank %d: is every rank the same drkc build?", count,
          st.MPI_TAG, st.MPI_SOURCE);
      return -1;
    }
    *out_w = *w;
    if (w->payload) {
      *out_payload = malloc(w->payload);
      if (*out_payload) memcpy(*out_payload, buf + sizeof *w, w->payload);
    }
    free(buf);
    if (out_w->payload && !*out_payload) {
      say(msg, n, "out of memory for %llu bytes", (unsigned long long)out_w->payload);
      return -1;
    }
    return 1;
  }
}

/* ---- starting ---- */
bool drk_tune_mpi_init(int *argc, char ***argv, drk_tune_mpi_t **out, char *msg, size_t n) {
  *out = NULL;
  int inited = 0;
  MPI_Initialized(&inited);
  if (!inited) {
    int provided;
    int e = MPI_Init_thread(argc, argv, MPI_THREAD_SINGLE, &provided);
    if (e != MPI_SUCCESS) {
      char t[256];
      mpi_error_text(e, t, sizeof t);
      say(msg, n, "MPI_Init: %s", t);
      return false;
    }
  }
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  drk_tune_mpi_t *m = calloc(1, sizeof *m);
  if (!m) {
    say(msg, n, "out of memory");
    return false;
  }
  MPI_Comm_rank(MPI_COMM_WORLD, &m->rank);
  MPI_Comm_size(MPI_COMM_WORLD, &m->size);
  m->ranks = calloc((size_t)m->size, sizeof *m->ranks);
  if (!m->ranks) {
    free(m);
    say(msg, n, "out of memory");
    return false;
  }
  m->next_id = 1;
  m->role = m->rank == 0 ? DRK_TUNE_MPI_POLICY : DRK_TUNE_MPI_IDLE;
  m->last_heard = mono_s();
  *out = m;
  return true;
}

int drk_tune_mpi_rank(const drk_tune_mpi_t *m) { return m->rank; }
int drk_tune_mpi_size(const drk_tune_mpi_t *m) { return m->size; }

/* GPUs this process may use: CUDA_VISIBLE_DEVICES's entries when set, else the /dev/nvidiaN
 * device files (looking does not start the driver: a CUDA context would not survive the tune
 * worker's fork). */
static int gpus_seen(void) {
  const char *v = getenv("CUDA_VISIBLE_DEVICES");
  if (v) {
    int k = 0;
    for (const char *p = v; *p;) {
      const char *c = strchr(p, ',');
      size_t len = c ? (size_t)(c - p) : strlen(p);
      if (len > 0 && !(len == 2 && !strncmp(p, "-1", 2))) k++;
      if (!c) break;
      p = c + 1;
    }
    return k;
  }
  DIR *d = opendir("/dev");
  if (!d) return 0;
  int k = 0;
  struct dirent *e;
  while ((e = readdir(d))) {
    const char *s = e->d_name;
    if (strncmp(s, "nvidia", 6) || !s[6]) continue;
    bool digits = true;
    for (const char *p = s + 6; *p; p++) digits = digits && *p >= '0' && *p <= '9';
    k += digits;
  }
  closedir(d);
  return k;
}

static const char *role_name(drk_tune_mpi_role_t r) {
  switch (r) {
    case DRK_TUNE_MPI_POLICY: return "policy";
    case DRK_TUNE_MPI_COMPILE: return "compile";
    case DRK_TUNE_MPI_MEASURE: return "measure";
    default: return "idle";
  }
}

/* Rank 0: roles from the hellos. Measure ranks: ranks that see a GPU, in rank order, at most
 * as many per host as it has GPUs (rank 0 runs the policy, it takes none), --ranks' G of them
 * (else all such); compile ranks: the rest, --ranks' K of them (else all). */
static bool assign_roles(drk_tune_mpi_t *m, char *msg, size_t n) {
  int want_m = m->o.measure_ranks, want_c = m->o.compile_ranks, nm = 0, nc = 0;
  for (int r = 1; r < m->size; r++) {
    rank_info_t *ri = &m->ranks[r];
    if (!ri->hello || (want_m >= 0 && nm >= want_m)) continue;
    int used = 0;
    for (int q = 1; q < r; q++)
      if (m->ranks[q].role == DRK_TUNE_MPI_MEASURE && !strcmp(m->ranks[q].host, ri->host)) used++;
    if (used >= ri->gpus) continue;
    ri->role = DRK_TUNE_MPI_MEASURE;
    ri->device = m->o.device + used;
    nm++;
  }
  /* --ranks asks for more measure ranks than see a GPU (the device files may be elsewhere in a
   * container): the first other ranks measure, as asked, and their worker says if it has none */
  for (int r = 1; r < m->size && want_m >= 0 && nm < want_m; r++) {
    rank_info_t *ri = &m->ranks[r];
    if (!ri->hello || ri->role == DRK_TUNE_MPI_MEASURE) continue;
    int used = 0;
    for (int q = 1; q < m->size; q++)
      if (q != r && m->ranks[q].role == DRK_TUNE_MPI_MEASURE && !strcmp(m->ranks[q].host, ri->host)) used++;
    ri->role = DRK_TUNE_MPI_MEASURE;
    ri->device = m->o.device + used;
    snprintf(ri->why, sizeof ri->why, "sees no GPU (/dev/nvidiaN, CUDA_VISIBLE_DEVICES); measures as --ranks asks");
    nm++;
  }
  for (int r = 1; r < m->size; r++) {
    rank_info_t *ri = &m->ranks[r];
    if (!ri->hello || ri->role == DRK_TUNE_MPI_MEASURE) continue;
    if (want_c >= 0 && nc >= want_c) {
      snprintf(ri->why, sizeof ri->why, "not needed (--ranks)");
      continue;
    }
    ri->role = DRK_TUNE_MPI_COMPILE;
    nc++;
  }
  if (m->size < 2) {
    say(msg, n, "no rank can measure: this job has rank 0 only (run drkc tune --mpi under mpirun -np 2 or more: "
                "rank 0 searches, the others compile and measure)");
    return false;
  }
  if (nm == 0) {
    say(msg, n, "no rank can measure: none of ranks 1..%d sees a GPU (/dev/nvidiaN, CUDA_VISIBLE_DEVICES)", m->size - 1);
    return false;
  }
  if (want_m >= 0 && nm < want_m) {
    say(msg, n, "--ranks asks for %d measure ranks; only %d ranks said hello", want_m, nm);
    return false;
  }
  if (want_c >= 0 && nc < want_c) {
    say(msg, n, "--ranks asks for %d compile ranks; %d ranks are left after the %d measure ranks", want_c, nc, nm);
    return false;
  }
  return true;
}

bool drk_tune_mpi_roles(drk_tune_mpi_t *m, const drk_tune_mpi_options_t *o, uint64_t ref_hash, double hello_timeout_s,
                        FILE *report, char *msg, size_t n) {
  m->o = *o;
  char host[64] = "";
  gethostname(host, sizeof host - 1);
  if (m->rank != 0) {
    wire_t w;
    wire_init(&w, M_HELLO);
    w.ref_hash = ref_hash;
    w.gpus = o->fake ? 1 : gpus_seen();
    w.pid = (uint64_t)getpid();
    snprintf(w.host, sizeof w.host, "%s", host);
    if (!send_msg(m, 0, &w, NULL, 0)) {
      say(msg, n, "rank %d: cannot send its hello to rank 0", m->rank);
      return false;
    }
    for (;;) {
      wire_t a;
      void *pl;
      int src;
      int k = recv_msg(0, mono_s() + DRK_TUNE_MPI_IDLE_S, &a, &pl, &src, msg, n);
      free(pl);
      if (k <= 0) {
        if (k == 0) say(msg, n, "rank %d: no role from rank 0 within %.0f s", m->rank, DRK_TUNE_MPI_IDLE_S);
        return false;
      }
      if (a.kind == M_PING) continue;
      if (a.kind == M_STOP) {
        m->role = DRK_TUNE_MPI_IDLE;
        return true;
      }
      if (a.kind != M_ROLE) continue;
      m->role = (drk_tune_mpi_role_t)a.role;
      m->device = a.device;
      m->last_heard = mono_s();
      return true;
    }
  }
  /* rank 0 */
  snprintf(m->ranks[0].host, sizeof m->ranks[0].host, "%s", host);
  m->ranks[0].role = DRK_TUNE_MPI_POLICY;
  m->ranks[0].pid = (uint64_t)getpid();
  int heard = 0;
  double until = mono_s() + hello_timeout_s;
  while (heard < m->size - 1) {
    wire_t w;
    void *pl;
    int src;
    int k = recv_msg(MPI_ANY_SOURCE, until, &w, &pl, &src, msg, n);
    free(pl);
    if (k < 0) return false;
    if (k == 0) break;
    if (w.kind != M_HELLO || src <= 0 || src >= m->size || m->ranks[src].pid) continue;
    rank_info_t *ri = &m->ranks[src];
    heard++;
    ri->pid = w.pid ? w.pid : 1;
    ri->gpus = w.gpus;
    snprintf(ri->host, sizeof ri->host, "%s", w.host);
    ri->role = DRK_TUNE_MPI_IDLE;
    if (w.ref_hash != ref_hash) {
      snprintf(ri->why, sizeof ri->why, "refused: its reference module differs from rank 0's (another model or drkc?)");
      continue;
    }
    ri->hello = true;
  }
  for (int r = 1; r < m->size; r++)
    if (!m->ranks[r].pid) {
      m->ranks[r].lost = m->ranks[r].ever_lost = true;
      snprintf(m->ranks[r].why, sizeof m->ranks[r].why, "no hello within %.0f s", hello_timeout_s);
    }
  bool ok = assign_roles(m, msg, n);
  for (int r = 1; r < m->size; r++) {
    rank_info_t *ri = &m->ranks[r];
    wire_t w;
    wire_init(&w, ok && ri->role != DRK_TUNE_MPI_IDLE ? M_ROLE : M_STOP);
    w.role = (int32_t)ri->role;
    w.device = ri->device;
    if (ri->pid) send_msg(m, r, &w, NULL, 0);
    ri->stopped = w.kind == M_STOP;
    ri->last_ping = mono_s();
    if (!report) continue;
    char what[192];
    if (ri->role == DRK_TUNE_MPI_MEASURE)
      snprintf(what, sizeof what, "measure, device %d%s%.150s", ri->device, ri->why[0] ? ": " : "", ri->why);
    else snprintf(what, sizeof what, "%s%s%.170s", role_name(ri->role), ri->why[0] ? ": " : "", ri->why);
    fprintf(report, "drkc tune: mpi: rank %d (%s, pid %llu): %s\n", r, ri->host[0] ? ri->host : "?",
            (unsigned long long)ri->pid, what);
  }
  m->t_roles = mono_s();
  return ok;
}

drk_tune_mpi_role_t drk_tune_mpi_role(const drk_tune_mpi_t *m, int *out_device) {
  if (out_device) *out_device = m->device;
  return m->role;
}

/* ---- ranks other than 0 ---- */
static void cand_from_wire(const wire_t *w, drk_tune_mpi_cand_t *c) {
  memset(c, 0, sizeof *c);
  snprintf(c->kernel, sizeof c->kernel, "%s", w->kernel);
  snprintf(c->wl, sizeof c->wl, "%s", w->wl);
  snprintf(c->point, sizeof c->point, "%s", w->point);
  c->node = w->node;
  c->warmup = w->warmup, c->iters = w->iters;
  c->seed = w->seed;
}

static void cand_to_wire(const drk_tune_mpi_cand_t *c, wire_t *w) {
  snprintf(w->kernel, sizeof w->kernel, "%s", c->kernel);
  snprintf(w->wl, sizeof w->wl, "%s", c->wl);
  snprintf(w->point, sizeof w->point, "%s", c->point);
  w->node = c->node;
  w->warmup = c->warmup, w->iters = c->iters;
  w->seed = c->seed;
}

static void serve_compile(drk_tune_mpi_t *m, const drk_tune_mpi_hooks_t *h, const wire_t *w) {
  drk_tune_mpi_cand_t c;
  cand_from_wire(w, &c);
  double t0 = mono_s();
  void *bytes = NULL;
  size_t size = 0;
  wire_t a;
  wire_init(&a, M_COMPILED);
  a.id = w->id;
  a.ok = h->compile(h->ctx, &c, m->o.compile_timeout_s, &bytes, &size, a.msg, sizeof a.msg);
  a.secs = mono_s() - t0;
  if (!send_msg(m, 0, &a, a.ok ? bytes : NULL, a.ok ? size : 0))
    fprintf(stderr, "drkc tune: mpi: rank %d: cannot send a module of %zu bytes to rank 0\n", m->rank, size);
  free(bytes);
}

static void serve_measure(drk_tune_mpi_t *m, const drk_tune_mpi_hooks_t *h, const wire_t *w, const void *bytes) {
  drk_tune_mpi_cand_t c;
  cand_from_wire(w, &c);
  wire_t a;
  wire_init(&a, M_MEASURED);
  a.id = w->id;
  double t0 = mono_s();
  char path[512];
  snprintf(path, sizeof path, "%s/cand%llu.drkm", m->dir, (unsigned long long)w->id);
  FILE *f = fopen(path, "wb");
  bool wrote = f && (!w->payload || fwrite(bytes, 1, w->payload, f) == w->payload);
  if (f && fclose(f) != 0) wrote = false;
  if (wrote) {
    a.r = h->measure(h->ctx, path, &c);
  } else {
    a.r.ok = false;
    snprintf(a.r.msg, sizeof a.r.msg, "rank %d cannot write %.150s: %.60s", m->rank, path, strerror(errno));
  }
  unlink(path);
  a.ok = 1;
  a.secs = mono_s() - t0;
  send_msg(m, 0, &a, NULL, 0);
}

static void serve_device(drk_tune_mpi_t *m, const drk_tune_mpi_hooks_t *h) {
  wire_t a;
  wire_init(&a, M_DEVICE_ANS);
  a.ok = h->device(h->ctx, &a.dev, a.msg, sizeof a.msg);
  send_msg(m, 0, &a, NULL, 0);
}

static void serve_profile(drk_tune_mpi_t *m, const drk_tune_mpi_hooks_t *h, const wire_t *w) {
  wire_t a;
  wire_init(&a, M_PROFILE_ANS);
  double t0 = mono_s();
  size_t k = (size_t)w->n;
  double *ms = calloc(k + 1, sizeof *ms);
  a.ok = ms && h->profile(h->ctx, ms, k, w->iters, a.msg, sizeof a.msg);
  if (!ms) snprintf(a.msg, sizeof a.msg, "out of memory");
  a.n = a.ok ? k : 0;
  a.secs = mono_s() - t0;
  send_msg(m, 0, &a, a.ok ? ms : NULL, a.ok ? k * sizeof *ms : 0);
  free(ms);
}

int drk_tune_mpi_serve(drk_tune_mpi_t *m, const drk_tune_mpi_hooks_t *h) {
  if (m->rank == 0 || m->role == DRK_TUNE_MPI_IDLE) return 0;
  snprintf(m->dir, sizeof m->dir, "%s/drkc-rank-XXXXXX", getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
  if (m->role == DRK_TUNE_MPI_MEASURE && !mkdtemp(m->dir)) {
    fprintf(stderr, "drkc tune: mpi: rank %d: cannot make a work folder: %s\n", m->rank, strerror(errno));
    return 1;
  }
  int rc = 0;
  for (;;) {
    reap_sends(m);
    wire_t w;
    void *pl = NULL;
    int src;
    char e[256];
    int k = recv_msg(0, m->last_heard + DRK_TUNE_MPI_IDLE_S, &w, &pl, &src, e, sizeof e);
    if (k == 0) {
      fprintf(stderr, "drkc tune: mpi: rank %d: rank 0 has been silent for %.0f s: leaving\n", m->rank,
              DRK_TUNE_MPI_IDLE_S);
      rc = 1;
      break;
    }
    if (k < 0) {
      fprintf(stderr, "drkc tune: mpi: rank %d: %s\n", m->rank, e);
      continue;
    }
    m->last_heard = mono_s();
    bool stop = false;
    switch (w.kind) {
      case M_STOP: stop = true; break;
      case M_COMPILE: serve_compile(m, h, &w); break;
      case M_MEASURE: serve_measure(m, h, &w, pl); break;
      case M_DEVICE: serve_device(m, h); break;
      case M_PROFILE: serve_profile(m, h, &w); break;
      default: break; /* M_PING */
    }
    free(pl);
    m->last_heard = mono_s();
    if (stop) break;
  }
  if (m->role == DRK_TUNE_MPI_MEASURE) rmdir(m->dir);
  return rc;
}

void drk_tune_mpi_alive(drk_tune_mpi_t *m) {
  if (!m || m->rank == 0 || mono_s() - m->last_alive_sent < ALIVE_EVERY_S) return;
  wire_t w;
  wire_init(&w, M_ALIVE);
  send_msg(m, 0, &w, NULL, 0);
  reap_sends(m);
  m->last_alive_sent = mono_s();
}

/* ---- rank 0: the jobs ---- */
void drk_tune_mpi_local(drk_tune_mpi_t *m, const drk_tune_mpi_hooks_t *h) {
  m->local = *h;
  m->have_local = true;
}

static job_t *find_job(drk_tune_mpi_t *m, uint64_t id) {
  for (size_t i = 0; i < m->n_jobs; i++)
    if (m->jobs[i].id == id) return &m->jobs[i];
  return NULL;
}

static job_t *new_job(drk_tune_mpi_t *m, const drk_tune_mpi_cand_t *c) {
  if (m->n_jobs == m->cap_jobs) {
    size_t cap = m->cap_jobs ? 2 * m->cap_jobs : 64;
    job_t *j = realloc(m->jobs, cap * sizeof *j);
    if (!j) return NULL;
    m->jobs = j, m->cap_jobs = cap;
  }
  job_t *j = &m->jobs[m->n_jobs++];
  memset(j, 0, sizeof *j);
  j->id = m->next_id++;
  j->c = *c;
  j->st = J_QUEUED;
  j->rank = -1;
  return j;
}

uint64_t drk_tune_mpi_submit(drk_tune_mpi_t *m, const drk_tune_mpi_cand_t *c) {
  job_t *j = new_job(m, c);
  return j ? j->id : 0;
}

void drk_tune_mpi_drop(drk_tune_mpi_t *m) {
  for (size_t i = 0; i < m->n_jobs; i++) free(m->jobs[i].bytes);
  m->n_jobs = 0;
}

static int alive(const drk_tune_mpi_t *m, drk_tune_mpi_role_t role) {
  int k = 0;
  for (int r = 1; r < m->size; r++) k += m->ranks[r].role == role && !m->ranks[r].lost;
  return k;
}

static void finish_job(job_t *j, bool compiled, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void finish_job(job_t *j, bool compiled, const char *fmt, ...) {
  j->st = J_DONE;
  j->out.compiled = compiled;
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(compiled ? j->out.r.msg : j->out.msg, sizeof j->out.msg, fmt, ap);
  va_end(ap);
  free(j->bytes);
  j->bytes = NULL;
}

/* Rank r missed its deadline (or cannot be sent to): its job goes back to the queue. */
static void lose(drk_tune_mpi_t *m, int r, const char *why) {
  rank_info_t *ri = &m->ranks[r];
  ri->lost = ri->ever_lost = true;
  snprintf(ri->why, sizeof ri->why, "%s", why);
  job_t *j = ri->job ? find_job(m, ri->job) : NULL;
  ri->job = 0;
  fprintf(stderr, "drkc tune: mpi: rank %d (%s, pid %llu, %s) lost: %s%s\n", r, ri->host, (unsigned long long)ri->pid,
          role_name(ri->role), why, j && j->rank == r ? "; its candidate goes to another rank" : "");
  if (!j || j->rank != r) return;
  j->rank = -1;
  if (j->st == J_COMPILING) {
    if (++j->compile_tries >= DRK_TUNE_MPI_ATTEMPTS)
      finish_job(j, false, "compile: %d compile ranks were lost on this candidate (last: rank %d, %s)", j->compile_tries,
                 r, why);
    else
      j->st = J_QUEUED;
  } else if (j->st == J_MEASURING) {
    if (++j->measure_tries >= DRK_TUNE_MPI_ATTEMPTS) {
      j->out.r.ok = j->out.r.valid = false;
      finish_job(j, true, "%d measure ranks were lost on this candidate (last: rank %d, %s)", j->measure_tries, r, why);
    } else {
      j->st = J_COMPILED;
    }
  }
}

static int idle_rank(drk_tune_mpi_t *m, drk_tune_mpi_role_t role) {
  for (int r = 1; r < m->size; r++) {
    const rank_info_t *ri = &m->ranks[r];
    if (ri->role == role && !ri->lost && !ri->job && !ri->kind) return r;
  }
  return -1;
}

static void give(drk_tune_mpi_t *m, int r, job_t *j, int kind, double timeout_s) {
  wire_t w;
  wire_init(&w, kind);
  w.id = j->id;
  cand_to_wire(&j->c, &w);
  rank_info_t *ri = &m->ranks[r];
  bool measure = kind == M_MEASURE;
  j->st = measure ? J_MEASURING : J_COMPILING;
  j->rank = r;
  ri->job = j->id;
  ri->deadline = mono_s() + timeout_s;
  ri->limit_s = timeout_s;
  ri->last_alive = mono_s();
  if (!send_msg(m, r, &w, measure ? j->bytes : NULL, measure ? j->size : 0)) lose(m, r, "cannot send to it");
}

/* rank 0 compiles j itself (no compile rank left) */
static void compile_here(drk_tune_mpi_t *m, job_t *j) {
  double t0 = mono_s();
  char msg[256] = "";
  void *bytes = NULL;
  size_t size = 0;
  bool ok = m->local.compile(m->local.ctx, &j->c, m->o.compile_timeout_s, &bytes, &size, msg, sizeof msg);
  j->out.compile_s = mono_s() - t0;
  m->ranks[0].jobs++;
  m->ranks[0].busy_s += j->out.compile_s;
  if (!ok) {
    free(bytes);
    finish_job(j, false, "%s", msg);
    return;
  }
  j->bytes = bytes, j->size = size;
  j->st = J_COMPILED;
}

/* Hands out work, in submission order: queued candidates to idle compile ranks (rank 0
 * compiles one when none is left), compiled ones to idle measure ranks. */
static void dispatch(drk_tune_mpi_t *m) {
  /* a rank's own limit, plus the trip */
  double cmargin = 5 + m->o.compile_timeout_s / 10, mmargin = 5 + m->o.measure_timeout_s / 10;
  for (size_t i = 0; i < m->n_jobs; i++) {
    job_t *j = &m->jobs[i];
    if (j->st == J_QUEUED) {
      int r = idle_rank(m, DRK_TUNE_MPI_COMPILE);
      if (r > 0) give(m, r, j, M_COMPILE, m->o.compile_timeout_s + cmargin);
      else if (!alive(m, DRK_TUNE_MPI_COMPILE) && m->have_local) compile_here(m, j);
    }
    if (j->st == J_COMPILED) {
      int r = idle_rank(m, DRK_TUNE_MPI_MEASURE);
      if (r > 0) give(m, r, j, M_MEASURE, m->o.measure_timeout_s + mmargin);
    }
  }
}

/* the answer to a synchronous request (device, profile) */
typedef struct sync_ans {
  int src;
  wire_t w;
  void *payload;
} sync_ans_t;

static void take_answer(drk_tune_mpi_t *m, int src, wire_t *w, void *pl, sync_ans_t *sync) {
  rank_info_t *ri = &m->ranks[src];
  if (ri->lost && ri->role != DRK_TUNE_MPI_IDLE) {
    ri->lost = false;
    fprintf(stderr, "drkc tune: mpi: rank %d answered after all: back to work\n", src);
  }
  if (w->kind == M_ALIVE) {
    ri->last_alive = mono_s();
    free(pl);
    return;
  }
  if (w->kind == M_DEVICE_ANS || w->kind == M_PROFILE_ANS) {
    ri->kind = 0;
    if (sync && !sync->payload && sync->src == src) {
      sync->w = *w;
      sync->payload = pl ? pl : malloc(1);
      return;
    }
    free(pl);
    return;
  }
  if (w->kind != M_COMPILED && w->kind != M_MEASURED) {
    free(pl);
    return;
  }
  ri->jobs++;
  ri->busy_s += w->secs;
  if (ri->job == w->id) ri->job = 0;
  job_t *j = find_job(m, w->id);
  if (w->kind == M_COMPILED && j && (j->st == J_QUEUED || j->st == J_COMPILING)) {
    /* a rank it was handed to again stays busy with it; its answer will be dropped */
    j->out.compile_s = w->secs;
    j->rank = -1;
    if (w->ok) {
      j->bytes = pl, j->size = w->payload;
      j->st = J_COMPILED;
      return;
    }
    finish_job(j, false, "%s", w->msg);
  } else if (w->kind == M_MEASURED && j && (j->st == J_COMPILED || j->st == J_MEASURING)) {
    j->out.r = w->r;
    j->out.measure_s = w->secs;
    m->measure_s += w->secs;
    j->rank = -1;
    j->st = J_DONE;
    j->out.compiled = true;
    free(j->bytes);
    j->bytes = NULL;
  }
  free(pl);
}

/* One step: hand out work, take in answers until `until`, retire ranks past their deadline,
 * ping idle ranks. */
static void progress(drk_tune_mpi_t *m, double until, sync_ans_t *sync) {
  reap_sends(m);
  dispatch(m);
  for (;;) {
    wire_t w;
    void *pl;
    int src;
    char e[256];
    int k = recv_msg(MPI_ANY_SOURCE, until, &w, &pl, &src, e, sizeof e);
    if (k < 0) fprintf(stderr, "drkc tune: mpi: %s\n", e);
    if (k <= 0) break;
    if (src > 0 && src < m->size) take_answer(m, src, &w, pl, sync);
    else free(pl);
    until = 0; /* what else has come, without waiting */
    dispatch(m);
  }
  double now = mono_s();
  for (int r = 1; r < m->size; r++) {
    rank_info_t *ri = &m->ranks[r];
    if ((ri->job || ri->kind) && !ri->lost && now > ri->deadline) {
      char why[160];
      snprintf(why, sizeof why, "no answer within %.0f s", ri->limit_s);
      ri->kind = 0;
      lose(m, r, why);
    } else if (ri->job && !ri->lost && ri->role == DRK_TUNE_MPI_COMPILE && now - ri->last_alive > ALIVE_LOST_S) {
      char why[160];
      snprintf(why, sizeof why, "silent for %.0f s while compiling (no heartbeat)", now - ri->last_alive);
      lose(m, r, why);
    }
    if (!ri->lost && !ri->job && !ri->kind && ri->role != DRK_TUNE_MPI_IDLE && now - ri->last_ping > PING_EVERY_S) {
      wire_t w;
      wire_init(&w, M_PING);
      send_msg(m, r, &w, NULL, 0);
      ri->last_ping = now;
    }
  }
}

static void no_measure_rank(const drk_tune_mpi_t *m, char *msg, size_t n) {
  int at = snprintf(msg, n, "no measure rank is left");
  for (int r = 1; r < m->size && at > 0 && (size_t)at < n; r++)
    if (m->ranks[r].role == DRK_TUNE_MPI_MEASURE)
      at += snprintf(msg + at, n - (size_t)at, "; rank %d: %s", r, m->ranks[r].why);
}

bool drk_tune_mpi_wait(drk_tune_mpi_t *m, uint64_t id, drk_tune_mpi_outcome_t *out, char *msg, size_t n) {
  for (;;) {
    job_t *j = find_job(m, id);
    if (!j) {
      say(msg, n, "no candidate %llu", (unsigned long long)id);
      return false;
    }
    if (j->st == J_DONE) {
      *out = j->out;
      return true;
    }
    if (!alive(m, DRK_TUNE_MPI_MEASURE)) {
      no_measure_rank(m, msg, n);
      return false;
    }
    progress(m, mono_s() + 0.05, NULL);
  }
}

bool drk_tune_mpi_measure_module(drk_tune_mpi_t *m, const void *bytes, size_t size, const drk_tune_mpi_cand_t *c,
                                 drk_tune_result_t *out, char *msg, size_t n) {
  job_t *j = new_job(m, c);
  if (!j || !(j->bytes = malloc(size ? size : 1))) {
    say(msg, n, "out of memory");
    return false;
  }
  memcpy(j->bytes, bytes, size);
  j->size = size;
  j->st = J_COMPILED;
  drk_tune_mpi_outcome_t o;
  if (!drk_tune_mpi_wait(m, j->id, &o, msg, n)) return false;
  *out = o.r;
  return true;
}

/* A request to rank r that rank 0 waits for (device, profile); false when r is lost on it. */
static bool ask(drk_tune_mpi_t *m, int r, const wire_t *req, wire_t *out_w, void **out_payload) {
  sync_ans_t s = {.src = r};
  rank_info_t *ri = &m->ranks[r];
  ri->kind = (int)req->kind;
  ri->limit_s = m->o.measure_timeout_s + 5 + m->o.measure_timeout_s / 10;
  ri->deadline = mono_s() + ri->limit_s;
  if (!send_msg(m, r, req, NULL, 0)) {
    ri->kind = 0;
    lose(m, r, "cannot send to it");
    return false;
  }
  while (!s.payload && ri->kind && !ri->lost) progress(m, mono_s() + 0.05, &s);
  if (!s.payload) return false;
  *out_w = s.w;
  *out_payload = s.payload;
  return true;
}

bool drk_tune_mpi_device(drk_tune_mpi_t *m, drk_tune_device_t *out, char *msg, size_t n) {
  bool have = false;
  int first = -1;
  for (int r = 1; r < m->size; r++) {
    rank_info_t *ri = &m->ranks[r];
    if (ri->role != DRK_TUNE_MPI_MEASURE || ri->lost) continue;
    wire_t req, a;
    void *pl;
    wire_init(&req, M_DEVICE);
    if (!ask(m, r, &req, &a, &pl)) continue;
    free(pl);
    if (!a.ok) {
      ri->role = DRK_TUNE_MPI_IDLE;
      snprintf(ri->why, sizeof ri->why, "its GPU: %.200s", a.msg);
      fprintf(stderr, "drkc tune: mpi: rank %d measures nothing: its GPU: %s\n", r, a.msg);
      continue;
    }
    if (!have) {
      *out = a.dev;
      have = true;
      first = r;
    } else if (strcmp(a.dev.name, out->name) || a.dev.sms != out->sms || a.dev.cc != out->cc) {
      ri->role = DRK_TUNE_MPI_IDLE;
      snprintf(ri->why, sizeof ri->why, "its GPU (%.80s, %d SMs) is not rank %d's (%.80s, %d SMs)", a.dev.name, a.dev.sms, first,
               out->name, out->sms);
      fprintf(stderr, "drkc tune: mpi: rank %d measures nothing: %s\n", r, ri->why);
    }
  }
  for (int r = 1; r < m->size; r++) /* ranks left out stop now */
    if (m->ranks[r].role == DRK_TUNE_MPI_IDLE && !m->ranks[r].stopped && !m->ranks[r].lost && m->ranks[r].pid) {
      wire_t w;
      wire_init(&w, M_STOP);
      send_msg(m, r, &w, NULL, 0);
      m->ranks[r].stopped = true;
    }
  if (!have) no_measure_rank(m, msg, n);
  return have;
}

bool drk_tune_mpi_profile(drk_tune_mpi_t *m, double *out_ms, size_t n, int iters, char *msg, size_t msg_size) {
  say(msg, msg_size, "no measure rank is left");
  for (int r = 1; r < m->size; r++) {
    rank_info_t *ri = &m->ranks[r];
    if (ri->role != DRK_TUNE_MPI_MEASURE || ri->lost) continue;
    wire_t req, a;
    void *pl;
    wire_init(&req, M_PROFILE);
    req.n = n;
    req.iters = iters;
    if (!ask(m, r, &req, &a, &pl)) continue;
    bool ok = a.ok && a.n == n && a.payload == n * sizeof *out_ms;
    if (ok) memcpy(out_ms, pl, n * sizeof *out_ms);
    else say(msg, msg_size, "rank %d: %s", r, a.ok ? "a profile of the wrong size" : a.msg);
    free(pl);
    if (ok) return true;
  }
  return false;
}

double drk_tune_mpi_measure_s(const drk_tune_mpi_t *m) { return m->measure_s; }

void drk_tune_mpi_report(const drk_tune_mpi_t *m, FILE *out, FILE *log) {
  double wall = mono_s() - m->t_roles;
  for (int r = 0; r < m->size; r++) {
    const rank_info_t *ri = &m->ranks[r];
    if (out)
      fprintf(out, "drkc tune: mpi: rank %d %-7s %-16s %4d answers, busy %7.1f s of %.1f s (%4.1f%%)%s%s\n", r,
              role_name(ri->role), ri->host, ri->jobs, ri->busy_s, wall, wall > 0 ? 100 * ri->busy_s / wall : 0,
              ri->ever_lost ? ", lost: " : "", ri->ever_lost ? ri->why : "");
    if (!log) continue;
    fprintf(log, "{\"event\":\"mpi_rank\",\"rank\":%d,\"role\":\"%s\",\"host\":", r, role_name(ri->role));
    fputc('"', log);
    for (const char *p = ri->host; *p; p++)
      if (*p != '"' && *p != '\\' && (unsigned char)*p >= 0x20) fputc(*p, log);
    fprintf(log, "\",\"answers\":%d,\"busy_s\":%.3f,\"wall_s\":%.3f,\"lost\":%s,\"back\":%s}\n", ri->jobs, ri->busy_s, wall,
            ri->ever_lost ? "true" : "false", ri->ever_lost && !ri->lost ? "true" : "false");
  }
  if (log) fflush(log);
}

void drk_tune_mpi_finish(drk_tune_mpi_t *m, int rc) {
  if (!m) return;
  /* rank 0 failing: mpirun under --mca orte_abort_on_non_zero_status 0 exits 0 whatever the
   * ranks' statuses, so rank 0's status reaches it through MPI_Abort */
  bool abort_job = m->rank == 0 && m->size > 1 && rc != 0;
  if (m->rank == 0) {
    for (int r = 1; r < m->size; r++) {
      if (m->ranks[r].lost) abort_job = true;
      if (!m->ranks[r].pid || m->ranks[r].stopped) continue;
      wire_t w;
      wire_init(&w, M_STOP);
      send_msg(m, r, &w, NULL, 0);
    }
  }
  double until = mono_s() + 5; /* the last answers and stops on their way */
  while (m->n_sends && mono_s() < until) {
    reap_sends(m);
    if (m->n_sends) nap();
  }
  drk_tune_mpi_drop(m);
  free(m->jobs);
  free(m->ranks);
  free(m->sends); /* buffers of sends that never completed stay with MPI */
  free(m);
  fflush(NULL);
  /* a lost rank may be hung rather than dead: it would never reach MPI_Finalize, and every
   * other rank's finalize would wait for it. The job ends with MPI_Abort(rc) instead: mpirun
   * kills the rest and exits with rc (or with a killed rank's status, 137 for SIGKILL). */
  if (abort_job) MPI_Abort(MPI_COMM_WORLD, rc);
  MPI_Finalize();
}
