#!/usr/bin/env bash
# The deployment path of docs/deploy.md, as a user takes it: `drkc -c` writes model.o (an ELF
# relocatable object for the host embedding the module) and model.h (the typed C API);
# examples/c-app/app.c links them with libdrkrt, static or shared, and nothing else, and
# runs. Without a GPU the app still reads the embedded module (provenance, shapes) and then
# stops with the runtime's clear "no GPU" status (exit 3); the driver libraries are pointed
# at paths that do not exist so this holds on a GPU machine too (tests/gpu/deploy.sh runs it
# there). Also: --emit=lib (a static archive), the object's layout (section alignment,
# symbols, the module bytes inside it read back by drkrun --list), and option errors.
# With MODELS_DIR (tests/models' data), a two-input model (bert_layer: f32 and int64 inputs)
# gets a typed run() that a -Werror C program calls.
# usage: c_app.sh DRKC DRKRUN MODEL SRC_DIR INCLUDE_DIR LIBDRKRT_A LIBDRKRT_SO WORK_DIR [CC [MODELS_DIR]]
set -u
DRKC=$1; DRKRUN=$2; MODEL=$3; SRC=$4; INC=$5; LIBA=$6; LIBSO=$7; W=$8; CC=${9:-cc}; MODELS=${10:-}
rm -rf "$W"; mkdir -p "$W"
fails=0
pass() { echo "PASS $1"; }
fail() { echo "FAIL $1"; fails=$((fails + 1)); }
has() { # NAME FILE REGEX want(1|0)
  local n; n=$(grep -cE -- "$3" "$2")
  if { [ "$4" = 1 ] && [ "$n" -gt 0 ]; } || { [ "$4" = 0 ] && [ "$n" = 0 ]; }; then pass "$1: /$3/ x$n"
  else fail "$1: /$3/ matched $n line(s) in $2:"; sed 's/^/  | /' "$2" | head -20; fi
}
for t in readelf nm objcopy ar "$CC"; do
  command -v "$t" >/dev/null || { echo "SKIP: $t not found (binutils, a C compiler)"; exit 77; }
done
export DRK_CUDA_DRIVER=/nonexistent/libcuda.so.1 DRK_HIP_DRIVER=/nonexistent/libamdhip64.so

# -c -o model.o: the object and its header
if ! (cd "$W" && "$DRKC" "$MODEL" --target=sm_90 -c -o model.o) >"$W/drkc.log" 2>&1; then
  fail "drkc -c"; sed 's/^/  | /' "$W/drkc.log"; echo "$fails failure(s)"; exit 1
