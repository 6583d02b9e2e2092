// The editor's helpers for the page of `shapelang serve` (loaded before app.js): syntax colours
// from the TextMate grammar and operation suggestions. Text is only ever set as textContent.
'use strict';

function el(tag, cls, text) {
  const e = document.createElement(tag);
  if (cls) e.className = cls;
  if (text !== undefined && text !== null) e.textContent = text;
  return e;
}

// ------------------------------------------------------------------ syntax colours
// The VS Code extension's TextMate grammar, read by a small interpreter of its rules: `match`
// with `captures`, `begin`/`end` regions with their own patterns, `include` of the grammar's
// repository. A rule JavaScript cannot compile is left out (that text stays plain).

const grammar = {rules: null};

function compileRules(patterns, repo, seen) {
  const out = [];
  for (const p of patterns || []) {
    if (p.include) {
      const name = p.include.startsWith('#') ? p.include.slice(1) : null;
      if (name && repo[name] && !seen.has(name)) {
        seen.add(name);
        const r = repo[name];
        out.push(...compileRules(r.patterns ? r.patterns : [r], repo, seen));
        seen.delete(name);
      }
      continue;
    }
    try {
      if (p.match) {
        out.push({re: new RegExp(p.match, 'dgy'), name: p.name, captures: p.captures});
      } else if (p.begin) {
        const rule = {re: new RegExp(p.begin, 'dgy'), name: p.name, captures: p.beginCaptures || p.captures,
                      end: p.end, endCaptures: p.endCaptures || p.captures, patterns: null, src: p.patterns};
        out.push(rule);
      }
    } catch (e) { /* an Oniguruma-only construct: leave the rule out */ }
  }
  return out;
}

function scopeClass(scope) {
  if (!scope) return null;
  for (const [prefix, cls] of [['comment', 'tk-comment'], ['keyword', 'tk-keyword'], ['entity.name.type', 'tk-dim'],
                               ['entity.name', 'tk-name'], ['support.function', 'tk-op'], ['constant', 'tk-number'],
                               ['string', 'tk-string'], ['variable.other.hole', 'tk-hole'], ['storage', 'tk-keyword'],
                               ['keyword.operator', 'tk-operator'], ['variable', 'tk-name']]) {
    if (scope.startsWith(prefix)) return cls;
  }
  return null;
}

async function loadGrammar() {
  try {
    const g = await (await fetch('/shapelang.tmLanguage.json', {cache: 'no-store'})).json();
    grammar.repo = g.repository || {};
    grammar.rules = compileRules(g.patterns, grammar.repo, new Set());
  } catch (e) { grammar.rules = []; }
}

function innerRules(rule) {
  if (rule.patterns === null) rule.patterns = compileRules(rule.src, grammar.repo, new Set());
  return rule.patterns;
}

