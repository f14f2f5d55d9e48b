/* `drkc db ...`: the kernel version database from the command line (search/db.h). */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "ir/support.h"
#include "search/db.h"

static const char *db_help =
    "usage: drkc db COMMAND [--db=FILE|URL] [options]\n"
    "\n"
    "The kernel version database that `drkc tune` fills and `drkc --db=FILE` compiles with:\n"
    "--db=FILE (SQLite) or --db=postgresql://USER@HOST/DBNAME (PostgreSQL; also postgres:// and\n"
    "libpq's \"host=H dbname=D\" form), else $DRKC_DB.\n"
    "\n"
    "commands:\n"
    "  list       records, one per line (newest last; --best: best first)\n"
    "  show ID    every field of one record, with its workload and target\n"
    "  best WORKLOAD --target=KEY [--version=V]\n"
    "             the record `drkc --db` would use, or why there is none\n"
    "  workloads  the workloads (key, kind, description)\n"
    "  export     records as JSON lines (-o FILE, default stdout)\n"
    "  import FILE...   JSON lines from export ('-': stdin); records already present are skipped\n"
    "  merge OTHER...   the union with other databases (files or URLs)\n"
    "  sync A B   A and B both become their union (records by uid, both ways)\n"
    "  prune --keep=N     keep the best N valid records per (workload, target, drkc version)\n"
    "  tag ID... --add=TAG|--remove=TAG\n"
    "\n"
    "`drkc db COMMAND --help` describes a command's options.\n";

static const char *filter_help =
    "  --workload=KEY   records of this workload\n"
    "  --target=KEY     records of this target (16 hex digits; `drkc db show` prints it)\n"
    "  --version=V      records of this drkc version\n"
    "  --tag=TAG        records with this tag\n"
    "  --kind=KIND      records of workloads of this kernel kind (mm_ws, rows, ...)\n"
    "  --valid          valid records only\n"
    "  --stable         stable records only (implies valid)\n"
    "  --best           best first (valid, stable, lowest time)\n"
    "  --limit=N        at most N records\n";

typedef struct db_args {
  const char *cmd;
  const char *db;
  const char *out; /* -o */
  const char *workload, *target, *version, *tag, *kind;
  const char *add_tag, *remove_tag;
  bool valid, stable, best, dry_run, help;
  bool db_given; /* --db, not $DRKC_DB */
  long limit, keep;
  int n_pos;
  char **pos;
} db_args_t;

static int usage(const db_args_t *a, const char *fmt, const char *arg) {
  fprintf(stderr, "drkc db%s%s: error: ", a->cmd ? " " : "", a->cmd ? a->cmd : "");
  fprintf(stderr, fmt, arg);
  fprintf(stderr, " (see drkc db %s--help)\n", a->cmd ? a->cmd : "");
  return 2;
}

static int fail(const db_args_t *a, const char *msg) {
  fprintf(stderr, "drkc db %s: error: %s\n", a->cmd, msg);
  return 1;
}

/* "--name=value" or "--name value": the value, "" when missing, NULL when argv[*i] is not --name. */
static const char *opt(int argc, char **argv, int *i, const char *name) {
  size_t len = strlen(name);
  const char *s = argv[*i];
  if (strncmp(s, name, len) != 0) return NULL;
  if (s[len] == '=') return s + len + 1;
  if (s[len]) return NULL;
  if (*i + 1 < argc) return argv[++*i];
  return "";
}

static bool parse_long(const char *s, long lo, long *out) {
  char *end;
  errno = 0;
  long v = strtol(s, &end, 10);
  if (!*s || *end || errno || v < lo) return false;
  *out = v;
  return true;
}

