// The page of `shapelang serve`: an editor (or an exercise's parts), checked as you type.
// Text typed here is only ever sent to this server as the body of a POST; what comes back is
// shown as text (textContent), except the trace picture, which the server renders and escapes.
'use strict';

const DEBOUNCE_MS = 250;
const HEADERS = {'Content-Type': 'text/plain; charset=utf-8', 'X-Shapelang': '1'};

const state = {info: null, editors: [], timer: null, inflight: false, dirty: false, checks: 0,
               version: 0, pieces: new Map(), explanations: new Map(), scrolledTo: null};

function $(id) { return document.getElementById(id); }

// el(), highlight(), loadGrammar(), suggestOps() and opWordAt() come from syntax.js

// Prose from the exercise: `code` spans become <code>, everything else stays text.
function prose(tag, text) {
  const e = el(tag);
  text.split('`').forEach((piece, k) => {
    e.append(k % 2 ? el('code', null, piece) : document.createTextNode(piece));
  });
  return e;
}

function setStatus(text, kind) {
  const s = $('status');
  s.textContent = text;
  s.className = kind || '';
}

function busy(on) { document.body.dataset.busy = on ? '1' : '0'; }

class ServerError extends Error {
  constructor(message, status) { super(message); this.status = status; }
}

async function request(path, text) {
  const init = text === undefined ? {cache: 'no-store'} :
    {method: 'POST', headers: HEADERS, body: text, cache: 'no-store'};
  const res = await fetch(path, init);
  let body = null;
  try { body = await res.json(); } catch (e) { body = null; }
  if (!res.ok || body === null) {
    throw new ServerError((body && body.error) || `the server answered ${res.status}`, res.status);
  }
  return body;
}


// ------------------------------------------------------------------ the editor

class Editor {
  // the text over its coloured copy: a transparent textarea on a highlighted <pre>, wrapping
  // alike, with line numbers beside each (wrapped) line; `grow`: as tall as its text (an
  // exercise's part), else it scrolls past 62% of the window
  constructor(text, firstLine, grow) {
    this.first = firstLine;
    this.grow = grow;
    this.marks = new Map();
    this.root = el('div', grow ? 'editor grow' : 'editor');
    this.gutter = el('pre', 'gutter');
    this.gutter.setAttribute('aria-hidden', 'true');
    this.code = el('div', 'code');
    this.hl = el('pre', 'hl');
    this.hl.setAttribute('aria-hidden', 'true');
    this.area = el('textarea');
    for (const [k, v] of [['spellcheck', 'false'], ['autocomplete', 'off'],
                          ['autocapitalize', 'off'], ['aria-label', 'spec text']]) {
      this.area.setAttribute(k, v);
    }
    this.area.value = text;
    this.suggest = el('div', 'suggest');
    this.suggest.hidden = true;
    this.code.append(this.hl, this.area);
    this.root.append(this.gutter, this.code);
    this.box = el('div', 'editor-box');
    this.box.append(this.root, this.suggest);
    this.area.addEventListener('input', () => { this.layout(); this.suggestions(); schedule(); });
    this.area.addEventListener('click', () => this.suggestions());
    this.area.addEventListener('keydown', (ev) => {
      if (ev.key === 'Tab' && !ev.shiftKey && !ev.ctrlKey && !ev.altKey && !ev.metaKey) {
        ev.preventDefault();
        const first = this.suggest.hidden ? null : this.suggest.querySelector('button');
        if (first) first.click(); else document.execCommand('insertText', false, '  ');
      } else if (ev.key === 'Escape') {
        this.suggest.hidden = true;
      }
    });
    new ResizeObserver(() => this.numbers()).observe(this.code);
    this.layout();
  }

  lineCount() { return this.area.value.split('\n').length; }

  layout() {
    highlight(this.hl, this.area.value);
    this.area.style.height = '0px';
    this.area.style.height = `${Math.max(this.area.scrollHeight, this.hl.scrollHeight)}px`;
    this.numbers();
  }

