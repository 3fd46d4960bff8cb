#!/usr/bin/env python3
"""Stall samples of one kernel by stretch between block barriers, from Nsight Compute's SASS
source page (ncu --import R --page source --csv --print-source sass > F.csv).

Each stretch ends at a BAR.SYNC (or EXIT); for each stretch over 0.5% of the samples it prints
its share, its top stall reasons and its most executed opcodes, which is how docs/NOTES.md
attributes a kernel's time to its steps.
    python3 scripts/ncu_regions.py F.csv
    python3 scripts/ncu_regions.py --roles F.csv
--top N: the N instructions with the most samples instead, each with its top stall reasons and
how often it issued (where a step's time sits, instruction by instruction).
    python3 scripts/ncu_regions.py --top 30 F.csv
--roles: a warp-specialised kernel's roles instead, its code cut at each unconditional EXIT
(each role's code ends in one): each part's share of the samples and top stalls, then the waits
at its block barriers. A warp waiting at a BAR.SYNC is sampled at the instruction after it (the
bar.sync has issued; with DEFER_BLOCKING it may issue a few independent instructions first),
so each barrier's wait is the barrier samples up to the next BAR.SYNC: the ids in the SASS
(named_barrier's, a register or a constant) tell which hand-off it is.
"""
import collections
import csv
import sys


def read(path):
    """The page's instruction rows, its column index by name, the samples column, the stall
    reasons' columns and the samples in all."""
    rows = list(csv.reader(open(path)))
    header, data = rows[1], rows[2:]
    col = {h: i for i, h in enumerate(header)}
    samples_col = col["Warp Stall Sampling (All Samples)"]
    stalls = [h for h in header if h.startswith("stall_") and "Not Issued" not in h]
    total = sum(int(r[samples_col] or 0) for r in data)
    print("samples", total, "instructions", len(data))
    return data, col, samples_col, stalls, total


def main(path):
    data, col, samples_col, stalls, total = read(path)

    def stretch(start):
        return {"start": start, "samples": 0, "n": 0, "ops": collections.Counter(), "stalls": collections.Counter()}

    stretches, cur = [], stretch(data[0][col["Address"]])
    for r in data:
        src = r[col["Source"]].strip()
        words = src.split()
        op = (words[1] if words and words[0].startswith("@") and len(words) > 1 else words[0] if words else "")
        cur["samples"] += int(r[samples_col] or 0)
        cur["n"] += 1
        cur["ops"][op.split(".")[0]] += int(r[col["Instructions Executed"]] or 0)
        for s in stalls:
            cur["stalls"][s] += int(r[col[s]] or 0)
        if "BAR.SYNC" in src or src.startswith("EXIT"):
            cur["end"] = r[col["Address"]]
            stretches.append(cur)
            cur = stretch(r[col["Address"]])
    cur["end"] = "end"
    stretches.append(cur)
    for i, s in enumerate(stretches):
        if s["samples"] < 0.005 * total:
            continue
        top = ", ".join("%s %d" % (k.replace("stall_", ""), v) for k, v in s["stalls"].most_common(4))
        ops = ", ".join("%s %d" % (k, v) for k, v in s["ops"].most_common(6))
        print("%2d %s-%s %5.1f%% n=%d | %s | %s" % (i, s["start"], s["end"], 100.0 * s["samples"] / total, s["n"], top, ops))


def roles(path):
    data, col, samples_col, stalls, total = read(path)
    base = int(data[0][col["Address"]], 16)
    parts, cur = [], []
    for r in data:
        cur.append(r)
        if r[col["Source"]].strip().startswith("EXIT"):
            parts.append(cur)
            cur = []
    if cur:
        parts.append(cur)
    for part in parts:
        n = sum(int(r[samples_col] or 0) for r in part)
        if n < 0.01 * total:
            continue
        st = collections.Counter()
        for r in part:
            for s in stalls:
                st[s] += int(r[col[s]] or 0)
        top = ", ".join("%s %d" % (k.replace("stall_", ""), v) for k, v in st.most_common(5))
        first, last = int(part[0][col["Address"]], 16) - base, int(part[-1][col["Address"]], 16) - base
        print("part %05x-%05x %5.1f%% | %s" % (first, last, 100.0 * n / total, top))
        waits, barrier = collections.Counter(), None  # barrier samples by the last BAR.SYNC before them
        for r in part:
            if barrier is not None:
                waits[barrier] += int(r[col["stall_barrier"]] or 0)
            if "BAR.SYNC" in r[col["Source"]]:
                barrier = (int(r[col["Address"]], 16) - base, r[col["Source"]].strip())
        for (address, src), wait in sorted(waits.items()):
            if wait >= 0.002 * total:
                print("  wait %5.1f%% at %05x %s" % (100.0 * wait / total, address, src))


def top(path, count):
    data, col, samples_col, stalls, total = read(path)
    base = int(data[0][col["Address"]], 16)
    ranked = sorted(data, key=lambda r: -int(r[samples_col] or 0))[:count]
    for r in ranked:
        n = int(r[samples_col] or 0)
        st = collections.Counter({s: int(r[col[s]] or 0) for s in stalls})
        reasons = ", ".join("%s %d" % (k.replace("stall_", ""), v) for k, v in st.most_common(3) if v)
        print("%05x %5.2f%% x%-6s %-48s | %s" % (int(r[col["Address"]], 16) - base, 100.0 * n / total,
                                             r[col["Instructions Executed"]], r[col["Source"]].strip()[:48], reasons))


if __name__ == "__main__":
    if sys.argv[1] == "--roles":
        roles(sys.argv[2])
    elif sys.argv[1] == "--top":
        top(sys.argv[3], int(sys.argv[2]))
    else:
        main(sys.argv[1])
