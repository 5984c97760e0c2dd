// The service emulator's console: one page over the emulator's JSON API
// (/emulator/api/). It writes no HTML from strings: every element is made
// with createElement and filled with textContent.

const api = '/emulator/api/';
const $ = (sel, root = document) => root.querySelector(sel);
const $$ = (sel, root = document) => Array.from(root.querySelectorAll(sel));

// el makes an element with attributes (data-* and the like) and children
// (elements or text).
function el(tag, attrs = {}, ...children) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) {
    if (v === undefined || v === null || v === false) continue;
    if (k === 'text') e.textContent = v;
    else if (k === 'class') e.className = v;
    else e.setAttribute(k, v === true ? '' : String(v));
  }
  for (const c of children) {
    if (c !== null && c !== undefined) e.append(c);
  }
  return e;
}

const state = {
  orgs: [],
  app: null,
  calls: new Map(), // id -> item
  maxID: 0,
  selected: 0,
  upload: null,
  strings: [],
  fileOrgChosen: false,
  revealed: new Map(), // domain -> the secret revealed
  userPaths: new Map(), // domain -> the path to open as a user
  cacheNotes: new Map(), // domain -> what became of the gateway's cached subscription
  found: null, // the ids of the calls the search found, null with no search
  searchTurn: 0,
};

// request calls the API and returns the decoded answer; a refusal shows
// its message and throws.
async function request(method, path, body, raw) {
  const init = { method, headers: {} };
  if (raw !== undefined) {
    init.body = raw;
  } else if (body !== undefined) {
    init.body = JSON.stringify(body);
    init.headers['Content-Type'] = 'application/json';
  }
  const resp = await fetch(api + path, init);
  let data = null;
  try {
    data = await resp.json();
  } catch {
    data = null;
  }
  if (!resp.ok) {
    const msg = (data && data.message) || `${method} ${path}: ${resp.status}`;
    showError(msg);
    throw new Error(msg);
  }
  clearError();
  return data;
}

function showError(msg) {
  const e = $('[data-testid="error"]');
  e.textContent = msg;
  e.hidden = false;
}

function clearError() {
  const e = $('[data-testid="error"]');
  e.hidden = true;
  e.textContent = '';
}

// copyText puts text on the clipboard and says so in status; where the
// browser refuses the clipboard, it says where the text is shown.
async function copyText(text, status) {
  try {
    await navigator.clipboard.writeText(text);
    status.textContent = 'Copied to the clipboard.';
    status.dataset.state = 'copied';
  } catch {
    status.textContent = 'Shown above: the browser did not allow the clipboard, select it to copy.';
    status.dataset.state = 'shown';
  }
}

// quietly runs an action whose refusal request already shows.
function quietly(p) {
  p.catch(() => {});
}

// --- organizations

function subscriptionText(s) {
  if (s.state === 'paid') return `paid until ${s.expires}`;
  if (s.state === 'unpaid') return 'unpaid';
  return 'missing';
}

function renderOrgs() {
  const box = $('[data-testid="orgs"]');
  const cards = state.orgs.map((o) => {
    const installed = o.installation.state === 'installed';
    // A secret revealed stays so while it is the installation's.
    const shown = state.revealed.get(o.domain);
    const revealed = installed && shown !== undefined && o.secret.endsWith(shown.slice(-4)) && o.secret.length <= shown.length + 4;
    const secret = el('code', { 'data-testid': 'secret', 'data-state': !installed ? 'none' : revealed ? 'revealed' : 'masked',
      text: !installed ? '—' : revealed ? shown : o.secret });
    const buttons = el('p', { class: 'buttons' },
      el('button', { type: 'button', 'data-action': 'install', text: 'Install', disabled: installed }),
      el('button', { type: 'button', 'data-action': 'uninstall', text: 'Uninstall', disabled: !installed }),
      el('button', { type: 'button', 'data-action': 'reinstall', text: 'Reinstall', disabled: !installed }),
      el('button', { type: 'button', 'data-action': 'paid', text: 'Mark paid' }),
      el('button', { type: 'button', 'data-action': 'unpaid', text: 'Make unpaid', disabled: o.subscription.state === 'unpaid' }),
      el('button', { type: 'button', 'data-action': 'missing', text: 'Remove subscription', disabled: o.subscription.state === 'missing' }));
    const asUser = el('p', { class: 'buttons as-user' },
      el('input', { type: 'text', 'data-testid': 'user-path', 'aria-label': `a path at the app, requested as a user of ${o.domain}`,
        value: state.userPaths.get(o.domain) || '/', spellcheck: 'false' }),
      el('button', { type: 'button', 'data-action': 'open-as-user', text: 'Open as a user' }));
    return el('article', { class: 'org', 'data-testid': 'org', 'data-domain': o.domain,
      'data-installation': o.installation.state, 'data-subscription': o.subscription.state },
      el('h3', { text: o.domain }, el('span', { class: 'muted', text: ` id ${o.id}` })),
      el('dl', {},
        el('dt', { text: 'subscription' }), el('dd', { class: `sub-${o.subscription.state}`, text: subscriptionText(o.subscription) }),
        el('dt', { text: 'installation' }), el('dd', { class: `inst-${o.installation.state}`,
          text: installed ? `installed since ${new Date(o.installation.since).toLocaleString()}` : 'not installed' }),
        el('dt', { text: 'app secret' }), el('dd', {}, secret, ' ',
          el('button', { type: 'button', class: 'small', 'data-action': 'reveal', text: 'Reveal', disabled: !installed }))),
      buttons, asUser, cacheNote(o.domain));
  });
  box.replaceChildren(...cards);
  fillOrgSelects();
}

