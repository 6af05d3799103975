#!/usr/bin/env bash
# usage: compare.sh REF NEW - every integer-model file (main.sknd, *.dat, quantization.json) byte-identical
ref=$1; new=$2; bad=0
for d in "$ref"/*/; do n=$(basename "$d")
  for f in $(cd "$d" && find . -type f \( -name '*.sknd' -o -name '*.dat' -o -name 'quantization.json' \) | sort); do
    if ! cmp -s "$d/$f" "$new/$n/$f"; then echo "DIFFERS: $n/$f"; bad=1; fi
  done
  extra=$(cd "$new/$n" 2>/dev/null && find . -type f \( -name '*.sknd' -o -name '*.dat' \) | sort | comm -13 <(cd "$d" && find . -type f \( -name '*.sknd' -o -name '*.dat' \) | sort) -)
  [ -n "$extra" ] && { echo "EXTRA in $n: $extra"; bad=1; }
  # the reported figures (accuracy, SQNR) must be equal too
  python - "$d/report.json" "$new/$n/report.json" <<'PY' || bad=1
import json,sys
def strip(o):
    if isinstance(o,dict): return {k:strip(v) for k,v in o.items() if not any(s in k for s in ("time","seconds","elapsed","version","date","path","threads"))}
    if isinstance(o,list): return [strip(v) for v in o]
    return o
try:
    a=strip(json.load(open(sys.argv[1]))); b=strip(json.load(open(sys.argv[2])))
except FileNotFoundError as e:
    print("MISSING", e.filename); sys.exit(1)
if a!=b: print("REPORT FIGURES DIFFER:", sys.argv[2]); sys.exit(1)
PY
done
for l in "$ref"/*.log; do n=$(basename "$l" .log)
  if [ ! -d "$ref/$n" ] && ! cmp -s "$l" "$new/$n.log"; then echo "FAILURE MESSAGE DIFFERS: $n"; bad=1; fi
done
[ $bad = 0 ] && echo "IDENTICAL: every integer model and report figure of $ref matches $new"
exit $bad
