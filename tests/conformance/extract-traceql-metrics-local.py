#!/usr/bin/env python3
"""Writes traceql_metrics_local.cases: the TraceQL metrics queries of Tempo's
pkg/traceql/test_examples.yaml (sections valid -> valid; parse_fails,
validate_fails, unsupported -> invalid) and of its metrics-queries docs
(lines of code blocks, and backticked examples in tables, that start with
"{", "(" or a digit: valid). A query counts as a metrics query when it
names a metrics function followed by "(".

usage: extract-traceql-metrics-local.py TEMPO_GIT_DIR > traceql_metrics_local.cases
"""
import re
import subprocess
import sys

YAML = "pkg/traceql/test_examples.yaml"
DOCS = ["docs/sources/tempo/metrics-from-traces/metrics-queries/_index.md",
        "docs/sources/tempo/metrics-from-traces/metrics-queries/functions.md",
        "docs/sources/tempo/metrics-from-traces/metrics-queries/sampling-guide.md"]
FNS = re.compile(r"\b(rate|count_over_time|min_over_time|max_over_time|avg_over_time|"
                 r"sum_over_time|quantile_over_time|histogram_over_time|compare|topk|bottomk)\s*\(")
VERDICT = {"valid": "valid", "parse_fails": "invalid", "validate_fails": "invalid",
           "unsupported": "invalid"}


def unquote(s):
    s = s.strip()
    if s.startswith("'"):
        return s[1:s.rindex("'")].replace("''", "'")
    if s.startswith('"'):
        return bytes(s[1:s.rindex('"')], "utf-8").decode("unicode_escape")
    return s.split(" #")[0].strip()


def esc(q):
    return q.replace("\\", "\\\\").replace("\t", "\\t").replace("\n", "\\n")


def show(git, path):
    return subprocess.check_output(["git", "-C", git, "show", "HEAD:" + path], text=True)


def from_yaml(git, commit, seen):
    section = None
    for no, line in enumerate(show(git, YAML).splitlines(), 1):
        m = re.match(r"^([a-z_]+):\s*$", line)
        if m:
            section = m.group(1)
            continue
        m = re.match(r"^\s*-\s+(.*)$", line)
        if not m or section not in VERDICT:
            continue
        q = unquote(m.group(1))
        if FNS.search(q):
            seen.add(q)
            print("%s\ttempo@%s:%s:%d\t%s" % (VERDICT[section], commit[:7], YAML, no, esc(q)))


def from_docs(git, commit, seen):
    for path in DOCS:
        fence = False
        for no, line in enumerate(show(git, path).splitlines(), 1):
            if line.strip().startswith("```"):
                fence = not fence
                continue
            if fence:
                cands = [line.strip()]
            elif line.startswith("|"):
                cands = [c.replace("\\|", "|") for c in re.findall(r"`([^`]+)`", line)]
            else:
                cands = []
            for q in cands:
                if not q or q[0] not in "{(0123456789" or not FNS.search(q) or q in seen:
                    continue
                if q.startswith("{") and "|" not in q:
                    continue
                seen.add(q)
                print("valid\ttempo@%s:%s:%d\t%s" % (commit[:7], path, no, esc(q)))


def main():
    git = sys.argv[1]
    commit = subprocess.check_output(["git", "-C", git, "rev-parse", "HEAD"], text=True).strip()
    print("# TraceQL metrics cases from grafana/tempo@%s" % commit)
    print("# made by tests/conformance/extract-traceql-metrics-local.py: %s (sections valid," % YAML)
    print("# parse_fails, validate_fails, unsupported; metrics queries only) and the examples of")
    print("# docs/sources/tempo/metrics-from-traces/metrics-queries/ (valid)")
    seen = set()
    from_yaml(git, commit, seen)
    from_docs(git, commit, seen)


main()