// cacheNote says what became of the gateway's cached subscription answer
// after the last change of the organization's subscription.
function cacheNote(domain) {
  const c = state.cacheNotes.get(domain);
  if (!c) return null;
  if (c.state === 'forgotten') {
    return el('p', { class: 'muted note', 'data-testid': 'cache-note', 'data-state': c.state,
      text: 'The gateway of this process forgot its cached answer: the next request is answered by the new state.' });
  }
  return el('div', { class: 'note', 'data-testid': 'cache-note', 'data-state': c.state },
    el('p', { class: 'muted', text: 'The gateway runs in another process: its cache keeps the old answer until its expires, or until you purge it with its admin API:' }),
    el('pre', { class: 'command', 'data-testid': 'purge-command', text: c.purge }),
    el('p', { class: 'buttons' }, el('button', { type: 'button', class: 'small', 'data-action': 'copy-purge', text: 'Copy the purge' }),
      el('span', { class: 'muted', 'data-testid': 'copied', role: 'status' })));
}

function fillSelect(sel, values, keep, first) {
  const before = sel.value;
  const opts = values.map(([value, text]) => el('option', { value, text }));
  if (first) opts.unshift(el('option', { value: first[0], text: first[1] }));
  sel.replaceChildren(...opts);
  if (keep && values.some(([v]) => v === before)) sel.value = before;
}

function fillOrgSelects() {
  const domains = state.orgs.map((o) => [o.domain, o.domain]);
  fillSelect($('[data-testid="delivery-org"]'), domains, true);
  fillSelect($('[data-testid="filter-org"]'), domains, true, ['', 'all']);
  const fileOrg = $('[data-testid="file-org"]');
  fillSelect(fileOrg, domains, state.fileOrgChosen);
  if (!state.fileOrgChosen) {
    const installed = state.orgs.find((o) => o.installation.state === 'installed');
    if (installed) fileOrg.value = installed.domain;
  }
  const delivery = $('[data-testid="delivery-org"]');
  if (!state.deliveryOrgChosen) {
    const installed = state.orgs.find((o) => o.installation.state === 'installed');
    if (installed) delivery.value = installed.domain;
  }
}

async function loadOrgs() {
  state.orgs = await request('GET', 'organizations');
  renderOrgs();
}

async function orgAction(domain, action) {
  let answer;
  if (action === 'open-as-user') {
    const path = state.userPaths.get(domain) || '/';
    answer = await request('POST', `organizations/${encodeURIComponent(domain)}/request`, { path });
  } else {
    answer = await request('POST', `organizations/${encodeURIComponent(domain)}/${action}`);
  }
  if (answer.gateway_cache) state.cacheNotes.set(domain, answer.gateway_cache);
  for (const c of answer.calls || []) addCall(c);
  await loadOrgs();
  if (answer.call) await select(answer.call.id);
}

async function reveal(card) {
  const domain = card.dataset.domain;
  const answer = await request('POST', `organizations/${encodeURIComponent(domain)}/secret`);
  state.revealed.set(domain, answer.secret);
  renderOrgs();
}

// --- calls

const kinds = ['installed', 'uninstall', 'subscription_paid', 'delivery', 'parse-file', 'build-file', 'file-pre-export',
  'user', 'token', 'authorize', 'subscription'];

function statusClass(status) {
  if (status < 100 || status > 599) return 'none';
  return `${Math.floor(status / 100)}xx`;
}

function verdictText(g) {
  if (g.outcome === 'refused') return `refused: ${g.reason}`;
  if (g.outcome === 'accepted') return g.added && g.added.length ? `accepted, added ${g.added.join(', ')}` : 'accepted';
  return '—';
}

