// txncoord console: reads the admin API from the browser and draws it.
// No framework: h() builds DOM nodes (text is never parsed as HTML, so a
// transactional id cannot inject markup); each view is a function that
// fetches what it shows and fills #main; a timer calls the current view
// again every POLL_MS, replacing only what it drew.
'use strict';

const POLL_MS = 2000;
const PAGE = 50;             // transactions per page
const SAMPLES = 90;          // metric samples kept for the plots (3 min)
const OPEN_STATES = ['Ongoing', 'PrepareCommit', 'PrepareAbort', 'PrepareEpochFence'];
const STATES = ['Empty', 'Ongoing', 'PrepareCommit', 'PrepareAbort', 'CompleteCommit', 'CompleteAbort', 'Dead', 'PrepareEpochFence'];

const TOKEN_KEY = 'txncoord-admin-token';
let token = sessionStorage.getItem(TOKEN_KEY) || '';

// h('a', {href: '#/x'}, 'text', child...) builds an element.
function h(tag, attrs, ...children) {
  const el = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === undefined || v === null || v === false) continue;
    if (k.startsWith('on')) el.addEventListener(k.slice(2), v);
    else if (k === 'style') el.style.cssText = v; // CSSOM: allowed by the page's CSP, a style attribute is not
    else el.setAttribute(k, v === true ? '' : v);
  }
  for (const c of children.flat(Infinity)) {
    if (c === undefined || c === null || c === false) continue;
    el.append(c instanceof Node ? c : String(c));
  }
  return el;
}

// fill replaces el's children (arrays flattened, null and false left out).
function fill(el, ...children) {
  el.replaceChildren(...children.flat(Infinity).filter((c) => c !== null && c !== undefined && c !== false));
}

class AuthError extends Error {}

// api fetches an admin API path with the token; a 401 shows the login.
async function api(path, opts = {}) {
  const headers = Object.assign({}, opts.headers);
  if (token) headers['Authorization'] = 'Bearer ' + token;
  const r = await fetch(path, Object.assign({}, opts, { headers, cache: 'no-store' }));
  if (r.status === 401) {
    showLogin(token ? 'The token was refused.' : '');
    throw new AuthError('unauthorized');
  }
  const body = await r.text();
  if (!r.ok) {
    let msg = body;
    try { msg = JSON.parse(body).error; } catch (e) { /* not JSON */ }
    const err = new Error(`${r.status}: ${msg}`);
    err.status = r.status;
    throw err;
  }
  const out = path === '/metrics' ? body : JSON.parse(body);
  if (!opts.page) return out;
  let counts = {};
  try { counts = JSON.parse(r.headers.get('X-State-Counts') || '{}'); } catch (e) { /* none */ }
  return { items: out, total: Number(r.headers.get('X-Total-Count') || out.length), counts };
}

// apiPage fetches one page of a paged list (offset, limit): {items,
// total, counts} from the API's X-Total-Count and X-State-Counts.
function apiPage(path, query, offset, limit) {
  const q = new URLSearchParams(query);
  q.set('offset', offset);
  q.set('limit', limit);
  return api(path + '?' + q, { page: true });
}

// optional is api() answering fallback for a 404 (an endpoint this node
// does not serve, such as /v1/coordinators or /v1/topics off node 0).
async function optional(path, fallback) {
  try { return await api(path); } catch (e) {
    if (e.status === 404 || e.status === 409) return fallback;
    throw e;
  }
}

// ---- formatting -------------------------------------------------------

