#!/usr/bin/env python3
"""brigade's tokenizer.json encodings checked against Hugging Face's `tokenizers` library.

    bench/compare_tokenizers.py [--brigade build/tools/brigade] [--vocab 3000] [--whole] [TEXT FILES...]

Run once by hand, never in CI (it needs `pip install tokenizers`, which CI does not have). For each
pre-tokenizer brigade implements (GPT-2's ByteLevel, LLaMA 3's and Qwen2's Split + ByteLevel) it
trains a small byte-level BPE with the library on the text files (default: docs/*.md and
README.md), adds special tokens, saves it as tokenizer.json, and encodes every text with both the
library and `brigade tokenizer encode --file` — the files whole, their paragraphs one by one, and a set
of awkward Unicode strings — with special tokens read as tokens (--special) and as text. The
LLaMA 3 one also sets ignore_merges, as Meta's file does, and the Qwen2 one the NFC normalizer.
Then the other way: `brigade data prepare` writes its copy of each tokenizer (a tokenizer.json of
brigade's), which the library loads and encodes the same texts with. Prints the texts compared and
the mismatches, with the first of them. --whole compares the files whole only (no paragraphs, no
extra strings): for many files, e.g. all of the sources.
"""
import argparse
import glob
import os
import subprocess
import sys
import tempfile

from tokenizers import Regex, Tokenizer, decoders, models, normalizers, pre_tokenizers, trainers

PATTERNS = {
    "gpt2": None,  # ByteLevel with use_regex
    "llama3": r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+",
    "qwen2": r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+",
}
SPECIALS = ["<|endoftext|>", "<|begin_of_text|>", "<|eot_id|>", "<|im_start|>"]

# Strings that stress the patterns and the byte alphabet: scripts, digits of other systems, marks,
# every kind of white space and line break, contractions in all cases, emoji, special tokens.
UNICODE = [
    "Hello, world! It's 2024; we'LL see. O'REILLY'S 'Tis THEY'VE",
    "\u4e2d\u6587\u6587\u672c\uff0c\u5e26\u6807\u70b9\u3002\u65e5\u672c\u8a9e\u306e\u30c6\u30ad\u30b9\u30c8",
    "\u0627\u0644\u0639\u0631\u0628\u064a\u0629 \u0661\u0662\u0663\u0664\u0665 \u0939\u093f\u0928\u094d\u0926\u0940 \u0967\u0968\u0969",
    "caf\u00e9 cafe\u0301 na\u00efve \u00c5ngstr\u00f6m \u1e9b\u0323 \u017ftop '\u017f",
    "tabs\tand\u00a0nbsp\u2003em\u3000ideographic\u2028line\u2029para\u0085nel end",
    "\r\n\r\nwindows\r\nlines  \n\n  \n\tindented\n",
    "emoji \U0001f600\U0001f44d\U0001f3fd family \U0001f468\u200d\U0001f469\u200d\U0001f467 flags \U0001f1ef\U0001f1f5",
    "numbers 1234567890 \u00bd\u00b2\u2163 1,234.56 3rd 0x1F",
    # For NFC: letters followed by marks out of canonical order, singletons, exclusions, Hangul jamo.
    "".join(chr(c) + "\u0301\u0323" for c in range(0x41, 0x7B)),
    "".join(chr(c) + "\u0307\u0323 " for c in range(0xC0, 0x250)),
    "".join(chr(c) + "\u0342\u0345" for c in range(0x1F00, 0x2000)),
    "\u212b\u2126\u0958\u095f\u1100\u1161\u11a8 \u1100\u1161 \uac00\u11a8 \u0b47\u0b3e e\u0305\u0301 \u1e9b\u0323",
    "<|begin_of_text|>Hi<|eot_id|><|endoftext|> <|im_start|>user\n<|im_end|>",
    "   leading spaces and trailing   ",
    "code: for (int i = 0; i < n; ++i) { x[i] += y[i]; }\n\treturn 0;\n}\n",
    "\u0417\u0434\u0440\u0430\u0432\u0441\u0442\u0432\u0443\u0439, \u043c\u0438\u0440! \u0393\u03b5\u03b9\u03ac \u03c3\u03bf\u03c5",
]


