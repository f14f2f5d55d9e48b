#!/usr/bin/env bash
# `drkc MODEL --db=FILE`: tuned schedules from the kernel database. Records are planted with
# `drkc db import` for some of a small model's workload keys (read off --emit=schedules); the
# compile with --db changes exactly the kernels of those workloads, to exactly the records'
# knobs, and no other kernel; records that must not be used (another drkc version, another
# arch, not stable, invalid) change nothing and get a note; a --schedules line wins over the
# database; --report names the record of every tuned kernel; --require-tuned fails listing
# every untuned kernel, and passes once all are tuned. Needs no GPU.
# usage: db.sh DRKC MODELS_DIR WORK
set -u
DRKC=$1; MODELS=$2; W=$3
rm -rf "$W"; mkdir -p "$W"
fail=0
bad() { echo "FAIL: $*"; fail=1; }
VERSION=$("$DRKC" --version | awk 'NR == 1 {print $2}')
n_uid=0
# record WL KERNEL KIND "SCHEDULE" TIME STABLE VALID VERSION ARCH TARGETKEY
record() {
  n_uid=$((n_uid + 1))
  printf '{"uid":"%032x","workload":"%s","kind":"%s","description":"%s","target":"%s","fingerprint":"arch=%s;sms=132;sm_mhz=1980;mem_mhz=2619;bw_gbs=4800;l2_bytes=52428800;driver=560.35.03;cuda=12.6;name=GPU %s","kernel":"%s","schedule":"%s","valid":%s,"reason":"%s","time_us":%s,"tflops":null,"gbs":null,"energy_j":null,"mem_bytes":null,"error":null,"reward":1,"weights":[1,0,0,0],"drkc_version":"%s","host":"test","created":1796175959,"model":"db.sh","user":"test","tags":"","stable":%s,"policy":"test","trial":0}\n' \
    $n_uid "$1" "$3" "$3" "${10}" "$9" "$9" "$2" "$4" "$7" "$([ "$7" = true ] || echo wrong)" "$5" "$8" "$6"
}
# a target's key (16 hex digits of its fingerprint's hash): import says which it expects
target_key() { # ARCH
  record 0123456789abcdef0123456789abcdef k0_X mm_ws "" 1 false true "$VERSION" "$1" 0000000000000000 >"$W/probe.jsonl"
  "$DRKC" db import "$W/probe.jsonl" --db="$W/probe.db" 2>&1 | sed -n 's/.*is not the key of its fingerprint (\([0-9a-f]*\)).*/\1/p'
}
TK_H200=$(target_key sm_90a)
TK_A100=$(target_key sm_80)
[ ${#TK_H200} = 16 ] && [ ${#TK_A100} = 16 ] || { echo "FAIL: cannot learn the target keys ($TK_H200, $TK_A100)"; exit 1; }
# the line of kernel K in schedules file F, without the name
line_of() { awk -v k="$1" '$1 == k' "$2"; }
# a legal point other than the heuristic's: every knob moved to another value of its domain
other_point() { # KIND KNOBS... -> text
  local out=() kv k v
  for kv in "$@"; do
    k=${kv%%=*}; v=${kv#*=}
    case $k in
      mm.tile_n) [ "$v" = 128 ] && v=64 || v=128 ;;
      mm.split_k) [ "$v" = 2 ] && v=1 || v=2 ;;
      mm.stages) [ "$v" = 4 ] && v=3 || v=4 ;;
      mm.staged) v=$((1 - v)) ;;
      rows.spt) [ "$v" = 2 ] && v=1 || v=2 ;;
      *) ;;
    esac
    out+=("$k=$v")
  done
  echo "${out[*]}"
}
F0=(--target=sm_90a --precision=fp16 --fusion-aggressiveness=3)
for model in mlp gpt_layer; do
  F=("${F0[@]}"); [ $model = gpt_layer ] && F+=(--bind=batch=1,seq=128)
  m="$MODELS/$model/model.onnx"
  D="$W/$model"; mkdir -p "$D"
  "$DRKC" "$m" "${F[@]}" --emit=schedules -o "$D/heur.sched" || { bad "$model: --emit=schedules failed"; continue; }
  # kernels with knobs: NAME WL KIND KNOBS...
  grep '^k' "$D/heur.sched" | awk 'NF > 3' >"$D/knobbed"
  nk=$(wc -l <"$D/knobbed")
  [ "$nk" -ge 3 ] || { bad "$model: only $nk kernels with knobs"; continue; }
  # tune every other workload (a workload shared by two kernels tunes both)
  : >"$D/r.jsonl"; : >"$D/tuned_wl"
  i=0
  while read -r name wl kind knobs; do
    wl=${wl#wl=}
    i=$((i + 1))
    grep -q "^$wl " "$D/tuned_wl" && continue
    if [ $((i % 2)) = 1 ]; then
      # shellcheck disable=SC2086
      pt=$(other_point $knobs)
      echo "$wl $pt" >>"$D/tuned_wl"
      record "$wl" "$name" "$kind" "$pt" 5 true true "$VERSION" sm_90a $TK_H200 >>"$D/r.jsonl"
      # a slower stable record and a faster invalid one of the same workload: never chosen
      record "$wl" "$name" "$kind" "$knobs" 9 true true "$VERSION" sm_90a $TK_H200 >>"$D/r.jsonl"
      record "$wl" "$name" "$kind" "$knobs" 1 false false "$VERSION" sm_90a $TK_H200 >>"$D/r.jsonl"
    else
      # records that must not be used: another version, another arch, not stable, invalid
      # shellcheck disable=SC2086
      pt=$(other_point $knobs)
      record "$wl" "$name" "$kind" "$pt" 1 true true 0.0.1 sm_90a $TK_H200 >>"$D/r.jsonl"
      record "$wl" "$name" "$kind" "$pt" 1 true true "$VERSION" sm_80 $TK_A100 >>"$D/r.jsonl"
      record "$wl" "$name" "$kind" "$pt" 1 false true "$VERSION" sm_90a $TK_H200 >>"$D/r.jsonl"
      record "$wl" "$name" "$kind" "$pt" 1 false false "$VERSION" sm_90a $TK_H200 >>"$D/r.jsonl"
    fi
  done <"$D/knobbed"
  "$DRKC" db import "$D/r.jsonl" --db="$D/k.db" >"$D/import.out" 2>&1 || { bad "$model: import failed: $(cat "$D/import.out")"; continue; }
  "$DRKC" "$m" "${F[@]}" --emit=schedules --db="$D/k.db" -o "$D/db.sched" 2>"$D/db.err" || { bad "$model: --db compile failed: $(cat "$D/db.err")"; continue; }
  # (a) exactly the kernels of the planted workloads changed, to the records' knobs
  changed=0 tuned=0
  while read -r name wl kind rest; do
    key=${wl#wl=}
    want=$(awk -v w="$key" '$1 == w { $1 = ""; sub(/^ /, ""); print }' "$D/tuned_wl")
    got=$(line_of "$name" "$D/db.sched" | cut -d' ' -f4-)
    heur=$(line_of "$name" "$D/heur.sched" | cut -d' ' -f4-)
    if [ -n "$want" ]; then
      tuned=$((tuned + 1))
      [ "$got" = "$want" ] || bad "$model: $name (tuned workload $key) has '$got', the record says '$want'"
    else
      [ "$got" = "$heur" ] || bad "$model: $name (no usable record) changed from '$heur' to '$got'"
    fi
    [ "$got" = "$heur" ] || changed=$((changed + 1))
  done <"$D/knobbed"
  # kernels without knobs are listed unchanged too
  diff <(grep '^k' "$D/heur.sched" | awk 'NF <= 3') <(grep '^k' "$D/db.sched" | awk 'NF <= 3') >/dev/null ||
    bad "$model: kernels without knobs changed"
  [ "$(grep -c '^k' "$D/heur.sched")" = "$(grep -c '^k' "$D/db.sched")" ] || bad "$model: the kernel count changed"
  [ "$changed" = "$tuned" ] && [ "$tuned" -ge 1 ] || bad "$model: $changed kernels changed, $tuned tuned"
  # the tile IR changes too (the records reach the lowering, not only the listing)
  "$DRKC" "$m" "${F[@]}" --emit=tile -o "$D/heur.drkt" && "$DRKC" "$m" "${F[@]}" --emit=tile --db="$D/k.db" -o "$D/db.drkt" 2>/dev/null
  cmp -s "$D/heur.drkt" "$D/db.drkt" && bad "$model: --db did not change the tile IR"
  # --report: a line per kernel with knobs, the record id of each tuned one
  "$DRKC" "$m" "${F[@]}" --emit=schedules --db="$D/k.db" --report -o /dev/null 2>"$D/report.err"
  [ "$(grep -c ' tuned: record [0-9]*, ' "$D/report.err")" = "$tuned" ] || bad "$model: --report does not name $tuned tuned records: $(cat "$D/report.err")"
  [ "$(grep -c ' heuristic: ' "$D/report.err")" = $((nk - tuned)) ] || bad "$model: --report does not list $((nk - tuned)) untuned kernels"
  grep -q "is from drkc 0.0.1 (this is $VERSION): not used" "$D/report.err" || bad "$model: --report does not say a record is from another version"
  grep -q "$tuned of $nk kernels with knobs tuned from the database" "$D/report.err" || bad "$model: no --report summary"
  # (b) --require-tuned: fails, listing every untuned kernel with its workload key
  "$DRKC" "$m" "${F[@]}" --emit=schedules --db="$D/k.db" --require-tuned -o "$D/req.sched" 2>"$D/req.err"
  rc=$?
  [ $rc = 1 ] || bad "$model: --require-tuned with untuned kernels exited $rc"
  grep -q "error: --require-tuned: $((nk - tuned)) of $nk kernels with knobs have no usable record" "$D/req.err" || bad "$model: --require-tuned error: $(cat "$D/req.err")"
  while read -r name wl kind rest; do
    key=${wl#wl=}
    if grep -q "^$key " "$D/tuned_wl"; then
      grep -q "^  $name .*$wl" "$D/req.err" && bad "$model: --require-tuned lists the tuned $name"
    else
      grep -q "^  $name  *$wl  " "$D/req.err" || bad "$model: --require-tuned does not list $name $wl"
    fi
  done <"$D/knobbed"
  # a --schedules line wins over the database: the first tuned kernel back to its heuristic line
  first=$(while read -r name wl rest; do grep -q "^${wl#wl=} " "$D/tuned_wl" && { echo "$name"; break; }; done <"$D/knobbed")
  line_of "$first" "$D/heur.sched" >"$D/one.sched"
  "$DRKC" "$m" "${F[@]}" --emit=schedules --db="$D/k.db" --schedules="$D/one.sched" -o "$D/file.sched" 2>/dev/null
  [ "$(line_of "$first" "$D/file.sched")" = "$(line_of "$first" "$D/heur.sched")" ] || bad "$model: the --schedules line of $first did not win over the database"
  # every untuned workload tuned (a second import): --require-tuned passes, the module builds
  : >"$D/rest.jsonl"
  while read -r name wl kind knobs; do
    key=${wl#wl=}
    grep -q "^$key " "$D/tuned_wl" && continue
    record "$key" "$name" "$kind" "$knobs" 7 true true "$VERSION" sm_90a $TK_H200 >>"$D/rest.jsonl"
  done <"$D/knobbed"
  "$DRKC" db import "$D/rest.jsonl" --db="$D/k.db" >/dev/null 2>&1 || bad "$model: second import failed"
  "$DRKC" "$m" "${F[@]}" --emit=schedules --db="$D/k.db" --require-tuned -o "$D/all.sched" 2>"$D/all.err" ||
    bad "$model: --require-tuned with every kernel tuned failed: $(cat "$D/all.err")"
  echo "ok $model: $nk kernels with knobs, $tuned tuned from the database, only those changed"
done
# the database as a whole from another drkc version: a note, nothing used
m="$MODELS/mlp/model.onnx"
wl=$(awk '/^k.* mm_ws /{print substr($2, 4); exit}' "$W/mlp/heur.sched")
record "$wl" k1_MatMul mm_ws "mm.tile_n=128 mm.split_k=2 mm.stages=4 mm.persistent=0 mm.cluster=1 mm.staged=0" 3 true true 0.0.1 sm_90a $TK_H200 >"$W/old.jsonl"
"$DRKC" db import "$W/old.jsonl" --db="$W/old.db" >/dev/null 2>&1 || bad "import of the old-version record failed"
"$DRKC" "$m" "${F0[@]}" --emit=schedules --db="$W/old.db" -o "$W/old.sched" 2>"$W/old.err" || bad "--db with an old database failed"
grep -q "note: --db: .*old.db: its 1 stable records are from another drkc version (0.0.1; this is drkc $VERSION): not used" "$W/old.err" ||
  bad "no note for a database of another drkc version: $(cat "$W/old.err")"
cmp -s "$W/old.sched" "$W/mlp/heur.sched" || bad "a database of another version changed a schedule"
# for another target (sm_80 compile of the same model: other workload keys, and the record's arch is sm_90a)
"$DRKC" "$m" --target=sm_80 --precision=fp16 --emit=schedules --db="$W/mlp/k.db" -o "$W/sm80.sched" 2>"$W/sm80.err" || bad "--db for sm_80 failed"
"$DRKC" "$m" --target=sm_80 --precision=fp16 --emit=schedules -o "$W/sm80.heur.sched" 2>/dev/null
cmp -s "$W/sm80.sched" "$W/sm80.heur.sched" || bad "records of sm_90a changed an sm_80 compile"
# errors
"$DRKC" "$m" "${F0[@]}" --emit=schedules --db="$W/missing.db" -o "$W/x" 2>"$W/missing.err" && bad "a missing database accepted"
grep -q "error: --db: .*missing.db: no such database" "$W/missing.err" || bad "missing database: $(cat "$W/missing.err")"
[ ! -e "$W/missing.db" ] || bad "--db created a database"
"$DRKC" "$m" "${F0[@]}" --emit=schedules --require-tuned -o "$W/x" 2>"$W/noreq.err" && bad "--require-tuned without --db accepted"
grep -q "require-tuned needs --db" "$W/noreq.err" || bad "--require-tuned without --db: $(cat "$W/noreq.err")"
echo "not a database" >"$W/junk.db"
"$DRKC" "$m" "${F0[@]}" --emit=schedules --db="$W/junk.db" -o "$W/x" 2>"$W/junk.err" && bad "a junk database accepted"
grep -q "error: --db: " "$W/junk.err" || bad "junk database: $(cat "$W/junk.err")"
[ $fail = 0 ] && echo "db: all passed"
exit $fail
