#!/usr/bin/env bash
# usage: run.sh OUTDIR [REPO]  - quantizes the baseline set with the qsim of REPO (default: cwd) into OUTDIR
# (models from make_models.py in $BASELINE_MODELS, default OUTDIR/../baseline-models);
# run it before and after a change, then: compare.sh BEFORE AFTER
set -e
here=$(dirname "$(realpath "$0")")
out=$(realpath -m "$1"); repo=${2:-$PWD}
rm -rf "$out"; mkdir -p "$out"; cd "$repo"
M=${BASELINE_MODELS:-$(dirname "$out")/baseline-models}
[ -d "$M/mix" ] || python "$here/make_models.py" "$M" >/dev/null
q() { name=$1; shift; python -m qsim quantize -q "$@" -o "$out/$name" > "$out/$name.log" 2>&1 || { echo "FAILED $name"; cat "$out/$name.log" | tail -5; }; }
q emb_default --subset --eval-limit 200 &
q emb_double --subset --eval-limit 200 --rounding double --weights per-tensor --observer minmax
wait
q emb_16x8 --subset --eval-limit 200 --precision 16x8 --weight-rounding nearest --no-bias-correction &
q emb_mse --subset --eval-limit 200 --observer mse --calib-limit 64
wait
q cvm8 --subset --eval-limit 200 --target cvm &
q cvm4 --subset --eval-limit 200 --target cvm --cvm-precision 4
wait
q mix $M/mix --calib $M/mix_calib.npy &
q mix_cvm $M/cvmmix --calib $M/mix_calib.npy --target cvm
wait
q mix_16x8 $M/mixns --calib $M/mix_calib.npy --precision 16x8 --rounding double
echo done "$out"