def make_tokenizer(kind, corpus_files, vocab):
    tok = Tokenizer(models.BPE(ignore_merges=(kind == "llama3")))
    byte_level = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=PATTERNS[kind] is None)
    if PATTERNS[kind] is None:
        tok.pre_tokenizer = byte_level
    else:
        tok.pre_tokenizer = pre_tokenizers.Sequence(
            [pre_tokenizers.Split(Regex(PATTERNS[kind]), behavior="isolated", invert=False), byte_level])
    if kind == "qwen2":
        tok.normalizer = normalizers.NFC()  # as Qwen2's own file has it
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=vocab, initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
                                  special_tokens=SPECIALS, show_progress=False)
    tok.train(corpus_files, trainer)
    return tok


def brigade_ids(brigade, tokenizer_dir, path, special):
    args = [brigade, "tokenizer", "encode", "--tokenizer", tokenizer_dir, "--file", path] + (["--special"] if special else [])
    out = subprocess.run(args, capture_output=True, text=True, timeout=600)
    if out.returncode != 0:
        sys.exit(f"{' '.join(args)} failed:\n{out.stderr}")
    return [int(x) for x in out.stdout.split()]


def library_ids(tok, text, special):
    if special:
        return tok.encode(text, add_special_tokens=False).ids
    # Specials as text: the library's split_special_tokens, as brigade's default.
    tok.encode_special_tokens = True
    try:
        return tok.encode(text, add_special_tokens=False).ids
    finally:
        tok.encode_special_tokens = False


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--brigade", default="build-cpu/tools/brigade")
    parser.add_argument("--vocab", type=int, default=3000)
    parser.add_argument("--whole", action="store_true", help="the files whole only")
    parser.add_argument("files", nargs="*")
    a = parser.parse_args()
    files = a.files or sorted(glob.glob("docs/*.md")) + ["README.md"]

    texts = []
    for f in files:
        with open(f, encoding="utf-8", newline="") as fh:
            whole = fh.read()
        texts.append(whole)
        if not a.whole:
            texts += [para for para in whole.split("\n\n") if para.strip()]
    if not a.whole:
        texts += UNICODE

    total = mismatches = 0
    with tempfile.TemporaryDirectory() as work:
        paths = []
        for i, t in enumerate(texts):
            paths.append(os.path.join(work, f"text{i}.txt"))
            with open(paths[-1], "w", encoding="utf-8", newline="") as fh:
                fh.write(t)
        for kind in PATTERNS:
            tok = make_tokenizer(kind, files, a.vocab)
            hf_dir = os.path.join(work, kind)
            os.makedirs(hf_dir)
            tok.save(os.path.join(hf_dir, "tokenizer.json"))
            # brigade's own copy, as `brigade data prepare` writes it, read by the library.
            prepared = os.path.join(work, kind + "-prepared")
            out = subprocess.run([a.brigade, "data", "prepare", "--tokenizer", hf_dir, "--out", prepared, "--val-fraction",
                                  "0"] + files[:1], capture_output=True, text=True, timeout=600)
            if out.returncode != 0:
                sys.exit(f"brigade data prepare failed:\n{out.stderr}")
            written = Tokenizer.from_file(os.path.join(prepared, "tokenizer", "tokenizer.json"))
            n = bad = 0
            for text, path in zip(texts, paths):
                for special in (True, False):
                    mine = brigade_ids(a.brigade, hf_dir, path, special)
                    for name, lib in (("the library's file", tok), ("brigade's file", written)):
                        theirs = library_ids(lib, text, special)
                        n += 1
                        if mine != theirs:
                            bad += 1
                            if bad <= 3:
                                at = next((i for i, (x, y) in enumerate(zip(mine, theirs)) if x != y), min(len(mine), len(theirs)))
                                print(f"  {kind}: MISMATCH ({name}, special={special}) at token {at} of {text[:60]!r}: "
                                      f"brigade {mine[at:at + 5]} library {theirs[at:at + 5]}")
            print(f"{kind}: vocabulary {tok.get_vocab_size()}, {len(texts)} texts x specials as tokens/text x "
                  f"2 files = {n} encodings compared, {bad} mismatches")
            total += n
            mismatches += bad
    print(f"all: {total} encodings compared, {mismatches} mismatches")
    return 1 if mismatches else 0


if __name__ == "__main__":
    sys.exit(main())