// shortURL is an address without its origin, which is the app's (or the
// emulator's) for every call.
function shortURL(raw) {
  try {
    const u = new URL(raw);
    return u.pathname + u.search;
  } catch {
    return raw;
  }
}

function callRow(c) {
  const time = new Date(c.time);
  return el('tr', { 'data-testid': 'call', 'data-id': c.id, 'data-kind': c.kind, 'data-status': c.status,
    'data-org': c.organization, 'data-outcome': c.gateway.outcome, 'data-direction': c.direction, tabindex: 0 },
  el('td', { class: 'time', title: c.time, text: time.toLocaleTimeString([], { hour12: false }) }),
  el('td', { class: 'kind', text: c.kind + (c.replay_of ? ` ↻${c.replay_of}` : '') + (c.tamper ? ` (${c.tamper})` : '') }),
  el('td', { title: c.organization, text: c.organization }),
  el('td', { text: c.method }),
  el('td', { class: 'url', title: c.url, text: shortURL(c.url) }),
  el('td', { class: `status s${statusClass(c.status)}`, text: c.status || 'none' }),
  el('td', { class: 'num', text: c.duration_ms.toFixed(1) }),
  el('td', { class: `verdict v-${c.gateway.outcome}`, 'data-testid': 'call-verdict', title: verdictText(c.gateway), text: verdictText(c.gateway) }));
}

function matchesFilters(c) {
  const org = $('[data-testid="filter-org"]').value;
  const kind = $('[data-testid="filter-kind"]').value;
  const status = $('[data-testid="filter-status"]').value;
  return (!org || c.organization === org) && (!kind || c.kind === kind) && (!status || statusClass(c.status) === status) &&
    (!state.found || state.found.has(c.id));
}

// filterQuery is the query of GET calls that selects what the filters
// and the search show.
function filterQuery() {
  const q = new URLSearchParams();
  const org = $('[data-testid="filter-org"]').value;
  const kind = $('[data-testid="filter-kind"]').value;
  const status = $('[data-testid="filter-status"]').value;
  const text = $('[data-testid="call-search"]').value.trim();
  if (org) q.set('organization', org);
  if (kind) q.set('kind', kind);
  if (status) q.set('status', status);
  if (text) q.set('q', text);
  return q;
}

// search asks the API which calls hold the search's text (the page
// holds only what it lists, masked), and shows only those.
async function search() {
  const box = $('[data-testid="call-search"]');
  const text = box.value.trim();
  const turn = ++state.searchTurn;
  box.dataset.state = 'searching';
  let found = null;
  if (text) {
    const list = await request('GET', `calls?q=${encodeURIComponent(text)}`);
    found = new Set(list.map((c) => c.id));
  }
  if (turn !== state.searchTurn) return;
  state.found = found;
  applyFilters();
  box.dataset.state = 'done';
  box.dataset.found = found ? String(found.size) : '';
}

function updateExports() {
  const q = filterQuery();
  for (const format of ['har', 'ndjson']) {
    q.set('format', format);
    $(`[data-testid="export-${format}"]`).href = `${api}calls?${q}`;
  }
}

const maxRows = 2000;

// addCall puts a call in the list (newest first), once.
function addCall(c) {
  if (state.calls.has(c.id)) return;
  state.calls.set(c.id, c);
  state.maxID = Math.max(state.maxID, c.id);
  const body = $('[data-testid="calls"]');
  const row = callRow(c);
  row.hidden = !matchesFilters(c);
  let before = null;
  for (const r of body.children) {
    if (Number(r.dataset.id) < c.id) {
      before = r;
      break;
    }
  }
  body.insertBefore(row, before);
  while (body.children.length > maxRows) {
    const last = body.lastElementChild;
    state.calls.delete(Number(last.dataset.id));
    last.remove();
  }
  $('[data-testid="calls-count"]').textContent = `(${body.children.length})`;
  // A new call may hold the text searched for.
  if (state.found) quietly(search());
  if (['installed', 'uninstall', 'subscription_paid'].includes(c.kind)) quietly(loadOrgs());
}

function applyFilters() {
  for (const row of $$('[data-testid="call"]')) {
    row.hidden = !matchesFilters(state.calls.get(Number(row.dataset.id)));
  }
  updateExports();
}

async function loadCallsAfter(id) {
  const list = await request('GET', `calls?after=${id}`);
  for (const c of list.reverse()) addCall(c);
}

function headersBlock(h) {
  const names = Object.keys(h || {}).sort();
  return el('dl', { class: 'headers' }, ...names.flatMap((n) => h[n].flatMap((v) => [el('dt', { text: n }), el('dd', { text: v })])));
}