/* Parses the options every command takes; 0 ok, else the exit status. */
static int parse_args(int argc, char **argv, db_args_t *a) {
  a->pos = calloc((size_t)argc + 1, sizeof *a->pos);
  if (!a->pos) return fail(a, "out of memory");
  bool only_pos = false;
  for (int i = 2; i < argc; i++) {
    const char *s = argv[i], *v;
    if (only_pos || s[0] != '-' || !strcmp(s, "-")) {
      a->pos[a->n_pos++] = argv[i];
      continue;
    }
    if (!strcmp(s, "--")) {
      only_pos = true;
      continue;
    }
    if (!strcmp(s, "--help") || !strcmp(s, "-h")) {
      a->help = true;
      continue;
    }
#define STR_OPT(name, field)                                          \
  if ((v = opt(argc, argv, &i, name))) {                              \
    if (!*v) return usage(a, "%s needs a value", name);               \
    a->field = v;                                                     \
    continue;                                                         \
  }
    STR_OPT("--db", db)
    STR_OPT("--workload", workload)
    STR_OPT("--target", target)
    STR_OPT("--version", version)
    STR_OPT("--tag", tag)
    STR_OPT("--kind", kind)
    STR_OPT("--add", add_tag)
    STR_OPT("--remove", remove_tag)
    STR_OPT("-o", out)
    STR_OPT("--output", out)
#undef STR_OPT
    if ((v = opt(argc, argv, &i, "--limit"))) {
      if (!parse_long(v, 1, &a->limit)) return usage(a, "--limit: '%s' is not a count >= 1", v);
      continue;
    }
    if ((v = opt(argc, argv, &i, "--keep"))) {
      if (!parse_long(v, 1, &a->keep)) return usage(a, "--keep: '%s' is not a count >= 1", v);
      continue;
    }
    if (!strcmp(s, "--valid")) a->valid = true;
    else if (!strcmp(s, "--stable")) a->stable = a->valid = true;
    else if (!strcmp(s, "--best")) a->best = true;
    else if (!strcmp(s, "--dry-run")) a->dry_run = true;
    else return usage(a, "unknown option '%s'", s);
  }
  a->db_given = a->db != NULL;
  if (!a->db) a->db = getenv("DRKC_DB");
  return 0;
}

static const char *const filter_cmds[] = {"list", "export", NULL};

/* Options that only some commands take: refused elsewhere, so a typo is not ignored. */
static int check_options(const db_args_t *a) {
  bool filters = false;
  for (int i = 0; filter_cmds[i]; i++) filters |= !strcmp(a->cmd, filter_cmds[i]);
  bool is_best = !strcmp(a->cmd, "best");
  if (!filters) {
    if (a->workload) return usage(a, "%s takes no --workload", a->cmd);
    if (a->target && !is_best) return usage(a, "%s takes no --target", a->cmd);
    if (a->version && !is_best) return usage(a, "%s takes no --version", a->cmd);
    if (a->tag || a->kind || a->valid || a->best || a->limit) return usage(a, "%s takes no filter options", a->cmd);
  }
  if (a->out && strcmp(a->cmd, "export")) return usage(a, "%s takes no -o", a->cmd);
  if ((a->add_tag || a->remove_tag) && strcmp(a->cmd, "tag")) return usage(a, "%s takes no --add/--remove", a->cmd);
  if ((a->keep || a->dry_run) && strcmp(a->cmd, "prune")) return usage(a, "%s takes no --keep/--dry-run", a->cmd);
  return 0;
}

static int open_db(const db_args_t *a, bool readonly, drk_search_db_t **db) {
  if (!a->db || !*a->db) {
    fprintf(stderr, "drkc db %s: error: no database: give --db=FILE or --db=postgresql://... (or set DRKC_DB)\n",
            a->cmd);
    return 2;
  }
  char err[1200];
  if (!drk_search_db_open(a->db, readonly, db, err, sizeof err)) return fail(a, err);
  return 0;
}

static void print_num(FILE *o, const char *fmt, double x) {
  if (x < 0) fprintf(o, "%s", "-");
  else fprintf(o, fmt, x);
}

static bool list_one(void *ctx, const drk_search_record_t *r) {
  FILE *o = ctx;
  fprintf(o, "%-6lld %s %s %-8s ", (long long)r->id, r->workload, r->target, r->drkc_version);
  print_num(o, "%10.3f", r->time_us);
  fprintf(o, " %8.4f %-7s %-6s %-20s %s", r->reward, r->valid ? "valid" : "INVALID", r->stable ? "stable" : "-",
          r->kernel[0] ? r->kernel : "-", r->schedule);
  if (r->tags[0]) fprintf(o, "  [%s]", r->tags);
  fputc('\n', o);
  return !ferror(o);
}

static void query_of(const db_args_t *a, drk_search_query_t *q) {
  memset(q, 0, sizeof *q);
  q->workload = a->workload;
  q->target = a->target;
  q->drkc_version = a->version;
  q->tag = a->tag;
  q->kind = a->kind;
  q->valid_only = a->valid;
  q->stable_only = a->stable;
  q->best_first = a->best;
  q->limit = a->limit;
}

