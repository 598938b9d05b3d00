#!/usr/bin/env python3
"""Regenerates traceql.cases and traceql_metrics.cases from a Tempo git dir.

usage: extract-traceql.py TEMPO_GIT_DIR [OUT_DIR]

Sources (read with `git show HEAD:path`, nothing is checked out):
  pkg/traceql/test_examples.yaml  valid -> valid; parse_fails, validate_fails,
                                  unsupported -> invalid (Tempo refuses them);
                                  dump is a debugging list without verdicts: skipped
  pkg/traceql/parse_test.go       the `in:` strings of each test table, expanded
                                  with the wrappers the test itself applies
                                  (TEMPLATES below); an entry with a non-nil
                                  `err:` or `shouldError: true` -> invalid; a
                                  `[]string` table takes its loop's verdict
                                  (require.Error -> invalid)
  pkg/traceql/lexer_test.go       token tables; none of its inputs is a whole
                                  query, so it adds no case (listed for the record)
  docs/sources/tempo/traceql/*.md fenced code blocks (```traceql and the bare
                                  ``` blocks holding TraceQL) -> valid
  docs/sources/tempo/metrics-from-traces/metrics-queries/*.md
                                  ```traceql blocks, and the lines of other blocks
                                  and backticked table examples that start like a
                                  metrics query -> valid
A query using a metrics function goes to traceql_metrics.cases instead.

parse_test.go checks Parse() only; /api/search also runs Tempo's validate(),
which refuses some queries that parse. tempo_validate_refuses applies those rules
(tempo_validate_refuses, after Tempo's ast_validate.go); such cases become invalid.
"""
import ast
import re
import subprocess
import sys

METRICS = re.compile(r'\b(rate|count_over_time|min_over_time|max_over_time|avg_over_time|'
                     r'sum_over_time|quantile_over_time|histogram_over_time|compare|topk|'
                     r'bottomk)\s*\(')

# Wrappers parse_test.go applies to tc.in before Parse(); default: tc.in as is.
TEMPLATES = {
    'TestAttributes': ['{ %s }', '{%s}', '{ (%s) }', '{ %s + %s }'],
    'TestIntrinsics': ['{ %s }', '{ .%s}', '{ span.%s}', '{ resource.%s}', '{ parent.%s}',
                       '{ parent.%s.foo }', '{ parent.resource.%s}', '{ parent.span.%s}'],
    'TestScopedIntrinsics': ['{ %s}'],
}
# Tables that are not TraceQL queries at all (ParseIdentifier takes one name).
SKIP_TESTS = {'TestParseIdentifier', 'TestParseIdentifierErrors'}

# parse_test.go shows only that Parse() succeeds; /api/search also runs
# Tempo's validate() (pkg/traceql/ast_validate.go), which refuses some of
# those. tempo_validate_refuses() applies the rules of validate() that such
# cases meet and returns the reason, or None.
ATTR = re.compile(r'(?:\.|span\.|resource\.|event\.|link\.|instrumentation\.)'
                  r'(?:"(?:[^"\\]|\\.)*"|[^\s{}()=~!<>&|^,+*/%"-][^\s{}()=~!<>&|^,]*)'
                  r'(?:\.(?:"(?:[^"\\]|\\.)*"|[^\s{}()=~!<>&|^,."][^\s{}()=~!<>&|^,]*))*')
TOKEN = re.compile(r'\s+|"(?:[^"\\]|\\.)*"|`[^`]*`|[0-9.][0-9.a-zµ]*|[A-Za-z_][\w]*:[A-Za-z]+|'
                   r'&&|\|\||=~|!~|!=|<=|>=|[=<>!]|[-+*/%^()]|[A-Za-z_]\w*')
BOOLEAN_OPS = {'&&', '||', '=~', '!~', '!=', '<=', '>=', '=', '<', '>', '!'}


def filter_bodies(q):
    """The text inside each { } of q, strings skipped."""
    out, depth, start, i = [], 0, 0, 0
    while i < len(q):
        c = q[i]
        if c in '"`':
            j = i + 1
            while j < len(q) and q[j] != c:
                j += 2 if (c == '"' and q[j] == '\\') else 1
            i = j + 1
            continue
        if c == '{':
            depth += 1
            start = i + 1
        elif c == '}' and depth > 0:
            depth -= 1
            out.append(q[start:i])
        i += 1
    return out


def operands(body):
    """Tokens of a field expression: ('attr', text) / ('op', text) / ('other', text)."""
    toks, i = [], 0
    while i < len(body):
        m = ATTR.match(body, i)
        if m and (i == 0 or not body[i - 1].isalnum()) and not re.match(r'\.\d', body[i:]):
            toks.append(('attr', m.group(0)))
            i = m.end()
            continue
        m = TOKEN.match(body, i)
        if not m:
            return None
        t = m.group(0)
        i = m.end()
        if t.strip():
            toks.append(('op' if t in BOOLEAN_OPS or t in '-+*/%^()' else 'other', t))
    return toks


