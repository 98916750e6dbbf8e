/* Exercises every export of queuebox.h against a real PostgreSQL, success and error paths,
 * freeing everything it receives, so that valgrind can prove there is no leak and no use
 * after free. Usage: abi_test <url of an empty database> <url of a second empty database>
 * The test part (scripts/test.d/30-c-abi.sh) creates both databases and runs this under
 * valgrind. Rows are inserted and checked with psql, never through the library under test. */
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "queuebox.h"

static int failures = 0;
static const char *db_url;

#define CHECK(cond, ...)                                                            \
  do {                                                                              \
    if (!(cond)) {                                                                  \
      failures++;                                                                   \
      fprintf(stderr, "FAIL %s:%d: %s: ", __FILE__, __LINE__, #cond);               \
      fprintf(stderr, __VA_ARGS__);                                                 \
      fprintf(stderr, "\n");                                                        \
    }                                                                               \
  } while (0)

/* Checks a status and the error object that must come with it, then frees the error. */
static void expect_status(QbStatus got, QbError *err, QbStatus want, const char *code, const char *needle, const char *what) {
  CHECK(got == want, "%s: status %d (%s), want %d (%s); message: %s", what, got, qb_status_name(got), want,
        qb_status_name(want), err ? err->message : "(none)");
  if (want == QB_OK) {
    CHECK(err == NULL, "%s: an error object came with QB_OK", what);
  } else if (err == NULL) {
    CHECK(err != NULL, "%s: no error object came with a failure", what);
  } else {
    CHECK(err->kind == want, "%s: error kind %d", what, err->kind);
    CHECK(strcmp(err->kind_name, qb_status_name(want)) == 0, "%s: kind_name %s", what, err->kind_name);
    CHECK(err->message != NULL && strlen(err->message) > 0, "%s: empty message", what);
    if (code) CHECK(err->code && strcmp(err->code, code) == 0, "%s: code %s, want %s", what, err->code ? err->code : "NULL", code);
    if (needle) CHECK(err->message && strstr(err->message, needle), "%s: message '%s' lacks '%s'", what, err->message, needle);
  }
  qb_error_free(err);
}

/* Evaluates the call before reading `err` (C leaves the order of arguments unspecified). */
#define EXPECT(call, ...)                  \
  do {                                     \
    QbStatus st_ = (call);                 \
    expect_status(st_, err, __VA_ARGS__);  \
    err = NULL;                            \
  } while (0)

/* Runs SQL through psql and returns its first output line (trimmed), caller frees. */
static char *sql(const char *url, const char *text) {
  char path[] = "/tmp/qb_abi_sql_XXXXXX";
  int fd = mkstemp(path);
  if (fd < 0) { perror("mkstemp"); exit(2); }
  FILE *f = fdopen(fd, "w");
  fputs(text, f);
  fclose(f);
  char cmd[1024];
  snprintf(cmd, sizeof cmd, "psql '%s' -X -q -t -A -v ON_ERROR_STOP=1 -f %s", url, path);
  FILE *p = popen(cmd, "r");
  char line[4096] = "";
  if (!fgets(line, sizeof line, p)) line[0] = 0;
  char rest[4096];
  while (fgets(rest, sizeof rest, p)) {}
  int rc = pclose(p);
  unlink(path);
  if (rc != 0) { fprintf(stderr, "psql failed (%d) on: %s\n", rc, text); exit(2); }
  line[strcspn(line, "\r\n")] = 0;
  return strdup(line);
}

static void sql_expect(const char *text, const char *want, const char *what) {
  char *got = sql(db_url, text);
  CHECK(strcmp(got, want) == 0, "%s: got '%s', want '%s'", what, got, want);
  free(got);
}

static void insert_rows(const char *source, int n) {
  char buf[512];
  snprintf(buf, sizeof buf,
           "INSERT INTO inbox (source, idempotency_key, payload, consumption) "
           "SELECT '%s', 'k' || g, jsonb_build_object('n', g), 'pull' FROM generate_series(1, %d) g;",
           source, n);
  free(sql(db_url, buf));
}

/* ---- a one-shot latch for callbacks ---- */
typedef struct {
  pthread_mutex_t mu;
  pthread_cond_t cv;
  int fired;
  QbStatus status;
  QbError *error;
  void *ptr;      /* worker or task */
  char *json;     /* message, rows, report */
  uint64_t count;
  bool cancelled;
  QbStatus nested; /* status of a blocking call attempted inside the callback */
} Latch;

static void latch_init(Latch *l) {
  memset(l, 0, sizeof *l);
  pthread_mutex_init(&l->mu, NULL);
  pthread_cond_init(&l->cv, NULL);
}
static void latch_fire(Latch *l) {
  pthread_mutex_lock(&l->mu);
  l->fired++;
  pthread_cond_broadcast(&l->cv);
  pthread_mutex_unlock(&l->mu);
}
static void latch_wait(Latch *l) {
  pthread_mutex_lock(&l->mu);
  while (!l->fired) pthread_cond_wait(&l->cv, &l->mu);
  pthread_mutex_unlock(&l->mu);
}
static void latch_destroy(Latch *l) {
  pthread_mutex_destroy(&l->mu);
  pthread_cond_destroy(&l->cv);
}

static void on_worker(void *ud, QbStatus st, QbWorker *w, QbError *e) {
  Latch *l = ud; l->status = st; l->ptr = w; l->error = e; latch_fire(l);
}
static void on_task(void *ud, QbStatus st, QbTask *t, char *json, QbError *e) {
  Latch *l = ud; l->status = st; l->ptr = t; l->json = json; l->error = e;
  /* A blocking call on a runtime thread must be refused, not deadlock. */
  if (t) {
    QbError *ne = NULL;
    l->nested = qb_task_complete_blocking(t, &ne);
    qb_error_free(ne);
  }
  latch_fire(l);
}
static void on_count(void *ud, QbStatus st, uint64_t n, QbError *e) {
  Latch *l = ud; l->status = st; l->count = n; l->error = e; latch_fire(l);
}
static void on_done(void *ud, QbStatus st, QbError *e) {
  Latch *l = ud; l->status = st; l->error = e; latch_fire(l);
}
static void on_string(void *ud, QbStatus st, char *json, QbError *e) {
  Latch *l = ud; l->status = st; l->json = json; l->error = e; latch_fire(l);
}
static void on_cancel(void *ud, bool cancelled) {
  Latch *l = ud; l->cancelled = cancelled; latch_fire(l);
}

/* ---- tests ---- */

static void static_strings_and_null_frees(void) {
  CHECK(strcmp(qb_version(), "0.1.0") == 0, "version %s", qb_version());
  CHECK(strcmp(qb_status_name(QB_ERR_CLAIM_LOST), "claim_lost") == 0, "name");
  CHECK(strcmp(qb_status_name(QB_CANCELLED), "cancelled") == 0, "name");
  CHECK(strcmp(qb_status_name(99), "unknown") == 0, "name");
  qb_error_free(NULL);
  qb_string_free(NULL);
  qb_task_free(NULL);
  qb_worker_free(NULL);
  qb_runtime_free(NULL);
}

static void conformance_evaluate_runs_core_and_reports_bad_input(void) {
  char *out = NULL;
  QbError *err = NULL;
  QbStatus st = qb_conformance_evaluate(
      "backoff", "{\"policy\":{\"maxAttempts\":5,\"baseDelay\":1000,\"maxDelay\":300000,\"jitter\":0.2},\"attempt\":2,\"u\":0.5}",
      &out, &err);
  expect_status(st, err, QB_OK, NULL, NULL, "evaluate backoff");
  CHECK(out && strcmp(out, "{\"decision\":\"retry\",\"delayMs\":4000}") == 0, "backoff output %s", out ? out : "NULL");
  qb_string_free(out);

  st = qb_conformance_evaluate("no_such_kind", "{}", &out, &err);
  CHECK(out == NULL, "no output on failure");
  expect_status(st, err, QB_ERR_INVALID_INPUT, NULL, "no_such_kind", "unknown kind");
  st = qb_conformance_evaluate("backoff", "{not json", &out, &err);
  expect_status(st, err, QB_ERR_INVALID_INPUT, NULL, "not valid JSON", "bad json");
  st = qb_conformance_evaluate(NULL, "{}", &out, &err);
  expect_status(st, err, QB_ERR_INVALID_INPUT, NULL, "kind is NULL", "null kind");
  st = qb_conformance_evaluate("backoff", "{}", NULL, &err);
  expect_status(st, err, QB_ERR_INVALID_INPUT, NULL, NULL, "null out");
  /* NULL out_error: the status alone. */
  CHECK(qb_conformance_evaluate("backoff", "{", &out, NULL) == QB_ERR_INVALID_INPUT, "status without error object");
}

static void runtime_new_rejects_null_out(void) {
  QbError *err = NULL;
  EXPECT(qb_runtime_new(1, NULL, &err), QB_ERR_INVALID_INPUT, NULL, "out_runtime", "runtime null out");
}

static void migrate_applies_then_reports_applied(QbRuntime *rt) {
  char *report = NULL;
  QbError *err = NULL;
  QbStatus st = qb_migrate_blocking(rt, db_url, &report, &err);
  expect_status(st, err, QB_OK, NULL, NULL, "migrate");
  CHECK(report && strstr(report, "\"applied\":[\"") != NULL, "first migrate applies: %s", report ? report : "NULL");
  qb_string_free(report);

  Latch l; latch_init(&l);
  st = qb_migrate(rt, db_url, on_string, &l, &err);
  expect_status(st, err, QB_OK, NULL, NULL, "migrate async start");
  latch_wait(&l);
  expect_status(l.status, l.error, QB_OK, NULL, NULL, "migrate async");
  CHECK(l.json && strstr(l.json, "\"applied\":[]") != NULL, "second migrate applies nothing: %s", l.json ? l.json : "NULL");
  qb_string_free(l.json);
  latch_destroy(&l);

  st = qb_migrate_blocking(rt, "postgres://postgres@127.0.0.1:1/none", NULL, &err);
  expect_status(st, err, QB_ERR_CONNECT, NULL, NULL, "migrate unreachable");
  st = qb_migrate_blocking(NULL, db_url, NULL, &err);
  expect_status(st, err, QB_ERR_INVALID_INPUT, NULL, "runtime is NULL", "migrate null runtime");
  st = qb_migrate(rt, NULL, on_string, NULL, &err);
  expect_status(st, err, QB_ERR_INVALID_INPUT, NULL, "database_url", "migrate async null url");
}

static void worker_options_errors_name_the_field(QbRuntime *rt) {
  struct { const char *json; const char *field; } cases[] = {
      {"{\"source\":\"\"}", "source"},
      {"{\"batchSize\":10}", "source"},
      {"{\"source\":\"s\",\"batchSize\":0}", "batchSize"},
      {"{\"source\":\"s\",\"batchSize\":\"ten\"}", "batchSize"},
      {"{\"source\":\"s\",\"concurrency\":0}", "concurrency"},
      {"{\"source\":\"s\",\"leaseMs\":10}", "leaseMs"},
      {"{\"source\":\"s\",\"pollIntervalMs\":0}", "pollIntervalMs"},
      {"{\"source\":\"s\",\"retry\":{\"baseDelayMs\":0}}", "retry.baseDelayMs"},
      {"{\"source\":\"s\",\"retry\":{\"jitter\":2}}", "retry.jitter"},
      {"{\"source\":\"s\",\"retry\":{\"tries\":2}}", "retry.tries"},
      {"{\"source\":\"s\",\"batchsize\":2}", "batchsize"},
      {"{\"source\":\"s\",\"handOut\":\"yes\"}", "handOut"},
      {"[1]", "options"},
      {"{oops", "options"},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    QbWorker *w = (QbWorker *)0x1;
    QbError *err = NULL;
    QbStatus st = qb_worker_new_blocking(rt, db_url, cases[i].json, &w, &err);
    CHECK(w == NULL, "no worker on failure for %s", cases[i].json);
    expect_status(st, err, QB_ERR_CONFIG, cases[i].field, NULL, cases[i].json);
    /* The async variant validates before it returns. */
    st = qb_worker_new(rt, db_url, cases[i].json, on_worker, NULL, &err);
    expect_status(st, err, QB_ERR_CONFIG, cases[i].field, NULL, cases[i].json);
  }
}

static void worker_new_reports_connect_and_schema_errors(QbRuntime *rt, const char *bare_url) {
  QbWorker *w = NULL;
  QbError *err = NULL;
  QbStatus st = qb_worker_new_blocking(rt, "postgres://postgres:secret@127.0.0.1:1/x", "{\"source\":\"s\"}", &w, &err);
  CHECK(err == NULL || strstr(err->message, "secret") == NULL, "password leaked: %s", err->message);
  expect_status(st, err, QB_ERR_CONNECT, NULL, NULL, "unreachable");
  st = qb_worker_new_blocking(rt, bare_url, "{\"source\":\"s\"}", &w, &err);
  expect_status(st, err, QB_ERR_SCHEMA_MISSING, NULL, "migrate", "unmigrated");

  Latch l; latch_init(&l);
  st = qb_worker_new(rt, bare_url, "{\"source\":\"s\"}", on_worker, &l, &err);
  expect_status(st, err, QB_OK, NULL, NULL, "async start");
  latch_wait(&l);
  CHECK(l.ptr == NULL, "no worker on failure");
  expect_status(l.status, l.error, QB_ERR_SCHEMA_MISSING, NULL, NULL, "async unmigrated");
  latch_destroy(&l);

  st = qb_worker_new_blocking(rt, db_url, "{\"source\":\"s\"}", NULL, &err);
  expect_status(st, err, QB_ERR_INVALID_INPUT, NULL, "out_worker", "null out");
  st = qb_worker_new_blocking(NULL, db_url, "{\"source\":\"s\"}", &w, &err);
  expect_status(st, err, QB_ERR_INVALID_INPUT, NULL, "runtime", "null runtime");
  st = qb_worker_new_blocking(rt, db_url, NULL, &w, &err);
  expect_status(st, err, QB_ERR_INVALID_INPUT, NULL, "options_json", "null options");
}

static QbWorker *new_worker(QbRuntime *rt, const char *options) {
  QbWorker *w = NULL;
  QbError *err = NULL;
  QbStatus st = qb_worker_new_blocking(rt, db_url, options, &w, &err);
  expect_status(st, err, QB_OK, NULL, NULL, options);
  if (!w) { fprintf(stderr, "cannot continue without a worker\n"); exit(1); }
  return w;
}

static QbTask *next_task(QbWorker *w, char **json) {
  QbTask *t = NULL;
  QbError *err = NULL;
  QbStatus st = qb_worker_next_blocking(w, &t, json, &err);
  expect_status(st, err, QB_OK, NULL, NULL, "next");
  CHECK(t != NULL, "a task was delivered");
  return t;
}

static void blocking_calls_finish_rows_in_the_database(QbRuntime *rt) {
  free(sql(db_url, "CREATE TABLE seen (key text primary key, n int);"));
  insert_rows("blk", 6);
  QbWorker *w = new_worker(rt, "{\"source\":\"blk\",\"batchSize\":6,\"concurrency\":6,\"listen\":false,"
                               "\"pollIntervalMs\":50,\"retry\":{\"maxAttempts\":3,\"baseDelayMs\":60000,\"maxDelayMs\":60000,\"jitter\":0}}");
  QbError *err = NULL;
  QbStatus st;

  /* 1: the message, the transaction, complete, and a second finish. */
  char *json = NULL;
  QbTask *t = next_task(w, &json);
  CHECK(json && strstr(json, "\"idempotencyKey\":\"k1\"") && strstr(json, "\"payload\":{\"n\":1}") && strstr(json, "\"attempt\":0"),
        "message %s", json ? json : "NULL");
  qb_string_free(json);
  char *msg = NULL;
  EXPECT(qb_task_message(t, &msg, &err), QB_OK, NULL, NULL, "message");
  CHECK(msg && strstr(msg, "\"source\":\"blk\""), "message %s", msg ? msg : "NULL");
  qb_string_free(msg);
  EXPECT(qb_task_message(t, NULL, &err), QB_ERR_INVALID_INPUT, NULL, NULL, "message null out");
  uint64_t n = 0;
  st = qb_task_execute_blocking(t, "INSERT INTO seen (key, n) VALUES ($1, $2)", "[\"k1\", 1]", &n, &err);
  expect_status(st, err, QB_OK, NULL, NULL, "execute");
  CHECK(n == 1, "rows affected %llu", (unsigned long long)n);
  char *rows = NULL;
  st = qb_task_query_blocking(t, "SELECT key, n FROM seen WHERE key = $1", "[\"k1\"]", &rows, &err);
  expect_status(st, err, QB_OK, NULL, NULL, "query");
  CHECK(rows && strcmp(rows, "[{\"key\":\"k1\",\"n\":1}]") == 0, "rows %s", rows ? rows : "NULL");
  qb_string_free(rows);
  sql_expect("SELECT count(*) FROM seen;", "0", "business write invisible before commit");
  bool cancelled = true;
  EXPECT(qb_task_is_cancelled(t, &cancelled, &err), QB_OK, NULL, NULL, "is_cancelled");
  CHECK(!cancelled, "not cancelled");
  EXPECT(qb_task_complete_blocking(t, &err), QB_OK, NULL, NULL, "complete");
  EXPECT(qb_task_complete_blocking(t, &err), QB_ERR_ALREADY_FINISHED, NULL, NULL, "second complete");
  EXPECT(qb_task_execute_blocking(t, "SELECT 1", NULL, NULL, &err), QB_ERR_ALREADY_FINISHED, NULL, NULL, "execute after finish");
  qb_task_free(t);
  sql_expect("SELECT state || ' ' || (processed_at IS NOT NULL) FROM inbox WHERE idempotency_key='k1';", "processed true", "k1 processed");
  sql_expect("SELECT count(*) FROM seen;", "1", "business write committed with the completion");

  /* 2: statement errors carry the SQLSTATE; bad params are refused; fail applies the policy
   * and rolls the business write back. */
  t = next_task(w, NULL);
  st = qb_task_execute_blocking(t, "INSERT INTO seen (key, n) VALUES ($1, $2)", "[\"k2\", 2]", NULL, &err);
  expect_status(st, err, QB_OK, NULL, NULL, "execute k2");
  EXPECT(qb_task_execute_blocking(t, "SELEC 1", "[]", NULL, &err), QB_ERR_DATABASE, "42601", NULL, "syntax error");
  EXPECT(qb_task_execute_blocking(t, "SELECT 1", "{\"a\":1}", NULL, &err), QB_ERR_INVALID_INPUT, NULL, "array", "params object");
  EXPECT(qb_task_execute_blocking(t, "SELECT 1", "[", NULL, &err), QB_ERR_INVALID_INPUT, NULL, "JSON", "params bad json");
  EXPECT(qb_task_execute_blocking(t, NULL, NULL, NULL, &err), QB_ERR_INVALID_INPUT, NULL, "sql", "null sql");
  EXPECT(qb_task_query_blocking(t, "SELECT 1", NULL, NULL, &err), QB_ERR_INVALID_INPUT, NULL, "out_rows_json", "query null out");
  EXPECT(qb_task_fail_blocking(t, "boom password=hunter2", &err), QB_OK, NULL, NULL, "fail");
  qb_task_free(t);
  sql_expect("SELECT state || ' ' || attempt || ' ' || (scheduled_at > now() + interval '30 seconds') FROM inbox WHERE idempotency_key='k2';",
             "pending 1 true", "k2 retried by the policy");
  sql_expect("SELECT count(*) FROM seen WHERE key='k2';", "0", "failed handler left no business row");
  sql_expect("SELECT position('hunter2' in last_error) FROM inbox WHERE idempotency_key='k2';", "0", "error text redacted");

  /* 3..6: retry with the handler's delay, dead, release, abandon. */
  t = next_task(w, NULL);
  EXPECT(qb_task_retry_blocking(t, 5000, "later", &err), QB_OK, NULL, NULL, "retry");
  qb_task_free(t);
  sql_expect("SELECT state || ' ' || attempt || ' ' || last_error FROM inbox WHERE idempotency_key='k3';", "pending 1 later", "k3 retried");
  t = next_task(w, NULL);
  EXPECT(qb_task_dead_blocking(t, "poison", &err), QB_OK, NULL, NULL, "dead");
  qb_task_free(t);
  sql_expect("SELECT state || ' ' || last_error FROM inbox WHERE idempotency_key='k4';", "dead poison", "k4 dead");
  t = next_task(w, NULL);
  EXPECT(qb_task_release_blocking(t, &err), QB_OK, NULL, NULL, "release");
  qb_task_free(t);
  sql_expect("SELECT state || ' ' || attempt FROM inbox WHERE idempotency_key='k5';", "pending 0", "k5 released");
  /* k5 is due again at once; abandon whichever row comes next. */
  t = next_task(w, &json);
  qb_string_free(json);
  EXPECT(qb_task_abandon_blocking(t, &err), QB_OK, NULL, NULL, "abandon");
  EXPECT(qb_task_complete_blocking(t, &err), QB_ERR_ALREADY_FINISHED, NULL, NULL, "complete after abandon");
  qb_task_free(t);
  sql_expect("SELECT count(*) FROM inbox WHERE source='blk' AND state='processing' AND claim_token IS NOT NULL;", "1",
             "abandoned row keeps its lease until expiry");

  QbStats s;
  EXPECT(qb_worker_stats(w, &s, &err), QB_OK, NULL, NULL, "stats");
  CHECK(s.completed == 1 && s.retried == 2 && s.dead == 1 && s.released == 1 && s.in_flight == 0,
        "stats claimed=%llu completed=%llu retried=%llu dead=%llu released=%llu in_flight=%llu", (unsigned long long)s.claimed,
        (unsigned long long)s.completed, (unsigned long long)s.retried, (unsigned long long)s.dead, (unsigned long long)s.released,
        (unsigned long long)s.in_flight);
  EXPECT(qb_worker_stats(w, NULL, &err), QB_ERR_INVALID_INPUT, NULL, NULL, "stats null out");
  /* Handler times: taken (ignored by a worker without handOut), checked at the boundary. */
  EXPECT(qb_worker_handlers_took(w, 3, 0.25, &err), QB_OK, NULL, NULL, "handlers took");
  EXPECT(qb_worker_handlers_took(w, 0, 0.0, &err), QB_OK, NULL, NULL, "handlers took, none");
  EXPECT(qb_worker_handlers_took(w, 1, -1.0, &err), QB_ERR_INVALID_INPUT, NULL, "handlerSeconds", "handlers took negative");
  EXPECT(qb_worker_handlers_took(w, 1, NAN, &err), QB_ERR_INVALID_INPUT, NULL, "handlerSeconds", "handlers took NaN");
  EXPECT(qb_worker_handlers_took(NULL, 1, 0.1, &err), QB_ERR_INVALID_INPUT, NULL, NULL, "handlers took null worker");
  /* The same counts in the worker's Prometheus text, with the handler histogram. */
  char *metrics = NULL;
  EXPECT(qb_worker_metrics_text(w, &metrics, &err), QB_OK, NULL, NULL, "metrics text");
  CHECK(metrics && strstr(metrics, "queuebox_worker_completed_total{source=\"blk\"} 1\n") &&
            strstr(metrics, "queuebox_worker_dead_total{source=\"blk\"} 1\n") &&
            strstr(metrics, "# TYPE queuebox_worker_handler_duration_seconds histogram"),
        "metrics %s", metrics ? metrics : "NULL");
  qb_string_free(metrics);
  EXPECT(qb_worker_metrics_text(w, NULL, &err), QB_ERR_INVALID_INPUT, NULL, "out_text", "metrics null out");

  /* A task freed unfinished is abandoned too (no leak, no write). */
  t = next_task(w, NULL);
  qb_task_free(t);

  uint64_t abandoned = 99;
  EXPECT(qb_worker_shutdown_blocking(w, &abandoned, &err), QB_OK, NULL, NULL, "shutdown");
  CHECK(abandoned == 0, "nothing running at shutdown: %llu", (unsigned long long)abandoned);
  QbTask *none = (QbTask *)0x1;
  EXPECT(qb_worker_next_blocking(w, &none, NULL, &err), QB_OK, NULL, NULL, "next after shutdown");
  CHECK(none == NULL, "stopped worker delivers no task");
  qb_worker_free(w);
}

static void callbacks_fire_once_from_runtime_threads(QbRuntime *rt) {
  insert_rows("cb", 6);
  QbError *err = NULL;
  Latch l;
  latch_init(&l);
  QbStatus st = qb_worker_new(rt, db_url, "{\"source\":\"cb\",\"batchSize\":1,\"listen\":true,\"retry\":{\"baseDelayMs\":60000,\"maxDelayMs\":60000}}",
                              on_worker, &l, &err);
  expect_status(st, err, QB_OK, NULL, NULL, "worker_new async");
  latch_wait(&l);
  expect_status(l.status, l.error, QB_OK, NULL, NULL, "worker_new callback");
  QbWorker *w = l.ptr;
  latch_destroy(&l);
  if (!w) exit(1);

  /* next + message; the callback tries a blocking call and must be refused. */
  latch_init(&l);
  EXPECT(qb_worker_next(w, on_task, &l, &err), QB_OK, NULL, NULL, "next async");
  latch_wait(&l);
  expect_status(l.status, l.error, QB_OK, NULL, NULL, "next callback");
  QbTask *t = l.ptr;
  CHECK(t && l.json && strstr(l.json, "\"idempotencyKey\":\"k1\""), "task and message");
  CHECK(l.nested == QB_ERR_INVALID_INPUT, "blocking call inside a callback refused: %d", l.nested);
  qb_string_free(l.json);
  latch_destroy(&l);

  latch_init(&l);
  EXPECT(qb_task_execute(t, "CREATE TABLE cb_seen (k text)", NULL, on_count, &l, &err), QB_OK, NULL, NULL, "execute async");
  latch_wait(&l);
  expect_status(l.status, l.error, QB_OK, NULL, NULL, "execute callback");
  latch_destroy(&l);
  latch_init(&l);
  EXPECT(qb_task_execute(t, "INSERT INTO cb_seen VALUES ($1), ($2)", "[\"a\",\"b\"]", on_count, &l, &err), QB_OK, NULL, NULL, "insert async");
  latch_wait(&l);
  expect_status(l.status, l.error, QB_OK, NULL, NULL, "insert callback");
  CHECK(l.count == 2, "two rows inserted: %llu", (unsigned long long)l.count);
  latch_destroy(&l);
  latch_init(&l);
  EXPECT(qb_task_execute(t, "INSERT INTO cb_seen VALUES (1, 2)", NULL, on_count, &l, &err), QB_OK, NULL, NULL, "bad insert async");
  latch_wait(&l);
  expect_status(l.status, l.error, QB_ERR_DATABASE, "42601", NULL, "bad insert callback");
  latch_destroy(&l);
  /* The failed statement aborted the transaction: complete must not commit cb_seen. */
  latch_init(&l);
  EXPECT(qb_task_query(t, "SELECT count(*) AS n FROM cb_seen", NULL, on_string, &l, &err), QB_OK, NULL, NULL, "query async");
  latch_wait(&l);
  expect_status(l.status, l.error, QB_ERR_DATABASE, "25P02", NULL, "query in aborted transaction");
  CHECK(l.json == NULL, "no rows on failure");
  latch_destroy(&l);

  Latch c;
  latch_init(&c);
  EXPECT(qb_task_on_cancelled(t, on_cancel, &c, &err), QB_OK, NULL, NULL, "on_cancelled");
  latch_init(&l);
  EXPECT(qb_task_fail(t, "aborted tx", on_done, &l, &err), QB_OK, NULL, NULL, "fail async");
  qb_task_free(t); /* freeing right after the call returned is allowed */
  latch_wait(&l);
  expect_status(l.status, l.error, QB_OK, NULL, NULL, "fail callback");
  latch_destroy(&l);
  latch_wait(&c);
  CHECK(!c.cancelled, "a finished task reports not cancelled");
  latch_destroy(&c);
  sql_expect("SELECT to_regclass('cb_seen') IS NULL;", "t", "rolled back table");

  /* query, complete, retry, dead, release, abandon through callbacks. */
  const char *names[] = {"complete", "retry", "dead", "release", "abandon"};
  for (int i = 0; i < 5; i++) {
    latch_init(&l);
    EXPECT(qb_worker_next(w, on_task, &l, &err), QB_OK, NULL, NULL, "next async");
    latch_wait(&l);
    t = l.ptr;
    qb_string_free(l.json);
    qb_error_free(l.error);
    latch_destroy(&l);
    if (!t) { CHECK(t != NULL, "task for %s", names[i]); continue; }
    if (i == 0) {
      latch_init(&l);
      EXPECT(qb_task_query(t, "SELECT $1::int + 1 AS x", "[41]", on_string, &l, &err), QB_OK, NULL, NULL, "query");
      latch_wait(&l);
      expect_status(l.status, l.error, QB_OK, NULL, NULL, "query callback");
      CHECK(l.json && strcmp(l.json, "[{\"x\":42}]") == 0, "rows %s", l.json ? l.json : "NULL");
      qb_string_free(l.json);
      latch_destroy(&l);
    }
    latch_init(&l);
    switch (i) {
      case 0: st = qb_task_complete(t, on_done, &l, &err); break;
      case 1: st = qb_task_retry(t, 60000, "again", on_done, &l, &err); break;
      case 2: st = qb_task_dead(t, "bad", on_done, &l, &err); break;
      case 3: st = qb_task_release(t, on_done, &l, &err); break;
      default: st = qb_task_abandon(t, on_done, &l, &err); break;
    }
    expect_status(st, err, QB_OK, NULL, NULL, names[i]);
    latch_wait(&l);
    expect_status(l.status, l.error, QB_OK, NULL, NULL, names[i]);
    latch_destroy(&l);
    /* A second finish through the callback path reports already finished. */
    latch_init(&l);
    EXPECT(qb_task_complete(t, on_done, &l, &err), QB_OK, NULL, NULL, "second finish start");
    latch_wait(&l);
    expect_status(l.status, l.error, QB_ERR_ALREADY_FINISHED, NULL, NULL, "second finish");
    latch_destroy(&l);
    qb_task_free(t);
  }
  sql_expect("SELECT string_agg(state, ',' ORDER BY idempotency_key) FROM inbox WHERE source='cb';",
             "pending,processed,pending,dead,processing,pending", "states after callbacks");
  /* Fire-and-forget: a NULL callback is allowed and leaks nothing. */
  EXPECT(qb_worker_next(w, NULL, NULL, &err), QB_OK, NULL, NULL, "next without callback");

  latch_init(&l);
  EXPECT(qb_worker_shutdown(w, on_count, &l, &err), QB_OK, NULL, NULL, "shutdown async");
  latch_wait(&l);
  expect_status(l.status, l.error, QB_OK, NULL, NULL, "shutdown callback");
  latch_destroy(&l);
  latch_init(&l);
  EXPECT(qb_worker_next(w, on_task, &l, &err), QB_OK, NULL, NULL, "next after shutdown");
  latch_wait(&l);
  expect_status(l.status, l.error, QB_OK, NULL, NULL, "stopped");
  CHECK(l.ptr == NULL && l.json == NULL, "stopped: no task");
  latch_destroy(&l);
  qb_worker_free(w);
}

typedef struct {
  QbTask *task;
  bool cancelled;
  QbStatus status;
} WaitArgs;

static void *wait_thread(void *p) {
  WaitArgs *a = p;
  QbError *err = NULL;
  a->status = qb_task_wait_cancelled_blocking(a->task, &a->cancelled, &err);
  qb_error_free(err);
  return NULL;
}

static void shutdown_after_grace_cancels_and_nothing_completes(QbRuntime *rt) {
  insert_rows("cancel", 2);
  QbWorker *w = new_worker(rt, "{\"source\":\"cancel\",\"batchSize\":2,\"concurrency\":2,\"shutdownGraceMs\":200,\"leaseMs\":30000}");
  QbError *err = NULL;
  QbTask *t = next_task(w, NULL);
  EXPECT(qb_task_execute_blocking(t, "CREATE TABLE cancel_seen (k text)", NULL, NULL, &err), QB_OK, NULL, NULL, "execute");
  Latch c;
  latch_init(&c);
  EXPECT(qb_task_on_cancelled(t, on_cancel, &c, &err), QB_OK, NULL, NULL, "on_cancelled");
  WaitArgs a = {t, false, QB_ERR_INTERNAL};
  pthread_t th;
  pthread_create(&th, NULL, wait_thread, &a);

  uint64_t abandoned = 0;
  EXPECT(qb_worker_shutdown_blocking(w, &abandoned, &err), QB_OK, NULL, NULL, "shutdown");
  CHECK(abandoned == 1, "one running task cancelled: %llu", (unsigned long long)abandoned);
  latch_wait(&c);
  CHECK(c.cancelled, "on_cancelled reported cancellation");
  latch_destroy(&c);
  pthread_join(th, NULL);
  CHECK(a.status == QB_OK && a.cancelled, "wait_cancelled_blocking: status %d cancelled %d", a.status, a.cancelled);
  bool cancelled = false;
  EXPECT(qb_task_is_cancelled(t, &cancelled, &err), QB_OK, NULL, NULL, "is_cancelled");
  CHECK(cancelled, "polled cancellation");
  EXPECT(qb_task_execute_blocking(t, "SELECT 1", NULL, NULL, &err), QB_CANCELLED, NULL, NULL, "execute after cancel");
  EXPECT(qb_task_complete_blocking(t, &err), QB_CANCELLED, NULL, NULL, "complete after cancel");
  /* The core abandoned the cancelled task on that refused finish: it stays abandoned. */
  EXPECT(qb_task_fail_blocking(t, "late", &err), QB_ERR_ALREADY_FINISHED, NULL, NULL, "fail after the refused complete");
  EXPECT(qb_task_abandon_blocking(t, &err), QB_OK, NULL, NULL, "abandon is always allowed");
  qb_task_free(t);
  sql_expect("SELECT string_agg(state, ',' ORDER BY idempotency_key) FROM inbox WHERE source='cancel';", "processing,pending",
             "cancelled row not completed (lease kept), unstarted row released");
  sql_expect("SELECT to_regclass('cancel_seen') IS NULL;", "t", "cancelled task's writes rolled back");
  qb_worker_free(w);
}

static void null_handles_are_refused(void) {
  QbError *err = NULL;
  QbTask *t = NULL;
  bool b;
  uint64_t n;
  char *s = NULL;
  QbStats stats;
  EXPECT(qb_worker_next_blocking(NULL, &t, NULL, &err), QB_ERR_INVALID_INPUT, NULL, "worker is NULL", "next null");
  EXPECT(qb_worker_next(NULL, on_task, NULL, &err), QB_ERR_INVALID_INPUT, NULL, NULL, "next async null");
  EXPECT(qb_worker_shutdown(NULL, on_count, NULL, &err), QB_ERR_INVALID_INPUT, NULL, NULL, "shutdown null");
  EXPECT(qb_worker_shutdown_blocking(NULL, &n, &err), QB_ERR_INVALID_INPUT, NULL, NULL, "shutdown blocking null");
  EXPECT(qb_worker_stats(NULL, &stats, &err), QB_ERR_INVALID_INPUT, NULL, NULL, "stats null");
  EXPECT(qb_worker_metrics_text(NULL, &s, &err), QB_ERR_INVALID_INPUT, NULL, "worker is NULL", "metrics null");
  EXPECT(qb_worker_new(NULL, db_url, "{}", on_worker, NULL, &err), QB_ERR_INVALID_INPUT, NULL, NULL, "new null rt");
  EXPECT(qb_task_message(NULL, &s, &err), QB_ERR_INVALID_INPUT, NULL, "task is NULL", "message null");
  EXPECT(qb_task_is_cancelled(NULL, &b, &err), QB_ERR_INVALID_INPUT, NULL, NULL, "is_cancelled null");
  EXPECT(qb_task_on_cancelled(NULL, on_cancel, NULL, &err), QB_ERR_INVALID_INPUT, NULL, NULL, "on_cancelled null");
  EXPECT(qb_task_wait_cancelled_blocking(NULL, &b, &err), QB_ERR_INVALID_INPUT, NULL, NULL, "wait null");
  EXPECT(qb_task_execute(NULL, "x", NULL, on_count, NULL, &err), QB_ERR_INVALID_INPUT, NULL, NULL, "execute null");
  EXPECT(qb_task_execute_blocking(NULL, "x", NULL, &n, &err), QB_ERR_INVALID_INPUT, NULL, NULL, "execute blocking null");
  EXPECT(qb_task_query(NULL, "x", NULL, on_string, NULL, &err), QB_ERR_INVALID_INPUT, NULL, NULL, "query null");
  EXPECT(qb_task_query_blocking(NULL, "x", NULL, &s, &err), QB_ERR_INVALID_INPUT, NULL, NULL, "query blocking null");
  EXPECT(qb_task_complete(NULL, on_done, NULL, &err), QB_ERR_INVALID_INPUT, NULL, NULL, "complete null");
  EXPECT(qb_task_complete_blocking(NULL, &err), QB_ERR_INVALID_INPUT, NULL, NULL, "complete blocking null");
  EXPECT(qb_task_fail(NULL, "e", on_done, NULL, &err), QB_ERR_INVALID_INPUT, NULL, NULL, "fail null");
  EXPECT(qb_task_fail_blocking(NULL, "e", &err), QB_ERR_INVALID_INPUT, NULL, NULL, "fail blocking null");
  EXPECT(qb_task_retry(NULL, 1, "e", on_done, NULL, &err), QB_ERR_INVALID_INPUT, NULL, NULL, "retry null");
  EXPECT(qb_task_retry_blocking(NULL, 1, "e", &err), QB_ERR_INVALID_INPUT, NULL, NULL, "retry blocking null");
  EXPECT(qb_task_dead(NULL, "r", on_done, NULL, &err), QB_ERR_INVALID_INPUT, NULL, NULL, "dead null");
  EXPECT(qb_task_dead_blocking(NULL, "r", &err), QB_ERR_INVALID_INPUT, NULL, NULL, "dead blocking null");
  EXPECT(qb_task_release(NULL, on_done, NULL, &err), QB_ERR_INVALID_INPUT, NULL, NULL, "release null");
  EXPECT(qb_task_release_blocking(NULL, &err), QB_ERR_INVALID_INPUT, NULL, NULL, "release blocking null");
  EXPECT(qb_task_abandon(NULL, on_done, NULL, &err), QB_ERR_INVALID_INPUT, NULL, NULL, "abandon null");
  EXPECT(qb_task_abandon_blocking(NULL, &err), QB_ERR_INVALID_INPUT, NULL, NULL, "abandon blocking null");
}

/* The `index`-th string of the statement's "params" array (a UUID here), caller frees. */
static char *param_at(const char *json, int index) {
  const char *p = strstr(json, "\"params\":[");
  if (!p) return strdup("");
  p += strlen("\"params\":[");
  for (int i = 0; i <= index; i++) {
    p = strchr(p, '"');
    if (!p) return strdup("");
    if (i < index) p = strchr(p + 1, '"') + 1;
  }
  const char *end = strchr(p + 1, '"');
  return strndup(p + 1, (size_t)(end - p - 1));
}

/* The statement's "sql" string with its JSON escapes (\n, \") undone, caller frees. */
static char *sql_of(const char *json) {
  const char *p = strstr(json, "\"sql\":\"");
  if (!p) return strdup("");
  p += strlen("\"sql\":\"");
  char *out = malloc(strlen(p) + 1), *o = out;
  for (; *p && *p != '"'; p++) {
    if (*p == '\\') { p++; *o++ = *p == 'n' ? '\n' : *p; } else *o++ = *p;
  }
  *o = 0;
  return out;
}

/* The application's own transaction: the completion statement run by another client (psql,
 * standing in for the application's driver) inside its transaction, a claim reported lost,
 * and the publish statement with its validation. */
static void application_transaction_statements(QbRuntime *rt) {
  insert_rows("app", 2);
  QbWorker *w = new_worker(rt, "{\"source\":\"app\",\"batchSize\":2,\"concurrency\":2,\"listen\":false,\"pollIntervalMs\":50}");
  QbError *err = NULL;
  char *json = NULL;

  /* 1: the application runs the fenced completion with its business write and commits. */
  QbTask *t = next_task(w, NULL);
  EXPECT(qb_task_completion_statement(t, "dollar", &json, &err), QB_OK, NULL, NULL, "completion statement");
  CHECK(json && strstr(json, "\"expect\":\"one_row_affected\"") && strstr(json, "CAST($1 AS uuid)"), "statement %s", json ? json : "NULL");
  char *id = param_at(json, 0), *token = param_at(json, 1), *text = sql_of(json);
  qb_string_free(json);
  char buf[2048];
  snprintf(buf, sizeof buf,
           "BEGIN; CREATE TABLE app_seen (id uuid); INSERT INTO app_seen VALUES ('%s');"
           " PREPARE qb_complete(text, text) AS %s; EXECUTE qb_complete('%s', '%s'); COMMIT;"
           " SELECT state FROM inbox WHERE id = '%s';",
           id, text, id, token, id);
  free(sql(db_url, buf));
  sql_expect("SELECT state FROM inbox WHERE idempotency_key = 'k1' AND source = 'app';", "processed", "completed by the application's commit");
  EXPECT(qb_task_execute_blocking(t, "SELECT 1", NULL, NULL, &err), QB_ERR_INVALID_INPUT, NULL, "application's transaction", "own tx after handing over");
  EXPECT(qb_task_complete_blocking(t, &err), QB_OK, NULL, NULL, "complete settles without writing");
  qb_task_free(t);
  free(id); free(token); free(text);

  /* 2: zero rows affected -> claim_lost returns the ClaimLost error, counted once. */
  t = next_task(w, NULL);
  EXPECT(qb_task_completion_statement(t, "question", &json, &err), QB_OK, NULL, NULL, "completion statement question");
  CHECK(json && strstr(json, "CAST(? AS uuid)"), "question style %s", json ? json : "NULL");
  qb_string_free(json);
  EXPECT(qb_task_claim_lost(t, &err), QB_ERR_CLAIM_LOST, NULL, "claim lost", "claim lost reported");
  EXPECT(qb_task_fail_blocking(t, "handler saw ClaimLost", &err), QB_ERR_CLAIM_LOST, NULL, NULL, "fail after claim lost");
  EXPECT(qb_task_claim_lost(NULL, &err), QB_ERR_INVALID_INPUT, NULL, "task is NULL", "claim lost null");
  qb_task_free(t);
  QbStats stats;
  EXPECT(qb_worker_stats(w, &stats, &err), QB_OK, NULL, NULL, "stats");
  CHECK(stats.claims_lost == 1 && stats.completed == 1, "claims_lost %llu completed %llu",
        (unsigned long long)stats.claims_lost, (unsigned long long)stats.completed);
  sql_expect("SELECT state || ' ' || attempt FROM inbox WHERE idempotency_key = 'k2' AND source = 'app';", "processing 0", "a lost claim writes nothing");

  EXPECT(qb_task_completion_statement(NULL, "dollar", &json, &err), QB_ERR_INVALID_INPUT, NULL, "task is NULL", "completion null task");
  uint64_t abandoned = 0;
  EXPECT(qb_worker_shutdown_blocking(w, &abandoned, &err), QB_OK, NULL, NULL, "shutdown");
  qb_worker_free(w);

  /* 3: the publish statement, and bad input naming messages[i].field. */
  EXPECT(qb_publish_statement(NULL, "[{\"topic\":\"t\",\"payload\":{\"a\":1}},{\"topic\":\"u\",\"payload\":2}]", "dollar", &json, &err),
         QB_OK, NULL, NULL, "publish statement");
  CHECK(json && strstr(json, "jsonb_to_recordset") && strstr(json, "\"expect\":\"rows_affected\"") && strstr(json, "\"ids\":[\""),
        "publish %s", json ? json : "NULL");
  qb_string_free(json);
  EXPECT(qb_publish_statement("sqlserver", "[{\"topic\":\"t\",\"payload\":{}}]", "at", &json, &err), QB_OK, NULL, NULL, "publish sqlserver");
  CHECK(json && strstr(json, "OPENJSON(@p1)"), "sqlserver publish %s", json ? json : "NULL");
  qb_string_free(json);
  EXPECT(qb_publish_statement(NULL, "[{\"topic\":\"t\",\"payload\":{}},{\"topic\":\"\",\"payload\":{}}]", "dollar", &json, &err),
         QB_ERR_INVALID_INPUT, NULL, "messages[1].topic", "publish empty topic");
  CHECK(json == NULL, "no output on failure");
  EXPECT(qb_publish_statement(NULL, "[{\"topic\":\"t\",\"payload\":{}}]", "qmark", &json, &err), QB_ERR_INVALID_INPUT, NULL, "qmark", "bad placeholder");
  EXPECT(qb_publish_statement("oracle", "[{\"topic\":\"t\",\"payload\":{}}]", "dollar", &json, &err), QB_ERR_INVALID_INPUT, NULL, "oracle", "bad backend");
  EXPECT(qb_publish_statement(NULL, "[{", "dollar", &json, &err), QB_ERR_INVALID_INPUT, NULL, "not valid JSON", "bad json");
  EXPECT(qb_publish_statement(NULL, NULL, "dollar", &json, &err), QB_ERR_INVALID_INPUT, NULL, "messages_json is NULL", "null messages");
  EXPECT(qb_publish_statement(NULL, "[]", NULL, &json, &err), QB_ERR_INVALID_INPUT, NULL, "placeholder is NULL", "null placeholder");
  EXPECT(qb_publish_statement(NULL, "[{\"topic\":\"t\",\"payload\":{}}]", "dollar", NULL, &err), QB_ERR_INVALID_INPUT, NULL, "out_json", "null out");

  /* 4: the enqueue statement (pull rows; its result rows carry the ids), and bad input
   * naming messages[i].field. */
  EXPECT(qb_enqueue_statement(NULL, "[{\"source\":\"jobs\",\"payload\":{\"a\":1},\"priority\":5},{\"source\":\"jobs\",\"payload\":2,\"idempotency_key\":\"k\"}]",
                              "dollar", &json, &err),
         QB_OK, NULL, NULL, "enqueue statement");
  CHECK(json && strstr(json, "queuebox_enqueue_many(CAST($1 AS jsonb))") && strstr(json, "\"expect\":\"enqueue_rows\"") &&
            strstr(json, "\\\"priority\\\":5") && !strstr(json, "\"ids\""),
        "enqueue %s", json ? json : "NULL");
  qb_string_free(json);
  EXPECT(qb_enqueue_statement("sqlserver", "[{\"source\":\"jobs\",\"payload\":{}}]", "at", &json, &err), QB_OK, NULL, NULL, "enqueue sqlserver");
  CHECK(json && strstr(json, "EXEC queuebox_enqueue_many @messages = @p1"), "sqlserver enqueue %s", json ? json : "NULL");
  qb_string_free(json);
  EXPECT(qb_enqueue_statement(NULL, "[{\"source\":\"jobs\",\"payload\":{}},{\"source\":\"jobs\",\"payload\":{}},{\"source\":\"jobs\",\"payload\":{},\"priority\":99999}]",
                              "dollar", &json, &err),
         QB_ERR_INVALID_INPUT, NULL, "messages[2].priority", "enqueue bad priority");
  CHECK(json == NULL, "no output on failure");
  EXPECT(qb_enqueue_statement(NULL, "[{\"payload\":{}}]", "dollar", &json, &err), QB_ERR_INVALID_INPUT, NULL, "messages[0].source", "enqueue no source");
  EXPECT(qb_enqueue_statement(NULL, "[{\"source\":\"jobs\",\"payload\":{}}]", "qmark", &json, &err), QB_ERR_INVALID_INPUT, NULL, "qmark", "enqueue bad placeholder");
  EXPECT(qb_enqueue_statement(NULL, NULL, "dollar", &json, &err), QB_ERR_INVALID_INPUT, NULL, "messages_json is NULL", "enqueue null messages");
  EXPECT(qb_enqueue_statement(NULL, "[{\"source\":\"jobs\",\"payload\":{}}]", "dollar", NULL, &err), QB_ERR_INVALID_INPUT, NULL, "out_json", "enqueue null out");
}

/* ---- the log callback ---- */

/* Records the callback received, copied (the library's strings live only during the call). */
#define MAX_LOGS 256
typedef struct {
  pthread_mutex_t mu;
  int n;
  QbLogLevel level[MAX_LOGS];
  char *message[MAX_LOGS];
  char *fields[MAX_LOGS];
  char *target[MAX_LOGS];
  QbStatus nested; /* qb_set_log_callback tried inside the callback */
} Logs;

static void on_log(void *ud, QbLogLevel level, const char *target, const char *message, const char *fields) {
  Logs *l = ud;
  QbError *e = NULL;
  QbStatus nested = qb_set_log_callback(NULL, NULL, 0, &e);
  qb_error_free(e);
  pthread_mutex_lock(&l->mu);
  l->nested = nested;
  if (l->n < MAX_LOGS) {
    l->level[l->n] = level;
    l->target[l->n] = strdup(target);
    l->message[l->n] = strdup(message);
    l->fields[l->n] = strdup(fields);
    l->n++;
  }
  pthread_mutex_unlock(&l->mu);
}

/* The index of the first record at `level` whose message holds `msg` and whose fields hold
 * every non-NULL needle; -1 when there is none. */
static int find_log(Logs *l, QbLogLevel level, const char *msg, const char *f1, const char *f2) {
  pthread_mutex_lock(&l->mu);
  int found = -1;
  for (int i = 0; i < l->n && found < 0; i++) {
    if (l->level[i] == level && strstr(l->message[i], msg) && (!f1 || strstr(l->fields[i], f1)) &&
        (!f2 || strstr(l->fields[i], f2)))
      found = i;
  }
  pthread_mutex_unlock(&l->mu);
  return found;
}

static void log_callback_forwards_core_records(QbRuntime *rt) {
  Logs logs;
  memset(&logs, 0, sizeof logs);
  pthread_mutex_init(&logs.mu, NULL);
  QbError *err = NULL;
  QbWorker *w = NULL;
  EXPECT(qb_set_log_callback(on_log, &logs, 9, &err), QB_ERR_INVALID_INPUT, NULL, "min_level 9", "bad level");
  EXPECT(qb_set_log_callback(on_log, &logs, QB_LOG_INFO, &err), QB_OK, NULL, NULL, "set log callback");

  /* A worker whose database is down says so at warn level, naming the source. */
  QbStatus st = qb_worker_new_blocking(rt, "postgres://qb@127.0.0.1:1/down", "{\"source\":\"logs-down\"}", &w, &err);
  expect_status(st, err, QB_ERR_CONNECT, NULL, NULL, "unreachable database");
  err = NULL;
  int i = find_log(&logs, QB_LOG_WARN, "database is unreachable", "\"source\":\"logs-down\"", "127.0.0.1:1");
  CHECK(i >= 0, "no warn record about the unreachable database (%d records)", logs.n);
  if (i >= 0) CHECK(strcmp(logs.target[i], "queuebox_core::worker") == 0, "target %s", logs.target[i]);
  CHECK(logs.nested == QB_ERR_INVALID_INPUT, "qb_set_log_callback inside the callback: %d", logs.nested);

  /* A dead-lettered message: its id and source are fields of a warn record. */
  insert_rows("logs-dead", 1);
  w = new_worker(rt, "{\"source\":\"logs-dead\",\"listen\":false,\"pollIntervalMs\":50}");
  char *json = NULL;
  QbTask *t = next_task(w, &json);
  char *id = sql(db_url, "SELECT id FROM inbox WHERE source = 'logs-dead';");
  char want_id[128];
  snprintf(want_id, sizeof want_id, "\"message_id\":\"%s\"", id);
  EXPECT(qb_task_dead_blocking(t, "poison pill", &err), QB_OK, NULL, NULL, "dead");
  i = find_log(&logs, QB_LOG_WARN, "dead-lettered", want_id, "\"source\":\"logs-dead\"");
  CHECK(i >= 0, "no warn record for the dead-lettered message %s", id);
  if (i >= 0) CHECK(strstr(logs.fields[i], "poison pill") != NULL, "reason missing: %s", logs.fields[i]);
  for (int k = 0; k < logs.n; k++) CHECK(logs.level[k] <= QB_LOG_INFO, "a record below the minimum: %s", logs.message[k]);
  qb_task_free(t);
  qb_string_free(json);
  free(id);
  uint64_t abandoned = 0;
  EXPECT(qb_worker_shutdown_blocking(w, &abandoned, &err), QB_OK, NULL, NULL, "shutdown");
  qb_worker_free(w);

  /* Removed: nothing more arrives. */
  EXPECT(qb_set_log_callback(NULL, NULL, 0, &err), QB_OK, NULL, NULL, "remove log callback");
  int before = logs.n;
  st = qb_worker_new_blocking(rt, "postgres://qb@127.0.0.1:1/down", "{\"source\":\"logs-down\"}", &w, &err);
  expect_status(st, err, QB_ERR_CONNECT, NULL, NULL, "unreachable, no callback");
  err = NULL;
  CHECK(logs.n == before, "a record arrived after the callback was removed");

  for (int k = 0; k < logs.n; k++) {
    free(logs.message[k]);
    free(logs.fields[k]);
    free(logs.target[k]);
  }
  pthread_mutex_destroy(&logs.mu);
}

/* ---- batches: qb_worker_next_batch*, qb_tasks_complete*, qb_task_batch_free ---- */
typedef struct {
  Latch l;
  QbTaskBatch *batch;
  QbStatus results[8];
  size_t len;
} BatchLatch;

static void on_batch(void *ud, QbStatus st, QbTaskBatch *b, QbError *e) {
  BatchLatch *bl = ud; bl->l.status = st; bl->batch = b; bl->l.error = e; latch_fire(&bl->l);
}
static void on_tasks_done(void *ud, QbStatus st, const QbStatus *results, size_t len, QbError *e) {
  BatchLatch *bl = ud; bl->l.status = st; bl->l.error = e; bl->len = len;
  for (size_t i = 0; i < len && i < 8; i++) bl->results[i] = results[i];
  latch_fire(&bl->l);
}

/* The idempotency key ("k3") of a message JSON, into buf. */
static void key_of(const char *json, char *buf, size_t n) {
  const char *p = strstr(json, "\"idempotencyKey\":\"");
  buf[0] = 0;
  if (!p) return;
  p += strlen("\"idempotencyKey\":\"");
  size_t i = 0;
  while (p[i] && p[i] != '"' && i + 1 < n) { buf[i] = p[i]; i++; }
  buf[i] = 0;
}

static void wait_for_sql(const char *text, const char *want, const char *what) {
  for (int i = 0; i < 200; i++) {
    char *got = sql(db_url, text);
    int ok = strcmp(got, want) == 0;
    free(got);
    if (ok) return;
    usleep(50000);
  }
  sql_expect(text, want, what);
}

static void batches_hand_out_and_complete_with_one_crossing(QbRuntime *rt) {
  insert_rows("bat", 6);
  QbWorker *w = new_worker(rt, "{\"source\":\"bat\",\"batchSize\":6,\"concurrency\":4,\"listen\":false,\"pollIntervalMs\":50}");
  QbError *err = NULL;
  QbTaskBatch *b = (QbTaskBatch *)0x1;
  EXPECT(qb_worker_next_batch_blocking(w, 0, &b, &err), QB_ERR_INVALID_INPUT, NULL, "max", "max 0");
  CHECK(b == NULL, "out_batch cleared on failure");
  EXPECT(qb_worker_next_batch_blocking(w, 4, NULL, &err), QB_ERR_INVALID_INPUT, NULL, "out_batch", "null out_batch");
  EXPECT(qb_worker_next_batch_blocking(NULL, 4, &b, &err), QB_ERR_INVALID_INPUT, NULL, "worker", "null worker");
  qb_task_batch_free(NULL);

  /* The first batch: bounded by the 4 concurrency slots although max is 10. */
  EXPECT(qb_worker_next_batch_blocking(w, 10, &b, &err), QB_OK, NULL, NULL, "next_batch");
  CHECK(b && b->len == 4, "batch of 4, got %zu", b ? b->len : 0);
  if (!b || b->len != 4) exit(1);
  QbTask *tasks[4];
  char lost_key[32];
  for (size_t i = 0; i < 4; i++) {
    tasks[i] = b->tasks[i];
    CHECK(strstr(b->messages_json[i], "\"source\":\"bat\"") != NULL, "message %s", b->messages_json[i]);
  }
  key_of(b->messages_json[1], lost_key, sizeof lost_key);
  qb_task_batch_free(b); /* the tasks stay the caller's */

  /* Another owner takes the second row: only that task's completion is fenced out. */
  char q[256];
  snprintf(q, sizeof q, "UPDATE inbox SET claim_token = gen_random_uuid() WHERE source='bat' AND idempotency_key='%s';", lost_key);
  free(sql(db_url, q));
  QbStatus results[4] = {99, 99, 99, 99};
  EXPECT(qb_tasks_complete_blocking((const QbTask *const *)tasks, 4, results, &err), QB_OK, NULL, NULL, "tasks_complete");
  CHECK(results[0] == QB_OK && results[1] == QB_ERR_CLAIM_LOST && results[2] == QB_OK && results[3] == QB_OK,
        "results %d %d %d %d", results[0], results[1], results[2], results[3]);
  snprintf(q, sizeof q, "SELECT state FROM inbox WHERE source='bat' AND idempotency_key='%s';", lost_key);
  sql_expect(q, "processing", "the fenced-out row was not completed");
  sql_expect("SELECT count(*) FROM inbox WHERE source='bat' AND state='processed';", "3", "the other three completed");
  /* A second completion of the same tasks is refused per task, not as a whole. */
  EXPECT(qb_tasks_complete_blocking((const QbTask *const *)tasks, 1, results, &err), QB_OK, NULL, NULL, "again");
  CHECK(results[0] == QB_ERR_ALREADY_FINISHED, "second completion %d", results[0]);
  for (int i = 0; i < 4; i++) qb_task_free(tasks[i]);
  EXPECT(qb_tasks_complete_blocking(NULL, 2, NULL, &err), QB_ERR_INVALID_INPUT, NULL, "tasks", "null tasks");
  EXPECT(qb_tasks_complete_blocking(NULL, 0, NULL, &err), QB_OK, NULL, NULL, "empty batch");

  /* Async: the two claimed rows left; handles freed right after the call returned. */
  BatchLatch bl;
  memset(&bl, 0, sizeof bl);
  latch_init(&bl.l);
  EXPECT(qb_worker_next_batch(w, 10, on_batch, &bl, &err), QB_OK, NULL, NULL, "next_batch async");
  latch_wait(&bl.l);
  expect_status(bl.l.status, bl.l.error, QB_OK, NULL, NULL, "next_batch callback");
  latch_destroy(&bl.l);
  CHECK(bl.batch && bl.batch->len == 2, "async batch of 2, got %zu", bl.batch ? bl.batch->len : 0);
  if (!bl.batch) exit(1);
  QbTaskBatch *ab = bl.batch;
  memset(&bl, 0, sizeof bl);
  latch_init(&bl.l);
  EXPECT(qb_tasks_complete((const QbTask *const *)ab->tasks, ab->len, on_tasks_done, &bl, &err), QB_OK, NULL, NULL, "tasks_complete async");
  for (size_t i = 0; i < ab->len; i++) qb_task_free(ab->tasks[i]);
  qb_task_batch_free(ab);
  latch_wait(&bl.l);
  expect_status(bl.l.status, bl.l.error, QB_OK, NULL, NULL, "tasks_complete callback");
  CHECK(bl.len == 2 && bl.results[0] == QB_OK && bl.results[1] == QB_OK, "async results len %zu: %d %d", bl.len, bl.results[0], bl.results[1]);
  latch_destroy(&bl.l);
  sql_expect("SELECT count(*) FROM inbox WHERE source='bat' AND state='processed';", "5", "five completed");

  /* Shutdown while a partial batch is out: the claimed rows never handed out go back to
   * pending, the batch out finishes normally, nothing is abandoned or lost. */
  insert_rows("bat2", 4);
  QbWorker *w2 = new_worker(rt, "{\"source\":\"bat2\",\"batchSize\":6,\"concurrency\":4,\"listen\":false,\"pollIntervalMs\":50}");
  EXPECT(qb_worker_next_batch_blocking(w2, 2, &b, &err), QB_OK, NULL, NULL, "partial batch");
  CHECK(b && b->len == 2, "max 2 bounds the batch, got %zu", b ? b->len : 0);
  if (!b || b->len != 2) exit(1);
  QbTask *out[2] = {b->tasks[0], b->tasks[1]};
  qb_task_batch_free(b);
  sql_expect("SELECT count(*) FROM inbox WHERE source='bat2' AND state='processing';", "4", "all four claimed");
  Latch sl;
  latch_init(&sl);
  EXPECT(qb_worker_shutdown(w2, on_count, &sl, &err), QB_OK, NULL, NULL, "shutdown async");
  wait_for_sql("SELECT count(*) FROM inbox WHERE source='bat2' AND state='pending' AND attempt=0;", "2", "unstarted rows released");
  EXPECT(qb_worker_next_batch_blocking(w2, 4, &b, &err), QB_OK, NULL, NULL, "next_batch while stopping");
  CHECK(b && b->len == 0, "a stopping worker hands out an empty batch");
  qb_task_batch_free(b);
  EXPECT(qb_tasks_complete_blocking((const QbTask *const *)out, 2, results, &err), QB_OK, NULL, NULL, "complete the batch out");
  CHECK(results[0] == QB_OK && results[1] == QB_OK, "results %d %d", results[0], results[1]);
  qb_task_free(out[0]);
  qb_task_free(out[1]);
  latch_wait(&sl);
  expect_status(sl.status, sl.error, QB_OK, NULL, NULL, "shutdown callback");
  CHECK(sl.count == 0, "nothing abandoned: %llu", (unsigned long long)sl.count);
  latch_destroy(&sl);
  sql_expect("SELECT count(*) FILTER (WHERE state='processed') || ' ' || count(*) FILTER (WHERE state='pending') FROM inbox WHERE source='bat2';",
             "2 2", "two completed, two back to pending");

  QbStats s;
  EXPECT(qb_worker_stats(w, &s, &err), QB_OK, NULL, NULL, "stats");
  CHECK(s.completed == 5 && s.claims_lost == 1 && s.in_flight == 0, "completed=%llu claims_lost=%llu in_flight=%llu",
        (unsigned long long)s.completed, (unsigned long long)s.claims_lost, (unsigned long long)s.in_flight);
  uint64_t abandoned = 99;
  EXPECT(qb_worker_shutdown_blocking(w, &abandoned, &err), QB_OK, NULL, NULL, "shutdown");
  qb_worker_free(w);
  qb_worker_free(w2);
}

/* ---- message batches: qb_worker_next_messages*, qb_message_batch_free ---- */
typedef struct {
  Latch l;
  QbMessageBatch *batch;
} MessageLatch;

static void on_messages(void *ud, QbStatus st, QbMessageBatch *b, QbError *e) {
  MessageLatch *ml = ud; ml->l.status = st; ml->batch = b; ml->l.error = e; latch_fire(&ml->l);
}

/* A library string equals want (NULL: absent). */
static int str_is(QbStr s, const char *want) {
  if (!want) return s.ptr == NULL && s.len == 0;
  return s.ptr != NULL && s.len == strlen(want) && memcmp(s.ptr, want, s.len) == 0;
}

static const char *header_of(const QbMessage *m, const char *name, char *buf, size_t n) {
  for (size_t i = 0; i < m->headers_len; i++) {
    if (str_is(m->headers[i].name, name)) {
      size_t len = m->headers[i].value.len < n - 1 ? m->headers[i].value.len : n - 1;
      memcpy(buf, m->headers[i].value.ptr, len);
      buf[len] = 0;
      return buf;
    }
  }
  return NULL;
}

static void message_batches_carry_every_field_as_structs(QbRuntime *rt) {
  /* One row with every optional field set (a header that is not a JSON string, an empty
   * event type, a trace context), one with none. */
  free(sql(db_url,
           "INSERT INTO inbox (source, idempotency_key, aggregate_id, event_type, payload, headers, correlation_id, "
           "traceparent, tracestate, consumption, created_at) VALUES "
           "('msgs', 'full', 'agg-1', '', '{\"n\": 1, \"big\": 12345678901234567890.5, \"s\": \"a\\u00e9\"}', "
           "'{\"x-tenant\": \"acme\", \"x-count\": 3}', 'corr-1', "
           "'00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01', 'vendor=1', 'pull', '2026-01-02T03:04:05.123456Z'),"
           "('msgs', 'bare', NULL, NULL, 'null', '{}', NULL, NULL, NULL, 'pull', '2026-01-02T03:04:06Z');"));
  QbWorker *w = new_worker(rt, "{\"source\":\"msgs\",\"concurrency\":4,\"listen\":false,\"pollIntervalMs\":50}");
  QbError *err = NULL;
  QbMessageBatch *b = (QbMessageBatch *)0x1;
  EXPECT(qb_worker_next_messages_blocking(w, 0, &b, &err), QB_ERR_INVALID_INPUT, NULL, "max", "max 0");
  CHECK(b == NULL, "out_batch cleared on failure");
  EXPECT(qb_worker_next_messages_blocking(w, 4, NULL, &err), QB_ERR_INVALID_INPUT, NULL, "out_batch", "null out_batch");
  EXPECT(qb_worker_next_messages_blocking(NULL, 4, &b, &err), QB_ERR_INVALID_INPUT, NULL, "worker", "null worker");
  qb_message_batch_free(NULL);

  /* Both rows, possibly over two hand-outs (the first waits for one claimed row only). */
  QbTask *tasks[2];
  size_t got = 0;
  int seen_full = 0, seen_bare = 0;
  while (got < 2) {
    EXPECT(qb_worker_next_messages_blocking(w, 4, &b, &err), QB_OK, NULL, NULL, "next_messages");
    if (!b || b->len == 0 || got + b->len > 2) { CHECK(0, "unexpected batch of %zu", b ? b->len : 0); exit(1); }
    for (size_t i = 0; i < b->len; i++) {
      const QbMessage *m = &b->messages[i];
      char id[64];
      CHECK(m->id.len == 36, "id length %zu", m->id.len);
      CHECK(str_is(m->source, "msgs"), "source");
      CHECK(m->attempt == 0, "attempt %d", m->attempt);
      /* The id is the row's: it finds the row by key. */
      char q[256];
      snprintf(q, sizeof q, "SELECT idempotency_key FROM inbox WHERE id = '%.*s';", (int)m->id.len, m->id.ptr);
      snprintf(id, sizeof id, "%.*s", (int)m->idempotency_key.len, m->idempotency_key.ptr);
      sql_expect(q, id, "id and idempotency key are the same row's");
      if (str_is(m->idempotency_key, "full")) {
        seen_full++;
        char hv[64];
        CHECK(str_is(m->aggregate_id, "agg-1"), "aggregate id");
        CHECK(m->event_type.ptr != NULL && m->event_type.len == 0, "an empty event type is present and empty");
        /* The payload's JSON text, numbers exact (key order is the JSON map's, not asserted). */
        char payload[128];
        snprintf(payload, sizeof payload, "%.*s", (int)m->payload_json.len, m->payload_json.ptr);
        CHECK(m->payload_json.len == 46 && payload[0] == '{' && strstr(payload, "\"n\":1") &&
                  strstr(payload, "\"big\":12345678901234567890.5") && strstr(payload, "\"s\":\"a\xc3\xa9\""),
              "payload %s", payload);
        CHECK(m->headers_len == 2, "headers %zu", m->headers_len);
        CHECK(header_of(m, "x-tenant", hv, sizeof hv) && strcmp(hv, "acme") == 0, "string header");
        CHECK(header_of(m, "x-count", hv, sizeof hv) && strcmp(hv, "3") == 0, "a number header as its JSON text");
        CHECK(str_is(m->correlation_id, "corr-1"), "correlation id");
        CHECK(m->created_at_unix_nanos == 1767323045123456000LL, "created_at %lld", (long long)m->created_at_unix_nanos);
        CHECK(str_is(m->traceparent, "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"), "traceparent");
        CHECK(str_is(m->tracestate, "vendor=1"), "tracestate");
      } else {
        seen_bare++;
        CHECK(str_is(m->idempotency_key, "bare"), "second key");
        CHECK(str_is(m->aggregate_id, NULL) && str_is(m->event_type, NULL) && str_is(m->correlation_id, NULL),
              "absent fields have a NULL ptr");
        CHECK(str_is(m->payload_json, "null"), "null payload");
        CHECK(m->headers_len == 0 && m->headers == NULL, "no headers");
        CHECK(m->created_at_unix_nanos == 1767323046000000000LL, "created_at %lld", (long long)m->created_at_unix_nanos);
        CHECK(str_is(m->traceparent, NULL) && str_is(m->tracestate, NULL), "no trace context");
      }
      tasks[got++] = b->tasks[i];
    }
    qb_message_batch_free(b); /* the tasks stay the caller's */
  }
  CHECK(seen_full == 1 && seen_bare == 1, "each row once: full %d bare %d", seen_full, seen_bare);
  QbStatus results[2];
  EXPECT(qb_tasks_complete_blocking((const QbTask *const *)tasks, 2, results, &err), QB_OK, NULL, NULL, "complete");
  CHECK(results[0] == QB_OK && results[1] == QB_OK, "results %d %d", results[0], results[1]);
  qb_task_free(tasks[0]);
  qb_task_free(tasks[1]);
  sql_expect("SELECT count(*) FROM inbox WHERE source='msgs' AND state='processed';", "2", "both completed");

  /* Async, and a stopping worker's empty batch. */
  insert_rows("msgs", 1);
  MessageLatch ml;
  memset(&ml, 0, sizeof ml);
  latch_init(&ml.l);
  EXPECT(qb_worker_next_messages(w, 4, on_messages, &ml, &err), QB_OK, NULL, NULL, "next_messages async");
  latch_wait(&ml.l);
  expect_status(ml.l.status, ml.l.error, QB_OK, NULL, NULL, "next_messages callback");
  latch_destroy(&ml.l);
  CHECK(ml.batch && ml.batch->len == 1 && str_is(ml.batch->messages[0].idempotency_key, "k1"), "async batch");
  if (!ml.batch || ml.batch->len != 1) exit(1);
  QbTask *t = ml.batch->tasks[0];
  qb_message_batch_free(ml.batch);
  EXPECT(qb_task_complete_blocking(t, &err), QB_OK, NULL, NULL, "complete async one");
  qb_task_free(t);
  uint64_t abandoned = 99;
  EXPECT(qb_worker_shutdown_blocking(w, &abandoned, &err), QB_OK, NULL, NULL, "shutdown");
  EXPECT(qb_worker_next_messages_blocking(w, 4, &b, &err), QB_OK, NULL, NULL, "next_messages while stopped");
  CHECK(b && b->len == 0, "a stopped worker hands out an empty batch");
  qb_message_batch_free(b);
  qb_worker_free(w);
}

/* qb_cancel*: pending pull rows named by key, aggregate or id become `cancelled` and are never
 * handed to a worker; a second cancel cancels nothing; a target that names no row is refused
 * naming the missing field, before any connection. */
static void cancel_takes_pending_rows_out_of_the_workers_reach(QbRuntime *rt) {
  free(sql(db_url,
           "INSERT INTO inbox (source, idempotency_key, aggregate_id, payload, consumption) VALUES "
           "('cxl','c1',NULL,'{}','pull'),('cxl','c2','A','{}','pull'),('cxl','c3','A','{}','pull'),"
           "('cxl','c4',NULL,'{}','pull'),('cxl','c5',NULL,'{}','pull');"));
  QbError *err = NULL;
  char *counts = NULL;
  EXPECT(qb_cancel_blocking(rt, db_url, "inbox", "{\"source\":\"cxl\",\"key\":\"c1\"}", &counts, &err), QB_OK, NULL, NULL,
         "cancel by key");
  CHECK(counts && strcmp(counts, "{\"cancelled\":1,\"inFlight\":0,\"finished\":0,\"push\":0}") == 0, "by key: %s",
        counts ? counts : "NULL");
  qb_string_free(counts);
  counts = NULL;
  EXPECT(qb_cancel_blocking(rt, db_url, "inbox", "{\"source\":\"cxl\",\"key\":\"c1\"}", &counts, &err), QB_OK, NULL, NULL,
         "second cancel");
  CHECK(counts && strcmp(counts, "{\"cancelled\":0,\"inFlight\":0,\"finished\":1,\"push\":0}") == 0, "second: %s",
        counts ? counts : "NULL");
  qb_string_free(counts);

  Latch l;
  latch_init(&l);
  EXPECT(qb_cancel(rt, db_url, "inbox", "{\"source\":\"cxl\",\"aggregate\":\"A\"}", on_string, &l, &err), QB_OK, NULL, NULL,
         "cancel by aggregate start");
  latch_wait(&l);
  expect_status(l.status, l.error, QB_OK, NULL, NULL, "cancel by aggregate");
  CHECK(l.json && strstr(l.json, "\"cancelled\":2,"), "by aggregate: %s", l.json ? l.json : "NULL");
  qb_string_free(l.json);
  latch_destroy(&l);

  char *id = sql(db_url, "SELECT id FROM inbox WHERE source='cxl' AND idempotency_key='c4';");
  char target[128];
  snprintf(target, sizeof target, "{\"id\":\"%s\"}", id);
  free(id);
  counts = NULL;
  EXPECT(qb_cancel_blocking(rt, db_url, "inbox", target, &counts, &err), QB_OK, NULL, NULL, "cancel by id");
  CHECK(counts && strstr(counts, "\"cancelled\":1,"), "by id: %s", counts ? counts : "NULL");
  qb_string_free(counts);
  sql_expect("SELECT string_agg(idempotency_key || '=' || state, ',' ORDER BY idempotency_key) FROM inbox WHERE source='cxl';",
             "c1=cancelled,c2=cancelled,c3=cancelled,c4=cancelled,c5=pending", "states after cancel");

  /* The worker is handed c5, the one row left: the cancelled rows come first in order. */
  QbWorker *w = new_worker(rt, "{\"source\":\"cxl\",\"batchSize\":5,\"listen\":false,\"pollIntervalMs\":50}");
  char *json = NULL;
  QbTask *t = next_task(w, &json);
  CHECK(json && strstr(json, "\"idempotencyKey\":\"c5\""), "the worker sees only c5: %s", json ? json : "NULL");
  qb_string_free(json);
  EXPECT(qb_task_complete_blocking(t, &err), QB_OK, NULL, NULL, "complete c5");
  qb_task_free(t);
  uint64_t abandoned = 0;
  EXPECT(qb_worker_shutdown_blocking(w, &abandoned, &err), QB_OK, NULL, NULL, "shutdown");
  qb_worker_free(w);
  sql_expect("SELECT count(*) FROM inbox WHERE source='cxl' AND state='cancelled' AND attempt=0;", "4",
             "cancelled rows were never claimed");

  /* Refusals name the field; the unreachable URL proves no connection was tried. */
  const char *nowhere = "postgres://postgres@127.0.0.1:1/none";
  EXPECT(qb_cancel_blocking(rt, nowhere, "inbox", "{\"source\":\"cxl\"}", &counts, &err), QB_ERR_INVALID_INPUT, NULL,
         "id, key or aggregate", "no id, key or aggregate");
  CHECK(counts == NULL, "no counts on failure");
  EXPECT(qb_cancel_blocking(rt, nowhere, "outbox", "{}", &counts, &err), QB_ERR_INVALID_INPUT, NULL, "id or key",
         "outbox without id or key");
  EXPECT(qb_cancel_blocking(rt, nowhere, "inbox", "{\"id\":\"x\",\"topic\":\"t\"}", &counts, &err), QB_ERR_INVALID_INPUT,
         NULL, "`topic`", "a field of the other table");
  EXPECT(qb_cancel_blocking(rt, nowhere, "queue", "{\"key\":\"k\"}", &counts, &err), QB_ERR_INVALID_INPUT, NULL,
         "inbox or outbox", "unknown table");
  EXPECT(qb_cancel_blocking(rt, nowhere, "inbox", "not json", &counts, &err), QB_ERR_INVALID_INPUT, NULL, "target",
         "target not JSON");
  EXPECT(qb_cancel_blocking(rt, db_url, NULL, "{}", &counts, &err), QB_ERR_INVALID_INPUT, NULL, "table", "null table");
  EXPECT(qb_cancel_blocking(rt, db_url, "inbox", "{\"id\":\"00000000-0000-0000-0000-000000000000\"}", NULL, &err),
         QB_ERR_INVALID_INPUT, NULL, "out_counts_json", "null out");
  EXPECT(qb_cancel_blocking(NULL, db_url, "inbox", "{}", &counts, &err), QB_ERR_INVALID_INPUT, NULL, "runtime is NULL",
         "null runtime");
  latch_init(&l);
  EXPECT(qb_cancel(rt, db_url, "outbox", "{\"key\":\"k\",\"source\":\"s\"}", on_string, &l, &err), QB_OK, NULL, NULL,
         "async refusal start");
  latch_wait(&l);
  expect_status(l.status, l.error, QB_ERR_INVALID_INPUT, NULL, "`source`", "async refusal");
  CHECK(l.json == NULL, "no counts with the async refusal");
  latch_destroy(&l);
}

int main(int argc, char **argv) {
  if (argc < 3) {
    fprintf(stderr, "usage: %s <empty database url> <second empty database url>\n", argv[0]);
    return 2;
  }
  db_url = argv[1];
  static_strings_and_null_frees();
  conformance_evaluate_runs_core_and_reports_bad_input();
  runtime_new_rejects_null_out();
  null_handles_are_refused();

  QbRuntime *rt = NULL;
  QbError *err = NULL;
  EXPECT(qb_runtime_new(2, &rt, &err), QB_OK, NULL, NULL, "runtime");
  if (!rt) return 1;
  migrate_applies_then_reports_applied(rt);
  worker_options_errors_name_the_field(rt);
  worker_new_reports_connect_and_schema_errors(rt, argv[2]);
  blocking_calls_finish_rows_in_the_database(rt);
  batches_hand_out_and_complete_with_one_crossing(rt);
  message_batches_carry_every_field_as_structs(rt);
  callbacks_fire_once_from_runtime_threads(rt);
  shutdown_after_grace_cancels_and_nothing_completes(rt);
  application_transaction_statements(rt);
  cancel_takes_pending_rows_out_of_the_workers_reach(rt);
  log_callback_forwards_core_records(rt);
  qb_runtime_free(rt);

  if (failures) {
    fprintf(stderr, "abi_test: %d check(s) failed\n", failures);
    return 1;
  }
  printf("abi_test: all checks passed\n");
  return 0;
}