static int cmd_list(const db_args_t *a) {
  if (a->help) {
    printf("usage: drkc db list [--db=FILE] [filters]\n\nOne record per line: id, workload, target, drkc version, "
           "time (us), reward, valid, stable, kernel, schedule, [tags].\n\nfilters:\n%s",
           filter_help);
    return 0;
  }
  if (a->n_pos) return usage(a, "unexpected argument '%s'", a->pos[0]);
  drk_search_db_t *db;
  int rc = open_db(a, true, &db);
  if (rc) return rc;
  drk_search_query_t q;
  query_of(a, &q);
  char err[1200];
  printf("%-6s %-32s %-16s %-8s %10s %8s %-7s %-6s %-20s %s\n", "id", "workload", "target", "version", "time_us",
         "reward", "valid", "stable", "kernel", "schedule");
  bool ok = drk_search_db_query(db, &q, list_one, stdout, err, sizeof err);
  drk_search_db_close(db);
  return ok ? 0 : fail(a, err);
}

static void show_record(drk_search_db_t *db, const drk_search_record_t *r) {
  char kind[64] = "", desc[1024] = "", fp[512] = "";
  drk_search_db_workload(db, r->workload, kind, sizeof kind, desc, sizeof desc);
  drk_search_target_t t;
  if (drk_search_db_target(db, r->target, &t)) drk_search_target_format(&t, fp, sizeof fp);
  printf("record %lld (uid %s)\n", (long long)r->id, r->uid);
  printf("  workload     %s  %s%s%s\n", r->workload, kind, kind[0] && desc[0] ? ": " : "", desc);
  printf("  target       %s  %s\n", r->target, fp);
  printf("  kernel       %s\n  schedule     %s\n", r->kernel, r->schedule);
  printf("  valid        %s%s%s\n", r->valid ? "yes" : "NO", r->reason[0] ? ": " : "", r->reason);
  printf("  stable       %s\n", r->stable ? "yes" : "no");
  printf("  time_us      ");
  print_num(stdout, "%.4f", r->time_us);
  printf("\n  tflops       ");
  print_num(stdout, "%.4f", r->tflops);
  printf("\n  gbs          ");
  print_num(stdout, "%.4f", r->gbs);
  printf("\n  energy_j     ");
  print_num(stdout, "%.6g", r->energy_j);
  printf("\n  mem_bytes    ");
  print_num(stdout, "%.0f", r->mem_bytes);
  printf("\n  error        ");
  print_num(stdout, "%.3g", r->error);
  printf("\n  reward       %.6f (weights %g, %g, %g, %g)\n", r->reward, r->weights[0], r->weights[1], r->weights[2],
         r->weights[3]);
  printf("  drkc         %s\n  provenance   host %s, user %s, model %s, created %lld\n", r->drkc_version, r->host,
         r->user, r->model[0] ? r->model : "-", (long long)r->created);
  printf("  policy       %s, trial %d\n  tags         %s\n", r->policy[0] ? r->policy : "-", r->trial,
         r->tags[0] ? r->tags : "-");
}

typedef struct show_ctx {
  drk_search_db_t *db;
  int n;
} show_ctx_t;

static bool show_one(void *vctx, const drk_search_record_t *r) {
  show_ctx_t *c = vctx;
  show_record(c->db, r);
  c->n++;
  return true;
}

static bool parse_id(const char *s, int64_t *id) {
  long v;
  if (!parse_long(s, 1, &v)) return false;
  *id = v;
  return true;
}

static int cmd_show(const db_args_t *a) {
  if (a->help) {
    printf("usage: drkc db show ID... [--db=FILE]\n\nEvery field of the records with these ids (`drkc db list` "
           "prints ids), with the workload's description and the target's fingerprint.\n");
    return 0;
  }
  if (!a->n_pos) return usage(a, "%s", "which record? (drkc db show ID)");
  drk_search_db_t *db;
  int rc = open_db(a, true, &db);
  if (rc) return rc;
  int status = 0;
  for (int i = 0; i < a->n_pos; i++) {
    int64_t id;
    if (!parse_id(a->pos[i], &id)) {
      drk_search_db_close(db);
      return usage(a, "'%s' is not a record id", a->pos[i]);
    }
    drk_search_query_t q = {.id = id};
    show_ctx_t c = {db, 0};
    char err[1200];
    if (!drk_search_db_query(db, &q, show_one, &c, err, sizeof err)) {
      status = fail(a, err);
      break;
    }
    if (!c.n) {
      char msg[1400];
      snprintf(msg, sizeof msg, "%s: no record %s", a->db, a->pos[i]);
      status = fail(a, msg);
    }
  }
  drk_search_db_close(db);
  return status;
}