def tempo_validate_refuses(q):
    for rx, why in PARENT_RULES:
        if rx.search(q):
            return why
    for body in filter_bodies(q):
        toks = operands(body)
        if not toks:
            continue
        if any(k == 'op' and t in BOOLEAN_OPS for k, t in toks):
            # -(a = b): unary minus on a boolean
            if re.match(r'^\s*-\s*\(', body):
                return 'unary - on a boolean: illegal operation for the given type'
            # =~ / !~ need a static string on the right
            for a, b in zip(toks, toks[1:]):
                if a[1] in ('=~', '!~') and not (b[0] == 'other' and b[1][0] in '"`'):
                    return 'regex operand not a static string: invalid type for =~ or !~'
            continue
        # arithmetic (or a single value): its type is the first operand's
        # that is not an attribute; only attribute or boolean may filter
        vals = [t for k, t in toks if k != 'op']
        if any(k == 'other' and t not in ('true', 'false') for k, t in toks if k != 'op'):
            return 'span filter field expressions must resolve to a boolean'
        del vals
    m = re.search(r'\b(sum|avg|min|max)\(\s*(true|false|"[^"]*"|`[^`]*`)\s*\)', q)
    if m:
        return 'aggregate field expressions must resolve to a number type'
    if METRICS.search(q):
        return None
    if re.match(r'^\(\{[^|]*\|\s*\w+\([^)]*\)\)\s*(=|!=|<=|>=|<|>)', q):
        return 'scalar filter lhs of type pipeline: unsupported'
    for m in re.finditer(r'\b(sum|avg|min|max)\(', q):
        arg = balanced(q, m.end() - 1)
        if arg is not None and not references_span(arg):
            return 'aggregate field expressions must reference the span'
    for stage in top_level_split(q, '|'):
        cmp = re.search(r'(?<![=!<>])(=|!=|<=|>=|<|>)(?![=~])', stage)
        if not cmp or not AGG.search(stage) or stage.lstrip()[:1] in '{(':
            continue
        lhs, rhs = stage[:cmp.start()], stage[cmp.end():]
        m = AGG.match(lhs.strip())
        if not m or balanced(lhs.strip(), m.end() - 1) is None or \
                len(balanced(lhs.strip(), m.end() - 1)) + m.end() + 1 != len(lhs.strip()):
            return 'scalar filter lhs of type (%v): unsupported'
        if AGG.search(rhs):
            return 'scalar filter rhs of type (%v): unsupported'
    return None


AGG = re.compile(r'\b(count|sum|avg|min|max)\(')
INTRINSICS = re.compile(r'(?<![\w.])(duration|name|status|statusMessage|kind|traceDuration|'
                        r'rootName|rootServiceName|nestedSetLeft|nestedSetRight|nestedSetParent|'
                        r'(span|trace|event|link|instrumentation):\w+)(?![\w.])')


def balanced(q, open_at):
    """The text between q[open_at] == '(' and its closing parenthesis."""
    depth = 0
    for i in range(open_at, len(q)):
        depth += {'(': 1, ')': -1}.get(q[i], 0)
        if depth == 0:
            return q[open_at + 1:i]
    return None


def references_span(expr):
    toks = operands(expr) or []
    return any(k == 'attr' for k, _ in toks) or bool(INTRINSICS.search(expr))


def top_level_split(q, sep):
    parts, depth, cur = [], 0, ''
    for c in q:
        depth += {'(': 1, '{': 1, ')': -1, '}': -1}.get(c, 0)
        if c == sep and depth == 0:
            parts.append(cur)
            cur = ''
        else:
            cur += c
    return parts + [cur]


PARENT_RULES = [
    # Attribute.validate: a.Parent -> "parent not yet supported"
    (re.compile(r'(^|[\s{(!+\-*/%^=<>&|,])parent\.'), 'parent. attributes: unsupported'),
    # Attribute.validate: IntrinsicParent -> unsupported
    (re.compile(r'(^|[\s{(!+\-*/%^=<>&|,])parent(?![\w.:])'), 'parent intrinsic: unsupported'),
]

# Cases left out on purpose, with the reason.
DROP = {
    # Parse("") fails, but /api/search reads an empty q as "no query" and
    # lists every trace (FACTS.md D.3, Tempo's search handler).
    '': 'empty q is a search without a query',
}