function bodyBlock(m, testid) {
  const note = m.cut ? `first 64 KiB of ${m.size} bytes` : `${m.size} bytes`;
  return [el('p', { class: 'muted', text: m.size ? note : 'no body' }),
    m.size ? el('pre', { class: m.json ? 'json' : '', 'data-testid': testid, text: m.body }) : null];
}

// markDiff marks, in the body a pre shows, the characters that differ
// from the original's body: what lies between their common start and
// their common end.
function markDiff(pre, original) {
  const text = pre.textContent;
  if (text === original) return 0;
  let start = 0;
  while (start < text.length && start < original.length && text[start] === original[start]) start++;
  let end = 0;
  while (end < text.length - start && end < original.length - start &&
    text[text.length - 1 - end] === original[original.length - 1 - end]) end++;
  const changed = text.slice(start, text.length - end);
  pre.replaceChildren(text.slice(0, start),
    el('mark', { 'data-testid': 'diff-mark', title: `was ${JSON.stringify(original.slice(start, original.length - end))}`,
      text: changed || '\u2038' }),
    text.slice(text.length - end));
  return Math.max(changed.length, 1);
}

// showDiff marks, in a resent call's request body, what differs from
// the call it resends.
async function showDiff(section, d) {
  const pre = $('[data-testid="request-body"]', section);
  if (!pre) return;
  let original;
  try {
    original = await (await fetch(`${api}calls/${d.replay_of}`)).json();
  } catch {
    return;
  }
  if (!original.request || state.selected !== d.id) return;
  const n = markDiff(pre, original.request.body);
  section.dataset.diff = String(n);
  if (n) {
    pre.before(el('p', { class: 'muted', 'data-testid': 'diff-note',
      text: `The marked part differs from call #${d.replay_of}${d.tamper === 'body' ? ', changed after signing' : ''}.` }));
  }
}

async function select(id) {
  state.selected = id;
  for (const r of $$('[data-testid="call"][data-selected]')) r.removeAttribute('data-selected');
  const row = $(`[data-testid="call"][data-id="${id}"]`);
  if (row) row.dataset.selected = 'true';
  const d = await request('GET', `calls/${id}`);
  if (state.selected !== id) return;
  // The verdict element holds the gateway's reason as it is; its label
  // is beside it.
  const g = d.gateway;
  const label = { refused: 'Refused: ', accepted: 'Accepted: ', unknown: 'Verdict: ' }[g.outcome] || '';
  let text;
  if (g.outcome === 'refused') {
    text = g.reason;
  } else if (g.outcome === 'accepted') {
    text = g.added && g.added.length ? `passed on to the app; the gateway added ${g.added.join(', ')}` : 'passed on to the app';
  } else {
    text = d.direction === 'answered' ? 'none: a call to the emulator (the gateway asking the service)' : 'the gateway said nothing about this call';
  }
  const verdict = el('p', { class: `verdict v-${g.outcome}` }, el('strong', { text: label }),
    el('span', { 'data-testid': 'gateway-verdict', 'data-outcome': g.outcome, text }),
    g.from === 'answer' ? el('span', { class: 'muted', text: ' (read from the answer\'s error.message)' }) : null);
  const section = el('section', { class: 'detail', 'data-testid': 'call-detail', 'data-id': d.id, 'data-org': d.organization, 'aria-label': 'the selected call' },
    el('h2', { text: `#${d.id} ${d.kind} ${d.organization}` }),
    el('p', { class: 'line' }, el('code', { text: `${d.method} ${d.url}` }), ` → ${d.status || 'no answer'} in ${d.duration_ms.toFixed(1)} ms`),
    d.error ? el('p', { class: 'warn', text: d.error }) : null,
    verdict);
  if (d.replayable) {
    const tamper = el('select', { 'data-testid': 'resend-tamper', 'aria-label': 'how to sign the resend' },
      el('option', { value: '', text: 'signed with the organization\'s secret' }),
      el('option', { value: 'unsigned', text: 'unsigned' }),
      el('option', { value: 'wrong_secret', text: 'signed with a wrong secret' }),
      el('option', { value: 'other_org', text: 'signed with another organization\'s secret' }),
      el('option', { value: 'body', text: 'one byte changed after signing' }));
    if (d.kind !== 'delivery') tamper.disabled = true;
    section.append(el('p', { class: 'buttons' },
      el('button', { type: 'button', 'data-action': 'replay', text: 'Replay' }),
      el('button', { type: 'button', 'data-action': 'curl', text: 'Copy as curl' }),
      el('span', { class: 'muted', 'data-testid': 'curl-copied', role: 'status' })),
    el('details', { class: 'resend' },
      el('summary', { text: 'Edit and resend' }),
      el('textarea', { rows: 10, spellcheck: 'false', 'data-testid': 'resend-body', 'aria-label': 'the body to send', text: d.request.body }),
      el('p', { class: 'buttons' }, tamper, el('button', { type: 'button', 'data-action': 'resend', text: 'Resend' }))),
    el('pre', { 'data-testid': 'curl', hidden: true }));
  }
  section.append(
    el('div', { class: 'messages' },
      el('div', { 'data-testid': 'service-request' }, el('h3', { text: d.direction === 'sent' ? 'Request (the service sent)' : 'Request' }),
        headersBlock(d.request.headers), ...bodyBlock(d.request, 'request-body')),
      el('div', { 'data-testid': 'service-answer' }, el('h3', { text: d.direction === 'sent' ? 'Answer (the service got)' : 'Answer' }),
        headersBlock(d.answer.headers), ...bodyBlock(d.answer))),
    appBlock(d));
  $('.detail').replaceWith(section);
  if (d.replay_of && d.request.size) await showDiff(section, d);
}

