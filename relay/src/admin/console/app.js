// The QueueBox console: reads the admin API's JSON and writes it into the page with text
// nodes only (never innerHTML): payloads, keys and errors come from senders and receivers,
// so whatever they hold is shown as text, never parsed as markup.
'use strict';

const CREDENTIAL = 'queuebox-console-credential';
const VIEWS = ['signin', 'overview', 'dead', 'message', 'paused'];
const $ = (id) => document.getElementById(id);
let auth = { scheme: 'none', header: null };
let overviewTimer = null;

/** An element with text (or element) children; `attrs` are attributes, `on` listeners. */
function el(tag, attrs, ...children) {
  const e = document.createElement(tag);
  for (const [name, value] of Object.entries(attrs || {})) {
    if (typeof value === 'function') e.addEventListener(name, value);
    else if (value != null) e.setAttribute(name, String(value));
  }
  for (const c of children) e.append(c instanceof Node ? c : String(c ?? ''));
  return e;
}

class Refused extends Error {}

/** One admin API call with the stored credential; a 401 sends the operator to sign in. */
async function api(method, path, body) {
  const headers = {};
  const credential = sessionStorage.getItem(CREDENTIAL);
  if (credential && auth.scheme === 'bearer') headers.Authorization = `Bearer ${credential}`;
  if (credential && auth.scheme === 'api-key') headers[auth.header] = credential;
  if (body !== undefined) headers['Content-Type'] = 'application/json';
  const res = await fetch(path, {
    method, headers, cache: 'no-store',
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const data = await res.json().catch(() => ({}));
  if (res.status === 401) {
    sessionStorage.removeItem(CREDENTIAL);
    signIn(`Refused: ${data.error || 'unauthorized'}`);
    throw new Refused();
  }
  if (!res.ok) throw new Error(data.error || `${method} ${path}: HTTP ${res.status}`);
  return data;
}

function say(text, isError) {
  $('status').textContent = text;
  $('status').className = isError ? 'error' : '';
}

/** Runs a view's work; a refusal already shows the sign-in, anything else is shown. */
async function attempt(work) {
  try {
    await work();
  } catch (e) {
    if (!(e instanceof Refused)) say(e.message, true);
  }
}

function show(view) {
  for (const v of VIEWS) $(v).hidden = v !== view;
  clearInterval(overviewTimer);
  if (view === 'overview') {
    attempt(loadOverview);
    // Each refresh counts rows in the database: none while the tab is in the background.
    overviewTimer = setInterval(() => { if (!document.hidden) attempt(loadOverview); }, 5000);
  }
  if (view === 'dead') attempt(loadDead);
  if (view === 'paused') attempt(loadPaused);
}

function route() {
  if (auth.scheme === 'hmac') {
    return signIn('This relay\'s admin API takes HMAC-signed requests; the console signs in '
      + 'with a bearer token or an API key only. Use `queuebox inspect` and `queuebox dead`.');
  }
  if (auth.scheme !== 'none' && !sessionStorage.getItem(CREDENTIAL)) return signIn('');
  $('signout').hidden = auth.scheme === 'none';
  const view = location.hash.slice(1);
  show(VIEWS.includes(view) && view !== 'signin' ? view : 'overview');
}

function signIn(why) {
  show('signin');
  $('signout').hidden = true;
  $('signin-why').textContent = why;
  $('signin-form').hidden = auth.scheme === 'hmac';
  $('signin-what').textContent = auth.scheme === 'bearer' ? 'bearer token' : `key (${auth.header})`;
}

// ---- formatting ----

const time = (t) => (t ? `${t.replace('T', ' ').slice(0, 19)} UTC` : '-');

function age(seconds) {
  if (!seconds) return '-';
  if (seconds < 120) return `${Math.round(seconds)} s`;
  if (seconds < 7200) return `${Math.round(seconds / 60)} min`;
  if (seconds < 172800) return `${(seconds / 3600).toFixed(1)} h`;
  return `${(seconds / 86400).toFixed(1)} d`;
}

/** Rows finished in the last five minutes, as the count and a rate per minute. */
const perMinute = (n) => `${n} (${(n / 5).toFixed(1)}/min)`;

/** A number cell, marked when it is a count an operator should look at. */
const count = (n, alarm) => el('td', { class: n > 0 && alarm ? 'num alarm' : 'num' }, n);

function replaceRows(tbody, rows, empty, columns) {
  tbody.replaceChildren(...(rows.length ? rows
    : [el('tr', {}, el('td', { colspan: columns, class: 'empty' }, empty))]));
}

// ---- overview ----

async function loadOverview() {
  const { rows } = await api('GET', '/admin/overview');
  const lines = rows.map((r) => el('tr', { 'data-name': r.topicOrSource, 'data-table': r.table },
    el('td', {}, r.table + (r.consumption ? ` (${r.consumption})` : '')),
    el('td', {}, r.topicOrSource),
    count(r.pending), count(r.retrying, true), count(r.processing),
    count(r.leaseExpired, true),
    el('td', {}, time(r.nextLeaseExpiry)),
    count(r.dead, true),
    el('td', { class: 'num' }, age(r.oldestPendingAge)),
    el('td', { class: 'num' }, perMinute(r.doneLast5Min))));
  replaceRows(document.querySelector('#overview-table tbody'), lines, 'Nothing waiting, in flight or dead.', 10);
  $('overview-time').textContent = new Date().toISOString().slice(11, 19);
}

// ---- dead letters ----

async function loadDead() {
  const table = $('dead-table').value;
  const query = new URLSearchParams({ limit: '200' });
  if ($('dead-source').value.trim()) query.set('source', $('dead-source').value.trim());
  if (table === 'outbox' && $('dead-topic').value.trim()) query.set('topic', $('dead-topic').value.trim());
  $('dead-topic').disabled = table !== 'outbox';
  const { rows } = await api('GET', `/admin/dead/${table}?${query}`);
  const lines = rows.map((r) => el('tr', { 'data-id': r.id },
    el('td', {}, el('button', { type: 'button', class: 'link', click: () => openMessage(r.id) }, r.id)),
    el('td', {}, r.topicOrSource),
    el('td', {}, r.key ?? '-'),
    el('td', { class: 'num' }, r.attempt),
    el('td', {}, time(r.updatedAt)),
    el('td', {}, el('pre', { class: 'error' }, r.lastError ?? '-')),
    el('td', { class: 'actions' },
      el('button', { type: 'button', class: 'replay', click: () => replay(table, r.id) }, 'Replay'),
      el('button', { type: 'button', class: 'delete', click: () => remove(table, r.id) }, 'Delete'))));
  replaceRows(document.querySelector('#dead-rows tbody'), lines, 'No dead rows match.', 7);
}

/** The row back to pending with attempt 0, as `queuebox dead replay` does: an outbox row is
 *  delivered again; an inbox row is forwarded again (push) or claimed by a worker (pull). */
async function replay(table, id) {
  if (!confirm(`Replay ${table} row ${id}? It goes back to pending with attempt 0.`)) return;
  await attempt(async () => {
    if (table === 'outbox') {
      const { moved } = await api('POST', '/admin/replay', { ids: [id], deadOnly: true });
      say(`Replayed ${moved} outbox row(s): ${id} is pending again.`);
    } else {
      const { requeued } = await api('POST', `/admin/inbox/${id}/requeue`, {});
      say(`Replayed ${requeued} inbox row(s): ${id} is pending again.`);
    }
    await loadDead();
  });
}

async function remove(table, id) {
  if (!confirm(`Delete ${table} row ${id}? This cannot be undone.`)) return;
  await attempt(async () => {
    const { deleted } = await api('DELETE', `/admin/${table}/${id}`);
    say(`Deleted ${deleted} ${table} row(s).`);
    await loadDead();
  });
}

// ---- one message ----

function openMessage(q) {
  $('message-q').value = q;
  location.hash = '#message';
  attempt(loadMessage);
}

function journeyRow(table, r) {
  return el('tr', { 'data-id': r.id, 'data-table': table, class: `state-${r.state}` },
    el('td', {}, table),
    el('td', {}, r.id),
    el('td', {}, r.topicOrSource),
    el('td', {}, r.key ?? '-'),
    el('td', { class: 'state' }, r.state,
      // Only a pending row can be cancelled; the core counts any other it is asked about.
      r.state === 'pending'
        ? el('button', { type: 'button', class: 'cancel', click: () => cancelRow(table, r.id) }, 'Cancel') : ''),
    el('td', { class: 'num' }, r.attempt),
    el('td', {}, time(r.createdAt)),
    el('td', {}, time(r.updatedAt)),
    el('td', {},
      el('pre', { class: 'error' }, r.lastError ?? '-'),
      el('details', {}, el('summary', {}, 'payload and headers'),
        el('pre', { class: 'payload' }, JSON.stringify(r.payload, null, 2)),
        el('pre', { class: 'headers' }, JSON.stringify(r.headers, null, 2)))));
}

/** A pending row becomes `cancelled`, as `queuebox cancel` does: no worker or relay takes it
 *  again. The answer says what happened when it was no longer pending (or was a push row). */
async function cancelRow(table, id) {
  if (!confirm(`Cancel ${table} row ${id}? It will never be handled or delivered.`)) return;
  await attempt(async () => {
    const r = await api('POST', `/admin/cancel/${table}`, { id });
    const left = [r.inFlight && `${r.inFlight} in flight (left to finish)`,
      r.finished && `${r.finished} already finished`,
      r.push && `${r.push} push row(s), which the relay forwards and are never cancelled`].filter(Boolean);
    await loadMessage();
    say(`Cancelled ${r.cancelled} ${table} row(s)${left.length ? `; ${left.join(', ')}` : ''}.`);
  });
}

async function loadMessage() {
  const q = $('message-q').value.trim();
  if (!q) return;
  const result = $('message-result');
  result.replaceChildren();
  const j = await api('GET', `/admin/journey?${new URLSearchParams({ q })}`);
  const rows = [
    j.inbox ? journeyRow('inbox', j.inbox)
      : el('tr', {}, el('td', { colspan: 9, class: 'empty' }, 'No inbox row: published to the outbox directly.')),
    ...j.outbox.map((r) => journeyRow('outbox', r)),
  ];
  if (!j.outbox.length) rows.push(el('tr', {}, el('td', { colspan: 9, class: 'empty' }, 'No outbox row yet.')));
  result.append(el('table', { id: 'journey' },
    el('thead', {}, el('tr', {}, ...['table', 'id', 'topic / source', 'key', 'state', 'attempts',
      'created', 'updated', 'last error'].map((h) => el('th', {}, h)))),
    el('tbody', {}, ...rows)));
  say('');
}

// ---- paused ----

async function loadPaused() {
  const { paused } = await api('GET', '/admin/paused');
  const lines = paused.map((p) => el('tr', { 'data-kind': p.kind, 'data-name': p.name },
    el('td', {}, p.kind),
    el('td', {}, p.name),
    el('td', {}, time(p.pausedAt)),
    el('td', { class: 'actions' },
      el('button', { type: 'button', class: 'resume', click: () => setPaused(p.kind, p.name, false) }, 'Resume'))));
  replaceRows(document.querySelector('#paused-rows tbody'), lines, 'Nothing is paused.', 4);
}

/** Pause or resume, as `queuebox pause|resume` do; an unknown name is refused, naming it. */
async function setPaused(kind, name, pause) {
  const verb = pause ? 'pause' : 'resume';
  if (!confirm(`${pause ? 'Pause' : 'Resume'} ${kind} ${name}?`)) return;
  await attempt(async () => {
    const r = await api('POST', `/admin/${verb}/${kind}`, { name });
    const changed = pause ? r.paused : r.resumed;
    await loadPaused();
    say(changed ? `${pause ? 'Paused' : 'Resumed'} ${kind} ${name}.`
      : `${kind} ${name} ${pause ? 'was paused already' : 'was not paused'}.`);
  });
}

// ---- wiring ----

$('signin-form').addEventListener('submit', (e) => {
  e.preventDefault();
  sessionStorage.setItem(CREDENTIAL, $('credential').value);
  $('credential').value = '';
  say('');
  route();
});
$('signout').addEventListener('click', () => {
  sessionStorage.removeItem(CREDENTIAL);
  signIn('Signed out.');
});
$('overview-refresh').addEventListener('click', () => attempt(loadOverview));
$('dead-form').addEventListener('submit', (e) => { e.preventDefault(); attempt(loadDead); });
$('dead-table').addEventListener('change', () => attempt(loadDead));
$('message-form').addEventListener('submit', (e) => { e.preventDefault(); attempt(loadMessage); });
$('pause-form').addEventListener('submit', (e) => {
  e.preventDefault();
  setPaused($('pause-kind').value, $('pause-name').value.trim(), true);
});
window.addEventListener('hashchange', route);

fetch('/console/auth', { cache: 'no-store' })
  .then((r) => r.json())
  .then((a) => { auth = a; route(); })
  .catch((e) => say(`The relay did not answer: ${e.message}`, true));
