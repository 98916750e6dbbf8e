/* The C quick start, built against the installed tarball (pkg-config queuebox):
 *   quickstart migrate URL   applies the schema
 *   quickstart work URL      handles one row of source "orders": the business insert and the
 *                            completion commit together; then a graceful shutdown. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <queuebox.h>

static int fail(const char *what, QbError *e) {
  fprintf(stderr, "%s: %s: %s\n", what, e ? e->kind_name : "?", e && e->message ? e->message : "");
  qb_error_free(e);
  return 1;
}

int main(int argc, char **argv) {
  if (argc != 3) { fprintf(stderr, "usage: quickstart migrate|work URL\n"); return 2; }
  const char *url = argv[2];
  QbRuntime *rt = NULL;
  QbError *e = NULL;
  if (qb_runtime_new(0, &rt, &e) != QB_OK) return fail("runtime", e);
  printf("libqueuebox %s\n", qb_version());
  int rc = 0;
  if (strcmp(argv[1], "migrate") == 0) {
    char *report = NULL;
    if (qb_migrate_blocking(rt, url, &report, &e) != QB_OK) rc = fail("migrate", e);
    else { printf("migrated: %s\n", report); qb_string_free(report); }
  } else {
    QbWorker *w = NULL;
    if (qb_worker_new_blocking(rt, url, "{\"source\": \"orders\"}", &w, &e) != QB_OK) {
      rc = fail("worker", e);
    } else {
      QbTask *task = NULL;
      char *message = NULL;
      if (qb_worker_next_blocking(w, &task, &message, &e) != QB_OK || task == NULL) {
        rc = task ? fail("next", e) : fail("next: no task", e);
      } else {
        printf("claimed: %s\n", message);
        qb_string_free(message);
        char *rows = NULL;
        /* The message id and its payload's total, read inside the task's transaction. */
        if (qb_task_query_blocking(task, "SELECT id::text AS id, payload->>'total' AS total FROM inbox WHERE idempotency_key = $1",
                                   "[\"install-1\"]", &rows, &e) != QB_OK) {
          rc = fail("query", e);
        } else {
          qb_string_free(rows);
          if (qb_task_execute_blocking(task,
                  "INSERT INTO orders_seen (id, total) SELECT id, (payload->>'total')::numeric FROM inbox WHERE idempotency_key = $1",
                  "[\"install-1\"]", NULL, &e) != QB_OK) rc = fail("execute", e);
          else if (qb_task_complete_blocking(task, &e) != QB_OK) rc = fail("complete", e);
        }
        qb_task_free(task);
      }
      uint64_t abandoned = 0;
      if (qb_worker_shutdown_blocking(w, &abandoned, &e) != QB_OK) rc = fail("shutdown", e);
      qb_worker_free(w);
    }
  }
  qb_runtime_free(rt);
  return rc;
}
