#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
# Prints one row per (run file, case) with the result in each guest:
#   vmlane/experiments/userns/summarize.py [RESULTS_DIR]
# (RESULTS_DIR: results/, laid out RUN/CELL/FILE.txt as the doc says.)
import os, re, sys

root = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), "results")
cols = [(r, c) for r in ("default", "clone0", "max0") for c in ("bookworm", "trixie")
        if os.path.isdir(os.path.join(root, r, c))]
rows, seen = {}, []
for r, c in cols:
    d = os.path.join(root, r, c)
    for f in sorted(os.listdir(d)):
        if not f.endswith(".txt") or f in ("facts.txt", "install.txt"):
            continue
        for line in open(os.path.join(d, f)):
            m = re.match(r"^(\d[\w.+/-]*) (\S+)", line)
            if not m or m.group(1).endswith("whoami"):
                continue
            key = (f[:-4], m.group(1))
            if key not in rows:
                rows[key] = {}
                seen.append(key)
            rows[key][(r, c)] = m.group(2)
print("| run | case | " + " | ".join(f"{r} {c}" for r, c in cols) + " |")
print("| --- | --- |" + " --- |" * len(cols))
for k in seen:
    print(f"| {k[0]} | {k[1]} | " + " | ".join(rows[k].get(col, "-") for col in cols) + " |")
