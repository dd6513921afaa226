#!/usr/bin/env python3
"""Turns a CUDA source file (.cu) into C++ that g++ compiles for the CPU emulator.

Usage: cuda_emulate.py SOURCE.cu OUTPUT.cpp DEPFILE SOURCE_ROOT

Two rewrites, nothing else (the kernels themselves are compiled as written):
  - every launch `kernel<<<config>>>(args)` becomes
    `::brigade::emu::Launch(config).run("kernel", [=](auto... a) { kernel(a...); }, args)`, which
    runs the grid on fibers (emulator/simt.h). The lambda copies what it names, so
    `kernel` may also be a local pointer to a kernel (`auto k = f ? a<1> : a<2>; k<<<...>>>()`),
    and the launch may run after the launching function has returned, as on a stream;
  - the project's .cuh headers are inlined, so their launches are rewritten too.
`#line` directives keep compiler errors and debugger locations pointing at the original files.
The output starts by including emulator/simt.h, which defines threadIdx, __syncthreads,
the warp shuffles and the other device built-ins.
"""
import os
import re
import sys

INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+\.cuh)"\s*(//.*)?$')
PRAGMA_ONCE = re.compile(r'^\s*#\s*pragma\s+once\s*$')


def fail(path, text, at, why):
    line = text.count("\n", 0, at) + 1
    sys.exit(f"{path}:{line}: cuda_emulate: {why}")


def matching(text, start, open_ch, close_ch):
    """Index just past the bracket that closes the one at text[start]."""
    depth = 0
    for i in range(start, len(text)):
        if text[i] == open_ch:
            depth += 1
        elif text[i] == close_ch:
            depth -= 1
            if depth == 0:
                return i + 1
    return -1


def kernel_start(text, end):
    """Start of the kernel expression that ends at `end` (`name`, `ns::name<T, 4>`)."""
    i = end
    while i > 0 and text[i - 1].isspace():  # `kernel<...>\n    <<<grid, ...>>>` is one launch
        i -= 1
    while i > 0:
        c = text[i - 1]
        if c == ">":  # template arguments: walk back to their '<'
            depth = 0
            while i > 0:
                i -= 1
                if text[i] == ">":
                    depth += 1
                elif text[i] == "<":
                    depth -= 1
                    if depth == 0:
                        break
        elif c.isalnum() or c in "_:":
            i -= 1
        else:
            break
    return i


def masked(text):
    """The text with comments and string/char literals blanked (newlines kept), same length, so
    a `<<<` or a bracket inside them is never taken for code."""
    out = list(text)
    i, n = 0, len(text)
    while i < n:
        two = text[i:i + 2]
        if two == "//":
            j = text.find("\n", i)
            j = n if j < 0 else j
        elif two == "/*":
            j = text.find("*/", i + 2)
            j = n if j < 0 else j + 2
        elif text[i] in "\"'":
            j = i + 1
            while j < n and text[j] != text[i]:
                j += 2 if text[j] == "\\" else 1
            j = min(n, j + 1)
        else:
            i += 1
            continue
        for k in range(i, j):
            if out[k] != "\n":
                out[k] = " "
        i = j
    return "".join(out)


def rewrite_launches(path, text):
    code = masked(text)  # where to look; the output copies from `text`
    out, pos = [], 0
    while True:
        at = code.find("<<<", pos)
        if at < 0:
            out.append(text[pos:])
            return "".join(out)
        start = kernel_start(code, at)
        kernel = text[start:at].strip()
        close = code.find(">>>", at)
        if not kernel or close < 0:
            fail(path, text, at, "cannot read this kernel launch")
        config = text[at + 3:close]
        paren = close + 3
        while paren < len(code) and code[paren].isspace():
            paren += 1
        if paren >= len(code) or code[paren] != "(":
            fail(path, text, at, "expected '(' after '>>>'")
        args_end = matching(code, paren, "(", ")")
        if args_end < 0:
            fail(path, text, at, "unbalanced parentheses in the launch's arguments")
        args = text[paren + 1:args_end - 1]
        name = " ".join(kernel.split())
        call = f'::brigade::emu::Launch({config}).run("{name}", [=](auto... a) {{ {kernel}(a...); }}'
        call += f", {args})" if args.strip() else ")"
        call += "\n" * (text.count("\n", start, args_end) - call.count("\n"))  # later lines keep their numbers
        out.append(text[pos:start])
        out.append(call)
        pos = args_end


def expand(path, root, seen, deps):
    """The file's text with project .cuh includes inlined (each once, like #pragma once)."""
    path = os.path.abspath(path)
    deps.append(path)
    lines = []
    with open(path) as f:
        source = f.read().split("\n")
    lines.append(f'#line 1 "{path}"')
    for number, line in enumerate(source, start=1):
        m = INCLUDE.match(line)
        if m:
            header = os.path.join(root, m.group(1))
            if not os.path.exists(header):
                header = os.path.join(os.path.dirname(path), m.group(1))
            header = os.path.abspath(header)
            if header not in seen:
                seen.add(header)
                lines.append(expand(header, root, seen, deps))
            lines.append(f'#line {number + 1} "{path}"')
        elif PRAGMA_ONCE.match(line):
            lines.append("")
        else:
            lines.append(line)
    return "\n".join(lines)


def main():
    if len(sys.argv) != 5:
        sys.exit(__doc__)
    source, output, depfile, root = sys.argv[1:]
    deps = [os.path.abspath(__file__)]  # a change to this script regenerates every output
    text = expand(source, root, set(), deps)
    text = rewrite_launches(source, text)
    header = "// Generated by scripts/cuda_emulate.py from %s: do not edit.\n" % os.path.relpath(source, root)
    header += '#include "emulator/simt.h"\n'
    tmp = output + ".tmp"
    with open(tmp, "w") as f:
        f.write(header + text + "\n")
    os.replace(tmp, output)  # never a half-written file
    with open(depfile, "w") as f:
        f.write(output + ": " + " ".join(d.replace(" ", "\\ ") for d in deps) + "\n")


if __name__ == "__main__":
    main()
