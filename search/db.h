/* The kernel version database: every measured candidate of every tune, in an SQLite file (WAL
 * mode) or a PostgreSQL database (a postgresql:// or postgres:// URL, or libpq's key=value
 * form: "host=db1 dbname=drkc"), with one schema and the same semantics. *
 * Tables (schema version 1):
 *   workloads(key, kind, description, first_seen)
 *   targets(key, fingerprint, arch, sms, sm_mhz, mem_mhz, bw_gbs, l2_bytes, driver, cuda, name, first_seen)
 *   records(id, uid, workload, target, kernel, schedule, valid, reason, time_us, tflops, gbs, energy_j,
 *           mem_bytes, error, reward, w_alpha..w_delta, drkc_version, host, created, model, user, tags,
 *           stable, policy, trial)
 * A record's key is (workload, target, drkc_version). Its uid (32 hex digits, made when it is
 * first stored) identifies it across databases: merge and import skip records already there.
 *
 * The best record of a key is the valid, stable record with the lowest time (ties: higher
 * reward, then the older record). Rewards steer a tune, but weights change between stages
 * and configs, so the database ranks by the measured time, the one quantity comparable
 * across tunes. An invalid record (valid = 0: wrong output, crash, hang) is kept for the
 * log and is never returned as best, whatever its time. A stable record is one whose
 * measurement was confirmed (the tuner re-measures its winner).
 *
 * Lookups never return another drkc version's or another target's record silently: they
 * return DRK_SEARCH_DB_OTHER_VERSION or DRK_SEARCH_DB_OTHER_TARGET (with that record, so the
 * caller can say what it found) and the caller decides (re-tune, or refuse).
 *
 * Concurrency and durability, SQLite: WAL mode, synchronous=FULL, a busy timeout (default 30 s) and
 * write transactions taken with BEGIN IMMEDIATE (so a writer waits instead of failing on a
 * stale snapshot): several processes may write one file at once and lose nothing. Outside an
 * explicit transaction every put commits on its own, so a process killed with SIGKILL loses
 * at most the record it was writing; a transaction from drk_search_db_begin commits at
 * drk_search_db_commit.
 * PostgreSQL: READ COMMITTED transactions; UNIQUE(uid) with INSERT ... ON CONFLICT DO NOTHING
 * (two writers of one record store it once) and a generated id; a transaction of drkc's own
 * that fails on a serialization failure (40001), a deadlock (40P01) or a lost connection is
 * rolled back and run again (the connection re-established), within the busy timeout. Writers
 * on many hosts at once lose nothing and duplicate nothing. The schema is created under an
 * advisory lock (two first writers at once create it once), in the connection's current schema
 * (search_path: options=-csearch_path=NAME in the URL keeps drkc's tables apart).
 *
 * Errors: functions return false (or DRK_SEARCH_DB_FAILED) with a message in err (size n)
 * naming the database (a URL with its password hidden) and the engine's message. Handles are not shared between threads. */
#ifndef DRK_SEARCH_DB_H
#define DRK_SEARCH_DB_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "search/features.h"

typedef struct drk_search_db drk_search_db_t;

/* Fixed-size text fields: a record is a plain value. */
typedef struct drk_search_record {
  int64_t id;         /* rowid in this database (0 before put) */
  char uid[33];       /* made by put when empty */
  char workload[40];  /* workload key */
  char target[17];    /* target key (drk_search_target_key) */
  char kernel[128];   /* kernel name in the model it was tuned in */
  char schedule[512]; /* canonical point text (drk_search_point_format) */
  bool valid;
  char reason[256];   /* why invalid ("" when valid) */
  double time_us, tflops, gbs, energy_j, mem_bytes, error; /* < 0: unknown */
  double reward;
  double weights[4];  /* alpha, beta, gamma, delta the reward was computed with */
  char drkc_version[32];
  char host[64];
  int64_t created;    /* unix time, seconds */
  char model[256];
  char user[64];
  char tags[256];     /* comma-separated, e.g. "arch=sm_90a,fp16,llm" */
  bool stable;
  char policy[32];    /* which policy proposed it */
  int trial;          /* the trial number in its tune */
} drk_search_record_t;

/* A record with every metric unknown, created now, this host/user, this drkc version. */
void drk_search_record_init(drk_search_record_t *r);

/* Opens (creating when missing, unless readonly) the database at path: a file, or a PostgreSQL
 * URL (drk_search_db_is_url; the database must exist, drkc creates its tables). A file or a
 * database that is not a drkc database, or one of a newer schema, is an error; so is a URL in
 * a drkc built without libpq (DRK_POSTGRES off), saying so. */
bool drk_search_db_open(const char *path, bool readonly, drk_search_db_t **out, char *err, size_t n);
/* Whether path names a PostgreSQL database (postgresql://, postgres://, host=/dbname=/... ). */
bool drk_search_db_is_url(const char *path);
/* Whether two --db arguments name one database (the same URL text, or one file). */
bool drk_search_db_same(const char *a, const char *b);
/* "SQLite" or "PostgreSQL". */
const char *drk_search_db_backend(const drk_search_db_t *db);
/* How many transactions of this handle failed where running them again could succeed
 * (serialization failure, deadlock, lost connection) and were run again. */
long drk_search_db_retries(const drk_search_db_t *db);
void drk_search_db_close(drk_search_db_t *db);
/* How long a writer waits for another process's lock (SQLite), and how long a transaction that
 * failed where running it again may succeed is run again (both; default 30000 ms). */
