// The operator console in a real headless Chromium, against the real `queuebox` binary, the
// test PostgreSQL (a database of its own) and a real HTTP receiver that first fails, so rows
// go dead the way they do in production. Run by run.sh (scripts/test.d/55-console.sh).
//
// Needs QUEUEBOX_BIN (the relay binary), QUEUEBOX_TEST_DATABASE_URL and Chromium at
// $QB_CHROMIUM (default /usr/bin/chromium). Screenshots and relay logs go to $QB_CONSOLE_OUT
// (default target/console-test/).
import { test, after } from 'node:test';
import assert from 'node:assert/strict';
import { spawn, execFileSync } from 'node:child_process';
import fs from 'node:fs';
import http from 'node:http';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { chromium } from 'playwright-core';

const ROOT = path.resolve(import.meta.dirname, '../..');
const OUT = process.env.QB_CONSOLE_OUT || path.join(ROOT, 'target/console-test');
const BIN = process.env.QUEUEBOX_BIN || path.join(ROOT, 'target/debug/queuebox');
const SERVER_URL = process.env.QUEUEBOX_TEST_DATABASE_URL;
const TOKEN = 'console-test-token';
// What the failing receiver answers and what one message carries: markup that would run
// (and set window.__xss) if the console ever parsed data as HTML.
const EVIL_ERROR = '<script>window.__xss="error"</script><img src=x onerror="window.__xss=\'img\'">';
const EVIL_NOTE = '<script>window.__xss="payload"</script>';

fs.mkdirSync(OUT, { recursive: true });
const cleanups = [];
after(async () => {
  for (const c of cleanups.reverse()) await c().catch((e) => console.error('cleanup:', e.message));
});

async function freePort() {
  const s = net.createServer();
  await new Promise((r) => s.listen(0, '127.0.0.1', r));
  const { port } = s.address();
  await new Promise((r) => s.close(r));
  return port;
}

async function waitFor(what, check, timeoutMs = 20000) {
  const end = Date.now() + timeoutMs;
  let last;
  while (Date.now() < end) {
    try {
      last = await check();
      if (last) return last;
    } catch (e) {
      last = e.message;
    }
    await new Promise((r) => setTimeout(r, 100));
  }
  throw new Error(`timed out waiting for ${what} (last: ${JSON.stringify(last)})`);
}

/** A fresh database on the test server; dropped at the end. */
function freshDatabase() {
  const name = `qb_console_${process.pid}_${Date.now() % 100000}`;
  const base = SERVER_URL.replace(/\/[^/?]*(\?.*)?$/, '');
  execFileSync('psql', [`${base}/postgres`, '-qc', `CREATE DATABASE ${name}`]);
  cleanups.push(async () => execFileSync('psql', [`${base}/postgres`, '-qc', `DROP DATABASE IF EXISTS ${name} WITH (FORCE)`]));
  return `${base}/${name}`;
}

/** The far end of the HTTP destination: answers 500 with markup until told to accept. */
async function startReceiver() {
  const receiver = { accept: false, delivered: [] };
  const server = http.createServer((req, res) => {
    let body = '';
    req.on('data', (c) => { body += c; });
    req.on('end', () => {
      if (!receiver.accept) {
        res.writeHead(500, { 'Content-Type': 'text/html' }).end(EVIL_ERROR);
        return;
      }
      receiver.delivered.push(JSON.parse(body));
      res.writeHead(200).end('ok');
    });
  });
  await new Promise((r) => server.listen(0, '127.0.0.1', r));
  receiver.url = `http://127.0.0.1:${server.address().port}`;
  cleanups.push(() => new Promise((r) => server.close(r)));
  return receiver;
}