fi
[ -f "$W/model.o" ] && [ -f "$W/model.h" ] && pass "model.o and model.h written" || fail "model.o / model.h missing"
has drkc.says "$W/drkc.log" 'wrote .*model\.h: the C API model_create/_run/_destroy' 1
readelf -hSW "$W/model.o" >"$W/readelf.txt" 2>&1
has elf.rel "$W/readelf.txt" 'Type: +REL ' 1
has elf.x86 "$W/readelf.txt" 'Machine: +Advanced Micro Devices X86-64' 1
has elf.section "$W/readelf.txt" '\.rodata\.drkm +PROGBITS .* A +0 +0 4096$' 1
has elf.stack "$W/readelf.txt" '\.note\.GNU-stack' 1
nm "$W/model.o" >"$W/nm.txt"
has nm.module "$W/nm.txt" ' R model_drkm$' 1
has nm.size "$W/nm.txt" ' R model_drkm_size$' 1
# the bytes inside are the module: cut them out by the symbol's size, drkrun --list reads them
size=$((16#$(nm -S "$W/model.o" | awk '$4 == "model_drkm" { print $2 }')))
objcopy -O binary --only-section=.rodata.drkm "$W/model.o" "$W/section.bin" && head -c "$size" "$W/section.bin" >"$W/embedded.drkm"
"$DRKRUN" "$W/embedded.drkm" --list >"$W/list.txt" 2>&1
has embedded.list "$W/list.txt" 'targets sm_90a,compute_90a$' 1
# the header: the typed API and the constants
has header.create "$W/model.h" '^static inline drk_status_t model_create\(model_t \*\*out, const model_options_t \*opts\)' 1
has header.run "$W/model.h" '^static inline drk_status_t model_run\(model_t \*m, const float \*input, float \*logits\)' 1
has header.destroy "$W/model.h" '^static inline void model_destroy\(model_t \*m\) \{' 1
has header.dims "$W/model.h" '^#define MODEL_INPUT_0_DIMS \{1, 784\}$' 1
has header.out "$W/model.h" '^#define MODEL_OUTPUT_0_BYTES 40$' 1
has header.doc "$W/model.h" 'Link: cc app.c model.o -ldrkrt -ldl' 1

# the app, static libdrkrt: links nothing but libc (libdl is part of it on glibc >= 2.34)
app_check() { # NAME BINARY
  "$2" >"$W/$1.out" 2>"$W/$1.err"; local rc=$?
  [ "$rc" = 3 ] && pass "$1: exit 3 (no GPU)" || { fail "$1: exit $rc, want 3"; sed 's/^/  | /' "$W/$1.out" "$W/$1.err"; }
  has "$1.provenance" "$W/$1.out" '^model: drkc [0-9.]+; targets sm_90a; model sha256:[0-9a-f]{64}; 4 kernels' 1
  has "$1.shapes" "$W/$1.out" "^input 'input' float32 \[1, 784\], output 'logits' float32 \[1, 10\]$" 1
  has "$1.status" "$W/$1.err" '^app: no GPU: starting the model: no CUDA driver: dlopen\("/nonexistent/libcuda.so.1"\) failed' 1
}
if "$CC" -std=c99 -Wall -Wextra -Werror -I"$INC" -I"$W" "$SRC/examples/c-app/app.c" "$W/model.o" "$LIBA" -ldl -o "$W/app_static" 2>"$W/cc_static.log"; then
  pass "app links with libdrkrt.a"
  readelf -d "$W/app_static" | awk '/NEEDED/ { print $5 }' >"$W/needed_static.txt"
  has static.needed "$W/needed_static.txt" '^\[(libc\.so\.6|libdl\.so\.2)\]$' 1
  if grep -vqE '^\[(libc\.so\.6|libdl\.so\.2)\]$' "$W/needed_static.txt"; then fail "static app needs more than libc: $(tr '\n' ' ' <"$W/needed_static.txt")"; else pass "static app needs only libc"; fi
  app_check static "$W/app_static"
else
  fail "app with libdrkrt.a does not build"; sed 's/^/  | /' "$W/cc_static.log"
fi
# ... and libdrkrt.so
if "$CC" -Wall -I"$INC" -I"$W" "$SRC/examples/c-app/app.c" "$W/model.o" -L"$(dirname "$LIBSO")" -ldrkrt -ldl \
     -Wl,-rpath,"$(dirname "$LIBSO")" -o "$W/app_shared" 2>"$W/cc_shared.log"; then
  readelf -d "$W/app_shared" | awk '/NEEDED/ { print $5 }' >"$W/needed_shared.txt"
  has shared.needed "$W/needed_shared.txt" '^\[libdrkrt\.so' 1
  app_check shared "$W/app_shared"
else
  fail "app with libdrkrt.so does not build"; sed 's/^/  | /' "$W/cc_shared.log"
fi
# C++ takes the header too
if command -v c++ >/dev/null; then
  c++ -x c++ -fsyntax-only -Wall -I"$INC" -I"$W" "$SRC/examples/c-app/app.c" 2>"$W/cxx.log" && pass "header compiles as C++" ||
    { fail "header as C++"; sed 's/^/  | /' "$W/cxx.log"; }
fi

# --emit=lib: libmodel.a names the API 'model'; the archive has an index, so -lmodel links
mkdir -p "$W/lib"
if (cd "$W/lib" && "$DRKC" "$MODEL" --target=sm_90 --emit=lib -o libmodel.a -q) 2>"$W/lib.log"; then
  [ -f "$W/lib/model.h" ] && pass "lib: model.h next to libmodel.a" || fail "lib: no model.h"
  ar t "$W/lib/libmodel.a" >"$W/ar.txt"; has lib.member "$W/ar.txt" '^drkm_model.o$' 1
  nm -s "$W/lib/libmodel.a" >"$W/ar_index.txt" 2>&1; has lib.index "$W/ar_index.txt" '^model_drkm in drkm_model.o$' 1
  if "$CC" -I"$INC" -I"$W/lib" "$SRC/examples/c-app/app.c" -L"$W/lib" -lmodel "$LIBA" -ldl -o "$W/app_lib" 2>"$W/cc_lib.log"; then
    app_check lib "$W/app_lib"
  else fail "app with libmodel.a does not link"; sed 's/^/  | /' "$W/cc_lib.log"; fi
else fail "drkc --emit=lib"; sed 's/^/  | /' "$W/lib.log"; fi

# --host=aarch64-linux-gnu: the same bytes in an AArch64 object
(cd "$W" && "$DRKC" "$MODEL" --target=sm_87 -c --host=aarch64-linux-gnu --name=orin -o orin.o -q) 2>"$W/a64.log" &&
  readelf -hW "$W/orin.o" >"$W/a64.txt" && has a64.machine "$W/a64.txt" 'Machine: +AArch64' 1 &&
  has a64.header "$W/orin.h" '^static inline drk_status_t orin_run\(orin_t \*m' 1 || { fail "aarch64 object"; cat "$W/a64.log"; }

# a model with two inputs of two dtypes: the typed run() takes each with its C type
B=$MODELS/bert_layer
if [ -n "$MODELS" ] && [ -f "$B/model.onnx" ]; then
  mkdir -p "$W/bert"
  if (cd "$W/bert" && "$DRKC" "$B/model.onnx" --target=sm_90 --shapes-from="$B/test_data_set_0" -c -o bert.o -q) 2>"$W/bert.log"; then
    has bert.run "$W/bert/bert.h" '^static inline drk_status_t bert_run\(bert_t \*m, const float \*hidden_states, const int64_t \*attention_mask, float \*last_hidden_state\)' 1
    cat >"$W/bert/main.c" <<'C'
#include <stdio.h>
#include "bert.h"
static float h[BERT_INPUT_0_NUMEL], y[BERT_OUTPUT_0_NUMEL];
static int64_t mask[BERT_INPUT_1_NUMEL];
int main(void) {
  bert_t *m;
  drk_status_t st = bert_create(&m, NULL);
  if (!st) st = bert_run(m, h, mask, y), bert_destroy(m);
  printf("%s\n", drk_status_code_name(drk_status_code(st)));
  drk_status_destroy(st);
  return 0;
}
C
    if "$CC" -std=c11 -Wall -Wextra -Werror -I"$INC" -I"$W/bert" "$W/bert/main.c" "$W/bert/bert.o" "$LIBA" -ldl -o "$W/bert/app" 2>"$W/bert_cc.log"; then
      "$W/bert/app" >"$W/bert.out" 2>&1; has bert.app "$W/bert.out" '^DRK_STATUS_NO_(DRIVER|DEVICE)$' 1
    else fail "bert app does not build with -Werror"; sed 's/^/  | /' "$W/bert_cc.log"; fi
  else fail "drkc bert_layer -c"; sed 's/^/  | /' "$W/bert.log"; fi
fi

# --weights=external: the weights in model.weights beside the object; the app reads it (by
# name, from the current directory), checks size and hash, and fails clearly without it
mkdir -p "$W/ext"
if (cd "$W/ext" && "$DRKC" "$MODEL" --target=sm_90 --weights=external -c -o model.o -q) 2>"$W/ext.log"; then
  wsize=$(stat -c %s "$W/ext/model.weights"); osize=$(stat -c %s "$W/ext/model.o"); full=$(stat -c %s "$W/model.o")
  [ "$wsize" = 814336 ] && [ $((osize + wsize)) -le $((full + 8192)) ] && [ "$osize" -lt $((full - wsize + 8192)) ] &&
    pass "external: model.weights $wsize bytes, model.o $osize bytes (embedded: $full)" ||
    fail "external: sizes weights $wsize, object $osize, embedded object $full"
  has ext.header "$W/ext/model.h" '^#define MODEL_WEIGHTS_FILE "model.weights"$' 1
  if "$CC" -I"$INC" -I"$W/ext" "$SRC/examples/c-app/app.c" "$W/ext/model.o" "$LIBA" -ldl -o "$W/ext/app" 2>"$W/ext_cc.log"; then
    (cd "$W/ext" && ./app >run.out 2>run.err); rc=$?
    [ "$rc" = 3 ] && pass "external: app reads model.weights, exit 3 (no GPU)" || { fail "external: app exit $rc"; cat "$W/ext/run.err"; }
    has ext.provenance "$W/ext/run.out" '\(in model.weights\)$' 1
    mv "$W/ext/model.weights" "$W/ext/saved.weights"
    (cd "$W/ext" && ./app >run2.out 2>run2.err); rc=$?
    [ "$rc" = 1 ] && has ext.missing "$W/ext/run2.err" "^app: error: starting the model: model.weights: cannot open the module's weights" 1 ||
      { fail "external: app without its weights: exit $rc"; cat "$W/ext/run2.err"; }
    head -c 1000 "$W/ext/saved.weights" >"$W/ext/model.weights"
    (cd "$W/ext" && ./app >run3.out 2>run3.err)
    has ext.short "$W/ext/run3.err" "model.weights: 1000 bytes, the module needs 814336" 1
    cp "$W/ext/saved.weights" "$W/ext/model.weights"; printf 'X' | dd of="$W/ext/model.weights" bs=1 seek=4000 conv=notrunc 2>/dev/null
    (cd "$W/ext" && ./app >run4.out 2>run4.err)
    has ext.hash "$W/ext/run4.err" "SHA-256 is not the one the module records" 1
  else fail "external: app does not build"; sed 's/^/  | /' "$W/ext_cc.log"; fi
  # drkrun: the side file next to the module, or --weights FILE
  (cd "$W/ext" && "$DRKC" "$MODEL" --target=sm_90 --weights=external -o m.drkm -q) 2>>"$W/ext.log"
  "$DRKRUN" "$W/ext/m.drkm" --list >"$W/ext/list.txt" 2>&1; has ext.list "$W/ext/list.txt" 'weights in the side file m.weights' 1
  "$DRKRUN" "$W/ext/m.drkm" >"$W/ext/drkrun.out" 2>&1; has ext.drkrun "$W/ext/drkrun.out" 'error: starting the runtime: no CUDA driver' 1
  mv "$W/ext/m.weights" "$W/ext/other.bin"
  "$DRKRUN" "$W/ext/m.drkm" >"$W/ext/drkrun2.out" 2>&1; has ext.drkrun.missing "$W/ext/drkrun2.out" "error: loading the weights: .*/ext/m.weights: cannot open" 1
  "$DRKRUN" "$W/ext/m.drkm" --weights "$W/ext/other.bin" >"$W/ext/drkrun3.out" 2>&1; has ext.drkrun.flag "$W/ext/drkrun3.out" 'error: starting the runtime: no CUDA driver' 1
else fail "drkc --weights=external"; sed 's/^/  | /' "$W/ext.log"; fi

# errors: located and with the way out, exit 2, no file left behind
err() { # NAME REGEX ARGS...
  local name=$1 re=$2; shift 2
  (cd "$W" && "$DRKC" "$MODEL" "$@") >"$W/$name.out" 2>&1; local rc=$?
  [ "$rc" = 2 ] && has "$name" "$W/$name.out" "$re" 1 || { fail "$name: exit $rc, want 2"; sed 's/^/  | /' "$W/$name.out"; }
}
err err.host "unknown --host 'mips-linux-gnu' \(x86_64-linux-gnu, aarch64-linux-gnu\)" -c --host=mips-linux-gnu -o bad1.o
err err.name "--name=1model: the C API's name must be a C identifier" -c --name=1model -o bad2.o
err err.stdout "--emit=obj writes a file and its header; give -o FILE" -c -o -
err err.notobj "--host and --name apply to host objects" --host=aarch64-linux-gnu -o bad3.drkm
err err.weights "--weights: embedded or external, not 'elsewhere'" --weights=elsewhere -o bad4.drkm
err err.weights_emit "--weights=external applies to modules and host objects" --weights=external --emit=ptx -o bad5.ptx
ls "$W"/bad* >/dev/null 2>&1 && fail "an error left a file: $(ls "$W"/bad*)" || pass "errors leave no file"
echo "$fails failure(s)"
[ "$fails" = 0 ]