  // one number per line, as tall as the line is drawn (wrapped lines take several rows)
  numbers() {
    const rows = this.hl.children;
    const frag = document.createDocumentFragment();
    for (let k = 0; k < rows.length; k++) {
      const line = this.first + k;
      const mark = this.marks.get(line);
      const span = el('span', mark ? `line ${mark}` : 'line', String(line));
      span.dataset.line = String(line);
      span.style.height = `${rows[k].getBoundingClientRect().height}px`;
      frag.append(span, '\n');
    }
    this.gutter.replaceChildren(frag);
  }

  suggestions() {
    const at = opWordAt(this.area.value, this.area.selectionStart);
    const names = (state.info && state.info.operations) || [];
    const found = at && at.word && !names.includes(at.word) ? suggestOps(at.word, names) : [];
    this.suggest.replaceChildren();
    this.suggest.hidden = !found.length;
    if (!found.length) return;
    this.suggest.append(el('span', 'label', 'operations:'));
    for (const name of found) {
      const b = el('button', null, name);
      b.type = 'button';
      b.addEventListener('mousedown', (ev) => ev.preventDefault());
      b.addEventListener('click', () => {
        this.area.focus();
        this.area.setSelectionRange(at.start, at.end);
        document.execCommand('insertText', false, name);
        this.suggest.hidden = true;
      });
      this.suggest.append(b);
    }
  }

  goTo(line, column) {
    const lines = this.area.value.split('\n');
    const k = Math.min(Math.max(line - this.first, 0), lines.length - 1);
    let at = 0;
    for (let i = 0; i < k; i++) at += lines[i].length + 1;
    at += Math.min(Math.max(column - 1, 0), lines[k].length);
    this.area.focus();
    this.area.setSelectionRange(at, at);
    const row = this.hl.children[k];
    if (row) row.scrollIntoView({block: 'nearest'});
  }
}

function text() { return state.editors.map((e) => e.area.value).join('\n\n'); }

// The first line of every part in the whole text (parts join with one blank line).
function renumber() {
  let first = 1;
  for (const e of state.editors) {
    if (e.first !== first) { e.first = first; e.numbers(); }
    first += e.lineCount() + 1;
  }
}

function editorOf(line) {
  let found = state.editors[0];
  for (const e of state.editors) if (e.first <= line) found = e;
  return found;
}

// ------------------------------------------------------------------ checking as you type

function schedule() {
  busy(true);
  renumber();
  setStatus('editing…');
  clearTimeout(state.timer);
  state.timer = setTimeout(runCheck, DEBOUNCE_MS);
}

async function runCheck() {
  state.timer = null;
  if (state.inflight) { state.dirty = true; return; }
  const body = text();
  const size = new TextEncoder().encode(body).length;
  if (size > state.info.limits.max_bytes) {
    showRefusal(`error[E004]: file is larger than ${state.info.limits.max_bytes / 1024} KB ` +
                '(the limit of `shapelang check`); nothing was sent');
    busy(false);
    return;
  }
  state.inflight = true;
  setStatus('checking…');
  try {
    const r = await request('/api/check', body);
    showCheck(r);               // the diagnostics first,
    if (!state.dirty) await showPicture(r.version);    // then the picture, unless stale already
  } catch (err) {
    showRefusal(err.message);
  } finally {
    state.inflight = false;
    if (state.dirty) {
      state.dirty = false;
      runCheck();
    } else if (state.timer === null) {
      busy(false);
    }
  }
}

function showRefusal(message) {
  setStatus(message, 'error');
  $('check-text').textContent = message;
}

// ------------------------------------------------------------------ the picture
// It comes after the diagnostics, in pieces: the server sends only the pieces this page does
// not hold (the others by their key), and a block is drawn when it is opened.

async function showPicture(version) {
  const r = await request('/api/picture', JSON.stringify({version, have: Array.from(state.pieces.keys())}));
  if (r.stale) return;
  let root = $('picture').querySelector(':scope > .shapelang-trace');
  if (!root) {
    root = el('div', 'shapelang-trace');
    root.addEventListener('toggle', openBlock, true);
    $('picture').replaceChildren(root);
  }
  const kept = new Map();
  const nodes = [];
  for (const [key, html] of r.pieces) {
    let node = state.pieces.get(key);
    if (html !== null || !node) {
      node = el('div', 'piece');
      node.innerHTML = html === null ? '' : html;     // rendered and escaped by shapelang.render.html
    } else if (kept.has(key)) {
      node = node.cloneNode(true);
    }
    node.dataset.key = key;
    kept.set(key, node);
    nodes.push(node);
  }
  root.replaceChildren(...nodes);
  state.pieces = kept;
  state.version = version;
  document.body.dataset.pictures = String(Number(document.body.dataset.pictures || 0) + 1);
  scrollToError();
}

