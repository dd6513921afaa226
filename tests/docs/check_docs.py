#!/usr/bin/env python3
"""The docs test: what README.md and docs/*.md point at must exist, and every command they quote must run.

    check_docs.py SOURCE_ROOT BRIGADE_CLI

Checks, in README.md and every docs/*.md:

  paths     every repository path they name exists: in `code spans` and in [links](...), a word made of
            path characters with a '/' that ends in a file extension or in '/' (a folder); in plain
            prose, such a word with one of the extensions in FILE_EXTENSIONS. A path is looked up from
            the repository root, from the document's own folder (links are relative to it), and under
            the folders the same document names (a chapter's "Code: `autograd/` — `functions/cast.cpp`"
            names files relative to its layer). Globs (`tests/gpu/cases_*.h`, `conv*.{cpp,cu}`) must
            match at least one file. Absolute paths (/etc/...) and URLs are not the repository's.
  anchors   every link to a heading (#section, other.md#section) finds that heading.
  layout    README's Layout block names every top-level folder of the repository (build directories,
            which hold meson-private/, and hidden ones aside), and every folder or file it names exists
            (a word like `cuda/` under its line's folder: core/cuda/).
  commands  for every distinct `brigade <command> [<subcommand>]` in code spans and in fenced blocks
            that are not C++ (the shell lines), `BRIGADE_CLI <command> [<subcommand>] --help` exits 0,
            and every --flag quoted for it appears in that help text.

Outputs are not in the repository; the few a document names are listed in NOT_IN_REPOSITORY, each with
why. Exits 1 listing every problem, naming the file and line.
"""
import glob
import os
import re
import subprocess
import sys

# Paths the documents name that a build or a run creates, so they are not expected in a checkout. Each
# entry is a prefix: anything under it is skipped.
NOT_IN_REPOSITORY = {
    "build/": "the default build directory (scripts/setup.sh creates it)",
    "build-emu/": "the emulator build directory (scripts/test.sh creates it)",
    "build-emu-asan/": "the AddressSanitizer emulator build the README shows how to make",
    "runs/": "checkpoints `brigade train --save runs/sort/` writes",
    "gpt2/": "GPT-2's weights and tokenizer files, which a user downloads (docs/language-modelling.md)",
    ".gpu-bin/": "the binaries `scripts/gpu-session.sh pack` copies for a GPU machine (ignored by git)",
    ".gpu-nccl/": "the NCCL `scripts/gpu-session.sh pack` lays out for a GPU machine (ignored by git)",
    "../shared/": "the folder beside the checkout that holds prebuilt files for GPU machines (not part of brigade)",
    "include/brigade/": "where `meson install` puts the headers, under the install prefix",
    "DIR/": "a placeholder in `brigade train --save DIR/`: the folder the reader chooses",
}

# Extensions that make a word in plain prose a file path (in code spans and links any extension does).
FILE_EXTENSIONS = ("h", "cpp", "cu", "cuh", "md", "py", "sh", "build", "txt", "json", "svg", "in")

PATH_CHARS = r"[A-Za-z0-9_.*{},$-]"
# A path: segments joined by '/', optionally ending in '/'.
PATH_RE = re.compile(rf"^{PATH_CHARS}+(?:/{PATH_CHARS}+)+/?$|^{PATH_CHARS}+/$")
PROSE_PATH_RE = re.compile(
    rf"(?<![\w/.$-])({PATH_CHARS}+(?:/{PATH_CHARS}+)+\.(?:{'|'.join(FILE_EXTENSIONS)}))(?![\w/])")
FENCE_RE = re.compile(r"^```(\w*)\s*$")
SPAN_RE = re.compile(r"`([^`\n]+)`")
LINK_RE = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")
COMMAND_RE = re.compile(r"(?:^|(?<=[\s/]))brigade((?:\s+[^\s|;&]+)*)")


