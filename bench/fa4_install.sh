#!/bin/bash
# FlashAttention-4 on the GPU machine, which reaches no package registry (../shared/ANCHORS.md):
# its wheels travel with the device calls in parts under 64 MiB each, and are put together there.
#   bash bench/fa4_install.sh stash DIR   copy DIR's files (wheels, parts of split wheels named
#                                         NAME.part.xx) to $FA4_STASH (default /tmp/fa4-stash),
#                                         which outlives the call while the machine stays warm
#   bash bench/fa4_install.sh finish      join the parts, unzip every wheel into $FA4_SITE (default
#                                         /tmp/fa4-site: pip's --target would drop the packages that
#                                         share nvidia_cutlass_dsl/), check the import
#   bash bench/fa4_install.sh pack WHEELS OUT
#                                         here, not on the GPU machine: every wheel of WHEELS unzipped
#                                         into one tree, that tree as an xz tar in two parts,
#                                         OUT1/fa4.tar.xz.part.aa and OUT2/fa4.tar.xz.part.ab (xz -9e:
#                                         74 MB for FA4 4.0.0b36 and its dependencies, against 111 MB of
#                                         wheels, so two calls carry it instead of three); `finish`
#                                         then unpacks it (Python's tarfile: no xz needed there)
# Then: export PYTHONPATH=$FA4_SITE:$FA4_SITE/nvidia_cutlass_dsl/dsl_packages
# The wheel parts come from `split -b 31M` of the cu13 wheel (see .dev/fa4p in the notes).
set -eu
stash=${FA4_STASH:-/tmp/fa4-stash}
site=${FA4_SITE:-/tmp/fa4-site}

# unzip_wheels DIR TO: every wheel in DIR unzipped into TO (what pip --target would lay out).
unzip_wheels() {
  for w in "$1"/*.whl; do
    [ -e "$w" ] || continue
    python3 -c "import zipfile,sys; zipfile.ZipFile(sys.argv[1]).extractall(sys.argv[2])" "$w" "$2"
  done
}

case ${1:-} in
stash)
  mkdir -p "$stash"
  cp "$2"/* "$stash"/
  echo "fa4: $(ls "$stash" | wc -l) files stashed"
  ;;
finish)
  cd "$stash"
  for first in nvidia_*.part.aa; do
    [ -e "$first" ] || continue
    cat "${first%.aa}".* > nvidia_cutlass_dsl_libs_cu13-4.8.1-cp312-cp312-manylinux_2_28_x86_64.whl
    rm -f "${first%.aa}".*
  done
  mkdir -p "$site"
  unzip_wheels . "$site"
  if [ -e fa4.tar.xz.part.aa ]; then
    cat fa4.tar.xz.part.* > fa4.tar.xz
    rm -f fa4.tar.xz.part.*
    python3 -c "import tarfile,sys; tarfile.open(sys.argv[1]).extractall(sys.argv[2], filter='data')" fa4.tar.xz "$site"
    rm -f fa4.tar.xz
  fi
  PYTHONPATH=$site:$site/nvidia_cutlass_dsl/dsl_packages python3 -c "from flash_attn.cute import flash_attn_func; print('fa4: import ok')"
  ;;
pack)
  tree=$(mktemp -d)
  unzip_wheels "$2" "$tree"
  mkdir -p "${3}1" "${3}2"
  tar cf - -C "$tree" . | xz -9e -T0 > "$tree.tar.xz"
  rm -rf "$tree"
  half=$(( ($(stat -c %s "$tree.tar.xz") + 1) / 2 ))
  split -b "$half" "$tree.tar.xz" "$tree.part."
  mv "$tree.part.aa" "${3}1/fa4.tar.xz.part.aa"
  mv "$tree.part.ab" "${3}2/fa4.tar.xz.part.ab"
  rm -f "$tree.tar.xz"
  ls -l "${3}1" "${3}2"
  ;;
*)
  echo "usage: bash bench/fa4_install.sh stash DIR | finish | pack WHEELS OUT" >&2
  exit 2
  ;;
esac
