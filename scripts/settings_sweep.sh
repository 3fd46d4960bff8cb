#!/usr/bin/env bash
# Each case timed by `gdn bench --backend cuda` under each of a list of environment settings, one
# line a case and setting: "CASE SETTING MS" (how a plan's constants are measured: the
# segment counts and CTAs a run of the f32 sequence split, for instance). SWEEP_CASES: case
# strings, space-separated; SWEEP_SETTINGS: settings separated by ';', each "VAR=x VAR2=y" (an
# empty one: the library's choice); SWEEP_REPEAT timed calls (default 10). Used by
# device_pass.sh's phase sweep; GDN is the tool (default .devbuild/bin/gdn).
set -uo pipefail
GDN=${GDN:-.devbuild/bin/gdn}
IFS=';' read -r -a SETTINGS <<< "${SWEEP_SETTINGS:-}"
[ ${#SETTINGS[@]} -gt 0 ] || SETTINGS=("")
for c in ${SWEEP_CASES:?SWEEP_CASES: case strings}; do
  for setting in "${SETTINGS[@]}"; do
    # shellcheck disable=SC2086  # (the setting's words are separate variables)
    ms=$(env $setting timeout 60 "$GDN" bench --backend cuda --no-accuracy --repeat "${SWEEP_REPEAT:-10}" --cases "$c" 2>&1 |
         awk '/^N=/ {print $2}')
    echo "$c ${setting:-chosen} ${ms:-failed}"
  done
done
