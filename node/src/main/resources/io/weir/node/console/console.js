// Weir operator console. Plain browser JavaScript, no build step, no third-party code.
//
// The page holds no data of its own: it asks this node's admin JSON API with the administrator
// token the operator entered (kept in this tab's sessionStorage only) and draws what comes back.
// Everything reaches the page through textContent and SVG attributes, never as HTML.
(function () {
  'use strict';

  var TOKEN_KEY = 'weir.console.token';
  var SAMPLE_MS = 3000;          // pipeline lag sampling period
  var WINDOW_MS = 5 * 60 * 1000; // lag history kept and drawn
  var SLOW_MS = 15000;           // cluster, placement and outbox refresh period
  var MAX_GRID = 4096;           // partitions drawn one cell each, at most
  var MAX_OUTBOX_AUTO = 256;     // above this partition count the outbox is refreshed on demand only
  var MAX_OUTBOX_ROWS = 64;      // outbox rows shown (the fullest first when there are more)
  var SVG_NS = 'http://www.w3.org/2000/svg';
  var PALETTE = ['#1f6feb', '#e8590c', '#2f9e44', '#ae3ec9', '#0c8599', '#f08c00', '#c2255c', '#5c7cfa',
    '#66a80f', '#868e96'];
  var NOT_RUNNING = '#cbd5e1';

  var token = null;
  var timers = [];
  var lagSamples = {};         // pipeline name -> [{t, v}]: its slot's lag in bytes
  var lastPipelines = null;    // the last GET /admin/pipelines
  var lastSlots = {};          // pipeline name -> its slot in the last GET /admin/slots
  var partitionCount = null;
  var outboxSettings = null;
  var fetchErrors = {};        // path -> message
  var busy = {};               // refresh name -> true while in flight

  /** Thrown to stop a refresh after the session ended (401/403); not an error to show. */
  function SignedOut() {}

  function $(id) { return document.getElementById(id); }

  function el(tag, text, cls) {
    var e = document.createElement(tag);
    if (text !== undefined && text !== null) { e.textContent = String(text); }
    if (cls) { e.className = cls; }
    return e;
  }

  function svgEl(tag, attrs, text) {
    var e = document.createElementNS(SVG_NS, tag);
    Object.keys(attrs || {}).forEach(function (k) { e.setAttribute(k, String(attrs[k])); });
    if (text !== undefined) { e.textContent = String(text); }
    return e;
  }

  function clear(node) { while (node.firstChild) { node.removeChild(node.firstChild); } }

  function row(cells) {
    var tr = document.createElement('tr');
    cells.forEach(function (c) {
      if (c instanceof Node) { tr.appendChild(c); } else { tr.appendChild(el('td', c)); }
    });
    return tr;
  }

  function num(v) { return el('td', v === null || v === undefined ? '—' : fmtInt(v), 'num'); }

  function emptyRow(tbody, columns, text) {
    var td = el('td', text, 'empty');
    td.colSpan = columns;
    var tr = document.createElement('tr');
    tr.appendChild(td);
    tbody.appendChild(tr);
  }

  function fmtInt(n) { return Number(n).toLocaleString('en-US'); }

  function fmtBytes(n) {
    var units = ['B', 'KiB', 'MiB', 'GiB', 'TiB'];
    var v = Number(n);
    var i = 0;
    while (Math.abs(v) >= 1024 && i < units.length - 1) { v /= 1024; i++; }
    return (i === 0 ? String(Math.round(v)) : v.toFixed(v < 10 ? 1 : 0)) + ' ' + units[i];
  }

  function stateCell(state) { return el('td', state, 'state-' + String(state).replace(/[^a-z]/g, '')); }

  function color(i) { return PALETTE[i % PALETTE.length]; }

  function swatch(fill) {
    var s = svgEl('svg', { width: 12, height: 12, viewBox: '0 0 12 12', 'aria-hidden': 'true' });
    s.appendChild(svgEl('rect', { x: 0, y: 0, width: 12, height: 12, rx: 2, fill: fill }));
    return s;
  }

  // --- the session -------------------------------------------------------------------------------

  function storedToken() {
    try { return window.sessionStorage.getItem(TOKEN_KEY); } catch (e) { return null; }
  }

  function storeToken(t) {
    try {
      if (t === null) { window.sessionStorage.removeItem(TOKEN_KEY); } else { window.sessionStorage.setItem(TOKEN_KEY, t); }
    } catch (e) { /* storage off: the token lives in this page only */ }
  }

  /** A token handed over as #token=... is taken once and removed from the address. */
  function fragmentToken() {
    var h = window.location.hash;
    if (!h || h.indexOf('#token=') !== 0) { return null; }
    window.history.replaceState(null, '', window.location.pathname + window.location.search);
    var t;
    try { t = decodeURIComponent(h.substring('#token='.length)); } catch (e) { t = ''; }
    return t.trim() || null;
  }

  function show(signedIn) {
    $('login').classList.toggle('hidden', signedIn);
    $('console').classList.toggle('hidden', !signedIn);
    $('sign-out').classList.toggle('hidden', !signedIn);
    document.body.setAttribute('data-state', signedIn ? 'signed-in' : 'signed-out');
  }

  function signOut(message) {
    timers.forEach(function (t) { window.clearInterval(t); });
    timers = [];
    token = null;
    storeToken(null);
    lagSamples = {};
    lastPipelines = null;
    lastSlots = {};
    partitionCount = null;
    outboxSettings = null;
    fetchErrors = {};
    busy = {};
    clear($('identity'));
    clear($('updated'));
    $('login-error').textContent = message || '';
    show(false);
    $('token').focus();
  }

  function signIn(candidate) {
    token = candidate;
    $('login-error').textContent = '';
    return api('/admin/cluster').then(function (cluster) {
      storeToken(candidate);
      show(true);
      renderCluster(cluster);
      samplePipelines();
      refreshSlow(true);
      timers.push(window.setInterval(samplePipelines, SAMPLE_MS));
      timers.push(window.setInterval(function () { refreshSlow(false); }, SLOW_MS));
    }).catch(function (e) {
      if (!(e instanceof SignedOut)) {
        token = null;
        show(false);
        $('login-error').textContent = 'The node did not answer as expected: ' + describe(e);
      }
    });
  }

  // --- the admin API -----------------------------------------------------------------------------

  function ApiError(path, status, code, message) {
    this.path = path;
    this.status = status;
    this.code = code;
    this.message = message;
  }

  function describe(e) {
    if (e instanceof ApiError) {
      return e.path + ': ' + e.status + (e.code ? ' ' + e.code : '') + (e.message ? ' (' + e.message + ')' : '');
    }
    return (e && e.message) ? e.message : String(e);
  }

  function api(path) {
    if (token === null) { return Promise.reject(new SignedOut()); }
    var sent = token;
    return window.fetch(path, {
      headers: { 'Authorization': 'Bearer ' + token, 'Accept': 'application/json' },
      cache: 'no-store',
      credentials: 'omit',
      redirect: 'error'
    }).then(function (r) {
      if (token !== sent) {
        throw new SignedOut(); // signed out (or in again) while this request was out: drop its answer
      }
      if (r.status === 401) {
        signOut('The token was not accepted (401 unauthenticated). Sign in again.');
        throw new SignedOut();
      }
      if (r.status === 403) {
        signOut('This token belongs to a principal who is not a cluster administrator (403 forbidden).');
        throw new SignedOut();
      }
      return r.json().catch(function () { return null; }).then(function (body) {
        if (!r.ok) {
          throw new ApiError(path, r.status, body && body.error, body && body.message);
        }
        delete fetchErrors[path];
        return body;
      });
    }, function (e) {
      throw new ApiError(path, 0, null, 'no answer from the node (' + (e && e.message ? e.message : 'network error') + ')');
    });
  }

  /** Runs refresh `name` unless one is in flight; failures other than a sign-out are listed on the page. */
  function once(name, work) {
    if (busy[name] || token === null) { return Promise.resolve(); }
    busy[name] = true;
    return work().catch(function (e) {
      if (e instanceof ApiError) {
        fetchErrors[e.path] = describe(e);
      } else if (!(e instanceof SignedOut)) {
        scriptError(e && e.message ? e.message : String(e));
      }
    }).then(function () {
      busy[name] = false;
      if (token !== null) {
        var list = Object.keys(fetchErrors).sort().map(function (k) { return fetchErrors[k]; });
        $('fetch-errors').textContent = list.join('\n');
        $('updated').textContent = 'updated ' + new Date().toLocaleTimeString('en-GB');
      }
    });
  }

  function refreshSlow(withOutbox) {
    once('cluster', function () {
      return api('/admin/cluster').then(function (c) {
        renderCluster(c);
        return api('/admin/partitions').then(function (p) {
          partitionCount = p.count;
          $('placement-summary').textContent = p.count + ' partitions, ' + p.running + ' running';
          renderPlacement(c);
        });
      });
    });
    once('outbox', function () {
      var settings = outboxSettings ? Promise.resolve(outboxSettings) : api('/admin/outbox/settings').then(function (s) {
        outboxSettings = s;
        return s;
      });
      return settings.then(function (s) {
        if (!withOutbox && s.partitions > MAX_OUTBOX_AUTO) {
          return null;
        }
        return api('/admin/outbox/status').then(function (list) { renderOutbox(s, list); });
      });
    });
  }

  // --- cluster and placement ---------------------------------------------------------------------

  function renderCluster(c) {
    $('identity').textContent = 'cluster ' + (c.clusterId || '(storage not ready)') + ' · this node ' + c.self;
    var dl = $('cluster-summary');
    clear(dl);
    [['members', String(c.members.length)], ['leader', c.leader || 'none'], ['slot owner', c.slotOwner || 'unknown (moving?)'],
      ['unreachable', c.unreachable.length ? c.unreachable.join(', ') : 'none']].forEach(function (kv) {
      dl.appendChild(el('dt', kv[0]));
      dl.appendChild(el('dd', kv[1], kv[0] === 'unreachable' && c.unreachable.length ? 'no' : null));
    });
    var tbody = $('members');
    clear(tbody);
    c.members.forEach(function (m) {
      var address = el('td', m.address, 'mono member-address');
      tbody.appendChild(row([
        address,
        stateCell(m.status),
        el('td', m.reachable ? 'yes' : 'no', m.reachable ? 'yes' : 'no'),
        el('td', m.roles.join(', ')),
        m.partitions === null ? el('td', 'unknown (no answer in time)', 'empty') : el('td', String(m.partitions.length), 'num'),
        el('td', m.slots.map(function (s) { return s.pipeline + (s.slot ? ' (' + s.slot + ')' : '') + ': ' + s.state; }).join(', ') || '—')
      ]));
    });
    if (!c.members.length) { emptyRow(tbody, 6, 'no members'); }
  }

  function renderPlacement(c) {
    var holder = $('placement-chart');
    var legend = $('placement-legend');
    clear(holder);
    clear(legend);
    var owner = {};
    c.members.forEach(function (m, i) {
      (m.partitions || []).forEach(function (p) { owner[p] = i; });
      var li = el('li');
      li.appendChild(swatch(color(i)));
      li.appendChild(el('span', m.address + ': ' + (m.partitions === null ? 'unknown' : m.partitions.length), 'mono'));
      legend.appendChild(li);
    });
    var li = el('li');
    li.appendChild(swatch(NOT_RUNNING));
    li.appendChild(el('span', 'not running'));
    legend.appendChild(li);
    var count = partitionCount || 0;
    if (count === 0 || count > MAX_GRID) {
      holder.appendChild(el('p', count > MAX_GRID ? 'Too many partitions to draw one by one; counts per member below.' : '', 'muted'));
      return;
    }
    var cols = Math.min(32, count);
    var size = count <= 256 ? 22 : 12;
    var gap = 2;
    var rows = Math.ceil(count / cols);
    var width = cols * (size + gap);
    var height = rows * (size + gap);
    var chart = svgEl('svg', { id: 'placement-grid', class: 'placement', width: width, height: height,
      viewBox: '0 0 ' + width + ' ' + height, role: 'img', 'aria-label': 'partition placement' });
    for (var p = 0; p < count; p++) {
      var x = (p % cols) * (size + gap);
      var y = Math.floor(p / cols) * (size + gap);
      var member = owner[p];
      var cell = svgEl('rect', { x: x, y: y, width: size, height: size, rx: 2,
        fill: member === undefined ? NOT_RUNNING : color(member), 'data-partition': p });
      cell.appendChild(svgEl('title', {}, 'partition ' + p + ': ' + (member === undefined ? 'not running' : c.members[member].address)));
      chart.appendChild(cell);
      if (size >= 22) {
        chart.appendChild(svgEl('text', { x: x + size / 2, y: y + size / 2 + 3, 'text-anchor': 'middle', class: 'cell-label' }, p));
      }
    }
    holder.appendChild(chart);
  }

  // --- pipelines and the lag chart ---------------------------------------------------------------

  function samplePipelines() {
    once('pipelines', function () {
      return api('/admin/pipelines').then(function (list) {
        lastPipelines = list;
        renderPipelines();
      });
    });
    once('slots', function () {
      return api('/admin/slots').then(function (report) {
        var now = Date.now();
        lastSlots = {};
        report.slots.forEach(function (s) {
          lastSlots[s.pipeline] = s;
          if (s.lagBytes !== null) {
            (lagSamples[s.pipeline] = lagSamples[s.pipeline] || []).push({ t: now, v: Number(s.lagBytes) });
          }
        });
        Object.keys(lagSamples).forEach(function (name) {
          var kept = lagSamples[name].filter(function (x) { return x.t >= now - WINDOW_MS; });
          if (kept.length === 0) { delete lagSamples[name]; } else { lagSamples[name] = kept; }
        });
        renderPipelines();
        renderLagChart(now);
      });
    });
  }

  function slotCell(s, field, format) {
    if (!s) { return el('td', '…', 'num muted'); }
    if (s.error) { return el('td', 'unknown (' + s.error + ')', 'num no'); }
    if (!s.exists) { return el('td', 'no slot', 'num muted'); }
    var v = s[field];
    return el('td', v === null ? '—' : format(v), 'num');
  }

  function renderPipelines() {
    var list = lastPipelines;
    if (!list) { return; }
    var tbody = $('pipeline-rows');
    clear(tbody);
    list.pipelines.forEach(function (p) {
      var s = lastSlots[p.name];
      tbody.appendChild(row([
        el('td', p.name, 'mono'), stateCell(p.state), el('td', p.slot || '—', 'mono'),
        slotCell(s, 'lagBytes', fmtBytes), slotCell(s, 'retainedBytes', fmtBytes),
        s && s.exists && s.walStatus ? stateCell(s.walStatus) : el('td', '—'),
        el('td', p.confirmedLsn || '—', 'mono'),
        num(p.transactions), num(p.rows), num(p.restarts)
      ]));
    });
    if (!list.pipelines.length) { emptyRow(tbody, 10, 'no pipelines configured'); }
    $('slot-owner').textContent = list.owner ? 'Pipelines run on ' + list.owner + '.' : '';

    var halted = $('halted-rows');
    clear(halted);
    list.pipelines.filter(function (p) { return p.state === 'halted'; }).forEach(function (p) {
      halted.appendChild(row([el('td', p.name, 'mono'), el('td', p.reason || 'unknown', 'state-halted halt-reason'),
        el('td', p.detail || '—')]));
    });
    if (!halted.firstChild) { emptyRow(halted, 3, 'no halted pipeline'); }
  }

  function niceCeiling(v) {
    if (v <= 0) { return 1024; }
    var p = Math.pow(2, Math.ceil(Math.log(v) / Math.LN2));
    return Math.max(1024, p);
  }

  function renderLagChart(now) {
    var holder = $('lag-chart');
    var legend = $('lag-legend');
    clear(holder);
    clear(legend);
    var W = 880, H = 240, L = 78, R = 14, T = 10, B = 26;
    var names = Object.keys(lagSamples).sort();
    var max = 0;
    names.forEach(function (n) { lagSamples[n].forEach(function (s) { max = Math.max(max, s.v); }); });
    var top = niceCeiling(max * 1.05);
    // The time axis grows with the history this tab has, from 1 minute up to WINDOW_MS.
    var first = now;
    names.forEach(function (n) { if (lagSamples[n].length) { first = Math.min(first, lagSamples[n][0].t); } });
    var span = Math.min(WINDOW_MS, Math.max(60000, Math.ceil((now - first) / 60000) * 60000));
    var step = span <= 60000 ? 15000 : (span <= 180000 ? 30000 : 60000);
    var start = now - span;
    function x(t) { return L + (t - start) / span * (W - L - R); }
    function y(v) { return T + (1 - v / top) * (H - T - B); }
    var chart = svgEl('svg', { id: 'lag-svg', class: 'chart', viewBox: '0 0 ' + W + ' ' + H, role: 'img',
      'aria-label': 'replication slot lag in bytes over the last 5 minutes', 'data-max': top });
    for (var i = 0; i <= 4; i++) {
      var v = top * i / 4;
      chart.appendChild(svgEl('line', { x1: L, x2: W - R, y1: y(v), y2: y(v), class: i === 0 ? 'axis' : 'grid' }));
      chart.appendChild(svgEl('text', { x: L - 6, y: y(v) + 4, 'text-anchor': 'end', class: 'tick' }, fmtBytes(v)));
    }
    var ticks = span / step;
    for (var m = 0; m <= ticks; m++) {
      var t = start + m * step;
      var age = span - m * step;
      chart.appendChild(svgEl('line', { x1: x(t), x2: x(t), y1: T, y2: H - B, class: m === 0 ? 'axis' : 'grid' }));
      chart.appendChild(svgEl('text', { x: x(t), y: H - 8, 'text-anchor': m === 0 ? 'start' : (m === ticks ? 'end' : 'middle'),
        class: 'tick' }, age === 0 ? 'now' : '-' + (age % 60000 === 0 ? age / 60000 + ' min' : age / 1000 + ' s')));
    }
    names.forEach(function (n, i) {
      var samples = lagSamples[n];
      if (!samples.length) { return; }
      var d = samples.map(function (s, k) { return (k ? 'L' : 'M') + x(s.t).toFixed(1) + ' ' + y(s.v).toFixed(1); }).join(' ');
      chart.appendChild(svgEl('path', { d: d, class: 'lag-line', stroke: color(i), 'data-pipeline': n,
        'data-points': samples.length }));
      var last = samples[samples.length - 1];
      chart.appendChild(svgEl('circle', { cx: x(last.t).toFixed(1), cy: y(last.v).toFixed(1), r: 3, fill: color(i) }));
      var li = el('li');
      li.appendChild(swatch(color(i)));
      li.appendChild(el('span', n + ': ' + fmtBytes(last.v), 'mono'));
      legend.appendChild(li);
    });
    if (!names.length) {
      chart.appendChild(svgEl('text', { x: W / 2, y: H / 2, 'text-anchor': 'middle', class: 'tick' }, 'no pipelines'));
    }
    holder.appendChild(chart);
  }

  // --- consumers and the outbox ------------------------------------------------------------------

  function quotaUse(s, p) {
    return Math.max(p.outboxEntries / s.maxEntries, p.outboxBytes / s.maxBytes);
  }

  function renderOutbox(s, list) {
    var consumers = $('consumer-rows');
    clear(consumers);
    list.forEach(function (p) {
      p.consumers.forEach(function (c) {
        consumers.appendChild(row([
          num(p.partition), el('td', c.consumer, 'mono consumer-name'), num(c.generation),
          el('td', c.collections.length ? c.collections.join(', ') : 'all', 'mono'),
          el('td', c.kinds.length ? c.kinds.join(', ') : 'all'),
          num(c.checkpoint), num(c.lag), el('td', c.released ? 'yes' : 'no')
        ]));
      });
    });
    if (!consumers.firstChild) { emptyRow(consumers, 8, 'no projection consumers'); }

    var entries = 0, bytes = 0;
    list.forEach(function (p) { entries += p.outboxEntries; bytes += p.outboxBytes; });
    $('outbox-summary').textContent = list.length + ' partitions retain ' + fmtInt(entries) + ' entries, ' + fmtBytes(bytes)
      + '. Quota per partition: ' + fmtInt(s.maxEntries) + ' entries / ' + fmtBytes(s.maxBytes)
      + ' (projection reserve beyond it: ' + fmtInt(s.reserveEntries) + ' entries / ' + fmtBytes(s.reserveBytes)
      + '). Automatic retention: ' + (s.autoPurgeIntervalMillis === null ? 'off' : 'every ' + (s.autoPurgeIntervalMillis / 1000) + ' s')
      + (s.partitions > MAX_OUTBOX_AUTO ? '. Refreshed on demand (more than ' + MAX_OUTBOX_AUTO + ' partitions).' : '.');

    var shown = list.slice();
    if (shown.length > MAX_OUTBOX_ROWS) {
      shown.sort(function (a, b) { return quotaUse(s, b) - quotaUse(s, a) || a.partition - b.partition; });
      shown = shown.slice(0, MAX_OUTBOX_ROWS);
    } else {
      shown.sort(function (a, b) { return a.partition - b.partition; });
    }
    var tbody = $('outbox-rows');
    clear(tbody);
    shown.forEach(function (p) {
      var use = quotaUse(s, p);
      var bar = el('td');
      var svg = svgEl('svg', { width: 160, height: 12, viewBox: '0 0 160 12', class: 'quota' });
      svg.appendChild(svgEl('rect', { x: 0, y: 1, width: 120, height: 10, rx: 2, class: 'bar-bg' }));
      svg.appendChild(svgEl('rect', { x: 0, y: 1, width: Math.min(1, use) * 120, height: 10, rx: 2,
        fill: use >= 0.9 ? '#b42318' : (use >= 0.7 ? '#f08c00' : '#2f9e44') }));
      svg.appendChild(svgEl('text', { x: 124, y: 10, class: 'tick' }, Math.round(use * 100) + '%'));
      bar.appendChild(svg);
      var active = p.consumers.filter(function (c) { return !c.released; });
      var pinned = active.length ? Math.min.apply(null, active.map(function (c) { return c.checkpoint; })) : null;
      tbody.appendChild(row([num(p.partition), num(p.documents), num(p.outboxFirst), num(p.outboxNext), num(p.outboxEntries),
        el('td', fmtBytes(p.outboxBytes), 'num'), bar, num(pinned),
        p.storage ? stateCell(p.storage.state) : el('td', '—'), num(p.storage ? p.storage.acknowledged : null),
        el('td', timelines(p.storage), 'num')]));
    });
    if (!shown.length) { emptyRow(tbody, 11, 'no partitions'); }
    renderStorage(list);
  }

  // The timeline a partition checked its journal on, and its last acknowledged commit's when that
  // differs (acknowledged before a promotion).
  function timelines(s) {
    if (!s || !s.checkedOn) { return '—'; }
    var on = String(s.checkedOn.timeline);
    if (s.acknowledgedOn && s.acknowledgedOn.timeline !== s.checkedOn.timeline) {
      on += ' (ack ' + s.acknowledgedOn.timeline + ')';
    }
    return on;
  }

  // Storage copies (from readiness) and the partitions halted storage-behind (ADR 0036).
  function renderStorage(list) {
    var behind = list.filter(function (p) { return p.storage && p.storage.state === 'storage-behind'; })
      .map(function (p) { return p.partition; });
    var text = behind.length
      ? behind.length + ' partition(s) storage-behind (' + behind.join(', ') + '): their journal lacks writes they acknowledged;'
        + ' they refuse writes until an operator runs weir ctl partitions accept-storage-loss N --confirm.'
      : 'No partition is storage-behind.';
    var p = $('storage-summary');
    p.textContent = text;
    p.className = behind.length ? 'no' : 'muted';
    fetch('/health/ready').then(function (r) { return r.json(); }).then(function (r) {
      var checks = r.checks || {};
      if (checks['storage-copies']) {
        p.textContent = 'Storage copies: ' + checks['storage-copies']
          + (checks['storage-system'] ? ' (' + checks['storage-system'] + ')' : '') + '. ' + text;
      }
    }).catch(function () { /* readiness unreachable: the partitions' line stands */ });
  }

  // --- start -------------------------------------------------------------------------------------

  function scriptError(message) {
    $('script-errors').textContent += 'script error: ' + message + '\n';
  }

  function start() {
    window.addEventListener('error', function (e) { scriptError(e.message); });
    window.addEventListener('unhandledrejection', function (e) {
      if (!(e.reason instanceof SignedOut)) {
        scriptError(e.reason && e.reason.message ? e.reason.message : String(e.reason));
      }
    });
    $('sample-seconds').textContent = String(SAMPLE_MS / 1000);
    $('login-form').addEventListener('submit', function (e) {
      e.preventDefault();
      var input = $('token');
      var candidate = input.value.trim();
      input.value = '';
      if (!candidate) {
        $('login-error').textContent = 'Enter a token.';
        return;
      }
      signIn(candidate);
    });
    $('sign-out').addEventListener('click', function () { signOut('Signed out.'); });
    $('outbox-refresh').addEventListener('click', function () {
      once('outbox', function () {
        return api('/admin/outbox/settings').then(function (s) {
          outboxSettings = s;
          return api('/admin/outbox/status').then(function (list) { renderOutbox(s, list); });
        });
      });
    });
    var candidate = fragmentToken() || storedToken();
    if (candidate) {
      signIn(candidate);
    } else {
      show(false);
    }
  }

  if (document.readyState === 'loading') {
    document.addEventListener('DOMContentLoaded', start);
  } else {
    start();
  }
}());
