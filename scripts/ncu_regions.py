#!/usr/bin/env python3
"""Stall samples of one kernel by stretch between block barriers, from Nsight Compute's SASS
source page (ncu --import R --page source --csv --print-source sass > F.csv).

Each stretch ends at a BAR.SYNC (or EXIT); for each stretch over 0.5% of the samples it prints
its share, its top stall reasons and its most executed opcodes, which is how docs/NOTES.md
attributes a kernel's time to its steps.
    python3 scripts/ncu_regions.py F.csv
"""
import collections
import csv
import sys


def main(path):
    rows = list(csv.reader(open(path)))
    header = rows[1]
    data = rows[2:]
    col = {h: i for i, h in enumerate(header)}
    samples_col = col["Warp Stall Sampling (All Samples)"]
    stalls = [h for h in header if h.startswith("stall_") and "Not Issued" not in h]
    total = sum(int(r[samples_col] or 0) for r in data)
    print("samples", total, "instructions", len(data))

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


if __name__ == "__main__":
    main(sys.argv[1])
