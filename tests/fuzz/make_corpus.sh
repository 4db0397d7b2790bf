#!/bin/sh
# Makes the seed corpus of the fuzzers (tests/fuzz/corpus/), from a build (default build/):
#   spec/  the built-in specs and the test specs (specs/, tests/specs/)
#   pack/  small real packs: a tune with the stand-in worker (real NVRTC cubins of one or two
#          d=32 variants, no GPU needed), exported; and one whose kernels have no source
#
#   sh tests/fuzz/make_corpus.sh [BUILD_DIR]
set -eu
cd "$(dirname "$0")/../.."
build=${1:-build}
ft=$build/flashtune
if [ ! -x "$ft" ] || [ ! -x "$build/tests/fake_worker" ]; then
  echo "make_corpus: build $build first" >&2
  exit 1
fi
corpus=tests/fuzz/corpus
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mkdir -p "$corpus/spec" "$corpus/pack"
cp specs/*.lua tests/specs/*.lua "$corpus/spec/"

export FLASHTUNE_WORKER="$build/tests/fake_worker" FLASHTUNE_CACHE_DIR="$work/cache"
pack() { # pack NAME FILTER: tune FILTER with the stand-in worker, export the winners as NAME
  "$ft" tune specs/flash_fwd.lua --db "$work/$1.db" --only "$2" -q -j 2 >"$work/out" 2>&1 ||
    { cat "$work/out"; exit 1; }
  "$ft" export --db "$work/$1.db" --out "$corpus/pack/$1.ftpack" >"$work/out" 2>&1 || { cat "$work/out"; exit 1; }
}
# shrink FROM TO: the same pack with every source cut to its first bytes, the index's sizes,
# offsets and sha256s (and the source hashes) made to match: smaller inputs that still pass
# every check (a cubin must stay whole: its ELF symbol table must define the kernel's entry).
shrink() {
  python3 - "$1" "$2" <<'PY'
import hashlib, json, sys
data = open(sys.argv[1], "rb").read()
nl = data.index(b"\n")
magic, version, nindex, nblob, _ = data[:nl].split()
index = json.loads(data[nl + 1:nl + 1 + int(nindex)])
blobs = data[nl + 1 + int(nindex):]
out = b""
for k in index["kernels"]:
    for part, keep in (("cubin", None), ("source", 120)):
        ref = k[part]
        whole = blobs[ref["offset"]:ref["offset"] + ref["size"]]
        # a source keeps its first and last bytes (the last name its kernel: sources stay distinct)
        chunk = whole if keep is None or len(whole) <= keep else whole[:keep // 2] + whole[-(keep // 2):]
        ref.update(offset=len(out), size=len(chunk), sha256=hashlib.sha256(chunk).hexdigest())
        if part == "source":
            k["source_hash"] = ref["sha256"]
        out += chunk
body = json.dumps(index).encode() + b"\n" + out
head = b"%s %s %d %d %s\n" % (magic, version, len(body) - len(out), len(out), hashlib.sha256(body).hexdigest().encode())
open(sys.argv[2], "wb").write(head + body)
PY
}
pack one_kernel "d=32,bm=64,bn=32,warps=4,stages=1,causal=0,dtype=f16,qreg=0,overlap=0"
pack two_kernels "d=32,bm=64,bn=32,warps=4,stages=1,dtype=bf16,qreg=0,overlap=0"
shrink "$corpus/pack/one_kernel.ftpack" "$corpus/pack/one_kernel_small.ftpack"
shrink "$corpus/pack/two_kernels.ftpack" "$corpus/pack/two_kernels_small.ftpack"
rm "$corpus/pack/two_kernels.ftpack"
for f in "$corpus"/pack/*.ftpack; do # each seed is a pack that import accepts
  "$ft" import "$f" --db "$work/check.db" --dry-run >"$work/out" 2>&1 || { cat "$work/out"; exit 1; }
done
ls -l "$corpus/pack"
