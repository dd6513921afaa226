#!/usr/bin/env bash
# Install test for CMake users: proves `find_package(brigade CONFIG REQUIRED)` and
# `target_link_libraries(app PRIVATE brigade::brigade)` build a program against the installed brigade,
# and that the installed package is relocatable.
#
#   cmake.sh BUILD_DIR PREFIX MAIN_CPP CXX...
#
# Installs the build into a temporary DESTDIR, then moves the installed prefix to another folder, so
# that nothing still points at PREFIX or at the DESTDIR: brigadeConfig.cmake must find its files from
# where it now is. Configures a one-file CMake project around MAIN_CPP there, builds it and runs it
# (MAIN_CPP checks its own result). Exits 77 (skipped) when cmake is not installed.
set -euo pipefail
build_dir=$1 prefix=$2 main_cpp=$3
shift 3
# The build's compiler, the last word of CXX...; words before it (ccache) are its launcher.
# SANITIZE_FLAGS: the library's -fsanitize= (a -Db_sanitize build), for compiling and linking the
# program, since a sanitized libbrigade.so needs its runtime loaded first.
compiler=${*: -1}
launcher=("${@:1:$#-1}")

command -v cmake >/dev/null || { echo "install test: cmake not found (scripts/setup.sh installs it): skipped"; exit 77; }

stage=$(mktemp -d "${TMPDIR:-/tmp}/brigade-cmake-test.XXXXXX")
trap 'rm -rf "$stage"' EXIT

meson install -C "$build_dir" --no-rebuild --quiet --destdir "$stage/destdir"
moved="$stage/moved"
mv "$stage/destdir$prefix" "$moved"
rm -rf "$stage/destdir"

config=$(find "$moved" -name brigadeConfig.cmake -print -quit)
[[ -n $config ]] || { echo "install test: no brigadeConfig.cmake installed under $moved" >&2; exit 1; }
echo "installed package: ${config#"$moved"/} (prefix moved to $moved)"

project="$stage/project"
mkdir -p "$project"
cp "$main_cpp" "$project/main.cpp"
cat >"$project/CMakeLists.txt" <<'CMAKE'
cmake_minimum_required(VERSION 3.16)
project(brigade_consumer CXX)
find_package(brigade CONFIG REQUIRED)
add_executable(app main.cpp)
target_link_libraries(app PRIVATE brigade::brigade)
CMAKE

cmake -S "$project" -B "$project/build" -DCMAKE_PREFIX_PATH="$moved" -DCMAKE_BUILD_TYPE=Release \
  -DCMAKE_CXX_COMPILER="$compiler" -DCMAKE_CXX_COMPILER_LAUNCHER="${launcher[*]}" \
  -DCMAKE_CXX_FLAGS="${SANITIZE_FLAGS:-}" >"$stage/configure.log" 2>&1 ||
  { cat "$stage/configure.log" >&2; echo "install test: cmake could not configure a project using brigade" >&2; exit 1; }
cmake --build "$project/build" -- -j1 >"$stage/build.log" 2>&1 ||
  { cat "$stage/build.log" >&2; echo "install test: the CMake build against brigade::brigade failed" >&2; exit 1; }
# Without LD_LIBRARY_PATH (meson test points it at the build tree): the program finds the moved
# library through the run-time search path CMake gives it from the imported target, as in a user's
# build tree — so it runs against the installed copy, which ldd shows.
resolved=$(env -u LD_LIBRARY_PATH ldd "$project/build/app" | awk '/libbrigade/ { print $3 }')
[[ $resolved == "$moved"/* ]] ||
  { echo "install test: the program finds libbrigade at '$resolved', not in the installed copy under $moved" >&2; exit 1; }
echo "runs against: ${resolved#"$moved"/}"
env -u LD_LIBRARY_PATH "$project/build/app"
