#!/usr/bin/env bash
# The issue-48 table's rows through the engine in the loop: cost / violation minutes / actions each.
# Usage: scripts/trouble-rows.sh [row ...] (default: every row); OUT=dir for the JSON (default out/rows).
set -euo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-out/rows}
mkdir -p "$OUT"
WC=data/traces/worldcup98/per_minute.csv
NASA=data/traces/nasa_jul95/per_minute.csv
declare -A ROWS=(
  [slow30]="--trace $WC --minutes 1000 --slowdown 600,120,0.3,0"
  [slow15]="--trace $WC --minutes 1000 --slowdown 600,120,0.15,0"
  [stall]="--trace $WC --minutes 1000 --slowdown 600,45,0.01,0"
  [overload]="--trace $WC --skip 7000 --minutes 2000 --peak-instances 40"
  [late]="--trace $NASA --minutes 2000 --checkpoint-delay 180"
  [rare]="--trace $WC --minutes 2000 --checkpoint-interval 300"
  [rebalance]="--trace $WC --minutes 2000 --rebalance-pause 120"
)
names=("$@")
[ ${#names[@]} -eq 0 ] && names=(slow30 slow15 stall overload late rare rebalance)
for name in "${names[@]}"; do
  # shellcheck disable=SC2086
  .venv/bin/python -m scaling simulate ${ROWS[$name]} --json "$OUT/$name.json" >/dev/null
  .venv/bin/python - "$OUT/$name.json" "$name" <<'PY'
import json, sys
summary = json.load(open(sys.argv[1]))
r = summary.get("result", summary)
print(f"{sys.argv[2]:10s} {r['cost_ratio']:.3f} / {r['slo_violation_minutes']} / {r['max_age_minutes']:.1f} / {r['scale_actions']} actions")
PY
done
