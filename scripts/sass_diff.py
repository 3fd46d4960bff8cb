#!/usr/bin/env python3
"""Which kernels of two builds have the same SASS: "same SASS" claims in commits and notes.

Usage: sass_diff.py LIB_A LIB_B [REGEX]
Disassembles both libraries' device code with cuobjdump (CUOBJDUMP, else on PATH, else the CUDA
toolkit's bin; the pip package nvidia-cuda-cuobjdump-cu13 carries one where the toolkit lacks it),
keeps the functions whose mangled name matches REGEX (default: all), drops addresses and encodings,
and prints one line a function: same, differs (instruction counts), or only in one build. Exit
status 0 when every compared function is the same, 1 otherwise, 2 on a usage or tool error.
"""
import os
import re
import shutil
import subprocess
import sys


def cuobjdump():
    for candidate in (os.environ.get("CUOBJDUMP"), shutil.which("cuobjdump"), "/usr/local/cuda/bin/cuobjdump"):
        if candidate and os.path.isfile(candidate) and os.access(candidate, os.X_OK):
            return candidate
    sys.exit("sass_diff.py: no cuobjdump (set CUOBJDUMP, or pip install nvidia-cuda-cuobjdump-cu13)")


def functions(tool, lib, pattern):
    """{mangled name: [instruction text, ...]} of lib's SASS (every architecture's, in order)."""
    out = subprocess.run([tool, "-sass", lib], capture_output=True, text=True)
    if out.returncode != 0:
        sys.exit(f"sass_diff.py: cuobjdump failed on {lib}: {out.stderr.strip()}")
    result, name = {}, None
    for line in out.stdout.splitlines():
        header = re.match(r"\s*Function : (\S+)", line)
        if header:
            name = header.group(1) if pattern.search(header.group(1)) else None
            if name is not None:
                result.setdefault(name, [])
            continue
        instruction = re.match(r"\s*/\*[0-9a-f]{4,}\*/\s*(.*?)\s*;", line)
        if name is not None and instruction:
            result[name].append(instruction.group(1))
    return result


def main():
    if len(sys.argv) not in (3, 4):
        print(__doc__.strip().splitlines()[2], file=sys.stderr)
        return 2
    tool = cuobjdump()
    pattern = re.compile(sys.argv[3] if len(sys.argv) == 4 else "")
    a, b = (functions(tool, lib, pattern) for lib in sys.argv[1:3])
    all_same = True
    for name in sorted(set(a) | set(b)):
        if name not in b or name not in a:
            print(f"only in {'A' if name in a else 'B'}  {name}")
            all_same = False
        elif a[name] == b[name]:
            print(f"same       {name} ({len(a[name])} instructions)")
        else:
            print(f"differs    {name} ({len(a[name])} against {len(b[name])} instructions)")
            all_same = False
    return 0 if all_same else 1


if __name__ == "__main__":
    sys.exit(main())
