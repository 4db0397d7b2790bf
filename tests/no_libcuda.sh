#!/bin/sh
# flashtune loads the CUDA driver with dlopen, so that it starts (and says so) where there is
# none: no binary of the build may need libcuda, except a program that calls the driver itself.
#
#   no_libcuda.sh READELF --needs PROGRAM... -- BINARY...
#
# Each BINARY must have a dynamic section and no NEEDED libcuda; each PROGRAM after --needs
# (examples/attention.c) must need it, which shows that the check sees what it looks for.
set -eu
readelf=$1
shift
fail() { echo "no_libcuda: $*" >&2; exit 1; }
needed() { # needed FILE: the file's NEEDED libraries, one per line
  "$readelf" -d "$1" >"$tmp" 2>&1 || fail "$readelf -d $1 failed: $(cat "$tmp")"
  sed -n 's/.*(NEEDED).*\[\(.*\)\]$/\1/p' "$tmp"
}
tmp=$(mktemp)
trap 'rm -f "$tmp"' EXIT
mode=bin
checked=0
for f in "$@"; do
  case $f in
    --needs) mode=needs; continue ;;
    --) mode=bin; continue ;;
  esac
  [ -f "$f" ] || fail "$f does not exist"
  libs=$(needed "$f")
  [ -n "$libs" ] || fail "$f has no NEEDED entries: not a dynamically linked binary?"
  if printf '%s\n' "$libs" | grep -q '^libcuda\.so'; then
    [ $mode = needs ] || fail "$f needs $(printf '%s\n' "$libs" | grep '^libcuda\.so' | tr '\n' ' ')(the driver must be loaded with dlopen)"
    echo "$f: needs libcuda, as it should"
  else
    [ $mode = bin ] || fail "$f calls the driver itself but does not need libcuda: the check cannot see it"
    echo "$f: $(printf '%s\n' "$libs" | tr '\n' ' ')"
    checked=$((checked + 1))
  fi
done
[ $checked -gt 0 ] || fail "no binary to check"
echo "no_libcuda: ok ($checked binaries without libcuda)"
