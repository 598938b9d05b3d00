#!/usr/bin/env python3
"""Writes traceql_metrics_local.cases: the TraceQL metrics queries of Tempo's
pkg/traceql/test_examples.yaml (sections valid -> valid; parse_fails,
validate_fails, unsupported -> invalid). A query counts as a metrics query
when it names a metrics function followed by "(".

usage: extract-traceql-metrics-local.py TEMPO_GIT_DIR > traceql_metrics_local.cases
"""
import re
import subprocess
import sys

PATH = "pkg/traceql/test_examples.yaml"
FNS = re.compile(r"\b(rate|count_over_time|min_over_time|max_over_time|avg_over_time|"
                 r"sum_over_time|quantile_over_time|histogram_over_time|compare|topk|bottomk)\s*\(")
VERDICT = {"valid": "valid", "parse_fails": "invalid", "validate_fails": "invalid",
           "unsupported": "invalid"}


def unquote(s):
    s = s.strip()
    if s.startswith("'"):
        end = s.rindex("'")
        return s[1:end].replace("''", "'")
    if s.startswith('"'):
        end = s.rindex('"')
        return bytes(s[1:end], "utf-8").decode("unicode_escape")
    return s.split(" #")[0].strip()


def esc(q):
    return q.replace("\\", "\\\\").replace("\t", "\\t").replace("\n", "\\n")


def main():
    git = sys.argv[1]
    commit = subprocess.check_output(["git", "-C", git, "rev-parse", "HEAD"], text=True).strip()
    text = subprocess.check_output(["git", "-C", git, "show", "HEAD:" + PATH], text=True)
    print("# TraceQL metrics cases from grafana/tempo@%s %s" % (commit, PATH))
    print("# made by tests/conformance/extract-traceql-metrics-local.py (sections valid,")
    print("# parse_fails, validate_fails, unsupported; metrics queries only)")
    section = None
    for no, line in enumerate(text.splitlines(), 1):
        m = re.match(r"^([a-z_]+):\s*$", line)
        if m:
            section = m.group(1)
            continue
        m = re.match(r"^\s*-\s+(.*)$", line)
        if not m or section not in VERDICT:
            continue
        q = unquote(m.group(1))
        if not FNS.search(q):
            continue
        print("%s\ttempo@%s:%s:%d\t%s" % (VERDICT[section], commit[:7], PATH, no, esc(q)))


main()
