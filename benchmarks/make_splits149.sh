#!/usr/bin/env bash
# Rebuilds, from nothing, the data every issue-23 ES run since stop 39 starts from, in the current
# directory (LLVM 19; each step is skipped when its output exists, so an interrupted run resumes):
#   larger2/      the 176-package Debian corpus (debian_packages.txt + debian_extra_packages.txt)
#   splits149/    its package split: 149 training, 12 validation (VAL) and 15 test (TEST) packages
#   large/ splits/ train-trace.npz   the 64-package corpus, its 0.6/0.2/0.2 split (37 training packages)
#                  and the heuristic's trace of that training side (stop 31's recipe)
#   runs/bc-s$s/ prior20-s$s.npz     BC seeds 0-4 on that trace and their margin-20 priors
#   trace149-train.npz               the heuristic's trace of splits149/train (the analysis scripts' input)
# Usage: bash benchmarks/make_splits149.sh [SEEDS]   (SEEDS: how many BC seeds, default 5)
# On a fresh 2-core machine the corpus is most of it (about 1 h 30 min of the 1 h 45 min it took from nothing in stop 65); see benchmarks/README.md.
# With mlopt's cache of built packages (~/.cache/mlopt/debian, 0.6 GB) kept from an earlier run, all of it takes 3 minutes (stop 67).
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
seeds="${1:-5}"
export MLOPT_LLVM=19
VAL=angelscript,cmark,fmtlib,lame,leveldb,libpcap,libtomcrypt,lzip,nettle,ninja-build,snappy,wavpack
TEST=box2d,clipper,faad2,giflib,hunspell,lcms2,libebml,libuv1,lmdb,lzo2,mawk,msgpack-c,openh264,qhull,spdlog
step() { echo "make_splits149 [$(date +%H:%M:%S)]: $*" >&2; }

if [ ! -f larger2.txt ]; then
  cat "$here/../python/mlopt/corpus/debian_packages.txt" "$here/debian_extra_packages.txt" > larger2.txt
fi
if [ ! -f larger2/corpus_description.json ]; then
  step "corpus larger2 (176 packages; packages built before are taken from mlopt's cache)"
  mlopt corpus debian --list larger2.txt -o larger2 --jobs 2 --llvm 19 --quiet
fi
if [ ! -d splits149/train ]; then
  step "split splits149"
  assign=$(grep -o '^[a-z0-9][a-z0-9+.-]*' larger2.txt | awk -v v=",$VAL," -v t=",$TEST," \
    '{s = index(v, ","$1",") ? "validation" : index(t, ","$1",") ? "test" : "train"; printf "%s%s=%s", (NR>1?",":""), $1, s}')
  mlopt corpus split larger2 splits149 --assign "$assign" --quiet
fi
if [ ! -f large/corpus_description.json ]; then
  step "corpus large (the 64 default packages, all in mlopt's cache by now)"
  mlopt corpus debian --large -o large --jobs 2 --llvm 19 --quiet
fi
[ -d splits/train ] || mlopt corpus split large splits --fractions 0.6,0.2,0.2 --quiet
[ -f train-trace.npz ] || { step "trace splits/train"; mlopt trace splits/train -o train-trace.npz --quiet; }
for s in $(seq 0 $((seeds - 1))); do
  [ -f runs/bc-s$s/policy.npz ] || { step "BC seed $s"; mlopt train bc train-trace.npz -o runs/bc-s$s --seed $s --no-compile --quiet; }
  [ -f prior20-s$s.npz ] || mlopt policy default-prior runs/bc-s$s --margin 20 -o prior20-s$s.npz
done
[ -f trace149-train.npz ] || { step "trace splits149/train"; mlopt trace splits149/train -o trace149-train.npz --quiet; }
step "done"
