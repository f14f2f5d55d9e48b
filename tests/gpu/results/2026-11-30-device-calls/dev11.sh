#!/bin/bash
# device call 11 (final): cases + 12 model configs, attention graphs (0/1 masks), medium models, full-model peers
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
O=/tmp/of; rm -rf $O; mkdir -p $O; W=/tmp/wf; rm -rf $W; mkdir -p $W && tar xJf .carry/bin.tar.xz -C $W; B=$W/bin
( python3 tests/models/gen_full_models.py /tmp/fm --outputs none > $O/gen.log 2>&1;
  python3 tests/models/gen_full_models.py /tmp/med --medium --only gpt2_small llama_decoder --outputs none > $O/genmed.log 2>&1 ) &
tests/gpu/run_bundle.sh .carry $O cases,models > $O/bundle.log 2>&1
grep -E "passed|failed" $O/cases.log | tail -1; grep "models:" $O/bundle.log; grep -v "PASS.*rc=0" $O/models.log | head
M=.carry/mask01
for g in tests/fuse/attn_*.drkg; do
  ins=; case $(basename $g) in attn_bert_f16.drkg) ins="--input q=$M/q.npy --input k=$M/k.npy --input v=$M/v.npy --input mask=$M/mask.npy";;
    attn_qkv_merged_bias_f16.drkg) ins="--input x=$M/x.npy --input w=$M/w.npy --input b=$M/b.npy --input mask=$M/mask.npy";; esac
  for cfg in "--fusion-aggressiveness=3" "--fusion-aggressiveness=1"; do
    out=$($B/drkc run $g --device=cuda --target=sm_90a --check $cfg $ins 2>&1)
    if grep -q PASS <<<"$out" && ! grep -q FAIL <<<"$out"; then echo "PASS $(basename $g) $cfg ${ins:+(0/1 mask)}: $(grep -o 'rel error [^ ]*' <<<"$out" | head -2 | tr '\n' ' ')"; else echo "FAIL $(basename $g) $cfg: $(grep -E 'check|error' <<<"$out" | head -3 | tr '\n' ' ')"; fi
  done
done > $O/attn.log 2>&1
echo "attn graphs: $(grep -c ^PASS $O/attn.log) PASS, $(grep -c ^FAIL $O/attn.log) FAIL"; grep ^FAIL $O/attn.log | head -5
wait
for m in gpt2_small llama_decoder; do for cfg in "--precision=fp16 --fusion-aggressiveness=3" "--precision=bf16 --fusion-aggressiveness=3" "--precision=fp8 --fusion-aggressiveness=3" "--fusion-aggressiveness=1"; do
  echo "== medium $m $cfg: $($B/drkc run /tmp/med/$m/model.onnx --device=cuda --check $cfg 2>&1 | grep -E 'check|error' | tr '\n' ' ')"; done; done > $O/check-med.log
cat $O/check-med.log | cut -c1-200
tests/bench/full_models.sh $B /tmp/fm $O compile > $O/fm-compile.log 2>&1
MODELS="gpt2_small llama_decoder" tests/bench/full_models.sh $B /tmp/fm $O profile > $O/fm-profile.log 2>&1
python3 tests/bench/peers.py /tmp/fm --modes eager,compile,reduce-overhead --drkrun $B/drkrun --iters 50 --out $O/peers.json > $O/peers.log 2>&1
tar czf $OUT/final.tgz -C /tmp of
grep -E "^==" $O/fm-profile.log; tail -9 $O/peers.log
