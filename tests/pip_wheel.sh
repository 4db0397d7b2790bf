#!/bin/sh
# pip install of the repository, as a Python user does it: builds a wheel with scikit-build-core
# (pyproject.toml; CMake builds libflashtune and the command), installs it into a fresh virtual
# environment, and checks that the command on PATH, the library and the package report the
# version of CMakeLists.txt, and that the package loads the library it carries.
#   pip_wheel.sh SOURCE_DIR WORK_DIR
# Exits 77 ("skipped") when python3 cannot make a virtual environment or scikit-build-core
# cannot be installed into one (no network and no copy at hand).
src=$1; work=$2
fail() { echo "pip wheel: FAIL: $*"; exit 1; }
skip() { echo "skipped: $*"; exit 77; }
rm -rf "$work" && mkdir -p "$work" || fail "cannot make $work"
python3 -m venv "$work/venv" > "$work/venv.log" 2>&1 || skip "python3 -m venv failed ($(tail -n 1 "$work/venv.log"))"
py=$work/venv/bin/python
"$py" -m pip install -q --disable-pip-version-check --timeout 20 --retries 2 "scikit-build-core>=0.10" \
  > "$work/pip.log" 2>&1 ||
  skip "scikit-build-core could not be installed ($(tail -n 1 "$work/pip.log"))"
want=$(sed -n 's/^project(flashtune VERSION \([0-9.]*\).*/\1/p' "$src/CMakeLists.txt")
[ -n "$want" ] || fail "no version in $src/CMakeLists.txt"
# the build works in a copy: pip's build tree must not be the developer's build/
"$py" -m pip wheel -q --disable-pip-version-check --no-build-isolation --no-deps -w "$work/dist" "$src" \
  > "$work/wheel.log" 2>&1 || { tail -n 30 "$work/wheel.log"; fail "pip wheel failed"; }
whl=$(ls "$work"/dist/flashtune-"$want"-py3-none-linux_*.whl 2>/dev/null | head -n 1)
[ -n "$whl" ] || fail "no wheel flashtune-$want-py3-none-linux_*.whl in $work/dist ($(ls "$work/dist"))"
"$py" -m pip install -q --disable-pip-version-check "$whl" > "$work/install.log" 2>&1 ||
  { tail -n 20 "$work/install.log"; fail "pip install of the wheel failed"; }
cmd=$("$work/venv/bin/flashtune" version 2>&1) || fail "the installed flashtune command failed: $cmd"
[ "$cmd" = "flashtune $want" ] || fail "the command says '$cmd', not 'flashtune $want'"
# outside the checkout, without $FLASHTUNE_LIB: the package must find its own library
out=$(cd "$work" && env -u FLASHTUNE_LIB "$py" -c '
import os, flashtune
print(flashtune.__version__, flashtune.version(), os.path.relpath(flashtune.library_path(), os.path.dirname(flashtune.__file__)))' 2>&1) ||
  fail "import flashtune failed: $out"
[ "$out" = "$want $want libflashtune.so" ] || fail "package, library and library path: '$out', not '$want $want libflashtune.so'"
echo "pip wheel: ok ($(basename "$whl"), package, library and command at $want)"