/** Runs `queuebox --config <file> run` until the end of the test; resolves once it is ready. */
async function startRelay(name, yaml) {
  const port = await freePort();
  const file = path.join(OUT, `${name}.yml`);
  fs.writeFileSync(file, `server:\n  httpPort: ${port}\n${yaml}`);
  const log = fs.openSync(path.join(OUT, `${name}.log`), 'w');
  // QUEUEBOX_* variables are configuration overrides to the relay: none of the test's own.
  const env = Object.fromEntries(Object.entries(process.env).filter(([k]) => !k.startsWith('QUEUEBOX_')));
  const child = spawn(BIN, ['--config', file, 'run'], { stdio: ['ignore', log, log], env });
  let exited = null;
  child.on('error', (e) => { exited = e.message; }); // e.g. no binary at BIN: no 'exit' follows
  child.on('exit', (code) => { exited = code; });
  cleanups.push(async () => {
    if (exited === null) {
      child.kill('SIGTERM');
      await new Promise((r) => child.once('exit', r));
    }
  });
  const base = `http://127.0.0.1:${port}`;
  await waitFor(`relay ${name} ready`, async () => exited !== null || (await fetch(`${base}/health/ready`)).ok);
  if (exited !== null) {
    throw new Error(`relay ${name} exited ${exited}: ${fs.readFileSync(path.join(OUT, `${name}.log`), 'utf8').slice(-800)}`);
  }
  return base;
}

const admin = (base, p, init = {}) => fetch(`${base}${p}`, {
  ...init, headers: { Authorization: `Bearer ${TOKEN}`, ...(init.headers || {}) },
});