static int cmd_best(const db_args_t *a) {
  if (a->help) {
    printf("usage: drkc db best WORKLOAD --target=KEY [--version=V] [--db=FILE]\n\nThe best stable, valid record "
           "of the workload on the target for drkc version V (default: this drkc's), which `drkc --db` uses.\n"
           "When there is none for exactly that key, says whether one exists for another drkc version or another "
           "target (never used silently) and exits 1.\n");
    return 0;
  }
  if (a->n_pos != 1) return usage(a, "%s", "expected one workload key (drkc db best WORKLOAD --target=KEY)");
  if (!a->target) return usage(a, "%s", "--target=KEY is required");
  drk_search_db_t *db;
  int rc = open_db(a, true, &db);
  if (rc) return rc;
  drk_search_record_t r;
  char err[1200];
  const char *version = a->version ? a->version : DRK_VERSION_STRING;
  drk_search_db_lookup_t l = drk_search_db_best(db, a->pos[0], a->target, version, &r, err, sizeof err);
  int status = 0;
  char msg[2000];
  switch (l) {
    case DRK_SEARCH_DB_FOUND: show_record(db, &r); break;
    case DRK_SEARCH_DB_NONE:
      snprintf(msg, sizeof msg, "no stable valid record of workload %s", a->pos[0]);
      status = fail(a, msg);
      break;
    case DRK_SEARCH_DB_OTHER_VERSION:
      snprintf(msg, sizeof msg,
               "no record of workload %s on target %s for drkc %s; record %lld is from drkc %s (not used: re-tune, "
               "or pass --version=%s)",
               a->pos[0], a->target, version, (long long)r.id, r.drkc_version, r.drkc_version);
      status = fail(a, msg);
      break;
    case DRK_SEARCH_DB_OTHER_TARGET:
      snprintf(msg, sizeof msg,
               "no record of workload %s on target %s; record %lld is from target %s (not used: tune on this GPU)",
               a->pos[0], a->target, (long long)r.id, r.target);
      status = fail(a, msg);
      break;
    case DRK_SEARCH_DB_FAILED: status = fail(a, err); break;
  }
  drk_search_db_close(db);
  return status;
}

static bool workload_one(void *ctx, const char *key, const char *kind, const char *desc) {
  printf("%s %-10s %s\n", key, kind[0] ? kind : "-", desc);
  (void)ctx;
  return true;
}

static int cmd_workloads(const db_args_t *a) {
  if (a->help) {
    printf("usage: drkc db workloads [--db=FILE]\n\nEvery workload: key, kernel kind, description.\n");
    return 0;
  }
  if (a->n_pos) return usage(a, "unexpected argument '%s'", a->pos[0]);
  drk_search_db_t *db;
  int rc = open_db(a, true, &db);
  if (rc) return rc;
  char err[1200];
  bool ok = drk_search_db_workloads(db, workload_one, NULL, err, sizeof err);
  drk_search_db_close(db);
  return ok ? 0 : fail(a, err);
}

static int cmd_export(const db_args_t *a) {
  if (a->help) {
    printf("usage: drkc db export [--db=FILE] [-o FILE] [filters]\n\nRecords as JSON lines, each with its "
           "workload's kind and description and its target's fingerprint (`drkc db import` reads them).\n\n"
           "filters:\n%s",
           filter_help);
    return 0;
  }
  if (a->n_pos) return usage(a, "unexpected argument '%s'", a->pos[0]);
  drk_search_db_t *db;
  int rc = open_db(a, true, &db);
  if (rc) return rc;
  FILE *out = stdout;
  if (a->out && strcmp(a->out, "-")) {
    out = fopen(a->out, "w");
    if (!out) {
      char msg[1200];
      snprintf(msg, sizeof msg, "%s: cannot write: %s", a->out, strerror(errno));
      drk_search_db_close(db);
      return fail(a, msg);
    }
  }
  drk_search_query_t q;
  query_of(a, &q);
  char err[1200];
  bool ok = drk_search_db_export(db, &q, out, err, sizeof err);
  if (out != stdout && fclose(out) != 0 && ok) {
    snprintf(err, sizeof err, "%s: write failed: %s", a->out, strerror(errno));
    ok = false;
  }
  drk_search_db_close(db);
  return ok ? 0 : fail(a, err);
}