async function openBlock(ev) {
  const d = ev.target;
  if (!(d instanceof HTMLDetailsElement) || !d.open || d.dataset.lazy === undefined || d.dataset.drawn) return;
  d.dataset.drawn = 'pending';
  try {
    const r = await request('/api/block', JSON.stringify({version: state.version, block: Number(d.dataset.lazy)}));
    if (r.stale) { delete d.dataset.drawn; return; }
    const body = el('div', 'block-body');
    body.innerHTML = r.html;       // rendered and escaped by shapelang.render.html
    d.querySelectorAll(':scope > :not(summary)').forEach((n) => n.remove());
    d.append(body);
    d.dataset.drawn = '1';
  } catch (err) {
    delete d.dataset.drawn;
    setStatus(err.message, 'error');
  }
}

// The picture shows the first error when it changes (not on every keystroke).
function scrollToError() {
  const diag = $('picture').querySelector('.diag.error');
  const key = diag ? diag.textContent : null;
  if (!diag || key === state.scrolledTo) { state.scrolledTo = key; return; }
  state.scrolledTo = key;
  const box = $('right');
  const top = diag.getBoundingClientRect().top - box.getBoundingClientRect().top + box.scrollTop;
  box.scrollTop = Math.max(0, top - 24);
  if (getComputedStyle(box).position !== 'sticky') diag.scrollIntoView({block: 'nearest'});
}

function diagnosticItem(d) {
  const item = el('div', `diag ${d.severity}`);
  item.dataset.line = String(d.line);
  item.dataset.column = String(d.column);
  item.dataset.code = d.code;
  const where = el('button', 'where', `line ${d.line}, column ${d.column}`);
  where.type = 'button';
  where.title = 'go to this line';
  where.addEventListener('click', () => editorOf(d.line).goTo(d.line, d.column));
  item.append(where, el('pre', null, d.rendered));
  const why = state.explanations.get(d.code);
  if (why) {              // the code links to its explanation (`shapelang explain CODE`)
    const more = el('details', 'explain');
    const sum = el('summary');
    const link = el('a', 'code-link', d.code);
    link.href = `#explain-${d.code}`;
    link.addEventListener('click', (ev) => { ev.preventDefault(); more.open = !more.open; });
    sum.append('what ', link, ' means');
    more.append(sum, el('pre', null, why));
    item.append(more);
  }
  return item;
}

function showCheck(r) {
  state.checks += 1;
  document.body.dataset.checks = String(state.checks);
  document.body.dataset.ok = r.ok ? '1' : '0';
  const n = `${r.errors} error${r.errors === 1 ? '' : 's'}, ${r.warnings} warning${r.warnings === 1 ? '' : 's'}`;
  setStatus(r.ok && !r.warnings ? `ok: ${r.bindings.length} bindings, every step proved` : n,
            r.ok ? (r.warnings ? 'warning' : 'ok') : 'error');
  $('check-text').textContent = r.text;
  for (const [code, why] of Object.entries(r.explanations || {})) state.explanations.set(code, why);
  for (const e of state.editors) e.marks.clear();
  const lists = state.info.mode === 'exercise' ?
    state.editors.map((e) => e.diagnostics) : [$('diagnostics')];
  lists.forEach((l) => l.replaceChildren());
  for (const d of r.diagnostics) {
    const e = editorOf(d.line);
    if (e.marks.get(d.line) !== 'error') e.marks.set(d.line, d.severity);
    const list = state.info.mode === 'exercise' ? e.diagnostics : $('diagnostics');
    list.append(diagnosticItem(d));
  }
  if (state.info.mode !== 'exercise' && !r.diagnostics.length) {
    $('diagnostics').append(el('p', 'none', 'none: every step is proved'));
  }
  for (const e of state.editors) e.numbers();
}

// ------------------------------------------------------------------ exercises

