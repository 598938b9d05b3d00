#!/usr/bin/env python3
"""Regenerate tests/conformance/logql.cases from a Loki git mirror.

usage: extract-logql.py LOKI_GIT_DIR > tests/conformance/logql.cases

Sources: pkg/logql/syntax/parser_test.go and ast_test.go (Go test tables,
read with a small Go tokenizer; a table element with a non-nil `err:` is an
invalid case) and every ```logql block of docs/sources/query/**/*.md (valid).
Which test function holds which kind of table is listed in RULES below; a
function not listed is not read (lexer tests, serialization and benchmark
code hold token streams or fragments, not whole queries with a verdict).
"""
import re
import subprocess
import sys

LOKI_REPO = "loki"


def git(gitdir, *args):
    return subprocess.run(["git", "-C", gitdir, *args], check=True,
                          capture_output=True, text=True).stdout


# --- a small Go tokenizer ---------------------------------------------------

GO_ESC = {"a": "\a", "b": "\b", "f": "\f", "n": "\n", "r": "\r", "t": "\t",
          "v": "\v", "\\": "\\", "'": "'", '"': '"'}


def go_unquote(body):
    out, i = [], 0
    raw = bytearray()

    def flush():
        if raw:
            out.append(raw.decode("utf-8", "surrogateescape"))
            raw.clear()
    while i < len(body):
        c = body[i]
        if c != "\\":
            flush()
            out.append(c)
            i += 1
            continue
        e = body[i + 1]
        if e in GO_ESC:
            flush()
            out.append(GO_ESC[e])
            i += 2
        elif e == "x":
            raw.append(int(body[i + 2:i + 4], 16))
            i += 4
        elif e in "01234567":
            raw.append(int(body[i + 1:i + 4], 8))
            i += 4
        elif e == "u":
            flush()
            out.append(chr(int(body[i + 2:i + 6], 16)))
            i += 6
        elif e == "U":
            flush()
            out.append(chr(int(body[i + 2:i + 10], 16)))
            i += 10
        else:
            raise ValueError("bad escape \\" + e)
    flush()
    return "".join(out)


def tokenize(src):
    """Yields (kind, value, line): kind in STR, ID, NUM, P (punctuation)."""
    i, line, n = 0, 1, len(src)
    toks = []
    while i < n:
        c = src[i]
        if c == "\n":
            line += 1
            i += 1
        elif c.isspace():
            i += 1
        elif src.startswith("//", i):
            while i < n and src[i] != "\n":
                i += 1
        elif src.startswith("/*", i):
            j = src.index("*/", i + 2)
            line += src.count("\n", i, j)
            i = j + 2
        elif c == "`":
            j = src.index("`", i + 1)
            toks.append(("STR", src[i + 1:j].replace("\r", ""), line))
            line += src.count("\n", i, j)
            i = j + 1
        elif c == '"':
            j = i + 1
            while src[j] != '"':
                j += 2 if src[j] == "\\" else 1
            toks.append(("STR", go_unquote(src[i + 1:j]), line))
            i = j + 1
        elif c == "'":
            j = i + 1
            while src[j] != "'":
                j += 2 if src[j] == "\\" else 1
            toks.append(("RUNE", src[i + 1:j], line))
            i = j + 1
        elif c.isalpha() or c == "_":
            j = i
            while j < n and (src[j].isalnum() or src[j] == "_"):
                j += 1
            toks.append(("ID", src[i:j], line))
            i = j
        elif c.isdigit():
            j = i
            while j < n and (src[j].isalnum() or src[j] in "._"):
                j += 1
            toks.append(("NUM", src[i:j], line))
            i = j
        else:
            two = src[i:i + 2]
            if two in (":=", "==", "!=", "&&", "||", "<-", "++", "--", "+=", "<=", ">="):
                toks.append(("P", two, line))
                i += 2
            else:
                toks.append(("P", c, line))
                i += 1
    return toks


def str_expr(toks, k):
    """A string expression at k: STR ('+' STR)*.  Returns (text, next) or None
    when what follows is not a literal (a call, a variable)."""
    if toks[k][0] != "STR":
        return None
    s, k = toks[k][1], k + 1
    while toks[k] == ("P", "+", toks[k][2]) and toks[k + 1][0] == "STR":
        s += toks[k + 1][1]
        k += 2
    if toks[k][0] == "P" and toks[k][1] in (",", "}", ")", "\n", ";") or toks[k][0] == "ID":
        return s, k
    return None