static int cmd_import(const db_args_t *a) {
  if (a->help) {
    printf("usage: drkc db import FILE... [--db=FILE]\n\nJSON lines written by `drkc db export` ('-': stdin), "
           "each file in one transaction (a bad line stores nothing of its file and names file:line). Records "
           "already present (same uid) are skipped.\n");
    return 0;
  }
  if (!a->n_pos) return usage(a, "%s", "which files? (drkc db import FILE...)");
  drk_search_db_t *db;
  int rc = open_db(a, false, &db);
  if (rc) return rc;
  int status = 0;
  for (int i = 0; i < a->n_pos && !status; i++) {
    const char *path = a->pos[i];
    bool is_stdin = !strcmp(path, "-");
    FILE *in = is_stdin ? stdin : fopen(path, "r");
    char err[1400];
    if (!in) {
      snprintf(err, sizeof err, "%s: cannot open: %s", path, strerror(errno));
      status = fail(a, err);
      break;
    }
    long added = 0, skipped = 0;
    if (!drk_search_db_import(db, in, is_stdin ? "<stdin>" : path, &added, &skipped, err, sizeof err))
      status = fail(a, err);
    else
      printf("%s: %ld records added, %ld already present\n", is_stdin ? "<stdin>" : path, added, skipped);
    if (!is_stdin) fclose(in);
  }
  drk_search_db_close(db);
  return status;
}

static int cmd_merge(const db_args_t *a) {
  if (a->help) {
    printf("usage: drkc db merge OTHER... [--db=FILE|URL]\n\nAdds the workloads, targets and records of other "
           "databases (SQLite files or PostgreSQL URLs) that this one lacks (records by uid; a record stable in "
           "either is stable). The best record of every key is then the better of the two.\n");
    return 0;
  }
  if (!a->n_pos) return usage(a, "%s", "which databases? (drkc db merge OTHER...)");
  drk_search_db_t *db;
  int rc = open_db(a, false, &db);
  if (rc) return rc;
  int status = 0;
  for (int i = 0; i < a->n_pos && !status; i++) {
    long added = 0, skipped = 0;
    char err[1400];
    if (!drk_search_db_merge(db, a->pos[i], &added, &skipped, err, sizeof err)) status = fail(a, err);
    else printf("%s: %ld records added, %ld already present\n", a->pos[i], added, skipped);
  }
  drk_search_db_close(db);
  return status;
}

static void print_copied(const char *from, const char *to, long added, long skipped, long stabilized) {
  printf("%s -> %s: %ld records added, %ld already present", from, to, added, skipped);
  if (stabilized) printf(" (%ld of them made stable)", stabilized);
  putchar('\n');
}

static int cmd_sync(const db_args_t *a) {
  if (a->help) {
    printf("usage: drkc db sync A B\n\nMakes both databases the union of the two: the records of B that A lacks "
           "(by uid) are added to A, then those of A that B lacks to B, each direction in one transaction, with "
           "their workloads and targets; a record stable in either becomes stable in both. A and B are SQLite "
           "files or PostgreSQL URLs (typically a local file and the team's shared database: "
           "drkc db sync model.db postgresql://tuner@dbhost/kernels). A missing file is created.\n");
    return 0;
  }
  if (a->n_pos != 2) return usage(a, "%s", "expected two databases (drkc db sync A B)");
  if (a->db_given) return usage(a, "%s", "sync takes its two databases as arguments, not --db");
  if (drk_search_db_same(a->pos[0], a->pos[1])) return usage(a, "%s", "A and B are one database");
  drk_search_db_t *x, *y;
  char err[1400];
  if (!drk_search_db_open(a->pos[0], false, &x, err, sizeof err)) return fail(a, err);
  if (!drk_search_db_open(a->pos[1], false, &y, err, sizeof err)) {
    drk_search_db_close(x);
    return fail(a, err);
  }
  long add1 = 0, skip1 = 0, stab1 = 0, add2 = 0, skip2 = 0, stab2 = 0;
  int status = 0;
  if (!drk_search_db_merge_from(x, y, &add1, &skip1, &stab1, err, sizeof err)) status = fail(a, err);
  else print_copied(drk_search_db_path(y), drk_search_db_path(x), add1, skip1, stab1);
  if (!status) {
    if (!drk_search_db_merge_from(y, x, &add2, &skip2, &stab2, err, sizeof err)) status = fail(a, err);
    else print_copied(drk_search_db_path(x), drk_search_db_path(y), add2, skip2, stab2);
  }
  drk_search_db_close(x);
  drk_search_db_close(y);
  return status;
}