// One line as [text, class] pieces; `stack` holds the open begin/end regions (carried to the next line).
function tokenizeLine(line, stack) {
  const pieces = [];
  let at = 0;
  const push = (from, to, cls) => { if (to > from) pieces.push([line.slice(from, to), cls]); };
  const capturePieces = (m, caps, whole) => {
    let pos = m.index;
    const end = m.index + m[0].length;
    if (caps && m.indices) {
      const idx = Object.keys(caps).map(Number).filter((k) => k > 0 && m.indices[k]).sort((a, b) => a - b);
      for (const k of idx) {
        const [a, b] = m.indices[k];
        if (a < pos) continue;
        push(pos, a, whole);
        push(a, b, scopeClass(caps[k].name) || whole);
        pos = b;
      }
      if (caps[0]) whole = scopeClass(caps[0].name) || whole;
    }
    push(pos, end, whole);
  };
  let guard = 0;
  while (at <= line.length && guard++ < 4 * line.length + 8) {
    const top = stack[stack.length - 1];
    const rules = top ? innerRules(top.rule) : grammar.rules;
    let best = null;
    let bestRule = null;
    for (const r of rules) {
      for (let k = at; k <= line.length; k++) {
        if (best && k >= best.index) break;
        r.re.lastIndex = k;
        const m = r.re.exec(line);
        if (m) { if (!best || m.index < best.index) { best = m; bestRule = r; } break; }
      }
    }
    let endMatch = null;
    if (top) {
      const re = top.endRe;
      for (let k = at; k <= line.length; k++) {
        re.lastIndex = k;
        const m = re.exec(line);
        if (m) { endMatch = m; break; }
      }
    }
    const cls = top ? scopeClass(top.rule.name) : null;
    if (endMatch && (!best || endMatch.index <= best.index)) {
      push(at, endMatch.index, cls);
      capturePieces(endMatch, top.rule.endCaptures, cls);
      at = endMatch.index + endMatch[0].length;
      stack.pop();
      if (endMatch[0].length === 0 && at >= line.length) break;
      continue;
    }
    if (!best) { push(at, line.length, cls); break; }
    push(at, best.index, cls);
    const whole = scopeClass(bestRule.name) || cls;
    capturePieces(best, bestRule.captures, whole);
    at = best.index + best[0].length;
    if (bestRule.end !== undefined) {
      let endRe;
      try { endRe = new RegExp(bestRule.end, 'dgy'); } catch (e) { endRe = /$/dgy; }
      stack.push({rule: bestRule, endRe});
    }
    if (best[0].length === 0) {
      if (bestRule.end === undefined) { push(at, at + 1, cls); at += 1; }
    }
    if (at >= line.length && !stack.length) break;
  }
  // regions that end at the end of a line (`$`) close here
  while (stack.length && /\$|\(\?=#\)/.test(stack[stack.length - 1].rule.end || '')) stack.pop();
  return pieces;
}

function highlight(pre, text) {
  const frag = document.createDocumentFragment();
  const stack = [];
  text.split('\n').forEach((line) => {
    const row = el('div', 'row');
    if (grammar.rules) {
      for (const [t, cls] of tokenizeLine(line, stack)) row.append(cls ? el('span', cls, t) : document.createTextNode(t));
    } else {
      row.textContent = line;
    }
    row.append('\u200b');       // an empty line keeps its height
    frag.append(row);
  });
  pre.replaceChildren(frag);
}

// ------------------------------------------------------------------ operation suggestions
// The word being typed after `->`: the operations that start with it, then the closest by edit
// distance (names from the checker's operation table, sent with the session).

function editDistance(a, b) {
  const row = Array.from({length: b.length + 1}, (_, k) => k);
  for (let i = 1; i <= a.length; i++) {
    let prev = row[0];
    row[0] = i;
    for (let j = 1; j <= b.length; j++) {
      const cur = row[j];
      row[j] = Math.min(row[j] + 1, row[j - 1] + 1, prev + (a[i - 1] === b[j - 1] ? 0 : 1));
      prev = cur;
    }
  }
  return row[b.length];
}

function suggestOps(word, names, n = 5) {
  if (!word) return [];
  const prefix = names.filter((x) => x.startsWith(word) && x !== word);
  const near = names.filter((x) => !x.startsWith(word))
    .map((x) => [editDistance(word, x.slice(0, Math.max(word.length, 1) + 1)), editDistance(word, x), x])
    .filter(([, d]) => d <= Math.max(1, Math.floor(word.length / 3)))
    .sort((a, b) => a[1] - b[1] || a[0] - b[0] || (a[2] < b[2] ? -1 : 1)).map((t) => t[2]);
  return prefix.sort((a, b) => a.length - b.length || (a < b ? -1 : 1)).concat(near).slice(0, n);
}

function opWordAt(text, caret) {
  const before = text.slice(0, caret);
  const m = /(?:->|^\s*[A-Za-z_][\w']*\s*:)\s*([a-z_0-9]*)$/m.exec(before);
  if (!m) return null;
  const after = /^[a-z_0-9]*/.exec(text.slice(caret))[0];
  return {word: m[1] + after, start: caret - m[1].length, end: caret + after.length};
}

