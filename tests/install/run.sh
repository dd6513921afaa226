#!/usr/bin/env bash
# Install test: proves a user can build a model against the *installed* brigade.
#
#   run.sh BUILD_DIR PREFIX LIBDIR MAIN_CPP CXX...
#
# CXX... is the compiler command, with any flags every program needs (the build's -fsanitize=...).
# Installs the build into a temporary DESTDIR, compiles MAIN_CPP with the flags
# `pkg-config --cflags --libs brigade` gives (pointed into the DESTDIR), runs the program, and
# removes the DESTDIR again. Nothing outside the temporary directory is touched.
set -euo pipefail
build_dir=$1 prefix=$2 libdir=$3 main_cpp=$4
shift 4
cxx=("$@")

stage=$(mktemp -d "${TMPDIR:-/tmp}/brigade-install-test.XXXXXX")
trap 'rm -rf "$stage"' EXIT

meson install -C "$build_dir" --no-rebuild --quiet --destdir "$stage"

# libdir may be relative to the prefix (lib/x86_64-linux-gnu) or absolute.
[[ $libdir == /* ]] || libdir="$prefix/$libdir"
root="$stage$prefix"
pc_dir="$stage$libdir/pkgconfig"
[[ -f "$pc_dir/brigade.pc" ]] || { echo "install test: no brigade.pc under $pc_dir" >&2; exit 1; }
[[ -f "$root/include/brigade/brigade.h" ]] || { echo "install test: brigade.h not installed" >&2; exit 1; }

# brigade.pc says prefix=$prefix; the files are under $stage$prefix until a real install.
flags=$(PKG_CONFIG_PATH="$pc_dir" pkg-config --define-variable=prefix="$root" --cflags --libs brigade)
echo "pkg-config flags: $flags"

# shellcheck disable=SC2086  # $flags is a list of words
"${cxx[@]}" -std=c++20 -O1 -o "$stage/mlp" "$main_cpp" $flags
LD_LIBRARY_PATH="$stage$libdir${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" "$stage/mlp"