void drk_search_db_set_busy_timeout(drk_search_db_t *db, int ms);
/* The database's name for messages (a URL's password hidden). */
const char *drk_search_db_path(const drk_search_db_t *db);

/* An explicit write transaction (BEGIN IMMEDIATE): puts inside it commit together. */
bool drk_search_db_begin(drk_search_db_t *db, char *err, size_t n);
bool drk_search_db_commit(drk_search_db_t *db, char *err, size_t n);
bool drk_search_db_rollback(drk_search_db_t *db, char *err, size_t n);

/* Adds the workload when its key is new (the first description and time are kept; an empty
 * description is filled in later). */
bool drk_search_db_put_workload(drk_search_db_t *db, const char *key, const char *kind, const char *description,
                                char *err, size_t n);
/* Adds the target when new; out_key (may be NULL) gets its key. */
bool drk_search_db_put_target(drk_search_db_t *db, const drk_search_target_t *t, char out_key[17], char *err, size_t n);
/* Stores r (its workload must have been put; its target too, or the target key must exist).
 * r->id gets the new rowid and r->uid is made when empty. A record whose uid is already
 * there is not stored again (true, r->id = the existing row). */
bool drk_search_db_put_record(drk_search_db_t *db, drk_search_record_t *r, char *err, size_t n);
/* Sets the stable flag of record id. False when there is no such record, or it is invalid
 * (an invalid record is never stable). */
bool drk_search_db_set_stable(drk_search_db_t *db, int64_t id, bool stable, char *err, size_t n);
/* Adds (remove = false) or removes a tag of record id. */
bool drk_search_db_tag(drk_search_db_t *db, int64_t id, const char *tag, bool remove, char *err, size_t n);

typedef enum drk_search_db_lookup {
  DRK_SEARCH_DB_FOUND,         /* the best of exactly this key */
  DRK_SEARCH_DB_NONE,          /* no usable record of this workload at all */
  DRK_SEARCH_DB_OTHER_VERSION, /* none for this version; *out: the best of this target, another drkc version */
  DRK_SEARCH_DB_OTHER_TARGET,  /* none for this target; *out: the best of another target */
  DRK_SEARCH_DB_FAILED         /* an error (err says which) */
} drk_search_db_lookup_t;

/* The best record (see above) of (workload, target, drkc_version) into *out. */
drk_search_db_lookup_t drk_search_db_best(drk_search_db_t *db, const char *workload, const char *target,
                                          const char *drkc_version, drk_search_record_t *out, char *err, size_t n);
const char *drk_search_db_lookup_name(drk_search_db_lookup_t l);

/* Which records a query visits (NULL / false fields: any). */
typedef struct drk_search_query {
  const char *workload, *target, *drkc_version, *tag, *kind;
  bool valid_only, stable_only;
  bool best_first; /* order: best first (valid, stable, time); otherwise by id */
  int64_t id;      /* > 0: that record only */
  long limit;      /* > 0: at most this many */
} drk_search_query_t;

/* Calls each(ctx, record) for the records q selects; each returns false to stop. */
bool drk_search_db_query(drk_search_db_t *db, const drk_search_query_t *q,
                         bool (*each)(void *ctx, const drk_search_record_t *r), void *ctx, char *err, size_t n);
/* The description and kind of a workload; false when unknown. */
bool drk_search_db_workload(drk_search_db_t *db, const char *key, char *kind, size_t kind_n, char *desc, size_t desc_n);
/* The fingerprint of a target key; false when unknown. */
bool drk_search_db_target(drk_search_db_t *db, const char *key, drk_search_target_t *out);
/* Calls each(ctx, key, kind, description) for every workload. */
bool drk_search_db_workloads(drk_search_db_t *db, bool (*each)(void *ctx, const char *key, const char *kind,
                                                               const char *desc),
                             void *ctx, char *err, size_t n);

/* JSON lines, a record per line with its workload's kind and description and its target's
 * fingerprint inline (so a line is self-contained). */
bool drk_search_db_export(drk_search_db_t *db, const drk_search_query_t *q, FILE *out, char *err, size_t n);
/* Reads JSON lines written by export (path names the input in errors: "path:line: error:
 * ..."), in one transaction: all lines or none. *out_added / *out_skipped (may be NULL) count
 * new records and those already present (same uid). */
bool drk_search_db_import(drk_search_db_t *db, FILE *in, const char *path, long *out_added, long *out_skipped,
                          char *err, size_t n);
/* The union with the database at other_path (a file or a URL; workloads, targets, records not
 * yet present by uid, a record stable in either made stable), in one transaction. The best
 * record of every key is then the better of the two. */
bool drk_search_db_merge(drk_search_db_t *db, const char *other_path, long *out_added, long *out_skipped, char *err,
                         size_t n);
/* The same from an open database (of either backend); *out_stabilized (may be NULL) counts
 * records already present that became stable. `drkc db sync A B` is A from B, then B from A. */
bool drk_search_db_merge_from(drk_search_db_t *db, drk_search_db_t *other, long *out_added, long *out_skipped,
                              long *out_stabilized, char *err, size_t n);
/* Keeps the best `keep` valid records per key (workload, target, drkc version) and deletes
 * the rest (invalid ones included); dry_run counts without deleting. */
bool drk_search_db_prune(drk_search_db_t *db, int keep, bool dry_run, long *out_deleted, char *err, size_t n);

/* `drkc db list|show|best|export|import|merge|sync|prune|tag ...` (argv[0] is "db"); --help for
 * each. Exit status: 0 done, 1 error, 2 usage. */
int drk_search_db_main(int argc, char **argv);

#endif