const badge = (state) => h('span', { class: 'badge s-' + state, 'data-state': state }, state);
const tp = (p) => `${p.topic}-${p.partition}`;
function age(ms) {
  if (ms < 0) return '—';
  if (ms < 1000) return ms + ' ms';
  const s = Math.floor(ms / 1000);
  if (s < 120) return s + ' s';
  if (s < 7200) return Math.floor(s / 60) + ' min';
  return Math.floor(s / 3600) + ' h';
}
const when = (ms) => ms > 0 ? new Date(ms).toLocaleTimeString() : '—';
function facts(pairs) {
  return h('dl', { class: 'facts' }, pairs.flatMap(([k, v]) => [h('dt', {}, k), h('dd', {}, v)]));
}
function table(headers, rows, attrs) {
  return h('table', attrs || {},
    h('thead', {}, h('tr', {}, headers.map((x) => h('th', { class: /^[#]|^(Offset|Lag|HW|LSO|Epoch|Attempts|Count)/.test(x) ? 'num' : null }, x)))),
    h('tbody', {}, rows));
}
const emptyRow = (n, text) => h('tr', {}, h('td', { colspan: n, class: 'muted' }, text));

// ---- views ------------------------------------------------------------

// Each view: async (main, arg, first) => fills main. first is true on
// navigation, false on a poll (a view keeps its inputs across polls).
const views = {
  cluster: viewCluster, transactions: viewTransactions, txn: viewTxn, markers: viewMarkers,
  topics: viewTopics, topic: viewTopic, groups: viewGroups, group: viewGroup, plots: viewPlots,
  records: viewRecords, faults: viewFaults,
};

async function viewCluster(main) {
  const [leaders, coords, ready] = await Promise.all([
    api('/v1/leaders'), optional('/v1/coordinators', []),
    fetch('/readyz', { headers: token ? { Authorization: 'Bearer ' + token } : {} }).then((r) => r.json()).catch(() => ({})),
  ]);
  fill(main, 
    h('h1', {}, 'Cluster'),
    h('p', {}, 'Readiness: ', ready.status === 'ready' ? h('b', { class: 'ok' }, 'ready') : h('b', { class: 'error' }, ready.error || 'unknown')),
    h('h2', {}, 'Coordinators'),
    table(['Node', 'Address', 'Kafka', 'Live', '__transaction_state partitions (epoch)'],
      coords.length ? coords.map((c) => h('tr', {},
        h('td', {}, c.node_id, c.self ? ' (this one)' : ''), h('td', {}, c.addr), h('td', {}, c.kafka_version),
        h('td', {}, c.live ? 'yes' : h('span', { class: 'error' }, 'no')),
        h('td', {}, c.partitions.length > 12
          ? `${c.partitions.length} partitions`
          : c.partitions.map((p) => `${p.partition} (${p.epoch})`).join(', ')))) : [emptyRow(5, 'not reported by this node')]),
    h('h2', {}, 'Partition leaders'),
    table(['Node', 'Address', 'Kafka', 'WriteTxnMarkers advertised', 'Negotiated', 'Connected', 'Queued markers', 'Stuck txns', 'Last error'],
      leaders.length ? leaders.map((l) => h('tr', { 'data-leader': l.node_id },
        h('td', {}, l.node_id), h('td', {}, l.addr), h('td', {}, l.kafka_version),
        h('td', {}, l.write_txn_markers.max < 0 ? '—' : `v${l.write_txn_markers.min}–v${l.write_txn_markers.max}`),
        h('td', { class: 'wtm' }, l.write_txn_markers.in_use < 0 ? 'not yet' : 'v' + l.write_txn_markers.in_use),
        h('td', {}, l.connected ? 'yes' : h('span', { class: 'error' }, 'no')),
        h('td', { class: 'num' }, l.queued_markers),
        h('td', { class: 'num' }, l.stuck_transactions ? h('span', { class: 'stuck' }, l.stuck_transactions) : 0),
        h('td', { class: 'error' }, l.last_error || ''))) : [emptyRow(9, 'no leader known yet')]),
  );
}

// The transactions list keeps its filter inputs and page across polls;
// only the counts, the table body and the pager are redrawn.
const txnList = { page: 0, state: '', pattern: '', minAge: '', coordinator: '' };

async function viewTransactions(main, _arg, first) {
  if (first || !main.querySelector('#txn-table')) {
    const refresh = () => { txnList.page = 0; render(main, false); };
    const input = (name, attrs) => h('input', Object.assign({
      id: 'f-' + name, value: txnList[name], oninput: (e) => { txnList[name] = e.target.value.trim(); refresh(); },
    }, attrs));
    fill(main, 
      h('h1', {}, 'Transactions'),
      h('div', { class: 'filters' },
        h('label', {}, 'State', h('select', { id: 'f-state', onchange: (e) => { txnList.state = e.target.value; refresh(); } },
          h('option', { value: '' }, 'any'), h('option', { value: 'open' }, 'open (Ongoing, Prepare*)'),
          STATES.map((s) => h('option', { value: s, selected: txnList.state === s }, s)))),
        h('label', {}, 'Transactional id (substring or glob)', input('pattern', { placeholder: 'orders-*' })),
        h('label', {}, 'Older than (e.g. 30s, 5m)', input('minAge', { placeholder: 'any', size: 8 })),
        h('label', {}, 'Coordinator', input('coordinator', { placeholder: 'any', size: 4 }))),
      h('div', { class: 'counts', id: 'txn-counts' }),
      table(['Transactional id', 'State', 'Coordinator', 'Producer id', 'Epoch', 'TV', 'Partitions', 'Age', 'Stuck'], [], { id: 'txn-table' }),
      h('div', { class: 'pager', id: 'txn-pager' }));
    main.querySelector('#f-state').value = txnList.state;
  }
  const q = new URLSearchParams();
  if (txnList.state) q.set('state', txnList.state === 'open' ? OPEN_STATES.join(',') : txnList.state);
  if (txnList.minAge) q.set('duration_filter', txnList.minAge);
  if (txnList.pattern) q.set('id', txnList.pattern);
  if (txnList.coordinator) q.set('coordinator', txnList.coordinator);
  // One page from the server: its filters, its order (by id), its
  // totals; the browser never holds the whole list.
  let res;
  try {
    res = await apiPage('/v1/transactions', q, txnList.page * PAGE, PAGE);
    if (res.total && txnList.page * PAGE >= res.total) {
      txnList.page = Math.ceil(res.total / PAGE) - 1;
      res = await apiPage('/v1/transactions', q, txnList.page * PAGE, PAGE);
    }
  } catch (e) {
    if (e.status !== 400) throw e;
    main.querySelector('#txn-counts').replaceChildren(h('span', { class: 'error' }, e.message));
    return;
  }
  const total = res.total;
  main.querySelector('#txn-counts').replaceChildren(h('span', {}, h('b', {}, total), ' transactions'),
    ...Object.entries(res.counts).map(([s, n]) => h('span', {}, badge(s), ' ', n)));

  const pages = Math.max(1, Math.ceil(total / PAGE));
  const start = txnList.page * PAGE;
  const rows = res.items.map((t) => h('tr', { 'data-txn': t.transactional_id },
    h('td', {}, h('a', { href: '#/txn/' + encodeURIComponent(t.transactional_id) }, t.transactional_id)),
    h('td', {}, badge(t.state)), h('td', { class: 'num' }, t.coordinator_id),
    h('td', { class: 'num' }, t.producer_id), h('td', { class: 'num' }, t.producer_epoch),
    h('td', { class: 'num' }, t.transaction_version), h('td', { class: 'num' }, t.partitions.length),
    h('td', { class: 'num' }, age(t.duration_ms)),
    h('td', { class: 'stuck' }, t.stuck_reason || '')));
  main.querySelector('#txn-table tbody').replaceChildren(...(rows.length ? rows : [emptyRow(9, 'no transaction matches')]));
  main.querySelector('#txn-pager').replaceChildren(...pager(txnList.page, pages, start, res.items.length, total, (p) => { txnList.page = p; render(main, false); }));
}

// pager is a page's Previous / Next buttons and where it is: page (from
// 0) of pages, its first item start and its count of total; go(p) shows
// page p.
function pager(page, pages, start, count, total, go) {
  return [
    h('button', { class: 'prev', onclick: () => go(page - 1), disabled: page === 0 }, '‹ Previous'),
    h('span', { class: 'where' }, total ? `${start + 1}–${start + count} of ${total}` : '0', ` · page ${page + 1}/${pages}`),
    h('button', { class: 'next', onclick: () => go(page + 1), disabled: page >= pages - 1 }, 'Next ›')];
}

// The confirm panel of a transaction page survives polls: an operator
// reading it must not see it vanish.
let pendingAction = null;

async function viewTxn(main, id, first) {
  if (first) pendingAction = null;
  const [t, markers, leaders] = await Promise.all([
    api('/v1/transactions/' + encodeURIComponent(id)), api('/v1/markers'), api('/v1/leaders')]);
  const byLeader = Object.fromEntries(leaders.map((l) => [l.node_id, l]));
  const pending = markers.filter((m) => m.transactional_id === id);
  const pendingByTP = {};
  for (const m of pending) for (const p of m.partitions) pendingByTP[tp(p)] = Object.assign({ result: m.result, stuck: m.stuck, reason: m.reason }, p);
  // Each partition's leader, from its topic's description (node 0 only).
  const topics = [...new Set(t.partitions.map((p) => p.topic).concat(t.completing ? t.completing.partitions.map((p) => p.topic) : []))];
  const leaderOf = {};
  await Promise.all(topics.map(async (name) => {
    const d = await optional('/v1/topics/' + encodeURIComponent(name), null);
    for (const p of (d && d.partition_info) || []) leaderOf[`${name}-${p.partition}`] = p.leader;
  }));
  const partRow = (p) => {
    const m = pendingByTP[tp(p)];
    const leader = m && m.leader >= 0 ? m.leader : leaderOf[tp(p)];
    const l = byLeader[leader];
    return h('tr', { 'data-partition': tp(p) },
      h('td', {}, p.topic), h('td', { class: 'num' }, p.partition), h('td', { class: 'num' }, leader ?? '?'),
      h('td', {}, l ? l.kafka_version : ''),
      h('td', {}, l && l.write_txn_markers.in_use >= 0 ? 'v' + l.write_txn_markers.in_use : '—'),
      h('td', {}, m ? h('span', { class: m.stuck ? 'stuck' : '' }, `${m.result} ${m.stuck ? 'STUCK' : m.in_flight ? 'in flight' : 'pending'}`) : '—'),
      h('td', { class: 'num' }, m ? m.attempts : ''), h('td', { class: 'error' }, m ? m.last_error || '' : ''));
  };
  const open = OPEN_STATES.includes(t.state);
  const stuck = pending.some((m) => m.stuck) || !!t.stuck_reason;
  fill(main, 
    h('p', {}, h('a', { href: '#/transactions' }, '‹ Transactions')),
    h('h1', {}, 'Transaction ', h('code', {}, t.transactional_id), ' ', badge(t.state)),
    t.stuck_reason ? h('div', { class: 'box danger', id: 'stuck-reason' }, h('b', {}, 'Stuck: '), t.stuck_reason) : null,
    h('div', { class: 'box' }, facts([
      ['State', t.state], ['Producer id', t.producer_id], ['Producer epoch', t.producer_epoch],
      ['Transaction version (TV)', t.transaction_version], ['Coordinator', t.coordinator_id],
      ['Timeout', t.timeout_ms + ' ms'], ['Started', when(t.start_time_ms)], ['Last update', when(t.last_update_time_ms)],
      ['Open for', open ? age(t.duration_ms) : '—']])),
    h('div', {}, open || stuck || pendingAction ? actions(t, stuck) : null),
    h('h2', {}, 'Timeline'),
    timeline(t.timeline || []),
    h('h2', {}, 'Partitions and their markers'),
    table(['Topic', 'Partition', 'Leader', 'Kafka', 'WriteTxnMarkers', 'Marker', 'Attempts', 'Last error'],
      t.partitions.length ? t.partitions.map(partRow) : [emptyRow(8, 'no partition in this transaction')], { id: 'txn-partitions' }),
    t.completing ? [h('h2', {}, `Previous transaction completing (${t.completing.result}, epoch ${t.completing.producer_epoch})`),
      table(['Topic', 'Partition', 'Leader', 'Kafka', 'WriteTxnMarkers', 'Marker', 'Attempts', 'Last error'], t.completing.partitions.map(partRow))] : null,
    t.gave_up_partitions ? h('p', { class: 'error' }, 'Given up: ', t.gave_up_partitions.map(tp).join(', ')) : null,
    h('h2', {}, 'Pending offsets'),
    table(['Group', 'Topic', 'Partition', 'Offset'], (t.pending_offsets || []).map((o) => h('tr', {},
      h('td', {}, h('a', { href: '#/group/' + encodeURIComponent(o.group) }, o.group)), h('td', {}, o.topic),
      h('td', { class: 'num' }, o.partition), h('td', { class: 'num' }, o.offset))).concat(
      (t.pending_offsets || []).length ? [] : [emptyRow(4, 'none')])));
}

// timeline draws a transaction's recorded steps, oldest first, each with
// its time and the time since the step before.
function timeline(events) {
  const clock = (ms) => { const d = new Date(ms); return d.toLocaleTimeString() + '.' + String(d.getMilliseconds()).padStart(3, '0'); };
  const what = (e) => {
    const part = e.topic !== undefined ? `${e.topic}-${e.partition}` : '';
    switch (e.event) {
      case 'InitProducerId': return `producer id ${e.producer_id}, epoch ${e.producer_epoch}`;
      case 'PartitionAdded': return part;
      case 'Prepare': return e.result === 'commit' ? 'PrepareCommit' : 'PrepareAbort';
      case 'Complete': return e.result === 'commit' ? 'CompleteCommit' : 'CompleteAbort';
      case 'MarkerSent': return [`${e.result.toUpperCase()} marker for ${part} to leader ${e.leader}, `,
        h('b', { class: 'wtm' }, e.write_txn_markers_version < 0 ? 'version unknown' : 'WriteTxnMarkers v' + e.write_txn_markers_version)];
      case 'MarkerAnswered': return [`leader ${e.leader} answered for ${part}: `,
        h('b', { class: e.error === 'NONE' ? 'ok answer' : 'error answer' }, e.error)];
      default: return '';
    }
  };
  if (!events.length) return h('p', { class: 'muted', id: 'timeline' }, 'Nothing recorded: the coordinator keeps the timelines of its recent transactions in memory only (since its start).');
  return table(['Time', '+ms', 'Step', 'Epoch', 'Details'], events.map((e, i) => h('tr', { 'data-event': e.event },
    h('td', { class: 'muted' }, clock(e.at_ms)), h('td', { class: 'num muted' }, i ? '+' + (e.at_ms - events[i - 1].at_ms) : ''),
    h('td', {}, e.event), h('td', { class: 'num' }, e.producer_epoch), h('td', {}, what(e)))), { id: 'timeline', class: 'timeline' });
}

// actions are the Abort and Retry buttons; each shows what it will do and
// asks before it does it, as `txncoord txn abort` does on a terminal.
function actions(t, stuck) {
  const id = t.transactional_id;
  const n = t.partitions.length;
  const what = {
    abort: t.state === 'PrepareAbort'
      ? `This will COMPLETE transaction "${id}" (producer id ${t.producer_id}, epoch ${t.producer_epoch}, state ${t.state}, ${n} partitions) as aborted without waiting for all its markers: the leaders that have not acknowledged keep it open.`
      : t.state === 'PrepareCommit'
        ? `This will COMPLETE transaction "${id}" (producer id ${t.producer_id}, epoch ${t.producer_epoch}, state ${t.state}, ${n} partitions) as COMMITTED without waiting for all its markers (force): the partitions that have not acknowledged are GIVEN UP and their records stay uncommitted.`
        : `This will ABORT transaction "${id}" (producer id ${t.producer_id}, epoch ${t.producer_epoch}, state ${t.state}, ${n} partitions): its records will never be visible to read_committed consumers, and the producer will be fenced.`,
    retry: `This resends the undelivered markers of "${id}" to their leaders.`,
  };
  const run = async (kind) => {
    const path = `/v1/transactions/${encodeURIComponent(id)}/` + (kind === 'abort' ? 'abort' + (t.state === 'PrepareCommit' ? '?force=true' : '') : 'retry-markers');
    try {
      const res = await api(path, { method: 'POST' });
      pendingAction = { kind: 'done', text: `${kind === 'abort' ? 'Abort' : 'Retry'} accepted: state ${res.state}.` };
    } catch (e) {
      if (e instanceof AuthError) return;
      pendingAction = { kind: 'done', text: 'Refused: ' + e.message, error: true };
    }
    render(document.getElementById('main'), false);
  };
  const ask = (kind) => () => { pendingAction = { kind }; render(document.getElementById('main'), false); };
  if (pendingAction && (pendingAction.kind === 'abort' || pendingAction.kind === 'retry')) {
    const kind = pendingAction.kind;
    return h('div', { class: 'box danger', id: 'confirm' }, h('p', {}, what[kind]),
      h('button', { class: 'danger', id: 'confirm-' + kind, onclick: () => run(kind) }, kind === 'abort' ? 'Yes, abort it' : 'Yes, retry'), ' ',
      h('button', { id: 'cancel', onclick: () => { pendingAction = null; render(document.getElementById('main'), false); } }, 'Cancel'));
  }
  return h('div', {},
    OPEN_STATES.includes(t.state) ? h('button', { class: 'danger', id: 'abort', onclick: ask('abort') }, 'Abort…') : null, ' ',
    stuck ? h('button', { id: 'retry', onclick: ask('retry') }, 'Retry markers…') : null,
    pendingAction && pendingAction.kind === 'done' ? h('p', { id: 'action-result', class: pendingAction.error ? 'error' : '' }, pendingAction.text) : null);
}

async function viewMarkers(main) {
  const [markers, leaders] = await Promise.all([api('/v1/markers'), api('/v1/leaders')]);
  const byLeader = new Map(leaders.map((l) => [l.node_id, []]));
  for (const m of markers) for (const p of m.partitions) {
    if (!byLeader.has(p.leader)) byLeader.set(p.leader, []);
    byLeader.get(p.leader).push([m, p]);
  }
  const info = Object.fromEntries(leaders.map((l) => [l.node_id, l]));
  fill(main, h('h1', {}, 'Markers'),
    h('p', { class: 'muted' }, `${markers.length} transactions with undelivered markers; ${markers.filter((m) => m.stuck).length} stuck.`),
    [...byLeader.entries()].sort((a, b) => a[0] - b[0]).map(([leader, rows]) => {
      const l = info[leader];
      const v = l ? l.write_txn_markers : null;
      return h('section', { 'data-leader': leader },
        h('h2', {}, leader < 0 ? 'No leader known' : `Leader ${leader}`,
          l ? h('span', { class: 'muted' }, ` · ${l.addr} · Kafka ${l.kafka_version} · WriteTxnMarkers ${v.in_use < 0 ? 'not negotiated' : 'v' + v.in_use} (advertised v${v.min}–v${v.max})${l.connected ? '' : ' · DISCONNECTED'}`) : null),
        l && l.last_error ? h('p', { class: 'error' }, 'Last error: ', l.last_error) : null,
        table(['Transactional id', 'Result', 'Partition', 'TV', 'Epoch', 'State', 'Attempts', 'Reason / last error'],
          rows.length ? rows.map(([m, p]) => h('tr', {},
            h('td', {}, h('a', { href: '#/txn/' + encodeURIComponent(m.transactional_id) }, m.transactional_id)),
            h('td', {}, m.result), h('td', {}, tp(p)), h('td', { class: 'num' }, m.transaction_version),
            h('td', { class: 'num' }, m.producer_epoch),
            h('td', { class: m.stuck ? 'stuck' : '' }, m.stuck ? 'STUCK' : p.in_flight ? 'in flight' : 'pending'),
            h('td', { class: 'num' }, p.attempts),
            h('td', { class: 'error' }, m.stuck ? m.reason : p.last_error || ''))) : [emptyRow(8, 'nothing pending')]));
    }));
}

// openTxns lists the open transactions (one call with every open state);
// query adds other filters (duration_filter).
async function openTxns(query) {
  const q = new URLSearchParams(query);
  q.set('state', OPEN_STATES.join(','));
  return api('/v1/transactions?' + q);
}

// openByPartition maps "topic-partition" to the open transactions on it.
async function openByPartition() {
  const txns = await openTxns();
  const out = {};
  for (const t of txns) if (OPEN_STATES.includes(t.state)) for (const p of t.partitions) (out[tp(p)] = out[tp(p)] || []).push(t);
  return out;
}

async function viewTopics(main) {
  const [topics, open] = await Promise.all([optional('/v1/topics', null), openByPartition()]);
  if (!topics) {
    fill(main, h('h1', {}, 'Topics'), h('p', {}, 'This node does not administer topics: open the console of coordinator node 0.'));
    return;
  }
  const openIn = (name) => Object.entries(open).filter(([k]) => k.slice(0, k.lastIndexOf('-')) === name).reduce((n, [, ts]) => n + ts.length, 0);
  fill(main, h('h1', {}, 'Topics'),
    table(['Topic', 'Id', 'Partitions', 'Open transactions'], topics.map((t) => h('tr', {},
      h('td', {}, h('a', { href: '#/topic/' + encodeURIComponent(t.name) }, t.name), t.internal ? h('span', { class: 'muted' }, ' internal') : ''),
      h('td', { class: 'muted' }, t.id), h('td', { class: 'num' }, t.partitions), h('td', { class: 'num' }, openIn(t.name))))));
}

// A topic's partitions are shown a page at a time (a topic may have
// thousands): the page is kept across polls, reset on navigation.
const PARTITION_PAGE = 100;
const topicPage = { page: 0 };

async function viewTopic(main, name, first) {
  if (first) topicPage.page = 0;
  const enc = encodeURIComponent(name);
  const offset = topicPage.page * PARTITION_PAGE;
  const [t, open, offsets] = await Promise.all([api(`/v1/topics/${enc}?offset=${offset}&limit=${PARTITION_PAGE}`), openByPartition(),
    optional(`/v1/topics/${enc}/offsets?offset=${offset}&limit=${PARTITION_PAGE}`, [])]);
  const at = Object.fromEntries(offsets.map((o) => [o.partition, o]));
  const n = (v) => v === undefined || v < 0 ? '?' : v;
  const parts = t.partition_info || [];
  const pages = Math.max(1, Math.ceil(t.partitions / PARTITION_PAGE));
  fill(main, h('p', {}, h('a', { href: '#/topics' }, '‹ Topics')), h('h1', {}, 'Topic ', h('code', {}, t.name)),
    h('div', { class: 'box' }, facts([['Id', t.id], ['Partitions', t.partitions], ['Replication factor', `${t.replication_factor} (asked ${t.requested_replication_factor})`],
      ['Configs', Object.entries(t.configs).map(([k, v]) => `${k}=${v}`).join(', ') || '—']])),
    h('p', { class: 'muted' }, 'LSO below HW: a transaction is open there; read_committed consumers stop at the LSO. ',
      h('a', { href: '#/records/' + enc + '/0' }, 'Browse records ›')),
    pages > 1 ? h('div', { class: 'pager', id: 'partition-pager' }, pager(topicPage.page, pages, offset, parts.length, t.partitions,
      (p) => { topicPage.page = p; render(main, false); })) : null,
    table(['Partition', 'Leader', 'HW', 'LSO', 'Open transactions (producer id, epoch, age)', 'Producers', ''], parts.map((p) => {
      const ts = open[`${t.name}-${p.partition}`] || [];
      const o = at[p.partition] || {};
      return h('tr', { 'data-partition': p.partition }, h('td', { class: 'num' }, p.partition), h('td', { class: 'num' }, p.leader),
        h('td', { class: 'num hw' }, n(o.high_watermark)),
        h('td', { class: 'num lso' + (o.last_stable_offset < o.high_watermark ? ' stuck' : '') }, n(o.last_stable_offset)),
        h('td', {}, ts.length ? ts.map((x, i) => [i ? ', ' : '', h('a', { href: '#/txn/' + encodeURIComponent(x.transactional_id) }, x.transactional_id),
          ` (${x.producer_id}, ${x.producer_epoch}, ${age(x.duration_ms)})`]) : h('span', { class: 'muted' }, 'none')),
        h('td', { class: 'producers' }, producersCell(o.producers)),
        h('td', {}, h('a', { href: `#/records/${enc}/${p.partition}` }, 'records')));
    })));
}

// producersCell lists a partition's active producers (DescribeProducers at
// its leader); an open transaction's first offset is what find-hanging
// looks for.
function producersCell(list) {
  if (!list) return h('span', { class: 'muted' }, '—');
  const shown = list.slice(0, 3).map((p, i) => [i ? h('br') : null, `pid ${p.producer_id} e${p.producer_epoch}`,
    p.current_txn_start_offset >= 0 ? h('span', { class: 'stuck' }, ` open from ${p.current_txn_start_offset}`) : '']);
  return [shown, list.length > 3 ? h('span', { class: 'muted' }, ` +${list.length - 3} more`) : null];
}

// The record browser: one page of a partition from its leader, at the
// isolation level chosen. Its inputs survive polls; a poll redraws only
// the table.
const RECORDS_PAGE = 50;
const recordsState = { key: '', offset: 0, isolation: 'read_uncommitted', history: [] };

async function viewRecords(main, arg, first) {
  const cut = arg.lastIndexOf('/');
  const topic = cut < 0 ? arg : arg.slice(0, cut);
  const partition = cut < 0 ? 0 : Number(arg.slice(cut + 1)) || 0;
  const enc = encodeURIComponent(topic);
  if (first || recordsState.key !== arg || !main.querySelector('#records-table')) {
    if (recordsState.key !== arg) Object.assign(recordsState, { key: arg, offset: 0, history: [] });
    const reload = () => render(main, false);
    fill(main, h('p', {}, h('a', { href: '#/topic/' + enc }, '‹ Topic ' + topic)),
      h('h1', {}, 'Records of ', h('code', {}, `${topic}-${partition}`)),
      h('div', { class: 'filters' },
        h('label', {}, 'Partition', h('input', { id: 'r-partition', type: 'number', min: 0, value: partition, size: 4,
          onchange: (e) => { location.hash = `#/records/${enc}/${Number(e.target.value) || 0}`; } })),
        h('label', {}, 'Isolation', h('select', { id: 'r-isolation', onchange: (e) => { recordsState.isolation = e.target.value; reload(); } },
          ['read_uncommitted', 'read_committed'].map((v) => h('option', { value: v, selected: recordsState.isolation === v }, v)))),
        h('label', {}, 'From offset', h('input', { id: 'r-offset', type: 'number', min: 0, value: recordsState.offset, size: 8,
          onchange: (e) => { recordsState.offset = Math.max(0, Number(e.target.value) || 0); recordsState.history = []; reload(); } }))),
      h('p', { class: 'muted' }, 'Read from the partition\'s leader with Fetch. Control records (the COMMIT and ABORT markers) and aborted data are shown, marked: ',
        'a read_committed consumer skips both, and stops at the last stable offset.'),
      h('div', { class: 'counts', id: 'records-facts' }),
      table(['Offset', 'Time', 'Producer (id, epoch)', 'Record', 'Transaction', 'Key', 'Value'], [], { id: 'records-table' }),
      h('div', { class: 'pager', id: 'records-pager' }));
    main.querySelector('#r-isolation').value = recordsState.isolation;
  }
  const page = await api(`/v1/topics/${enc}/records?partition=${partition}&offset=${recordsState.offset}&limit=${RECORDS_PAGE}&isolation=${recordsState.isolation}`);
  main.querySelector('#records-facts').replaceChildren(h('span', {}, 'Leader ', h('b', {}, page.leader)),
    h('span', {}, 'Log start ', h('b', {}, page.log_start_offset)), h('span', {}, 'HW ', h('b', {}, page.high_watermark)),
    h('span', {}, 'LSO ', h('b', { class: page.last_stable_offset < page.high_watermark ? 'stuck' : '' }, page.last_stable_offset)),
    h('span', {}, h('b', {}, page.records.length), ` records from offset ${recordsState.offset}, ${page.isolation}`));
  const text = (v) => v === null ? h('span', { class: 'muted' }, 'null') : v;
  const rows = page.records.map((r) => {
    const kind = r.control ? 'control' : r.transaction === 'aborted' ? 'aborted' : '';
    return h('tr', { 'data-offset': r.offset, class: kind || null, 'data-control': r.control || null, 'data-txn': r.transaction || null },
      h('td', { class: 'num' }, r.offset), h('td', { class: 'muted' }, when(r.timestamp_ms)),
      h('td', {}, r.producer_id < 0 ? h('span', { class: 'muted' }, 'none') : `${r.producer_id}, ${r.producer_epoch}`),
      h('td', {}, r.control ? h('span', { class: 'badge ctl-' + r.control }, r.control + ' marker') : r.transactional ? 'transactional data' : 'data'),
      h('td', {}, r.transaction ? h('span', { class: 'badge txn-' + r.transaction }, r.transaction) : ''),
      h('td', { class: 'bytes' }, r.control ? '' : text(r.key)), h('td', { class: 'bytes' }, r.control ? '' : [text(r.value), r.truncated ? '…' : '']));
  });
  main.querySelector('#records-table tbody').replaceChildren(...(rows.length ? rows : [emptyRow(7, 'no record at this offset yet')]));
  const go = (offset, back) => () => {
    if (back) recordsState.offset = recordsState.history.pop() ?? 0;
    else { recordsState.history.push(recordsState.offset); recordsState.offset = offset; }
    main.querySelector('#r-offset').value = recordsState.offset;
    render(main, false);
  };
  main.querySelector('#records-pager').replaceChildren(
    h('button', { class: 'prev', onclick: go(0, true), disabled: !recordsState.history.length }, '‹ Previous'),
    h('button', { class: 'next', onclick: go(page.next_offset, false), disabled: page.next_offset < 0 || page.records.length < RECORDS_PAGE }, 'Next ›'));
}

// The faults of the process (GET /v1/faults): listed, added, cleared; a
// held marker request can be replayed. The form survives polls.
const FAULT_KINDS = ['delay_request', 'delay_response', 'drop_request', 'drop_response', 'error', 'pause', 'kill', 'hold_markers'];

async function viewFaults(main, _arg, first) {
  if (first || !main.querySelector('#faults-table')) {
    const field = (name, label, attrs) => h('label', {}, label, h('input', Object.assign({ id: 'fault-' + name, size: 7 }, attrs)));
    const add = async (e) => {
      e.preventDefault();
      const v = (name) => main.querySelector('#fault-' + name).value.trim();
      const spec = { kind: v('kind'), node: Number(v('node')) };
      if (v('api_key') !== '') spec.api_key = Number(v('api_key'));
      if (v('error_code') !== '') spec.error_code = Number(v('error_code'));
      if (v('delay') !== '') spec.delay = v('delay');
      if (v('count') !== '') spec.count = Number(v('count'));
      if (v('for') !== '') spec.for = v('for');
      await act(main, () => api('/v1/faults', { method: 'POST', headers: { 'Content-Type': 'application/json' }, body: JSON.stringify(spec) }),
        (f) => `Fault ${f.id} added: ${f.kind} on node ${f.node}.`);
    };
    fill(main, h('h1', {}, 'Faults'),
      h('p', { class: 'muted' }, 'Faults injected on demand into this process\'s nodes (the admin API\'s /v1/faults, `txncoord fault`). ',
        'They act at once on real clients: use them on test clusters.'),
      h('form', { class: 'filters', id: 'fault-form', onsubmit: add },
        h('label', {}, 'Kind', h('select', { id: 'fault-kind' }, FAULT_KINDS.map((k) => h('option', { value: k }, k)))),
        field('node', 'Node', { type: 'number', value: 0, required: true }),
        field('api_key', 'API key (any)', { type: 'number', placeholder: 'any' }),
        field('error_code', 'Error code', { type: 'number', placeholder: 'for error' }),
        field('delay', 'Delay', { placeholder: '500ms' }),
        field('count', 'Count', { type: 'number', placeholder: 'no limit' }),
        field('for', 'For', { placeholder: 'until cleared' }),
        h('button', { type: 'submit', class: 'danger', id: 'fault-add' }, 'Add fault')),
      h('p', { id: 'fault-result' }),
      h('h2', {}, 'Active faults ', h('button', { id: 'faults-clear', onclick: () => act(main, () => api('/v1/faults', { method: 'DELETE' }), () => 'Every fault cleared.') }, 'Clear all')),
      table(['Id', 'Kind', 'Node', 'API key', 'Error code', 'Delay', 'Count left', 'Injected', 'Expires', ''], [], { id: 'faults-table' }),
      h('h2', {}, 'Held marker requests'),
      table(['Id', 'Fault', 'Leader', 'Held', 'Since', 'Markers', ''], [], { id: 'held-table' }));
  }
  const list = await optional('/v1/faults', null);
  if (!list) {
    fill(main, h('h1', {}, 'Faults'), h('p', {}, 'This node takes no faults on demand.'));
    return;
  }
  main.querySelector('#faults-table tbody').replaceChildren(...(list.faults.length ? list.faults.map((f) => h('tr', { 'data-fault': f.id },
    h('td', { class: 'num' }, f.id), h('td', {}, f.kind), h('td', { class: 'num' }, f.node), h('td', { class: 'num' }, f.api_key ?? 'any'),
    h('td', { class: 'num' }, f.error_code || ''), h('td', {}, f.delay || ''), h('td', { class: 'num' }, f.count ? f.remaining : ''),
    h('td', { class: 'num' }, f.injected), h('td', {}, f.expires_at ? new Date(f.expires_at).toLocaleTimeString() : 'when cleared'),
    h('td', {}, h('button', { class: 'fault-clear', onclick: () => act(main, () => api('/v1/faults/' + f.id, { method: 'DELETE' }), () => `Fault ${f.id} cleared.`) }, 'Clear'))))
    : [emptyRow(10, 'no fault')]));
  main.querySelector('#held-table tbody').replaceChildren(...(list.held_markers.length ? list.held_markers.map((m) => h('tr', { 'data-held': m.id },
    h('td', { class: 'num' }, m.id), h('td', { class: 'num' }, m.fault), h('td', { class: 'num' }, m.leader), h('td', {}, m.held ? 'held' : 'released'),
    h('td', {}, when(Date.parse(m.held_at))),
    h('td', {}, m.markers.map((x) => `${x.committed ? 'COMMIT' : 'ABORT'} pid ${x.producer_id} e${x.producer_epoch}`).join('; ')),
    h('td', {}, h('button', { onclick: () => act(main, () => api(`/v1/faults/markers/${m.id}/replay`, { method: 'POST' }), () => `Marker request ${m.id} replayed.`) }, 'Replay'))))
    : [emptyRow(7, 'none')]));
}

// act runs an admin API call of the faults view and says how it went.
async function act(main, call, said) {
  const out = main.querySelector('#fault-result');
  try {
    const res = await call();
    out.className = 'ok';
    out.textContent = said(res);
  } catch (e) {
    if (e instanceof AuthError) return;
    out.className = 'error';
    out.textContent = 'Refused: ' + e.message;
  }
  render(main, false);
}

async function viewGroups(main) {
  const groups = await optional('/v1/groups', null);
  if (!groups) {
    fill(main, h('h1', {}, 'Groups'), h('p', {}, 'This node has no group coordinator.'));
    return;
  }
  fill(main, h('h1', {}, 'Groups'),
    table(['Group', 'Type', 'State', 'Protocol', 'Generation', 'Members', 'Coordinator', '__consumer_offsets partition'],
      groups.length ? groups.map((g) => h('tr', {},
        h('td', {}, h('a', { href: '#/group/' + encodeURIComponent(g.group) }, g.group)), h('td', {}, g.type), h('td', {}, g.state),
        h('td', {}, g.protocol_type + (g.protocol ? '/' + g.protocol : '')), h('td', { class: 'num' }, g.generation),
        h('td', { class: 'num' }, g.member_count), h('td', { class: 'num' }, g.coordinator), h('td', { class: 'num' }, g.offsets_partition)))
        : [emptyRow(8, 'no group')]));
}

async function viewGroup(main, id) {
  const g = await api('/v1/groups/' + encodeURIComponent(id));
  const n = (v) => v < 0 ? '—' : v;
  fill(main, h('p', {}, h('a', { href: '#/groups' }, '‹ Groups')), h('h1', {}, 'Group ', h('code', {}, g.group), ' ', h('span', { class: 'badge' }, g.state)),
    h('div', { class: 'box' }, facts([['Type', g.type], ['Protocol', g.protocol_type + (g.protocol ? '/' + g.protocol : '')],
      ['Generation', g.generation], ['Leader', g.leader || '—'], ['Coordinator', g.coordinator]])),
    h('h2', {}, 'Members'),
    table(['Member', 'Client', 'Host', 'Assignment'], g.members.length ? g.members.map((m) => h('tr', {},
      h('td', {}, m.member_id, m.instance_id ? ` (${m.instance_id})` : ''), h('td', {}, m.client_id), h('td', {}, m.host),
      h('td', {}, m.assignment.map(tp).join(', ')))) : [emptyRow(4, 'no member')]),
    g.share_partitions ? [h('h2', {}, 'Share partitions'),
      table(['Topic', 'Partition', 'Start offset', 'End offset', 'Lag', 'Acquired', 'Available'], g.share_partitions.map((s) => h('tr', { 'data-share': `${s.topic}-${s.partition}` },
        h('td', {}, s.topic), h('td', { class: 'num' }, s.partition), h('td', { class: 'num' }, s.start_offset), h('td', { class: 'num' }, n(s.end_offset)),
        h('td', { class: 'num lag' }, n(s.lag)), h('td', { class: 'num' }, s.acquired), h('td', { class: 'num' }, s.available))))] : null,
    h('h2', {}, 'Committed offsets and lag'),
    table(['Topic', 'Partition', 'Offset', 'Log end', 'Lag', 'Member'], g.offsets.length ? g.offsets.map((o) => h('tr', {},
      h('td', {}, o.topic), h('td', { class: 'num' }, o.partition), h('td', { class: 'num' }, n(o.current_offset)),
      h('td', { class: 'num' }, n(o.log_end_offset)), h('td', { class: 'num' }, n(o.lag)), h('td', {}, o.consumer_id || ''))) : [emptyRow(6, 'none')]),
    h('h2', {}, 'Pending transactional offsets'),
    table(['Topic', 'Partition', 'Offset', 'Producer id', 'Epoch'], g.pending_offsets.length ? g.pending_offsets.map((o) => h('tr', {},
      h('td', {}, o.topic), h('td', { class: 'num' }, o.partition), h('td', { class: 'num' }, o.offset),
      h('td', { class: 'num' }, o.producer_id), h('td', { class: 'num' }, o.producer_epoch))) : [emptyRow(5, 'none')]));
}

// ---- plots --------------------------------------------------------------

// samples holds parsed /metrics scrapes, taken every POLL_MS while the
// console is open, whatever the view, so the plots have history.
const samples = [];

// parseMetrics reads Prometheus text: name -> [{labels, value}].
function parseMetrics(text) {
  const out = {};
  for (const line of text.split('\n')) {
    if (!line || line[0] === '#') continue;
    const m = line.match(/^([a-zA-Z_:][\w:]*)(?:\{(.*)\})?\s+(\S+)/);
    if (!m) continue;
    const labels = {};
    for (const l of (m[2] || '').matchAll(/(\w+)="((?:[^"\\]|\\.)*)"/g)) labels[l[1]] = l[2];
    (out[m[1]] = out[m[1]] || []).push({ labels, value: Number(m[3]) });
  }
  return out;
}

async function sample() {
  const text = await api('/metrics');
  samples.push({ t: Date.now(), m: parseMetrics(text) });
  if (samples.length > SAMPLES) samples.shift();
}

const sum = (m, name, pick) => (m[name] || []).filter((x) => !pick || pick(x.labels)).reduce((a, x) => a + x.value, 0);

// quantile of the commit latency (EndTxn's histogram, result="commit")
// between two scrapes.
function quantile(a, b, q) {
  const buckets = {};
  const commits = (m) => (m.txncoord_coordinator_end_txn_seconds_bucket || []).filter((x) => x.labels.result === 'commit');
  for (const x of commits(b.m)) buckets[x.labels.le] = (buckets[x.labels.le] || 0) + x.value;
  for (const x of commits(a.m)) buckets[x.labels.le] -= x.value;
  const les = Object.keys(buckets).sort((x, y) => Number(x) - Number(y));
  const total = buckets['+Inf'] || 0;
  if (!total) return null;
  let prevLe = 0, prevN = 0;
  for (const le of les) {
    const n = buckets[le];
    if (n >= q * total) {
      if (le === '+Inf') return prevLe * 1000;
      // linear within the bucket, as PromQL's histogram_quantile.
      return (prevLe + (Number(le) - prevLe) * ((q * total - prevN) / Math.max(n - prevN, 1))) * 1000;
    }
    prevLe = Number(le); prevN = n;
  }
  return null;
}

function series() {
  const commits = [], aborts = [], p50 = [], p99 = [], markers = {};
  const rate = (a, b, name, pick) => Math.max(sum(b.m, name, pick) - sum(a.m, name, pick), 0) / ((b.t - a.t) / 1000);
  for (let i = 1; i < samples.length; i++) {
    const a = samples[i - 1], b = samples[i];
    commits.push([b.t, rate(a, b, 'txncoord_coordinator_end_txn_seconds_count', (l) => l.result === 'commit')]);
    aborts.push([b.t, rate(a, b, 'txncoord_coordinator_end_txn_seconds_count', (l) => l.result === 'abort')]);
    p50.push([b.t, quantile(a, b, 0.5)]);
    p99.push([b.t, quantile(a, b, 0.99)]);
    const leaders = new Set((b.m.txncoord_markers_sent_total || []).map((x) => x.labels.leader));
    for (const l of leaders) (markers[l] = markers[l] || []).push([b.t, rate(a, b, 'txncoord_markers_sent_total', (x) => x.leader === l)]);
  }
  return { commits, aborts, p50, p99, markers };
}

const COLORS = ['#2457c5', '#c0262d', '#1a7f37', '#b25e00', '#7b3fc4'];

// chart draws lines [{name, points: [[t, v|null]]}] as an inline SVG.
function chart(id, title, lines, unit) {
  const W = 460, H = 180, L = 48, B = 20, T = 8, R = 8;
  const ns = 'http://www.w3.org/2000/svg';
  const s = (tag, attrs, text) => {
    const el = document.createElementNS(ns, tag);
    for (const [k, v] of Object.entries(attrs)) el.setAttribute(k, v);
    if (text !== undefined) el.textContent = text;
    return el;
  };
  const all = lines.flatMap((l) => l.points).filter((p) => p[1] !== null);
  const t1 = Date.now(), t0 = t1 - SAMPLES * POLL_MS;
  const vmax = Math.max(1e-9, ...all.map((p) => p[1])) * 1.1;
  const x = (t) => L + (W - L - R) * (t - t0) / (t1 - t0);
  const y = (v) => H - B - (H - B - T) * v / vmax;
  const svg = s('svg', { width: W, height: H, viewBox: `0 0 ${W} ${H}`, id, role: 'img', 'aria-label': title });
  svg.append(s('line', { x1: L, y1: H - B, x2: W - R, y2: H - B, stroke: '#ccd' }), s('line', { x1: L, y1: T, x2: L, y2: H - B, stroke: '#ccd' }));
  for (const f of [0, 0.5, 1]) {
    svg.append(s('text', { x: L - 4, y: y(vmax / 1.1 * f) + 3, 'text-anchor': 'end' }, (vmax / 1.1 * f).toPrecision(3)));
  }
  svg.append(s('text', { x: L, y: H - 4 }, `${Math.round((t1 - t0) / 60000)} min ago`), s('text', { x: W - R, y: H - 4, 'text-anchor': 'end' }, 'now'));
  lines.forEach((l, i) => {
    const pts = l.points.filter((p) => p[1] !== null && p[0] >= t0);
    if (pts.length) svg.append(s('polyline', { class: 'series', fill: 'none', stroke: COLORS[i % COLORS.length], 'stroke-width': 1.8,
      points: pts.map((p) => `${x(p[0]).toFixed(1)},${y(p[1]).toFixed(1)}`).join(' ') }));
  });
  return h('div', { class: 'plot' }, h('h3', {}, title, h('span', { class: 'muted' }, ` (${unit})`)), svg,
    h('div', { class: 'legend' }, lines.map((l, i) => h('span', { style: `color:${COLORS[i % COLORS.length]}` }, '— ' + l.name))));
}

async function viewPlots(main) {
  const { commits, aborts, p50, p99, markers } = series();
  fill(main, h('h1', {}, 'Plots'),
    h('p', { class: 'muted' }, `From this node's /metrics, sampled every ${POLL_MS / 1000} s since the console opened (${samples.length} samples).`),
    h('div', { class: 'plots' },
      chart('plot-txns', 'Transactions ended per second (EndTxn)', [{ name: 'commits', points: commits }, { name: 'aborts', points: aborts }], 'per s'),
      chart('plot-latency', 'Commit latency (EndTxn commit, until answered)', [{ name: 'p50', points: p50 }, { name: 'p99', points: p99 }], 'ms'),
      chart('plot-markers', 'Markers sent per leader', Object.entries(markers).map(([l, pts]) => ({ name: 'leader ' + l, points: pts })), 'per s')));
}

// ---- routing, polling, login ---------------------------------------------

function route() {
  const [, name, ...rest] = (location.hash || '#/transactions').split('/');
  return { name: views[name] ? name : 'transactions', arg: decodeURIComponent(rest.join('/')) };
}

// render draws the current view: first on navigation, otherwise a poll.
// Draws run one at a time, in order, so a poll still fetching for the
// view just left cannot draw over the new one; polls waiting to run are
// merged into one.
let queue = Promise.resolve();
let pollQueued = false;
function render(main, first) {
  if (!first) {
    if (pollQueued) return queue;
    pollQueued = true;
  }
  queue = queue.then(() => {
    if (!first) pollQueued = false;
    return draw(main, first);
  });
  return queue;
}

async function draw(main, first) {
  const { name, arg } = route();
  for (const a of document.querySelectorAll('#nav a')) {
    a.classList.toggle('active', a.getAttribute('href') === '#/' + name || (name === 'txn' && a.getAttribute('href') === '#/transactions') ||
      ((name === 'topic' || name === 'records') && a.getAttribute('href') === '#/topics') || (name === 'group' && a.getAttribute('href') === '#/groups'));
  }
  const started = performance.now();
  try {
    await views[name](main, arg, first);
    main.dataset.view = name;
    main.dataset.loadedMs = Math.round(performance.now() - started);
    document.getElementById('status').textContent = `updated ${new Date().toLocaleTimeString()} · ${main.dataset.loadedMs} ms`;
  } catch (e) {
    if (!(e instanceof AuthError)) {
      document.getElementById('status').textContent = 'error: ' + e.message;
      if (first) fill(main, h('p', { class: 'error' }, e.message));
    }
  }
}

let timer = null;
function start() {
  document.getElementById('login').hidden = true;
  document.getElementById('nav').hidden = false;
  document.getElementById('logout').hidden = !token;
  const main = document.getElementById('main');
  render(main, true);
  if (timer) return;
  sample().catch(() => {});
  timer = setInterval(() => {
    sample().then(() => { if (route().name === 'plots') render(main, false); }).catch(() => {});
    if (route().name !== 'plots') render(main, false);
  }, POLL_MS);
}

function showLogin(message) {
  clearInterval(timer);
  timer = null;
  document.getElementById('main').replaceChildren();
  document.getElementById('nav').hidden = true;
  document.getElementById('logout').hidden = true;
  document.getElementById('login').hidden = false;
  document.getElementById('login-error').textContent = message || '';
  document.getElementById('token').focus();
}

document.getElementById('login').addEventListener('submit', (e) => {
  e.preventDefault();
  token = document.getElementById('token').value.trim();
  sessionStorage.setItem(TOKEN_KEY, token);
  document.getElementById('token').value = '';
  start();
});
document.getElementById('logout').addEventListener('click', () => {
  token = '';
  sessionStorage.removeItem(TOKEN_KEY);
  showLogin('');
});
window.addEventListener('hashchange', () => render(document.getElementById('main'), true));

// The first call tells whether the API wants a token: a 401 shows the
// login (api() does it) and nothing else is drawn.
api('/v1/leaders').then(start).catch((e) => {
  if (!(e instanceof AuthError)) start();
});
