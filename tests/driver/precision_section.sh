#!/usr/bin/env bash
# The PRECISION section of modules drkc writes (docs/module-format.md): built from small
# models, decoded byte by byte from the documented layout (an independent reader in
# Python), printed by `drkrun --list`, and refused with a precise error when corrupted.
# usage: precision_section.sh DRKC DRKRUN WORK_DIR PYTHON
set -u
DRKC=$1; DRKRUN=$2; W=$3; PY=$4
rm -rf "$W"; mkdir -p "$W"
fails=0
fail() { echo "FAIL $*"; fails=$((fails + 1)); }
# compile NAME ARGS...: drkc ARGS -o W/NAME.drkm --report (report kept in W/NAME.report)
compile() {
  local name=$1; shift
  "$DRKC" "$@" -o "$W/$name.drkm" --report >"$W/$name.report" 2>&1 || { fail "$name: drkc failed:"; sed 's/^/  | /' "$W/$name.report"; return 1; }
  "$DRKRUN" "$W/$name.drkm" --list >"$W/$name.list" 2>&1 || { fail "$name: drkrun --list failed:"; sed 's/^/  | /' "$W/$name.list"; return 1; }
}
# has NAME REGEX: the --list output of NAME matches the extended regex
has() {
  if grep -Eq -- "$2" "$W/$1.list"; then echo "PASS $1: /$2/"; else fail "$1: no line matches /$2/ in:"; sed -n '/precision:/,$p' "$W/$1.list" | sed 's/^/  | /'; fi
}
# same-mix NAME: drkrun's precision mix is the one `drkc --report` printed
same_mix() {
  local a b
  a=$(grep -o 'precision mix (float nodes by compute dtype):.*' "$W/$1.report")
  b=$(grep -o 'precision mix (float nodes by compute dtype):.*' "$W/$1.list")
  if [ -n "$a" ] && [ "$a" = "$b" ]; then echo "PASS $1: same mix ($a)"; else fail "$1: mix differs: report '$a', module '$b'"; fi
}

# An f16 model: MatMul with a bias/Relu epilogue, LayerNormalization, a Reshape view, Tanh.
cat >"$W/half.drkg" <<'G'
graph @half(%x: f16[4, 16], %w: f16[16, 16], %b: f16[16], %s: f16[16], %t: f16[16]) -> (%z) {
  %shp: i64[1] = const [64]
  %h: f16[4, 16] = MatMul(%x, %w)
  %hb: f16[4, 16] = Add(%h, %b)
  %r: f16[4, 16] = Relu(%hb)
  %ln: f16[4, 16] = LayerNormalization(%r, %s, %t) {axis = -1, epsilon = 1e-5}
  %v: f16[64] = Reshape(%ln, %shp)
  %z: f16[64] = Tanh(%v)
  return %z
}
G
sed -e 's/f16\[/f32[/g' -e 's/@half/@single/' "$W/half.drkg" >"$W/single.drkg"

if compile half "$W/half.drkg" --target=sm_90a,gfx942; then
  # columns: kernel, dot, acc, math, io, group, nodes (anchor first)
  has half '^ +[0-9]+ +k[0-9]+_MatMul +f16 +f32 +f32 +f16 +mm +%h \(MatMul f16\), %hb \(Add f16\), %r \(Relu f16\)$'
  has half '^ +[0-9]+ +k[0-9]+_fused_LayerNormalization +- +f32 +f32 +f16 +rows +%ln \(LayerNormalization f16\), %v \(Reshape f16\), %z \(Tanh f16\)$'
  has half '^  precision: 6 graph nodes, 2 kernels; '
  same_mix half
fi
if compile fp16 "$W/single.drkg" --target=sm_87 --precision=fp16; then
  has fp16 '^ +[0-9]+ +k[0-9]+_MatMul +f16 +f32 +f32 +f16 +mm +%h \(MatMul f16\)'
  has fp16 'LayerNormalization +- +f32 +f32 +f32,f16 +rows +%ln \(LayerNormalization f16\)'
  has fp16 '_Cast +- +- +- +f32,f16 +single +%x\.f16 \(Cast f32->f16\)$'
  same_mix fp16
fi
if compile tf32 "$W/single.drkg" --target=sm_87 --matmul-precision=high; then
  has tf32 '^ +[0-9]+ +k[0-9]+_MatMul +tf32 +f32 +f32 +f32 +mm +%h \(MatMul f32\)'
  same_mix tf32
fi
if compile f32 "$W/single.drkg" --target=sm_87 --fusion-aggressiveness=0; then
  has f32 '^ +[0-9]+ +k[0-9]+_MatMul +f32 +f32 +- +f32 +single +%h \(MatMul f32\)$'
  has f32 '^ +[0-9]+ +k[0-9]+_Add +- +- +f32 +f32 +single +%hb \(Add f32\)$'
  has f32 '^    no kernel: %v \(Reshape f32\)$'
  same_mix f32