def git_show(repo, path):
    return subprocess.run(['git', '-C', repo, 'show', 'HEAD:' + path], check=True,
                          capture_output=True).stdout.decode('utf-8')


def esc(q):
    return q.replace('\\', '\\\\').replace('\t', '\\t').replace('\n', '\\n').replace('\r', '\\r')


class Out:
    def __init__(self):
        self.search, self.metrics, self.seen = [], [], set()

    def add(self, verdict, source, q, note=None):
        # First source wins: test_examples.yaml is read first, and its
        # validate_fails/unsupported verdicts are what /api/search does with a
        # query that parse_test.go only shows to parse.
        if q in self.seen:
            return
        self.seen.add(q)
        if q in DROP:
            return
        if verdict == 'valid' and note == 'parse-only':
            why = tempo_validate_refuses(q)
            if why is not None:
                verdict = 'invalid'
        line = '%s\t%s\t%s' % (verdict, source, esc(q))
        (self.metrics if METRICS.search(q) else self.search).append(line)


def from_yaml(repo, rev, out):
    import yaml
    path = 'pkg/traceql/test_examples.yaml'
    root = yaml.compose(git_show(repo, path))
    for key, val in root.value:
        sect = key.value
        if sect == 'dump':
            continue
        verdict = 'valid' if sect == 'valid' else 'invalid'
        for item in val.value:
            out.add(verdict, 'tempo@%s:%s:%d' % (rev, path, item.start_mark.line + 1), item.value,
                    note=sect if verdict == 'invalid' else None)


GOSTR = r'("(?:[^"\\\n]|\\.)*"|`[^`]*`)'


def go_unquote(s):
    if s[0] == '`':
        return s[1:-1]
    return ast.literal_eval(s)


def from_parse_test(repo, rev, out):
    path = 'pkg/traceql/parse_test.go'
    src = git_show(repo, path)
    lines = src.split('\n')
    funcs = [(m.start(), m.group(1)) for m in re.finditer(r'^func (\w+)\(', src, re.M)]
    funcs.append((len(src), None))
    for (start, name), (end, _) in zip(funcs, funcs[1:]):
        if name in SKIP_TESTS:
            continue
        body = src[start:end]
        ins = list(re.finditer(r'\b(?:in|query):\s*' + GOSTR, body))
        for i, m in enumerate(ins):
            rest = body[m.end():ins[i + 1].start() if i + 1 < len(ins) else len(body)]
            entry_end = re.search(r'\n\t\t\},?\n|\},\s*\n', rest)
            entry = rest[:entry_end.end()] if entry_end else rest
            bad = re.search(r'\berr:\s*(?!nil\b)\S', entry) or 'shouldError: true' in entry
            q = go_unquote(m.group(1))
            lineno = src.count('\n', 0, start + m.start()) + 1
            source = 'tempo@%s:%s:%d' % (rev, path, lineno)
            verdict = 'invalid' if bad else 'valid'
            forms = [t.replace('%s', q) for t in TEMPLATES.get(name, ['%s'])]
            if 'alsoTestWithoutSpace: true' in entry:
                forms.append(q.replace(' ', ''))
            for f in forms:
                out.add(verdict, source, f, note='parse-only')
        # a table of bare strings: each is a whole query, its verdict the
        # loop's require.Error / require.NoError
        m = re.search(r'tests := \[\]string\{(.*?)\n\t\}', body, re.S)
        if m:
            verdict = 'invalid' if 'require.Error(t, err)' in body else 'valid'
            table = re.sub(r'//[^\n]*', lambda c: ' ' * len(c.group(0)), m.group(1))
            for lit in re.finditer(GOSTR, table):
                lineno = src.count('\n', 0, start + m.start(1) + lit.start()) + 1
                out.add(verdict, 'tempo@%s:%s:%d' % (rev, path, lineno), go_unquote(lit.group(1)),
                        note='parse-only' if verdict == 'valid' else None)
        if name == 'TestReallyLongQuery':
            lineno = src.count('\n', 0, start) + 1
            source = 'tempo@%s:%s:%d' % (rev, path, lineno)
            out.add('valid', source, '{ .a = `%s` }' % ('a' * 1000), note='parse-only')
            out.add('valid', source, '{ .%s = `foo` }' % ('a' * 1000), note='parse-only')
    del lines


QSTART = re.compile(r'^\s*(\{|\(|[0-9]|count\(|avg\(|min\(|max\(|sum\(|by\(|select\()')


