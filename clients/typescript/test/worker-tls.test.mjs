// The worker against a PostgreSQL that accepts TLS with a client certificate only
// (scripts/postgres-tls.sh; scripts/test.d/40-node.sh starts it and exports
// QUEUEBOX_TEST_TLS_DATABASE_URL: sslmode=verify-full, sslrootcert, sslcert, sslkey). The
// package hands the URL to the Rust core as it is: migrate and the worker connect with the
// URL alone, PostgreSQL's pg_stat_ssl shows the worker's sessions encrypted with the client
// certificate, and a wrong CA or a missing client certificate is refused with the core's
// wording. psql (libpq, the same URL parameters) sets up and looks; the package does not.
import { test } from "node:test";
import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { randomBytes } from "node:crypto";
import { ConnectError, Worker, migrate } from "../dist/esm/index.js";
import { waitFor } from "./helpers.mjs";

const BASE = process.env.QUEUEBOX_TEST_TLS_DATABASE_URL ?? "";
const quiet = { warn() {} };

const psql = (url, sql) =>
  execFileSync("psql", [url, "-X", "-q", "-t", "-A", "-v", "ON_ERROR_STOP=1", "-c", sql], { encoding: "utf8" }).trim();

test("the worker connects to a TLS-only PostgreSQL with the URL alone", async () => {
  assert.ok(BASE, "NOT RUN: QUEUEBOX_TEST_TLS_DATABASE_URL is not set (scripts/test.d/40-node.sh starts scripts/postgres-tls.sh and sets it)");
  const name = `qb_node_tls_${randomBytes(4).toString("hex")}`;
  const admin = BASE.replace("/queuebox?", "/postgres?");
  psql(admin, `CREATE DATABASE ${name}`);
  const url = BASE.replace("/queuebox?", `/${name}?`);
  try {
    await migrate(url);
    psql(url, `INSERT INTO inbox (source, idempotency_key, payload, consumption) VALUES ('tls_jobs', 'k1', '{"n": 1}', 'pull')`);
    let sessions;
    const w = new Worker({ databaseUrl: url, source: "tls_jobs", pollIntervalMs: 20, logger: quiet });
    const ac = new AbortController();
    const done = w.run(
      async () => {
        // The worker's own sessions, seen by the server while it holds this row.
        sessions = psql(
          url,
          `SELECT string_agg(DISTINCT s.ssl || ' ' || s.version || ' ' || coalesce(s.client_dn, '-'), ', ')
           FROM pg_stat_ssl s JOIN pg_stat_activity a USING (pid)
           WHERE a.datname = current_database() AND a.pid <> pg_backend_pid()`,
        );
      },
      { signal: ac.signal },
    );
    await waitFor(() => psql(url, "SELECT state FROM inbox WHERE source = 'tls_jobs'") === "processed", 30000, "the row processed over TLS");
    ac.abort();
    await done;
    assert.equal(sessions, "true TLSv1.3 /CN=postgres");

    // The core read sslrootcert and sslcert/sslkey from this URL: change them and it refuses.
    const refused = async (badUrl, text) => {
      const bad = new Worker({ databaseUrl: badUrl, source: "tls_jobs", logger: quiet });
      await assert.rejects(bad.run(async () => {}), (e) => e instanceof ConnectError && e.message.includes(text));
    };
    await refused(url.replace("/ca.crt", "/other-ca.crt"), "not signed by a CA QueueBox trusts");
    await refused(url.slice(0, url.indexOf("&sslcert=")), "client certificate");
  } finally {
    psql(admin, `DROP DATABASE IF EXISTS ${name} WITH (FORCE)`);
  }
});