// appBlock is the app's side of a call: what it received from the gateway
// and what it answered, which the gateway may have refused. Only a
// gateway in the emulator's process tells it.
function appBlock(d) {
  if (d.direction !== 'sent') return null;
  if (!d.app) {
    const why = d.gateway.from === 'gateway' && d.gateway.outcome === 'refused'
      ? 'The gateway refused the call: the app did not receive it.'
      : 'What the app received and answered is shown when service_app runs in the emulator\'s Caddy.';
    return el('p', { class: 'muted', 'data-testid': 'app-none', text: why });
  }
  const a = d.app;
  const answer = a.answer;
  const answered = answer.status
    ? [el('p', { class: 'line' }, el('span', { class: `status s${statusClass(answer.status)}`, text: String(answer.status) }),
      answer.status !== d.status ? el('span', { class: 'muted', text: ` (the service got ${d.status || 'no answer'})` }) : null),
    headersBlock(answer.headers), ...bodyBlock(answer)]
    : [el('p', { class: 'warn', text: answer.error || 'No answer came from the app.' })];
  return el('div', { class: 'messages app-side' },
    el('div', { 'data-testid': 'app-received' }, el('h3', { text: 'The app received' }),
      el('p', { class: 'line' }, el('code', { class: 'url', text: `${a.request.method} ${a.request.url}` })),
      headersBlock(a.request.headers), ...bodyBlock(a.request)),
    el('div', { 'data-testid': 'app-answer', 'data-status': answer.status }, el('h3', { text: 'The app answered' }), ...answered));
}

async function callAction(action) {
  const section = $('[data-testid="call-detail"]');
  const id = section.dataset.id;
  if (action === 'curl') {
    const answer = await request('POST', `calls/${id}/curl`);
    const pre = $('[data-testid="curl"]', section);
    pre.textContent = answer.curl;
    pre.hidden = false;
    await copyText(answer.curl, $('[data-testid="curl-copied"]', section));
    return;
  }
  let item;
  if (action === 'replay') {
    item = await request('POST', `calls/${id}/replay`);
  } else {
    const body = { body: $('[data-testid="resend-body"]', section).value };
    const tamper = $('[data-testid="resend-tamper"]', section).value;
    if (tamper) body.tamper = tamper;
    item = await request('POST', `calls/${id}/resend`, body);
  }
  addCall(item);
  await select(item.id);
}

// --- the app and sending

async function loadApp() {
  const app = await request('GET', 'app');
  state.app = app;
  $('[data-testid="app-url"]').textContent = app.url;
  $('[data-testid="app-error"]').textContent = app.error ? `(${app.error})` : '';
  fillSelect($('[data-testid="delivery-module"]'), app.webhooks.map((w) => [w.key, `${w.key} ${w.url}`]), true);
  fillSelect($('[data-testid="file-module"]'), app.file_formats.map((f) => [f.key, `${f.key} ${f.url}`]), true,
    ['', 'first whose signaturePatterns match']);
  fillSelect($('[data-testid="preexport-module"]'), app.pre_exports.map((p) => [p.key, `${p.key} ${p.url}`]), true);
  fillEvents();
}

function fillEvents() {
  const key = $('[data-testid="delivery-module"]').value;
  const hook = state.app && state.app.webhooks.find((w) => w.key === key);
  fillSelect($('[data-testid="delivery-event"]'), (hook ? hook.events : []).map((e) => [e, e]), true);
  quietly(loadSample());
}

async function loadSample() {
  const event = $('[data-testid="delivery-event"]').value;
  if (!event) return;
  const sample = await request('GET', `deliveries/sample?event=${encodeURIComponent(event)}`);
  $('[data-testid="delivery-body"]').value = sample.body;
}