def split_block(text):
    """A fenced block holds one query or several, one starting on each line
    that begins a query while the text so far is balanced."""
    qs, cur, depth = [], [], 0
    for ln in text.split('\n'):
        if not ln.strip() or ln.strip().startswith('//') or ln.strip().startswith('#'):
            continue
        if cur and depth == 0 and QSTART.match(ln):
            qs.append('\n'.join(cur))
            cur = []
        cur.append(ln)
        for c in re.sub(r'"(?:[^"\\]|\\.)*"|`[^`]*`', '', ln):
            depth += c in '{(' and 1 or (c in '})' and -1 or 0)
    if cur:
        qs.append('\n'.join(cur))
    return [q.strip() for q in qs]


# Docs folders: (folder, also bare ``` blocks that start like a query?)
DOCS = [('docs/sources/tempo/traceql/', True),
        ('docs/sources/tempo/metrics-from-traces/metrics-queries/', False)]


def from_docs(repo, rev, out):
    for folder, bare in DOCS:
        from_docs_folder(repo, rev, out, folder, bare)


def from_docs_folder(repo, rev, out, folder, bare):
    names = subprocess.run(['git', '-C', repo, 'ls-tree', '-r', '--name-only', 'HEAD', folder],
                           check=True, capture_output=True).stdout.decode().split('\n')
    for path in sorted(n for n in names if n.endswith('.md')):
        lines = git_show(repo, path).split('\n')
        i = 0
        while i < len(lines):
            m = re.match(r'^\s*```(\w*)\s*$', lines[i])
            if not m:
                i += 1
                continue
            lang, start = m.group(1), i + 1
            j = start
            while j < len(lines) and not re.match(r'^\s*```\s*$', lines[j]):
                j += 1
            block = '\n'.join(lines[start:j])
            i = j + 1
            if lang != 'traceql' and (lang != '' or not bare):
                continue
            if lang == '' and not QSTART.match(block.lstrip('\n')):
                continue
            for q in split_block(block):
                off = next(k for k in range(start, j) if lines[k].strip()
                           and q.split('\n')[0].strip() == lines[k].strip())
                out.add('valid', 'tempo@%s:%s:%d' % (rev, path, off + 1), q)


# Metrics examples outside ```traceql blocks: lines of untagged blocks, and
# backticked examples in tables, that start like a query and name a metrics
# function (the metrics docs write many of them so).
METRICS_DOCS = 'docs/sources/tempo/metrics-from-traces/metrics-queries/'


def from_metrics_examples(repo, rev, out):
    names = subprocess.run(['git', '-C', repo, 'ls-tree', '-r', '--name-only', 'HEAD',
                            METRICS_DOCS], check=True, capture_output=True).stdout.decode()
    for path in sorted(n for n in names.split('\n') if n.endswith('.md')):
        fence = False
        for no, line in enumerate(git_show(repo, path).split('\n'), 1):
            if line.strip().startswith('```'):
                fence = not fence
                continue
            if fence:
                cands = [line.strip()]
            elif line.startswith('|'):
                cands = [c.replace('\\|', '|') for c in re.findall(r'`([^`]+)`', line)]
            else:
                cands = []
            for q in cands:
                if not q or q[0] not in '{(0123456789' or not METRICS.search(q):
                    continue
                if q.startswith('{') and '|' not in q:
                    continue
                out.add('valid', 'tempo@%s:%s:%d' % (rev, path, no), q)


def main():
    repo = sys.argv[1]
    outdir = sys.argv[2] if len(sys.argv) > 2 else '.'
    full = subprocess.run(['git', '-C', repo, 'rev-parse', 'HEAD'], check=True,
                          capture_output=True).stdout.decode().strip()
    rev = full[:7]
    out = Out()
    from_yaml(repo, rev, out)
    from_parse_test(repo, rev, out)
    from_docs(repo, rev, out)
    from_metrics_examples(repo, rev, out)
    for fname, rows, what in (('traceql.cases', out.search, 'TraceQL search queries (/api/search)'),
                              ('traceql_metrics.cases', out.metrics,
                               'TraceQL metrics queries (/api/metrics/query_range)')):
        with open('%s/%s' % (outdir, fname), 'w', encoding='utf-8') as f:
            f.write('# %s from grafana/tempo@%s\n' % (what, full))
            f.write('# made by tests/conformance/extract-traceql.py (see its docstring for the\n'
                    '# sources and verdict rules); <verdict>\\t<source>\\t<query>, the query with\n'
                    '# \\\\, \\t, \\n and \\r escaped. Regenerate, do not edit by hand:\n'
                    '#   python3 tests/conformance/extract-traceql.py TEMPO_GIT_DIR tests/conformance\n')
            for r in rows:
                f.write(r + '\n')
        print('%s: %d cases (%d valid, %d invalid)' % (fname, len(rows),
              sum(r.startswith('valid') for r in rows), sum(r.startswith('invalid') for r in rows)))


if __name__ == '__main__':
    main()
