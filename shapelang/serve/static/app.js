// The page of `shapelang serve`: an editor (or an exercise's parts), checked as you type.
// Text typed here is only ever sent to this server as the body of a POST; what comes back is
// shown as text (textContent), except the trace picture, which the server renders and escapes.
'use strict';

const DEBOUNCE_MS = 250;
const HEADERS = {'Content-Type': 'text/plain; charset=utf-8', 'X-Shapelang': '1'};

const state = {info: null, editors: [], timer: null, inflight: false, dirty: false, checks: 0};

function $(id) { return document.getElementById(id); }

function el(tag, cls, text) {
  const e = document.createElement(tag);
  if (cls) e.className = cls;
  if (text !== undefined && text !== null) e.textContent = text;
  return e;
}

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
  // `grow`: as tall as its text (an exercise's part); else at least 12 lines, at most 62% of
  // the window, then it scrolls
  constructor(text, firstLine, grow) {
    this.first = firstLine;
    this.grow = grow;
    this.marks = new Map();
    this.root = el('div', 'editor');
    this.gutter = el('pre', 'gutter');
    this.gutter.setAttribute('aria-hidden', 'true');
    this.area = el('textarea');
    for (const [k, v] of [['spellcheck', 'false'], ['wrap', 'off'], ['autocomplete', 'off'],
                          ['autocapitalize', 'off'], ['aria-label', 'spec text']]) {
      this.area.setAttribute(k, v);
    }
    this.area.value = text;
    this.root.append(this.gutter, this.area);
    this.area.addEventListener('input', () => { this.layout(); schedule(); });
    this.area.addEventListener('scroll', () => { this.gutter.scrollTop = this.area.scrollTop; });
    this.area.addEventListener('keydown', (ev) => {
      if (ev.key === 'Tab' && !ev.shiftKey && !ev.ctrlKey && !ev.altKey && !ev.metaKey) {
        ev.preventDefault();
        document.execCommand('insertText', false, '  ');
      }
    });
    this.layout();
  }

  lineCount() { return this.area.value.split('\n').length; }

  layout() {
    const n = this.lineCount();
    this.area.rows = Math.max(n + (this.grow ? 0 : 1), this.grow ? 2 : 12);
    const frag = document.createDocumentFragment();
    for (let k = 0; k < n; k++) {
      const line = this.first + k;
      const mark = this.marks.get(line);
      const span = el('span', mark ? `line ${mark}` : 'line', String(line));
      span.dataset.line = String(line);
      frag.append(span, '\n');
    }
    this.gutter.replaceChildren(frag);
    this.gutter.scrollTop = this.area.scrollTop;
  }

  goTo(line, column) {
    const lines = this.area.value.split('\n');
    const k = Math.min(Math.max(line - this.first, 0), lines.length - 1);
    let at = 0;
    for (let i = 0; i < k; i++) at += lines[i].length + 1;
    at += Math.min(Math.max(column - 1, 0), lines[k].length);
    this.area.focus();
    this.area.setSelectionRange(at, at);
  }
}

function text() { return state.editors.map((e) => e.area.value).join('\n\n'); }

// The first line of every part in the whole text (parts join with one blank line).
function renumber() {
  let first = 1;
  for (const e of state.editors) {
    if (e.first !== first) { e.first = first; e.layout(); }
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
    showCheck(await request('/api/check', body));
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
  for (const e of state.editors) e.layout();
  $('picture').innerHTML = r.picture;   // rendered and escaped by shapelang.render.html
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
    box.append(ed.root, ed.diagnostics);
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
    $('editor-slot').append(ed.root);
    state.editors.push(ed);
  }
  $('save').addEventListener('click', save);
  runCheck();
}

start();