async function deliver() {
  const item = await request('POST', 'deliveries', {
    organization: $('[data-testid="delivery-org"]').value,
    module: $('[data-testid="delivery-module"]').value,
    event: $('[data-testid="delivery-event"]').value,
    body: $('[data-testid="delivery-body"]').value,
  });
  addCall(item);
  await select(item.id);
}

function cell(v) {
  if (v === undefined || v === null) return '';
  return typeof v === 'object' ? JSON.stringify(v) : String(v);
}

function renderStrings(strs) {
  state.strings = strs;
  const rows = strs.map((s) => el('tr', { 'data-testid': 'string', 'data-identifier': cell(s.identifier) },
    el('td', { text: cell(s.identifier) }), el('td', { text: cell(s.text) }), el('td', { text: cell(s.context) }),
    el('td', { text: cell(s.maxLength) }),
    el('td', { text: s.text && typeof s.text === 'object' ? Object.keys(s.text).join(', ') : (s.hasPlurals ? 'yes' : '') }),
    el('td', { text: cell(s.customData) })));
  $('[data-testid="strings"] tbody').replaceChildren(...rows);
  const ready = state.upload !== null;
  for (const b of $$('[data-action="build"], [data-action="build-pseudo"], [data-action="pre-export"]')) b.disabled = !ready;
}

async function uploadFile() {
  const input = $('[data-testid="file-upload"]');
  const file = input.files[0];
  if (!file) return;
  const params = new URLSearchParams({ name: file.name });
  const module = $('[data-testid="file-module"]').value;
  if (module) params.set('module', module);
  const org = $('[data-testid="file-org"]').value;
  if (org) params.set('organization', org);
  const status = $('[data-testid="file-status"]');
  status.textContent = `parsing ${file.name}…`;
  const answer = await request('POST', `files?${params}`, undefined, file);
  fileAnswer(answer);
}

function fileAnswer(answer) {
  state.upload = answer.upload;
  if (answer.call) addCall(answer.call);
  $('[data-testid="file-module"]').value = answer.module;
  const matches = answer.matches.length ? `signaturePatterns match: ${answer.matches.join(', ')}` : 'no module\'s signaturePatterns match';
  const status = $('[data-testid="file-status"]');
  status.replaceChildren(el('span', { 'data-testid': 'file-matches', text: matches }),
    `. parse-file by ${answer.module} for ${answer.organization}: ${answer.strings.length} strings`,
    answer.error ? el('span', { class: 'warn', text: ` — ${answer.error}` }) : '');
  renderStrings(answer.strings);
  $('[data-testid="build-result"]').hidden = true;
  $('[data-testid="preexport-result"]').hidden = true;
}

async function build(pseudo) {
  const result = $('[data-testid="build-result"]');
  const answer = await request('POST', `files/${state.upload.id}/build`, {
    module: $('[data-testid="file-module"]').value,
    organization: $('[data-testid="file-org"]').value,
    pseudo,
  });
  if (answer.call) addCall(answer.call);
  result.replaceChildren();
  result.hidden = false;
  result.removeAttribute('data-identical');
  if (answer.error) {
    result.append(el('p', { class: 'warn', text: `build-file failed: ${answer.error}` }));
    return;
  }
  const link = el('a', { href: answer.build.download, download: answer.build.name, 'data-testid': 'build-download',
    text: `download ${answer.build.name} (${answer.build.size} bytes)` });
  if (answer.identical === null) {
    result.append(el('p', { text: 'Pseudo-translated build: ' }, link));
    return;
  }
  result.dataset.identical = String(answer.identical);
  if (answer.identical) {
    result.append(el('p', { class: 'ok', text: 'Identical: the build of the unchanged strings has the bytes of the upload. ' }, link));
  } else {
    const d = answer.difference;
    result.append(el('p', { class: 'warn', text: `Differs from the upload first at byte ${d.offset} (line ${d.line}, column ${d.column}). ` }, link),
      el('div', { class: 'diff' }, el('h4', { text: 'upload' }), el('pre', { text: d.expected }),
        el('h4', { text: 'build' }), el('pre', { text: d.got })));
  }
}

