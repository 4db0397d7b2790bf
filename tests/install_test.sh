#!/bin/sh
# Installs the build into a temporary prefix and builds an application against it three
# ways: pkg-config (libflashtune.so), pkg-config --static (libflashtune.a and its private
# dependencies), and a CMake project with find_package(flashtune) (both imported targets).
# Each program must run and, without a GPU, fail cleanly (tests/install_app.c). The shared
# library must export the public ft_ API and nothing else.
#
#   install_test.sh SOURCE_DIR BUILD_DIR WORK_DIR
#
# FT_SANITIZE_FLAGS (set by CMake for a sanitized build) go into every compile and link of
# those programs: a sanitized library needs the sanitizers' runtime first in the program.
set -eu
src=$1 build=$2 work=$3
cc=${CC:-cc}
san=${FT_SANITIZE_FLAGS:-}
fail() { echo "install_test: $*" >&2; exit 1; }

rm -rf "$work"
mkdir -p "$work"
prefix=$work/prefix
cmake --install "$build" --prefix "$prefix" >"$work/install.log" || { cat "$work/install.log"; fail "install failed"; }
for f in bin/flashtune include/flashtune.h; do
  [ -e "$prefix/$f" ] || fail "$f is not installed"
done
pc=$(find "$prefix" -name flashtune.pc | head -n 1)
[ -n "$pc" ] || fail "flashtune.pc is not installed"
libdir=$(dirname "$(dirname "$pc")")
for f in libflashtune.so libflashtune.a cmake/flashtune/flashtuneConfig.cmake cmake/flashtune/flashtuneConfigVersion.cmake; do
  [ -e "$libdir/$f" ] || fail "$libdir/$f is not installed"
done
"$prefix/bin/flashtune" version | grep -q "^flashtune " || fail "the installed flashtune does not run"

export PKG_CONFIG_PATH="$libdir/pkgconfig"
# What the run needs: no database, a cache of its own, the installed library.
export FLASHTUNE_DB="$work/none.db" FLASHTUNE_CACHE_DIR="$work/cache"

run() { # run NAME: runs the program, which must exit 0
  echo "== $1"
  "$work/$1" || fail "$1 failed"
}

# 1. pkg-config, shared library.
flags=$(pkg-config --cflags --libs flashtune) || fail "pkg-config does not know flashtune"
echo "pkg-config --cflags --libs flashtune: $flags"
# shellcheck disable=SC2086
$cc -std=c11 -Wall -Wextra -Werror $san "$src/tests/install_app.c" -o "$work/app_pc_shared" $flags \
  -Wl,-rpath,"$libdir" || fail "cannot build against the shared library with pkg-config"
readelf -d "$work/app_pc_shared" | grep -q 'NEEDED.*libflashtune\.so' || fail "app_pc_shared does not use libflashtune.so"
run app_pc_shared

# 2. pkg-config --static: libflashtune.a by name (the linker would take the .so for
#    -lflashtune), the rest as pkg-config says.
libs=""
for w in $(pkg-config --static --libs flashtune); do
  [ "$w" = -lflashtune ] && w=-l:libflashtune.a
  libs="$libs $w"
  case $w in -L*) libs="$libs -Wl,-rpath,${w#-L}" ;; esac # NVRTC outside the loader's path
done
echo "pkg-config --static --libs flashtune (archive by name):$libs"
# shellcheck disable=SC2086
$cc -std=c11 -Wall -Wextra -Werror $san $(pkg-config --cflags flashtune) "$src/tests/install_app.c" \
  -o "$work/app_pc_static" $libs || fail "cannot build against the static library with pkg-config --static"
if readelf -d "$work/app_pc_static" | grep -q 'NEEDED.*libflashtune'; then
  fail "app_pc_static still needs libflashtune.so"
fi
run app_pc_static

# 3. A CMake project with find_package(flashtune).
mkdir -p "$work/cmake-app"
cp "$src/tests/install_app.c" "$work/cmake-app/app.c"
cat >"$work/cmake-app/CMakeLists.txt" <<'CMAKE'
cmake_minimum_required(VERSION 3.20)
project(ft_install_app C)
find_package(flashtune 0.1 REQUIRED)
add_executable(app_cmake_shared app.c)
target_link_libraries(app_cmake_shared PRIVATE flashtune::flashtune)
add_executable(app_cmake_static app.c)
target_link_libraries(app_cmake_static PRIVATE flashtune::flashtune_static)
CMAKE
generator=""
command -v ninja >/dev/null 2>&1 && generator="-G Ninja"
# shellcheck disable=SC2086
cmake -S "$work/cmake-app" -B "$work/cmake-app/build" $generator -DCMAKE_PREFIX_PATH="$prefix" \
  -DCMAKE_C_FLAGS="-Wall -Werror $san" >"$work/cmake-app.log" 2>&1 || { cat "$work/cmake-app.log"; fail "find_package(flashtune) failed"; }
cmake --build "$work/cmake-app/build" >>"$work/cmake-app.log" 2>&1 || { cat "$work/cmake-app.log"; fail "the find_package project does not build"; }
cp "$work/cmake-app/build/app_cmake_shared" "$work/cmake-app/build/app_cmake_static" "$work/"
readelf -d "$work/app_cmake_shared" | grep -q 'NEEDED.*libflashtune\.so' || fail "app_cmake_shared does not use libflashtune.so"
if readelf -d "$work/app_cmake_static" | grep -q 'NEEDED.*libflashtune'; then
  fail "app_cmake_static still needs libflashtune.so"
fi
run app_cmake_shared
run app_cmake_static

# 4. The shared library exports the public API only.
nm -D --defined-only "$libdir/libflashtune.so" | awk '{print $NF}' | sort >"$work/exports.txt"
echo "exported: $(tr '\n' ' ' <"$work/exports.txt")"
if grep -v '^ft_' "$work/exports.txt" >"$work/foreign.txt"; then
  fail "libflashtune.so exports symbols outside the ft_ API: $(tr '\n' ' ' <"$work/foreign.txt")"
fi
if grep '^ft__' "$work/exports.txt" >"$work/internal.txt"; then
  fail "libflashtune.so exports internal symbols: $(tr '\n' ' ' <"$work/internal.txt")"
fi
for f in ft_version ft_status_name ft_context_options_init ft_context_create ft_context_destroy \
         ft_last_error ft_attention_forward ft_attention_kernel ft_set_log_handler; do
  grep -qx "$f" "$work/exports.txt" || fail "libflashtune.so does not export $f"
done
echo "install_test: ok"