test('operator console in Chromium: counts, dead letters, replay, delete, message, cancel, pause, escaping, auth', async (t) => {
  assert.ok(SERVER_URL, 'QUEUEBOX_TEST_DATABASE_URL is set');
  const db = freshDatabase();
  const receiver = await startReceiver();
  const config = `database:
  url: ${db}
outbox:
  pollIntervalMs: 50
  retryBaseDelayMs: 50
  maxAttempts: 2
inbox:
  relay:
    pollIntervalMs: 50
destinations:
  receiver:
    type: http
    baseUrl: ${receiver.url}
    path: /hooks
    timeoutMs: 5000
routes:
  - topicPattern: "orders.**"
    destination: receiver
sources:
  orders:
    path: /orders
    idempotencyKeyPath: $.id
    eventTypePath: $.type
    aggregateIdPath: $.orderId
    topic: "orders.{{ eventType }}"
  jobs:
    path: /jobs
    consumption: pull
    idempotencyKeyHeader: X-Job-Id
`;
  const base = await startRelay('relay', `${config}admin:\n  enabled: true\n  auth:\n    type: bearer\n    token: ${TOKEN}\n`);

  // Two orders that the failing receiver kills (2 attempts each), one pull job left waiting.
  for (const [id, orderId, note] of [['o-1', 'a1', EVIL_NOTE], ['o-2', 'a2', 'plain']]) {
    const r = await fetch(`${base}/inbox/orders`, {
      method: 'POST', headers: { 'Content-Type': 'application/json' },
      body: JSON.stringify({ id, type: 'created', orderId, note }),
    });
    assert.equal(r.status, 202, `POST /inbox/orders ${id}`);
  }
  for (const jobId of ['j-1', 'j-2', 'j-3', 'j-4']) {
    const job = await fetch(`${base}/inbox/jobs`, {
      method: 'POST', headers: { 'Content-Type': 'application/json', 'X-Job-Id': jobId }, body: '{}',
    });
    assert.equal(job.status, 202, `POST /inbox/jobs ${jobId}`);
  }
  // j-2 as a worker that died holding it leaves it: processing, its lease run out (the relay
  // never claims pull rows, so it stays so until a worker reclaims it).
  execFileSync('psql', [db, '-qc', `UPDATE inbox SET state = 'processing', claim_token = gen_random_uuid(),
    claimed_at = now() - interval '2 minutes', lease_expires_at = now() - interval '1 minute'
    WHERE source = 'jobs' AND idempotency_key = 'j-2'`]);
  // j-3 and j-4 as a worker's handler gave them up: dead, after 3 attempts, with markup in the error.
  execFileSync('psql', [db, '-qc', `UPDATE inbox SET state = 'dead', attempt = 3, last_error = '<b>boom</b>'
    WHERE source = 'jobs' AND idempotency_key IN ('j-3', 'j-4')`]);
  // An outbox row waiting for its second try an hour from now: "retrying".
  execFileSync('psql', [db, '-qc', `INSERT INTO outbox (topic, payload, attempt, scheduled_at, last_error)
    VALUES ('orders.retrying', '{}', 1, now() + interval '1 hour', 'HTTP 503')`]);
  await waitFor('both outbox rows dead', async () => {
    const { rows } = await (await admin(base, '/admin/dead/outbox')).json();
    return rows.length === 2;
  });

  const browser = await chromium.launchPersistentContext(fs.mkdtempSync(path.join(os.tmpdir(), 'qb-console-chromium-')), {
    executablePath: process.env.QB_CHROMIUM || '/usr/bin/chromium',
    headless: true,
    viewport: { width: 1400, height: 800 },
    args: ['--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run', '--disable-background-networking',
      '--disable-component-update', '--disable-sync'],
  });
  cleanups.push(() => browser.close());
  const page = await browser.newPage();
  const pageErrors = [];
  page.on('pageerror', (e) => pageErrors.push(e.message));
  page.on('dialog', (d) => d.accept()); // the replay, delete and cancel confirmations
  const xss = () => page.evaluate(() => window.__xss);
  // A dead-letter row by its key (the order's aggregate id); ids are random UUIDs.
  const deadRow = (key) => page.locator('#dead-rows tbody tr')
    .filter({ has: page.getByRole('cell', { name: key, exact: true }) });

  await t.test('without admin credentials the console shows no data and the API refuses', async () => {
    await page.goto(`${base}/console`);
    await page.locator('#signin').waitFor({ state: 'visible' });
    assert.equal(await page.locator('#overview').isHidden(), true);
    assert.equal(await page.evaluate(async () => (await fetch('/admin/overview')).status), 401);
    assert.equal((await fetch(`${base}/admin/dead/outbox`)).status, 401);
    assert.equal((await fetch(`${base}/admin/journey?q=orders:o-1`)).status, 401);
    await page.fill('#credential', 'wrong-token');
    await page.click('#signin-form button');
    await page.locator('#signin-why', { hasText: 'Refused: Invalid bearer token' }).waitFor();
    assert.equal(await page.locator('#overview-table tbody tr').count(), 0, 'no overview rows shown');
  });

  await t.test('overview: dead counts per topic, a waiting and a stuck pull job, the oldest pending age', async () => {
    await page.fill('#credential', TOKEN);
    await page.click('#signin-form button');
    const orders = page.locator('#overview-table tr[data-table="outbox"][data-name="orders.created"]');
    await orders.waitFor();
    const cells = await orders.locator('td').allTextContents();
    assert.deepEqual(cells.slice(0, 6), ['outbox', 'orders.created', '0', '0', '0', '0']);
    assert.equal(cells[7], '2', 'dead');
    const retrying = await page.locator('#overview-table tr[data-table="outbox"][data-name="orders.retrying"] td').allTextContents();
    assert.deepEqual([retrying[2], retrying[3], retrying[7]], ['0', '1', '0'], 'pending, retrying, dead');
    assert.match(retrying[8], /^\d+ s$/, 'oldest pending age of the retrying row');
    const jobs = await page.locator('#overview-table tr[data-table="inbox"][data-name="jobs"] td').allTextContents();
    assert.equal(jobs[0], 'inbox (pull)');
    assert.deepEqual([jobs[2], jobs[4], jobs[5], jobs[7]], ['1', '1', '1', '2'], 'pending, processing, lease expired, dead');
    assert.match(jobs[6], /^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC$/, 'next lease expiry');
    assert.match(jobs[8], /^\d+ s$/, 'oldest pending age');
    await page.screenshot({ path: path.join(OUT, 'overview.png'), fullPage: true });
  });

  await t.test('dead letters: filters, last_error and attempts, shown as text', async () => {
    await page.click('a[href="#dead"]');
    const rows = page.locator('#dead-rows tbody tr[data-id]');
    await waitFor('two dead rows', async () => (await rows.count()) === 2);
    const a1 = deadRow('a1');
    const cells = await a1.locator('td').allTextContents();
    assert.equal(cells[1], 'orders.created');
    assert.equal(cells[3], '2', 'attempts');
    assert.ok(cells[5].includes(EVIL_ERROR), `last_error shown verbatim: ${cells[5]}`);
    assert.equal(await page.locator('#dead-rows script, #dead-rows img').count(), 0, 'no markup from last_error');
    assert.equal(await xss(), undefined, 'nothing from last_error ran');

    await page.fill('#dead-topic', 'orders.none');
    await page.click('#dead-form button');
    await page.locator('#dead-rows td.empty', { hasText: 'No dead rows match.' }).waitFor();
    await page.fill('#dead-topic', 'orders.created');
    await page.fill('#dead-source', 'orders');
    await page.click('#dead-form button');
    await waitFor('two rows by topic and source', async () => (await rows.count()) === 2);
    await page.fill('#dead-source', 'jobs');
    await page.click('#dead-form button');
    await page.locator('#dead-rows td.empty').waitFor();
    await page.fill('#dead-source', '');
    await page.fill('#dead-topic', '');
    await page.click('#dead-form button');
    await waitFor('two rows unfiltered', async () => (await rows.count()) === 2);
    await page.screenshot({ path: path.join(OUT, 'dead-letters.png'), fullPage: true });
  });

  await t.test('replay: the receiver now answers 200 and the row is delivered', async () => {
    receiver.accept = true;
    const rows = page.locator('#dead-rows tbody tr[data-id]');
    await deadRow('a1').locator('button.replay').click();
    await page.locator('#status', { hasText: 'Replayed 1 outbox row(s)' }).waitFor();
    await waitFor('one dead row left', async () => (await rows.count()) === 1);
    await waitFor('o-1 delivered', () => receiver.delivered.some((m) => m.id === 'o-1'));
    assert.equal(receiver.delivered.length, 1, 'only the replayed row was delivered');
    // The overview's throughput column counts it: one row of orders.created done in 5 min.
    await page.click('a[href="#overview"]');
    const orders = page.locator('#overview-table tr[data-table="outbox"][data-name="orders.created"]');
    await waitFor('the delivery counted as done', async () => {
      await page.click('#overview-refresh');
      return ((await orders.locator('td').allTextContents())[9] ?? '') === '1 (0.2/min)';
    });
  });

  await t.test('message view: the inbox row and its outbox rows; the payload shown as text', async () => {
    await page.click('a[href="#message"]');
    await page.fill('#message-q', 'orders:o-1');
    const outbox = page.locator('#journey tr[data-table="outbox"]');
    await waitFor('the outbox row sent', async () => {
      await page.click('#message-form button');
      await page.locator('#journey').waitFor();
      return (await outbox.locator('td.state').allTextContents()).join() === 'sent';
    });
    const inbox = await page.locator('#journey tr[data-table="inbox"] td').allTextContents();
    assert.deepEqual([inbox[2], inbox[3], inbox[4]], ['orders', 'o-1', 'processed']);
    const row = await outbox.locator('td').allTextContents();
    assert.deepEqual([row[2], row[3], row[5]], ['orders.created', 'a1', '0'], 'topic, key, attempts after the replay');
    await outbox.locator('summary').click();
    const payload = JSON.parse(await outbox.locator('pre.payload').textContent());
    assert.equal(payload.note, EVIL_NOTE, 'the payload shown verbatim');
    const headers = JSON.parse(await outbox.locator('pre.headers').textContent());
    assert.equal(headers['x-inbox-id'], await page.locator('#journey tr[data-table="inbox"]').getAttribute('data-id'));
    assert.equal(await page.locator('#message-result script, #message-result img').count(), 0);
    assert.equal(await xss(), undefined, 'nothing from the payload ran');
    await page.screenshot({ path: path.join(OUT, 'message.png'), fullPage: true });

    await page.fill('#message-q', 'orders:no-such-key');
    await page.click('#message-form button');
    await page.locator('#status.error', { hasText: 'No inbox or outbox row matches orders:no-such-key' }).waitFor();
  });

  await t.test('delete: the other dead row is removed', async () => {
    await page.click('a[href="#dead"]');
    const a2 = deadRow('a2');
    await a2.locator('button.delete').click();
    await page.locator('#status', { hasText: 'Deleted 1 outbox row(s).' }).waitFor();
    await page.locator('#dead-rows td.empty').waitFor();
    const { rows } = await (await admin(base, '/admin/dead/outbox')).json();
    assert.equal(rows.length, 0);
    const journey = await (await admin(base, '/admin/journey?q=orders:o-2')).json();
    assert.equal(journey.inbox.state, 'processed');
    assert.deepEqual(journey.outbox, [], 'the outbox row is gone');
    assert.equal(receiver.delivered.length, 1, 'the deleted row was never delivered');
  });

  await t.test('inbox dead letters: replay requeues a pull job, delete removes one', async () => {
    await page.selectOption('#dead-table', 'inbox');
    const rows = page.locator('#dead-rows tbody tr[data-id]');
    await waitFor('two dead inbox rows', async () => (await rows.count()) === 2);
    assert.equal(await page.locator('#dead-topic').isDisabled(), true, 'no topic filter for inbox rows');
    const cells = await deadRow('j-3').locator('td').allTextContents();
    assert.deepEqual([cells[1], cells[2], cells[3], cells[5]], ['jobs', 'j-3', '3', '<b>boom</b>']);
    assert.equal(await page.locator('#dead-rows b').count(), 0, 'the error is text, not markup');
    await deadRow('j-3').locator('button.replay').click();
    await page.locator('#status', { hasText: 'Replayed 1 inbox row(s)' }).waitFor();
    await deadRow('j-4').locator('button.delete').click();
    await page.locator('#status', { hasText: 'Deleted 1 inbox row(s).' }).waitFor();
    await page.locator('#dead-rows td.empty').waitFor();
    const j3 = await (await admin(base, '/admin/journey?q=jobs:j-3')).json();
    assert.deepEqual([j3.inbox.state, j3.inbox.attempt, j3.inbox.lastError], ['pending', 0, null], 'requeued for a worker');
    assert.deepEqual(j3.outbox, [], 'a pull job is not turned into an outbox row');
    assert.equal((await admin(base, '/admin/journey?q=jobs:j-4')).status, 404, 'j-4 deleted');
  });

  await t.test('cancel: a pending pull job from the message view; a finished row has no cancel', async () => {
    await page.click('a[href="#message"]');
    await page.fill('#message-q', 'orders:o-1');
    await page.click('#message-form button');
    await page.locator('#journey tr[data-table="inbox"] td.state', { hasText: 'processed' }).waitFor();
    assert.equal(await page.locator('#journey button.cancel').count(), 0, 'no cancel on processed or sent rows');
    await page.fill('#message-q', 'jobs:j-1');
    await page.click('#message-form button');
    const job = page.locator('#journey tr[data-table="inbox"]');
    await job.locator('td.state', { hasText: 'pending' }).waitFor();
    await job.locator('button.cancel').click();
    await page.locator('#status', { hasText: 'Cancelled 1 inbox row(s).' }).waitFor();
    await page.locator('#journey tr.state-cancelled[data-table="inbox"]').waitFor();
    assert.equal(await job.locator('td.state').textContent(), 'cancelled');
    assert.equal(await page.locator('#journey button.cancel').count(), 0, 'no cancel on a cancelled row');
    const j1 = await (await admin(base, '/admin/journey?q=jobs:j-1')).json();
    assert.deepEqual([j1.inbox.state, j1.inbox.attempt], ['cancelled', 0], 'cancelled in the database, never attempted');
    await page.screenshot({ path: path.join(OUT, 'cancel.png'), fullPage: true });
  });

  await t.test('paused: a destination paused from the console holds its rows until resumed', async () => {
    await page.click('a[href="#paused"]');
    await page.locator('#paused-rows td.empty').waitFor();
    await page.selectOption('#pause-kind', 'destination');
    await page.fill('#pause-name', 'nowhere');
    await page.click('#pause-form button');
    await page.locator('#status.error', { hasText: "unknown destination 'nowhere'" }).waitFor();
    await page.fill('#pause-name', 'receiver');
    await page.click('#pause-form button');
    await page.locator('#status', { hasText: 'Paused destination receiver.' }).waitFor();
    const row = page.locator('#paused-rows tr[data-kind="destination"][data-name="receiver"]');
    await row.waitFor();
    const ready = await (await fetch(`${base}/health/ready`)).json();
    assert.deepEqual(ready.paused.map((p) => [p.kind, p.name]), [['destination', 'receiver']], 'readiness lists it');
    // Every replica obeys within a second; a row published after that waits, unattempted.
    await new Promise((r) => setTimeout(r, 1000));
    execFileSync('psql', [db, '-qc', `INSERT INTO outbox (topic, payload) VALUES ('orders.paused', '{"held": "yes"}')`]);
    await new Promise((r) => setTimeout(r, 1000));
    const held = () => execFileSync('psql', [db, '-Atc', "SELECT state || ' ' || attempt FROM outbox WHERE topic = 'orders.paused'"]).toString().trim();
    assert.equal(held(), 'pending 0', 'held while paused');
    assert.ok(!receiver.delivered.some((d) => d.held === 'yes'), 'nothing delivered to a paused destination');
    await page.screenshot({ path: path.join(OUT, 'paused.png'), fullPage: true });
    await row.locator('button.resume').click();
    await page.locator('#status', { hasText: 'Resumed destination receiver.' }).waitFor();
    await page.locator('#paused-rows td.empty').waitFor();
    await waitFor('the held row delivered after the resume', async () => receiver.delivered.some((d) => d.held === 'yes'));
    assert.equal(held(), 'sent 0');
  });

  await t.test('signing out forgets the credential', async () => {
    await page.click('#signout');
    await page.reload();
    await page.locator('#signin').waitFor({ state: 'visible' });
    assert.equal(await page.evaluate(() => sessionStorage.length), 0);
  });

  await t.test('an API-key admin: the console signs in with the key in its header', async () => {
    const keyed = await startRelay('relay-api-key', `${config}admin:\n  enabled: true\n  auth:\n    type: api-key\n    headerName: X-Admin-Key\n    key: k-console\n`);
    const auth = await (await fetch(`${keyed}/console/auth`)).json();
    assert.deepEqual(auth, { scheme: 'api-key', header: 'X-Admin-Key' }, 'the scheme and header, never the key');
    const p = await browser.newPage();
    await p.goto(`${keyed}/console#dead`);
    await p.locator('#signin-what', { hasText: 'key (X-Admin-Key)' }).waitFor();
    await p.fill('#credential', 'k-console');
    await p.click('#signin-form button');
    await p.locator('#dead-rows td.empty', { hasText: 'No dead rows match.' }).waitFor();
    await p.close();
  });

  await t.test('an HMAC admin: the console says it cannot sign in and shows nothing', async () => {
    const signed = await startRelay('relay-hmac', `${config}admin:\n  enabled: true\n  auth:\n    type: hmac\n    secret: s-console\n`);
    const p = await browser.newPage();
    await p.goto(`${signed}/console`);
    await p.locator('#signin-why', { hasText: 'takes HMAC-signed requests' }).waitFor();
    assert.equal(await p.locator('#signin-form').isHidden(), true, 'no credential form');
    assert.equal(await p.locator('#overview').isHidden(), true);
    await p.close();
  });

  await t.test('no console when the admin API is off', async () => {
    const off = await startRelay('relay-admin-off', config);
    for (const p of ['/console', '/console/app.js', '/console/auth', '/admin/overview']) {
      assert.equal((await fetch(`${off}${p}`)).status, 404, p);
    }
  });

  assert.deepEqual(pageErrors, [], 'no script errors in the page');
  assert.equal(await xss(), undefined);
});