async function preExport() {
  const result = $('[data-testid="preexport-result"]');
  const answer = await request('POST', `files/${state.upload.id}/pre-export`, {
    module: $('[data-testid="preexport-module"]').value,
    organization: $('[data-testid="file-org"]').value,
  });
  if (answer.call) addCall(answer.call);
  result.hidden = false;
  if (answer.error) {
    result.replaceChildren(el('p', { class: 'warn', text: `file-pre-export failed: ${answer.error}` }));
    return;
  }
  const rows = answer.changed.map((c) => el('tr', { 'data-testid': 'changed-string' },
    el('td', { text: c.identifier }), el('td', { text: cell(c.before && c.before.text) }), el('td', { text: cell(c.after && c.after.text) })));
  result.replaceChildren(el('p', { text: `${answer.changed.length} of ${answer.strings.length} strings changed` }),
    rows.length ? el('table', {}, el('thead', {}, el('tr', {}, el('th', { text: 'identifier' }), el('th', { text: 'text before' }), el('th', { text: 'text after' }))),
      el('tbody', {}, ...rows)) : null);
}

// --- faults

function faultOf(which) {
  const mode = $(`[data-testid="fault-${which}"]`).value;
  const seconds = Number($(`[data-testid="fault-${which}-seconds"]`).value) || 5;
  if (mode === '') return null;
  if (mode === '500') return { status: 500 };
  if (mode === 'slow') return { delay: `${seconds}s` };
  return { outage: true };
}

function showFaults(f) {
  const text = (name, x) => {
    if (!x) return `${name}: normal`;
    if (x.outage) return `${name}: outage`;
    return `${name}: ${[x.delay ? `slow ${x.delay}` : '', x.status ? `answers ${x.status}` : ''].filter(Boolean).join(', ')}`;
  };
  $('[data-testid="faults-now"]').textContent = `${text('token endpoint', f.token)}; ${text('subscription query', f.subscription)}`;
  for (const which of ['token', 'subscription']) {
    const x = f[which];
    const sel = $(`[data-testid="fault-${which}"]`);
    sel.value = !x ? '' : x.outage ? 'outage' : x.status ? '500' : 'slow';
    if (x && x.delay) $(`[data-testid="fault-${which}-seconds"]`).value = parseInt(x.delay, 10);
  }
}

// --- live

function connect() {
  const source = new EventSource(`${api}events`);
  source.addEventListener('ready', () => {
    document.body.dataset.live = 'true';
    document.body.dataset.connections = String(Number(document.body.dataset.connections || 0) + 1);
    $('.live-text').textContent = 'live';
    // Whatever came while the stream was down.
    quietly(loadCallsAfter(state.maxID));
  });
  source.addEventListener('call', (ev) => addCall(JSON.parse(ev.data)));
  source.addEventListener('error', () => {
    document.body.dataset.live = 'false';
    $('.live-text').textContent = 'reconnecting…';
  });
}

// --- wiring

function on(sel, type, fn) {
  document.addEventListener(type, (ev) => {
    const target = ev.target.closest(sel);
    if (target) fn(ev, target);
  });
}

function wire() {
  on('[data-testid="org"] [data-action]', 'click', (ev, b) => {
    const card = b.closest('[data-testid="org"]');
    if (b.dataset.action === 'reveal') quietly(reveal(card));
    else if (b.dataset.action === 'copy-purge') quietly(copyText($('[data-testid="purge-command"]', card).textContent, $('[data-testid="copied"]', card)));
    else quietly(orgAction(card.dataset.domain, b.dataset.action));
  });
  on('[data-testid="user-path"]', 'input', (ev, input) => {
    state.userPaths.set(input.closest('[data-testid="org"]').dataset.domain, input.value);
  });
  on('[data-testid="user-path"]', 'keydown', (ev, input) => {
    if (ev.key === 'Enter') quietly(orgAction(input.closest('[data-testid="org"]').dataset.domain, 'open-as-user'));
  });
  on('[data-testid="add-org"]', 'submit', (ev, form) => {
    ev.preventDefault();
    quietly(request('POST', 'organizations', { domain: form.domain.value.trim(), subscription: form.subscription.value })
      .then(() => { form.domain.value = ''; return loadOrgs(); }));
  });
  on('[data-testid="call"]', 'click', (ev, row) => quietly(select(Number(row.dataset.id))));
  on('[data-testid="call"]', 'keydown', (ev, row) => {
    if (ev.key === 'Enter') {
      quietly(select(Number(row.dataset.id)));
      return;
    }
    const step = { ArrowDown: 1, ArrowUp: -1 }[ev.key];
    if (!step) return;
    ev.preventDefault();
    let next = row;
    do {
      next = step > 0 ? next.nextElementSibling : next.previousElementSibling;
    } while (next && next.hidden);
    if (!next) return;
    next.focus();
    quietly(select(Number(next.dataset.id)));
  });
  on('[data-testid="call-detail"] [data-action]', 'click', (ev, b) => quietly(callAction(b.dataset.action)));
  on('.filters select', 'change', applyFilters);
  on('[data-testid="call-search"]', 'input', () => quietly(search()));
  on('[data-testid="delivery-module"]', 'change', fillEvents);
  on('[data-testid="delivery-event"]', 'change', () => quietly(loadSample()));
  on('[data-testid="delivery-org"]', 'change', () => { state.deliveryOrgChosen = true; });
  on('[data-testid="delivery-form"]', 'submit', (ev) => {
    ev.preventDefault();
    quietly(deliver());
  });
  on('[data-testid="file-form"]', 'submit', (ev) => ev.preventDefault());
  on('[data-testid="file-upload"]', 'change', () => quietly(uploadFile()));
  on('[data-testid="file-org"]', 'change', () => { state.fileOrgChosen = true; });
  on('[data-action="build"]', 'click', () => quietly(build(false)));
  on('[data-action="build-pseudo"]', 'click', () => quietly(build(true)));
  on('[data-action="pre-export"]', 'click', () => quietly(preExport()));
  on('[data-testid="faults"]', 'submit', (ev) => {
    ev.preventDefault();
    quietly(request('PUT', 'faults', { token: faultOf('token'), subscription: faultOf('subscription') }).then(showFaults));
  });
}

