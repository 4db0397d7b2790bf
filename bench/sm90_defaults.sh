#!/bin/sh
# The built-in defaults (runtime/defaults.c) of an sm_90a spec at the head dims given, one full
# variant a line (bf16; causal 0 and 1 where the default serves it), as `flashtune gen` names
# it: each line, given to --only, matches that kernel alone. Without head dims, all of them.
#   sh bench/sm90_defaults.sh path/to/flashtune flash_fwd_sm90 64 128 256
set -eu
ft=$1; spec=$2; shift 2
cd "$(dirname "$0")/.."
[ $# -gt 0 ] || set -- $(sed -n -E "s/^\s*\{\"$spec\", ([0-9]+), .*/\1/p" runtime/defaults.c | sort -un)
for d in "$@"; do
  grep -E "^\s*\{\"$spec\", $d, " runtime/defaults.c |
    sed -E 's/.*\{"[a-z0-9_]+", [0-9]+, (-?[0-9]+), "([^"]*)".*/\1 \2/' |
    while read -r c knobs; do
      for causal in 0 1; do
        [ "$c" = -1 ] || [ "$c" = "$causal" ] || continue
        "$ft" gen "$spec" --arch sm_90a --variant "d=$d,dtype=bf16,causal=$causal,$knobs" 2> /dev/null |
          sed -n 's|^// variant *||p'
      done
    done
done | sort -u