def decls(toks):
    """Top-level func/var declarations: name -> (start, end) token indexes."""
    out, depth, k = {}, 0, 0
    cur = None
    while k < len(toks):
        kind, v, _ = toks[k]
        if depth == 0 and kind == "ID" and v in ("func", "var") and k + 1 < len(toks):
            if cur:
                out[cur[0]] = (cur[1], k)
            cur = (toks[k + 1][1], k)
        if kind == "P" and v in "{([":
            depth += 1
        elif kind == "P" and v in "})]":
            depth -= 1
        k += 1
    if cur:
        out[cur[0]] = (cur[1], len(toks))
    return out


def elements(toks, a, b):
    """Innermost-or-not composite elements: yields (start, end) of every
    brace pair in [a, b)."""
    stack = []
    for k in range(a, b):
        if toks[k] [0] == "P" and toks[k][1] == "{":
            stack.append(k)
        elif toks[k][0] == "P" and toks[k][1] == "}" and stack:
            yield stack.pop(), k


def keyed(toks, a, b, keys, errkey):
    """Elements whose direct children include `key: "..."`: one case each;
    invalid when the same element has `errkey: <not nil>`."""
    for s, e in elements(toks, a, b):
        depth, found, err = 0, None, False
        for k in range(s + 1, e):
            kind, v, _ = toks[k]
            if kind == "P" and v in "{([":
                depth += 1
            elif kind == "P" and v in "})]":
                depth -= 1
            elif depth == 0 and kind == "ID" and toks[k + 1][1] == ":" and toks[k - 1][1] in ("{", ","):
                if v in keys:
                    r = str_expr(toks, k + 2)
                    if r is not None:
                        found = (r[0], toks[k + 2][2])
                elif errkey and v == errkey and toks[k + 2][1] != "nil":
                    err = True
        if found:
            yield found[0], found[1], not err


def first_positional(toks, a, b, verdict):
    """Elements that start with a string literal: `{ "query", ... }`."""
    for s, e in elements(toks, a, b):
        r = str_expr(toks, s + 1)
        if r is not None and toks[s - 1][1] in (",", "{") and looks_like_query(r[0]):
            yield r[0], toks[s + 1][2], verdict


def string_list(toks, a, b, verdict):
    """Every string expression directly inside a []string{...} literal (and
    map keys of a map[string]bool literal)."""
    for k in range(a, b - 2):
        if toks[k][1] == "string" and toks[k + 1][1] in ("{", "]"):
            depth, j = 0, k + 1
            if toks[j][1] == "]":  # map[string]bool{
                j += 2
            start = j
            while j < b:
                if toks[j][1] == "{":
                    depth += 1
                elif toks[j][1] == "}":
                    depth -= 1
                    if depth == 0:
                        break
                elif depth == 1 and toks[j][0] == "STR" and toks[j - 1][1] in ("{", ","):
                    r = str_expr(toks, j)
                    if r is not None:
                        yield r[0], toks[j][2], verdict
                j += 1
            del start


def assigned(toks, a, b, names, verdict):
    for k in range(a, b - 2):
        if toks[k][0] == "ID" and toks[k][1] in names and toks[k + 1][1] in (":=", "="):
            r = str_expr(toks, k + 2)
            if r is not None:
                yield r[0], toks[k + 2][2], verdict


def looks_like_query(s):
    return bool(s.strip()) and (s.lstrip()[0] in "{(" or re.match(r"\s*[a-z_]+\s*(\(|by|without)", s) is not None)