fi

# The documented bytes, decoded without drkc's reader; then corrupted copies (checksums
# recomputed, so the structural checks are what refuses them).
[ -f "$W/half.drkm" ] && "$PY" - "$W" <<'PY' || fail "python decoder / corruption checks"
import struct, sys, zlib
W = sys.argv[1]
data = bytearray(open(f"{W}/half.drkm", "rb").read())
u32 = lambda b, o: struct.unpack_from("<I", b, o)[0]
u64 = lambda b, o: struct.unpack_from("<Q", b, o)[0]
table, nsec = u64(data, 24), u32(data, 32)
secs = [struct.unpack_from("<IIQQII", data, table + 32 * i) for i in range(nsec)]
kinds = [s[0] for s in secs]
assert kinds.count(12) == 1 and kinds[-1] == 12, kinds  # one PRECISION section, written last
strings = next(s for s in secs if s[0] == 1)
S = bytes(data[strings[2]:strings[2] + strings[3]])
string = lambda r: S[r:S.index(b"\0", r)].decode()
kern = next(s for s in secs if s[0] == 4)
nk = kern[3] // 56
kname = [string(u32(data, kern[2] + 56 * i)) for i in range(nk)]
_, align, off, size, _, _ = secs[-1]
P = bytes(data[off:off + size])
version, ck, cn, res = struct.unpack_from("<IIII", P, 0)
assert (version, ck, res) == (1, nk, 0) and size == 16 + 16 * ck + 24 * cn and align == 8, (version, ck, cn, size)
krec = [struct.unpack_from("<IIHHHH", P, 16 + 16 * i) for i in range(ck)]
nrec = [struct.unpack_from("<IIIIIBBBB", P, 16 + 16 * ck + 24 * i) for i in range(cn)]
nodes = [dict(name=string(n[0]), onnx=string(n[1]), op=string(n[2]), kernel=n[3], nk=n[4], compute=n[5], frm=n[6]) for n in nrec]
F32, F16 = 2, 4
mm = next(n for n in nodes if n["op"] == "MatMul")
assert mm["compute"] == F16 and mm["nk"] == 1, mm
k = krec[mm["kernel"]]
assert kname[mm["kernel"]].endswith("_MatMul") and nodes[k[0]] is mm and k[1] == 4, (k, kname)
assert (k[2], k[3]) == (1 << F16, 1 << F32), k  # f16 products, f32 accumulator
ln = next(n for n in nodes if n["op"] == "LayerNormalization")
k = krec[ln["kernel"]]
assert ln["compute"] == F16 and nodes[k[0]] is ln and k[1] == 2, (ln, k)
assert (k[2], k[3], k[4], k[5]) == (0, 1 << F32, 1 << F32, 1 << F16), k  # f32 inside, f16 in memory
view = next(n for n in nodes if n["op"] == "Reshape")
assert view["compute"] == F16 and view["kernel"] == ln["kernel"], view  # a view inside the rows group
assert all(n["frm"] == 0 for n in nodes) and all(b[7] == b[8] == 0 for b in nrec)
print("PASS decoder: %d kernels, %d nodes" % (ck, cn))

def patched(name, at, value, fmt="<I"):
    c = bytearray(data)
    struct.pack_into(fmt, c, off + at, value)
    for i, (kind, al, o, sz, crc, r) in enumerate(secs):
        struct.pack_into("<I", c, table + 32 * i + 24, zlib.crc32(bytes(c[o:o + sz])))
    struct.pack_into("<I", c, 56, zlib.crc32(bytes(c[table:table + 32 * nsec])))
    struct.pack_into("<I", c, 60, zlib.crc32(bytes(c[:60])))
    open(f"{W}/{name}.drkm", "wb").write(c)
patched("bad_anchor", 16, 99)
patched("bad_count", 4, nk + 1)
patched("bad_nodes", 8, cn + 1)
PY
expect_err() {
  "$DRKRUN" "$W/$1.drkm" --list >"$W/$1.out" 2>&1; local rc=$?
  if [ "$rc" = 1 ] && grep -Eq -- "$2" "$W/$1.out"; then echo "PASS $1"; else fail "$1: exit $rc, output:"; sed 's/^/  | /' "$W/$1.out"; fi
}
if [ -f "$W/bad_anchor.drkm" ]; then
  expect_err bad_anchor "drkrun: error: .*bad_anchor.drkm: inconsistent module: precision of kernel 0 \('k[0-9]+_MatMul'\): node 99 of 6"
  expect_err bad_count "PRECISION section describes 3 kernels, the KERNELS section has 2"
  expect_err bad_nodes "PRECISION section has [0-9]+ bytes, but 2 kernel and 7 node records take [0-9]+ \(truncated or corrupted\)"
fi
head -c -1 "$W/half.drkm" >"$W/short.drkm"
expect_err short "file is truncated"
echo "$fails failed"
[ "$fails" = 0 ]