function buildParts(info) {
  const parts = $('parts');
  info.parts.forEach((p, k) => {
    const box = el('section', 'part');
    box.dataset.part = String(k + 1);
    let head = `Part ${k + 1} of ${info.parts.length}`;
    if (p.blanks.length) head += ': fill ' + p.blanks.map((b) => b.name).join(', ');
    box.append(el('h3', null, head));
    if (p.prose.length) box.append(prose('p', p.prose.join(' ')));
    if (p.hints.length) {
      const ul = el('ul', 'hints');
      for (const h of p.hints) {
        const li = el('li');
        li.append(el('code', null, h.name), document.createTextNode(': ' + h.text));
        ul.append(li);
      }
      box.append(ul);
    }
    const ed = new Editor(p.text, p.first_line, true);
    ed.diagnostics = el('div', 'diagnostics');
    box.append(ed.box, ed.diagnostics);
    parts.append(box);
    state.editors.push(ed);
  });
  $('grade-button').addEventListener('click', grade);
}

function cell(row, text, cls) {
  const td = el('td', cls, text);
  row.append(td);
  return td;
}

function showGrade(g) {
  const box = $('grade');
  box.hidden = false;
  box.replaceChildren();
  box.dataset.score = String(g.score);
  box.dataset.maxScore = String(g.max_score);
  box.dataset.fullMarks = g.full_marks ? '1' : '0';
  box.append(el('p', g.full_marks ? 'score full' : 'score', `${g.score}/${g.max_score} points`));
  if (g.result.error) box.append(el('p', 'grade-error', g.result.error));
  const table = el('table');
  const head = el('tr');
  for (const h of ['blank', 'line', 'points', 'result', 'feedback']) head.append(el('th', null, h));
  table.append(head);
  for (const b of g.result.blanks) {
    const row = el('tr', b.status.replace(' ', '-'));
    row.dataset.blank = b.name;
    row.dataset.status = b.status;
    cell(row, b.name);
    cell(row, b.line === null ? '' : String(b.line));
    cell(row, `${b.points}/${b.max_points}`);
    cell(row, b.status);
    const fb = cell(row, b.status === 'correct' ? '' : b.feedback, 'feedback');
    if (b.hint) fb.append(el('div', 'hint', 'hint: ' + b.hint));
    table.append(row);
  }
  box.append(table);
  for (const [what, items] of [['whole file', g.result.whole_file], ['note', g.result.notes]]) {
    for (const f of items) {
      box.append(el('p', 'finding', `${what}${f.line ? ', line ' + f.line : ''}: ${f.message}`));
    }
  }
  const d = el('details');
  d.append(el('summary', null, 'as shapelang grade prints it'));
  const pre = el('pre', null, g.report);
  pre.id = 'grade-report';
  d.append(pre);
  box.append(d);
}

async function grade() {
  const button = $('grade-button');
  button.disabled = true;
  busy(true);
  setStatus('grading…');
  try {
    const g = await request('/api/grade', text());
    showGrade(g);
    setStatus(`graded: ${g.score}/${g.max_score} points`, g.full_marks ? 'ok' : 'warning');
  } catch (err) {
    setStatus(err.message, 'error');
  } finally {
    button.disabled = false;
    busy(state.inflight || state.timer !== null);
  }
}

// ------------------------------------------------------------------ start

function save() {
  const url = URL.createObjectURL(new Blob([text()], {type: 'text/plain'}));
  const a = el('a');
  a.href = url;
  a.download = state.info.path.split(/[\\/]/).pop() || 'spec.shape';
  document.body.append(a);
  a.click();
  a.remove();
  setTimeout(() => URL.revokeObjectURL(url), 1000);
}

async function start() {
  try {
    state.info = await request('/api/session');
  } catch (err) {
    setStatus(err.message, 'error');
    busy(false);
    return;
  }
  const info = state.info;
  document.title = info.title;
  $('title').textContent = info.title;
  document.body.dataset.mode = info.mode;
  if (info.mode === 'exercise') {
    $('exercise-mode').hidden = false;
    buildParts(info);
  } else {
    $('spec-mode').hidden = false;
    const ed = new Editor(info.text, 1, false);
    $('editor-slot').append(ed.box);
    state.editors.push(ed);
  }
  $('save').addEventListener('click', save);
  await loadGrammar();
  for (const e of state.editors) e.layout();
  runCheck();
}

start();