RULES = {
    "pkg/logql/syntax/parser_test.go": {
        "ParseTestCases": [("keyed", {"in"}, "err")],
        "TestParseSampleExpr_equalityMatcher": [("keyed", {"in"}, "err")],
        "TestParseLogSelectorExpr_equalityMatcher": [("keyed", {"in"}, "err")],
        "TestParseUnreservedWordsAsLabelNames": [("list", True)],
        "TestParseSampleExpr_String": [("assign", {"query"}, True)],
        "Test_PipelineCombined": [("assign", {"query"}, True)],
    },
    "pkg/logql/syntax/ast_test.go": {
        "Test_logSelectorExpr_String": [("first", True)],
        "Test_SampleExpr_String": [("list", True)],
        "Test_SampleExpr_String_Fail": [("list", False)],
        "Test_SampleExpr_Sort_Fail": [("list", False)],
        "TestMatcherGroups": [("keyed", {"query"}, None)],
        "Test_NilFilterDoesntPanic": [("list", True)],
        "Test_FilterMatcher": [("first", True)],
        "TestStringer": [("keyed", {"in"}, None)],
        "TestFilterReordering": [("assign", {"logExpr"}, True)],
        "TestParseLargeQuery": [("assign", {"line"}, True)],
        "TestLogSelectorExprHasFilter": [("list", True)],
    },
}


def go_cases(gitdir, commit, path):
    toks = tokenize(git(gitdir, "show", f"{commit}:{path}"))
    d = decls(toks)
    for fn, rules in RULES[path].items():
        a, b = d[fn]
        for rule in rules:
            if rule[0] == "keyed":
                it = keyed(toks, a, b, rule[1], rule[2])
            elif rule[0] == "first":
                it = first_positional(toks, a, b, rule[1])
            elif rule[0] == "list":
                it = string_list(toks, a, b, rule[1])
            else:
                it = assigned(toks, a, b, rule[1], rule[2])
            for q, line, ok in it:
                yield q, f"{path}:{line}", ok


def doc_cases(gitdir, commit):
    files = git(gitdir, "ls-tree", "-r", "--name-only", commit, "docs/sources/query/").split()
    for path in files:
        if not path.endswith(".md"):
            continue
        text = git(gitdir, "show", f"{commit}:{path}")
        lines = text.split("\n")
        k = 0
        while k < len(lines):
            m = re.match(r"^(\s*)```logql\s*$", lines[k])
            if not m:
                k += 1
                continue
            start, body = k + 1, []
            k += 1
            cut = False
            while k < len(lines) and not re.match(r"^\s*```\s*$", lines[k]):
                if re.match(r"^\s*=>\s*$", lines[k]):
                    cut = True  # the docs show the result after a "=>" line
                if cut:
                    k += 1
                    continue
                body.append(lines[k][len(m.group(1)):] if lines[k].startswith(m.group(1)) else lines[k].lstrip())
                k += 1
            q = "\n".join(body).strip()
            if q:
                yield q, f"{path}:{start}", True
            k += 1


def escape(q):
    return q.replace("\\", "\\\\").replace("\t", "\\t").replace("\n", "\\n")


def main():
    sys.stdout.reconfigure(errors="surrogateescape")
    gitdir = sys.argv[1]
    commit = git(gitdir, "rev-parse", "HEAD").strip()
    short = commit[:7]
    print(f"# LogQL conformance cases from grafana/loki@{commit}")
    print("# made by tests/conformance/extract-logql.py (Go test tables of pkg/logql/syntax/parser_test.go")
    print("# and ast_test.go: a non-nil err => invalid; every ```logql block of docs/sources/query => valid)")
    print("# then the manual verdicts of tests/conformance/logql.overrides (one `verdict<TAB>source` a line).")
    print("# fields: verdict<TAB>source<TAB>query (\\\\ \\t \\n escaped)")
    overrides = {}
    try:
        with open(__file__.rsplit("/", 1)[0] + "/logql.overrides") as f:
            for ln in f:
                if ln.strip() and not ln.startswith("#"):
                    v, src = ln.rstrip("\n").split("\t")[:2]
                    overrides[src] = v
    except FileNotFoundError:
        pass
    seen = set()
    cases = []
    for path in RULES:
        cases.extend(go_cases(gitdir, commit, path))
    cases.extend(doc_cases(gitdir, commit))
    for q, src, ok in cases:
        key = (q, ok)
        if key in seen:
            continue
        seen.add(key)
        full = f"{LOKI_REPO}@{short}:{src}"
        v = overrides.get(full, "valid" if ok else "invalid")
        if v == "skip":
            continue
        print(f"{v}\t{full}\t{escape(q)}")


if __name__ == "__main__":
    main()