def split_document(text):
    """Yields (line number, kind, text): kind 'prose' for ordinary lines, or the fence's language
    ('' when none) for the lines of a fenced block. A code span that wraps onto the next line
    (an odd number of backticks) joins the two lines, under the first one's number."""
    fence, pending = None, None
    for number, line in enumerate(text.splitlines(), 1):
        m = FENCE_RE.match(line.strip())
        if pending is not None and (m or not line.strip()):  # a paragraph ends: a stray backtick, then
            yield pending[0], "prose", pending[1]
            pending = None
        if m:
            fence = None if fence is not None else m.group(1)
            continue
        if fence is not None:
            yield number, fence, line
            continue
        if pending is not None:
            number, line = pending[0], pending[1] + " " + line
            pending = None
        if line.count("`") % 2 == 1:
            pending = (number, line)
            continue
        yield number, "prose", line
    if pending is not None:
        yield pending[0], "prose", pending[1]


def is_repository_path(word):
    if not PATH_RE.match(word) or word.startswith("/") or "://" in word:
        return False
    last = word.rstrip("/").split("/")[-1]
    return word.endswith("/") or ("." in last and not last.endswith("."))


def expand_braces(pattern):
    m = re.search(r"\{([^{}]*)\}", pattern)
    if not m:
        return [pattern]
    out = []
    for choice in m.group(1).split(","):
        out += expand_braces(pattern[:m.start()] + choice + pattern[m.end():])
    return out


def exists(root, path):
    full = os.path.join(root, path)
    if any(c in path for c in "*{"):
        return any(glob.glob(p) for p in expand_braces(full))
    return os.path.isdir(full) if path.endswith("/") else os.path.isfile(full)


def heading_anchors(text):
    """GitHub's anchors for a document's headings: lower case, punctuation dropped, spaces to '-'."""
    anchors = set()
    for _, kind, line in split_document(text):
        m = re.match(r"^#+\s+(.*)$", line) if kind == "prose" else None
        if m:
            title = re.sub(r"[^\w\- ]", "", m.group(1).strip().lower().replace("`", ""))
            anchors.add(title.replace(" ", "-"))
    return anchors