static int cmd_prune(const db_args_t *a) {
  if (a->help) {
    printf("usage: drkc db prune --keep=N [--dry-run] [--db=FILE]\n\nKeeps the best N valid records of every "
           "(workload, target, drkc version) and deletes the others, invalid ones included (a later --resume "
           "measures deleted points again). --dry-run counts.\n");
    return 0;
  }
  if (a->n_pos) return usage(a, "unexpected argument '%s'", a->pos[0]);
  if (!a->keep) return usage(a, "%s", "--keep=N is required");
  drk_search_db_t *db;
  int rc = open_db(a, false, &db);
  if (rc) return rc;
  long deleted = 0;
  char err[1200];
  bool ok = drk_search_db_prune(db, (int)a->keep, a->dry_run, &deleted, err, sizeof err);
  drk_search_db_close(db);
  if (!ok) return fail(a, err);
  printf("%ld records %s\n", deleted, a->dry_run ? "would be deleted" : "deleted");
  return 0;
}

static int cmd_tag(const db_args_t *a) {
  if (a->help) {
    printf("usage: drkc db tag ID... --add=TAG|--remove=TAG [--db=FILE]\n\nAdds or removes a tag (letters, "
           "digits, _ . = : + - /) of records.\n");
    return 0;
  }
  if (!a->n_pos) return usage(a, "%s", "which records? (drkc db tag ID... --add=TAG)");
  if (!a->add_tag == !a->remove_tag) return usage(a, "%s", "give one of --add=TAG or --remove=TAG");
  for (int i = 0; i < a->n_pos; i++) {
    int64_t id;
    if (!parse_id(a->pos[i], &id)) return usage(a, "'%s' is not a record id", a->pos[i]);
  }
  drk_search_db_t *db;
  int rc = open_db(a, false, &db);
  if (rc) return rc;
  int status = 0;
  char err[1200];
  if (!drk_search_db_begin(db, err, sizeof err)) status = fail(a, err);
  for (int i = 0; i < a->n_pos && !status; i++) {
    int64_t id = 0;
    parse_id(a->pos[i], &id);
    if (!drk_search_db_tag(db, id, a->add_tag ? a->add_tag : a->remove_tag, a->remove_tag != NULL, err, sizeof err))
      status = fail(a, err);
  }
  if (!status && !drk_search_db_commit(db, err, sizeof err)) status = fail(a, err);
  if (status) drk_search_db_rollback(db, err, sizeof err);
  drk_search_db_close(db);
  return status;
}

int drk_search_db_main(int argc, char **argv) {
  db_args_t a;
  memset(&a, 0, sizeof a);
  if (argc < 2 || !strcmp(argv[1], "--help") || !strcmp(argv[1], "-h") || !strcmp(argv[1], "help")) {
    fputs(db_help, argc < 2 ? stderr : stdout);
    return argc < 2 ? 2 : 0;
  }
  static const struct {
    const char *name;
    int (*fn)(const db_args_t *);
  } cmds[] = {{"list", cmd_list},       {"show", cmd_show},     {"best", cmd_best},   {"workloads", cmd_workloads},
              {"export", cmd_export},   {"import", cmd_import}, {"merge", cmd_merge}, {"sync", cmd_sync},
              {"prune", cmd_prune},     {"tag", cmd_tag}};
  int (*fn)(const db_args_t *) = NULL;
  for (size_t i = 0; i < sizeof cmds / sizeof cmds[0]; i++)
    if (!strcmp(argv[1], cmds[i].name)) {
      fn = cmds[i].fn;
      a.cmd = cmds[i].name;
    }
  if (!fn) {
    fprintf(stderr,
            "drkc db: error: unknown command '%s' (list, show, best, workloads, export, import, merge, sync, prune, "
            "tag; "
            "see drkc db --help)\n",
            argv[1]);
    return 2;
  }
  int rc = parse_args(argc, argv, &a);
  if (!rc && !a.help) rc = check_options(&a);
  if (!rc) rc = fn(&a);
  free(a.pos);
  return rc;
}
