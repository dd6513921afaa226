#!/usr/bin/env python3
"""Writes the README's C++ program to a file, so the test suite compiles that very text.

    readme_program.py README.md OUT.cpp

README.md must hold exactly one ```cpp block (the "Your own model in C++" section); that block is the
program. Fails when there is none or more than one, so the test cannot silently compile nothing.
"""
import re
import sys


def main():
    readme, out = sys.argv[1], sys.argv[2]
    text = open(readme, encoding="utf-8").read()
    blocks = list(re.finditer(r"^```cpp[ \t]*\n(.*?)^```[ \t]*$", text, flags=re.S | re.M))
    if len(blocks) != 1:
        print(f"{readme}: expected exactly one ```cpp block (the example program), found {len(blocks)}",
              file=sys.stderr)
        return 1
    first_line = text.count("\n", 0, blocks[0].start(1)) + 1
    with open(out, "w", encoding="utf-8") as f:
        # Compiler messages then name README.md and its line.
        f.write(f'#line {first_line} "{readme}"\n')
        f.write(blocks[0].group(1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