class Checker:
    def __init__(self, root, cli):
        self.root, self.cli = root, cli
        self.problems = []
        # (command, subcommand or None) -> where it is first quoted, and each flag quoted with it (and where)
        self.commands = {}
        self.paths_checked = 0

    def problem(self, where, message):
        self.problems.append(f"{where}: {message}")

    def check_path(self, doc, where, path, bases):
        path = path.rstrip(".,;:")
        if any(path.startswith(prefix) for prefix in NOT_IN_REPOSITORY):
            return
        self.paths_checked += 1
        doc_dir = os.path.dirname(doc)
        candidates = [path, os.path.normpath(os.path.join(doc_dir, path))] + [b + path for b in bases]
        if not any(exists(self.root, c) for c in candidates):
            self.problem(where, f"'{path}' is not in the repository")

    def note_commands(self, where, text):
        for segment in re.split(r"\s(?:--|&&|\|\||;|\|)\s", text):
            for m in COMMAND_RE.finditer(segment):
                words = m.group(1).split()
                if not words or not re.fullmatch(r"[a-z][a-z_-]*", words[0]):
                    continue  # "brigade <command>" and the like: a placeholder, not a command
                key = (words[0], words[1] if len(words) > 1 and re.fullmatch(r"[a-z][a-z_-]*", words[1]) else None)
                _, flags = self.commands.setdefault(key, (where, {}))
                for w in words[1:]:
                    flag = re.match(r"^(--[a-z][a-z0-9-]*)", w)
                    if flag:
                        flags.setdefault(flag.group(1), where)

    def check_document(self, doc):
        text = open(os.path.join(self.root, doc), encoding="utf-8").read()
        # Folders the document names: a chapter's files may be named relative to them.
        bases = sorted({s for s in SPAN_RE.findall(text) if is_repository_path(s) and s.endswith("/")})
        for number, kind, line in split_document(text):
            where = f"{doc}:{number}"
            if kind != "prose":
                if kind not in ("cpp", "c++", "json"):
                    self.note_commands(where, line)
                continue
            spans = SPAN_RE.findall(line)
            prose = SPAN_RE.sub(" ", line)
            for span in spans:
                for word in span.split():
                    if is_repository_path(word):
                        self.check_path(doc, where, word, bases)
                self.note_commands(where, span)
            for target in LINK_RE.findall(prose):
                if "://" in target or target.startswith("mailto:"):
                    continue
                path, _, anchor = target.partition("#")
                if path:
                    self.check_path(doc, where, path, [])
                if anchor:
                    linked = os.path.normpath(os.path.join(os.path.dirname(doc), path)) if path else doc
                    full = os.path.join(self.root, linked)
                    if os.path.isfile(full) and anchor not in heading_anchors(open(full, encoding="utf-8").read()):
                        self.problem(where, f"no heading in {linked} has the anchor '#{anchor}'")
            for word in PROSE_PATH_RE.findall(LINK_RE.sub(" ", prose)):
                self.check_path(doc, where, word, bases)

    def check_layout(self, doc, text):
        """The fenced block under '## Layout': one line per top-level folder, `name/  what it holds`."""
        lines = text.splitlines()
        try:
            start = next(i for i, l in enumerate(lines) if l.strip() == "## Layout")
            open_fence = next(i for i in range(start + 1, len(lines)) if FENCE_RE.match(lines[i].strip()))
            close_fence = next(i for i in range(open_fence + 1, len(lines)) if FENCE_RE.match(lines[i].strip()))
        except StopIteration:
            self.problem(doc, "no '## Layout' heading followed by a fenced block")
            return
        listed, folder = set(), ""
        for number in range(open_fence + 1, close_fence):
            line, where = lines[number], f"{doc}:{number + 1}"
            m = re.match(r"^([A-Za-z0-9_.-]+/)\s", line)
            if m:
                folder = m.group(1)
                listed.add(folder)
            for word in re.findall(r"[^\s(),;:]+", line[m.end():] if m else line):
                if is_repository_path(word):
                    self.check_path(doc, where, word, [folder])
            if m:
                self.check_path(doc, where, folder, [])
        actual = {name + "/" for name in os.listdir(self.root)
                  if os.path.isdir(os.path.join(self.root, name)) and not name.startswith(".")
                  and not os.path.isdir(os.path.join(self.root, name, "meson-private"))}
        for missing in sorted(actual - listed):
            self.problem(f"{doc}:{open_fence + 1}", f"the Layout block does not list the folder '{missing}'")

    def check_commands(self):
        for (command, sub), (first, flags) in sorted(self.commands.items(), key=lambda kv: (kv[0][0], kv[0][1] or "")):
            argv = [self.cli, command] + ([sub] if sub else []) + ["--help"]
            shown = " ".join(["brigade"] + argv[1:])
            try:
                run = subprocess.run(argv, capture_output=True, text=True, timeout=60)
            except (OSError, subprocess.TimeoutExpired) as e:
                self.problem(first, f"'{shown}' did not run: {e}")
                continue
            if run.returncode != 0:
                self.problem(first, f"'{shown}' exited {run.returncode}: {(run.stderr or run.stdout).strip()[:300]}")
                continue
            help_text = run.stdout + run.stderr
            for flag, where in flags.items():
                if flag not in ("--help",) and not re.search(re.escape(flag) + r"(?![a-z0-9-])", help_text):
                    self.problem(where, f"'{flag}' is quoted for 'brigade {command}{' ' + sub if sub else ''}' "
                                        f"but its --help does not list it")
            print(f"ok: {shown} ({len(flags)} quoted flags listed)")


def main():
    if len(sys.argv) != 3:
        print(__doc__.strip().splitlines()[2], file=sys.stderr)
        return 2
    root, cli = sys.argv[1], sys.argv[2]
    documents = ["README.md"] + sorted(os.path.relpath(p, root) for p in glob.glob(os.path.join(root, "docs", "*.md")))
    checker = Checker(root, cli)
    for doc in documents:
        checker.check_document(doc)
    checker.check_layout("README.md", open(os.path.join(root, "README.md"), encoding="utf-8").read())
    if not checker.commands:
        checker.problem("README.md", "no `brigade ...` command found: the pattern no longer matches the documents")
    checker.check_commands()
    print(f"{len(documents)} documents, {checker.paths_checked} paths, {len(checker.commands)} commands checked")
    for p in checker.problems:
        print("problem: " + p, file=sys.stderr)
    return 1 if checker.problems else 0


if __name__ == "__main__":
    sys.exit(main())
