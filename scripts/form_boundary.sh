#!/usr/bin/env bash
# The chunked path's fused / split boundary (choose_form in src/cuda/chunked_tile.h) on the GPU:
# each case timed by `gdn bench --backend cuda` as the library chooses ("model") and with each
# form forced (GDN_CHUNKED_FORM=fused, split2), one line a case and form: "CASE FORM MS".
# Cases: BOUNDARY_CASES (space-separated case strings), default (sequence, value head) pairs 48
# to 128 at Hk/Hv 4/8 and 64, 96 at 16/32 (BENCH.md's head shape). Used by device_pass.sh's
# phase boundary; GDN is the tool (default .devbuild/bin/gdn).
set -uo pipefail
GDN=${GDN:-.devbuild/bin/gdn}
CASES=${BOUNDARY_CASES:-"N=6,T=8192,Hk=4,Hv=8 N=8,T=8192,Hk=4,Hv=8 N=9,T=8192,Hk=4,Hv=8 N=12,T=8192,Hk=4,Hv=8
  N=16,T=8192,Hk=4,Hv=8 N=2,T=16384,Hk=16,Hv=32 N=3,T=8192,Hk=16,Hv=32"}
for c in $CASES; do
  for form in model fused split2; do
    setting=GDN_CHUNKED_FORM=$form
    [ "$form" = model ] && setting=GDN_CHUNKED_FORM=
    ms=$(env "$setting" timeout 60 "$GDN" bench --backend cuda --no-accuracy --repeat 10 --cases "$c" 2>&1 |
         awk '/^N=/ {print $2}')
    echo "$c $form ${ms:-failed}"
  done
done
