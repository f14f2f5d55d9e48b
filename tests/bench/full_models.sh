#!/usr/bin/env bash
# The peer comparison of the full models on a GPU machine: generate the five models, compile
# each with drkc (fp16), time drkrun against PyTorch eager, torch.compile and
# torch.compile(mode="reduce-overhead") (tests/bench/peers.py). Steps can run in separate
# calls against the same WORK directory.
# usage: full_models.sh BINDIR WORK OUTDIR STEP...   (STEP: gen, compile, peers, peers-eager,
#        peers-compiled, profile; MODELS="..." limits the models; DRKC_FLAGS: drkc's options,
#        default "--precision=fp16 --fusion-aggressiveness=3"; LAYERS=N: models of N layers)
set -uo pipefail
SRC=$(cd "$(dirname "$0")/../.." && pwd)
BIN=$1; WORK=$2; OUT=$3; shift 3
MODELS=${MODELS:-resnet50 bert_base gpt2_small vit_b16 llama_decoder}
DRKC_FLAGS=${DRKC_FLAGS:-"--precision=fp16 --fusion-aggressiveness=3"}
mkdir -p "$WORK" "$OUT"
for step in "$@"; do
  case $step in
    gen)
      python3 "$SRC/tests/models/gen_full_models.py" "$WORK" --only $MODELS --outputs none ${LAYERS:+--layers $LAYERS} >"$OUT/gen.log" 2>&1 ||
        { echo "gen failed"; tail -5 "$OUT/gen.log"; } ;;
    compile)
      for m in $MODELS; do
        ( t0=$SECONDS; "$BIN/drkc" "$WORK/$m/model.onnx" --target=sm_90a $DRKC_FLAGS --report \
            -o "$WORK/$m/model.drkm" >"$OUT/compile-$m.log" 2>&1
          echo "$m compile rc=$? $((SECONDS - t0)) s" >>"$OUT/compile-$m.log" ) &
      done
      wait
      cat "$OUT"/compile-*.log | grep -E "report|compile|error" ;;
    profile)
      for m in $MODELS; do
        "$BIN/drkrun" "$WORK/$m/model.drkm" --iters 20 --warmup 3 --profile >"$OUT/profile-$m.log" 2>&1
        echo "== $m: $(grep -E '^resident' "$OUT/profile-$m.log")"
        grep -E '^ +[0-9]+ ' "$OUT/profile-$m.log" | sort -k2 -nr | head -n 8
      done ;;
    peers|peers-eager|peers-compiled)
      modes=eager,compile,reduce-overhead
      [ "$step" = peers-eager ] && modes=eager
      [ "$step" = peers-compiled ] && modes=compile,reduce-overhead
      python3 "$SRC/tests/bench/peers.py" "$WORK" --only $MODELS --modes "$modes" --drkrun "$BIN/drkrun" \
        --iters 20 --out "$OUT/peers-$step.json" 2>&1 | tee "$OUT/peers-$step.log" | tail -n 20 ;;
    *) echo "unknown step $step"; exit 2 ;;
  esac
done