async function start() {
  fillSelect($('[data-testid="filter-kind"]'), kinds.map((k) => [k, k]), false, ['', 'all']);
  wire();
  connect();
  await Promise.all([loadOrgs(), loadApp(), request('GET', 'faults').then(showFaults)]);
  document.body.dataset.ready = 'true';
}

quietly(start());

// --- conformance: the cases of caddy service-app conformance, run by the
// emulator through the gateway (POST conformance), listed as they end.
function base64Of(buf) {
  const bytes = new Uint8Array(buf);
  let s = '';
  for (let i = 0; i < bytes.length; i += 0x8000) s += String.fromCharCode(...bytes.subarray(i, i + 0x8000));
  return btoa(s);
}

function conformanceLine(m, list, status) {
  if (m.case) {
    const c = m.case;
    list.append(el('li', { 'data-testid': 'conformance-case', 'data-status': c.status, 'data-id': c.id },
      el('span', { class: `case-${c.status}`, text: c.status }), ' ', el('code', { text: c.id }),
      c.reason ? el('span', { class: 'muted', text: ` ${c.reason}` }) : null));
  } else if (m.report) {
    const s = m.report.summary;
    status.dataset.state = s.failed > 0 ? 'failed' : 'passed';
    status.textContent = `${s.passed} passed, ${s.failed} failed, ${s.skipped} skipped in ${(m.report.duration_ms / 1000).toFixed(1)}s`;
  } else if (m.error) {
    status.dataset.state = 'error';
    status.textContent = m.error;
  }
}

async function runConformance() {
  const status = $('[data-testid="conformance-status"]');
  const list = $('[data-testid="conformance-cases"]');
  const files = await Promise.all(Array.from($('[data-testid="conformance-files"]').files)
    .map(async (f) => ({ name: f.name, content: base64Of(await f.arrayBuffer()) })));
  list.replaceChildren();
  status.dataset.state = 'running';
  status.textContent = 'running…';
  const resp = await fetch(`${api}conformance`, {
    method: 'POST',
    headers: { 'Content-Type': 'application/json' },
    body: JSON.stringify({
      organization: $('[data-testid="conformance-org"]').value,
      secret: $('[data-testid="conformance-secret"]').value,
      only: $('[data-testid="conformance-only"]').value.trim(),
      files,
    }),
  });
  if (!resp.ok) {
    const data = await resp.json().catch(() => null);
    conformanceLine({ error: (data && data.message) || `conformance: ${resp.status}` }, list, status);
    return;
  }
  const reader = resp.body.pipeThrough(new TextDecoderStream()).getReader();
  let buf = '';
  for (;;) {
    const { value, done } = await reader.read();
    if (done) break;
    buf += value;
    for (let i = buf.indexOf('\n'); i >= 0; i = buf.indexOf('\n')) {
      const line = buf.slice(0, i);
      buf = buf.slice(i + 1);
      if (line.trim()) conformanceLine(JSON.parse(line), list, status);
    }
  }
  if (status.dataset.state === 'running') conformanceLine({ error: 'The run ended without its report.' }, list, status);
}

async function setupConformance() {
  const form = $('[data-testid="conformance-form"]');
  if (!form) return;
  form.addEventListener('submit', (ev) => {
    ev.preventDefault();
    runConformance().catch((err) => conformanceLine({ error: String(err) }, $('[data-testid="conformance-cases"]'),
      $('[data-testid="conformance-status"]')));
  });
  const orgs = await request('GET', 'organizations');
  fillSelect($('[data-testid="conformance-org"]'), orgs.map((o) => [o.domain, o.domain]), true);
}

quietly(setupConformance());
