#!/bin/bash
# FlashAttention-4 on the GPU machine, which reaches no package registry (../shared/ANCHORS.md):
# its wheels travel with the device calls in parts under 64 MiB each, and are put together there.
#   bash bench/fa4_install.sh stash DIR   copy DIR's files (wheels, parts of split wheels named
#                                         NAME.part.xx) to $FA4_STASH (default /tmp/fa4-stash),
#                                         which outlives the call while the machine stays warm
#   bash bench/fa4_install.sh finish      join the parts, unzip every wheel into $FA4_SITE (default
#                                         /tmp/fa4-site: pip's --target would drop the packages that
#                                         share nvidia_cutlass_dsl/), check the import
# Then: export PYTHONPATH=$FA4_SITE:$FA4_SITE/nvidia_cutlass_dsl/dsl_packages
# Here, the parts come from `split -b 31M` of the cu13 wheel (see .dev/fa4p in the notes).
set -eu
stash=${FA4_STASH:-/tmp/fa4-stash}
site=${FA4_SITE:-/tmp/fa4-site}
case ${1:-} in
stash)
  mkdir -p "$stash"
  cp "$2"/* "$stash"/
  echo "fa4: $(ls "$stash" | wc -l) files stashed"
  ;;
finish)
  cd "$stash"
  for first in *.part.aa; do
    [ -e "$first" ] || continue
    cat "${first%.aa}".* > nvidia_cutlass_dsl_libs_cu13-4.8.1-cp312-cp312-manylinux_2_28_x86_64.whl
    rm -f "${first%.aa}".*
  done
  mkdir -p "$site"
  for w in *.whl; do
    python3 -c "import zipfile,sys; zipfile.ZipFile(sys.argv[1]).extractall(sys.argv[2])" "$w" "$site"
  done
  PYTHONPATH=$site:$site/nvidia_cutlass_dsl/dsl_packages python3 -c "from flash_attn.cute import flash_attn_func; print('fa4: import ok')"
  ;;
*)
  echo "usage: bash bench/fa4_install.sh stash DIR | finish" >&2
  exit 2
  ;;
esac
