/* Tile IR -> LLVM IR for NVPTX: what its arithmetic does differently from
 * backends/common/lower_math.c (part of lower.c's lowering; see lower_internal.h).
 *
 * f16 and bf16 are computed in f32 and rounded back; f8 values live in i8 registers and are
 * decoded to f32 in software (exact), encoded with cvt.rn.satfinite.{e4m3,e5m2}x2.f32 on
 * sm_89+ and in software (round to nearest even, saturating to the largest finite value,
 * NaN kept) before. exp, exp2, log, tanh and erf call CUDA's libdevice (__nv_expf, ...),
 * linked into the module and internalized by nv_link_libdevice: its f32 functions are
 * within 1-2 ulp, which the f32 tolerance of 1e-5 needs (ex2.approx-based code is not);
 * `exp2 {approx = 1}` (flash attention's probabilities, rounded to 16 bits next) is one
 * ex2.approx.ftz.f32, `tanh {approx = 1}` one tanh.approx.f32 (results stored as 16 bits).
 * sqrt is sqrt.rn; rsqrt is 1/sqrt.rn (correctly rounded twice, not rsqrt.approx).
 * Comparisons follow C: eq lt le gt ge are false on NaN, ne is true. Float max/min
 * propagate NaN. Integer division and remainder truncate (C), by zero is undefined. */
#include "backends/nvptx/lower_internal.h"

#include <errno.h>
#include <pthread.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <llvm-c/BitReader.h>
#include <llvm-c/Linker.h>

#include "backends/package/module.h"
#include "ir/tensor.h"

static LLVMValueRef libdevice_call(nv_lc_t *lc, const char *name, LLVMTypeRef t, LLVMValueRef a) {
  LLVMValueRef f = LLVMGetNamedFunction(lc->cg->mod, name);
  LLVMTypeRef ft = LLVMFunctionType(t, &t, 1, 0);
  if (!f) f = LLVMAddFunction(lc->cg->mod, name, ft);
  return LLVMBuildCall2(lc->g.b, ft, f, &a, 1, "");
}

static LLVMValueRef libdevice_call2(nv_lc_t *lc, const char *name, LLVMTypeRef t, LLVMValueRef a, LLVMValueRef b) {
  LLVMValueRef f = LLVMGetNamedFunction(lc->cg->mod, name);
  LLVMTypeRef ps[2] = {t, t};
  LLVMTypeRef ft = LLVMFunctionType(t, ps, 2, 0);
  if (!f) f = LLVMAddFunction(lc->cg->mod, name, ft);
  LLVMValueRef args[2] = {a, b};
  return LLVMBuildCall2(lc->g.b, ft, f, args, 2, "");
}

/* gpu_target_t.f8_encode: cvt.rn.satfinite.{e4m3,e5m2}x2.f32 on sm_89+, NULL before. */
LLVMValueRef nv_f8_encode_hw(gpu_lc_t *g, drk_dtype_t t, LLVMValueRef f) {
  nv_lc_t *lc = (nv_lc_t *)g;
  if (!(lc->cg->arch && lc->cg->arch->sm >= 89)) return NULL;
  LLVMValueRef args[2] = {f, f};
  LLVMValueRef r = drk_nvptx_call_intrinsic(
      lc->cg, t == DRK_DT_F8E4M3 ? "llvm.nvvm.ff.to.e4m3x2.rn" : "llvm.nvvm.ff.to.e5m2x2.rn", NULL, 0, args, 2);
  return LLVMBuildTrunc(g->b, r, g->i8, "");
}

/* gpu_target_t.fptrunc_rz: f32 -> f16/bf16 toward zero in one instruction. */
LLVMValueRef nv_fptrunc_rz(gpu_lc_t *g, LLVMValueRef x, drk_dtype_t to) {
  return drk_nvptx_call_intrinsic(((nv_lc_t *)g)->cg, to == DRK_DT_F16 ? "llvm.nvvm.f2f16.rz" : "llvm.nvvm.f2bf16.rz",
                                  NULL, 0, &x, 1);
}

/* gpu_target_t.pow: libdevice's pow/powf. */
LLVMValueRef nv_pow(gpu_lc_t *g, LLVMValueRef x, LLVMValueRef y) {
  nv_lc_t *lc = (nv_lc_t *)g;
  return libdevice_call2(lc, LLVMTypeOf(x) == lc->g.f64 ? "__nv_pow" : "__nv_powf", LLVMTypeOf(x), x, y);
}

/* gpu_target_t.math1: exp, exp2, log, tanh, erf and the libdevice functions by name. */
LLVMValueRef nv_math1(gpu_lc_t *g, const drk_tile_op_t *op, LLVMTypeRef ct, LLVMValueRef x) {
  nv_lc_t *lc = (nv_lc_t *)g;
  LLVMBuilderRef B = lc->g.b;
  bool d = ct == lc->g.f64;
  const char *ld = NULL;
  switch (op->code) {
  case DRK_TOP_EXP: ld = d ? "__nv_exp" : "__nv_expf"; break;
  case DRK_TOP_EXP2:
    if (!d && drk_tile_op_attr_int(op, "approx", 0)) /* ex2.approx.ftz.f32: ~2 ulp, denormals flushed */
      return drk_nvptx_call_intrinsic(lc->cg, "llvm.nvvm.ex2.approx.ftz", &ct, 1, &x, 1);
    ld = d ? "__nv_exp2" : "__nv_exp2f";
    break;
  case DRK_TOP_LOG: ld = d ? "__nv_log" : "__nv_logf"; break;
  case DRK_TOP_TANH:
    if (!d && drk_tile_op_attr_int(op, "approx", 0)) { /* tanh.approx.f32 (sm_75+): ~2^-11 relative */
      LLVMTypeRef ft = LLVMFunctionType(ct, &ct, 1, 0);
      static const char asm_s[] = "tanh.approx.f32 $0, $1;", cons[] = "=f,f";
      LLVMValueRef ia = LLVMGetInlineAsm(ft, asm_s, sizeof asm_s - 1, cons, sizeof cons - 1, 0, 0, LLVMInlineAsmDialectATT, 0);
      return LLVMBuildCall2(B, ft, ia, &x, 1, "");
    }
    ld = d ? "__nv_tanh" : "__nv_tanhf";
    break;
  case DRK_TOP_ERF: ld = d ? "__nv_erf" : "__nv_erff"; break;
  default: {
    /* rows added to tile_ops.def later: map by name to libdevice when there is one */
    static const char *const known[] = {"sin", "cos", "tan", "floor", "ceil", "round", "trunc",
                                        "sigmoid", "rint", "log2", "log1p", "expm1", "atan", "asin",
                                        "acos", "sinh", "cosh", "asinh", "acosh", "atanh", NULL};
    const char *nm = drk_tile_op_name(op->code);
    for (int i = 0; known[i]; i++) {
      if (strcmp(nm, known[i]) != 0) continue;
      if (strcmp(nm, "sigmoid") == 0) {
        /* 1 / (1 + exp(-x)) */
        LLVMValueRef e = libdevice_call(lc, d ? "__nv_exp" : "__nv_expf", ct, LLVMBuildFNeg(B, x, ""));
        return LLVMBuildFDiv(B, LLVMConstReal(ct, 1.0), LLVMBuildFAdd(B, LLVMConstReal(ct, 1.0), e, ""), "");
      }
      if (strcmp(nm, "round") == 0) return gpu_call1(&lc->g, "llvm.roundeven", ct, x);
      char buf[32];
      snprintf(buf, sizeof buf, "__nv_%s%s", nm, d ? "" : "f");
      return libdevice_call(lc, buf, ct, x);
    }
    return NULL;
  }
  }
  return libdevice_call(lc, ld, ct, x);
}

LLVMValueRef nv_shfl_xor(nv_lc_t *lc, LLVMValueRef v, unsigned mask) {
  LLVMBuilderRef B = lc->g.b;
  LLVMTypeRef t = LLVMTypeOf(v);
  LLVMTypeKind k = LLVMGetTypeKind(t);
  LLVMValueRef m = gpu_i32(&lc->g, mask);
  if (k == LLVMFloatTypeKind || t == lc->g.i32) return drk_nvptx_shfl(lc->cg, DRK_NVPTX_SHFL_BFLY, v, m);
  if (k == LLVMDoubleTypeKind || t == lc->g.i64 || k == LLVMPointerTypeKind) {
    LLVMValueRef x = k == LLVMPointerTypeKind ? LLVMBuildPtrToInt(B, v, lc->g.i64, "") : LLVMBuildBitCast(B, v, lc->g.i64, "");
    LLVMValueRef lo = LLVMBuildTrunc(B, x, lc->g.i32, "");
    LLVMValueRef hi = LLVMBuildTrunc(B, LLVMBuildLShr(B, x, gpu_i64(&lc->g, 32), ""), lc->g.i32, "");
    lo = drk_nvptx_shfl(lc->cg, DRK_NVPTX_SHFL_BFLY, lo, m);
    hi = drk_nvptx_shfl(lc->cg, DRK_NVPTX_SHFL_BFLY, hi, m);
    LLVMValueRef r = LLVMBuildOr(B, LLVMBuildZExt(B, lo, lc->g.i64, ""),
                                 LLVMBuildShl(B, LLVMBuildZExt(B, hi, lc->g.i64, ""), gpu_i64(&lc->g, 32), ""), "");
    return k == LLVMPointerTypeKind ? LLVMBuildIntToPtr(B, r, t, "") : LLVMBuildBitCast(B, r, t, "");
  }
  /* 1, 8, 16-bit integers and halves */
  LLVMTypeRef it = k == LLVMIntegerTypeKind ? t : lc->g.i16;
  LLVMValueRef x = it == t ? v : LLVMBuildBitCast(B, v, it, "");
  x = drk_nvptx_shfl(lc->cg, DRK_NVPTX_SHFL_BFLY, LLVMBuildZExt(B, x, lc->g.i32, ""), m);
  x = LLVMBuildTrunc(B, x, it, "");
  return it == t ? x : LLVMBuildBitCast(B, x, t, "");
}

/* ---- libdevice ----
 * The bitcode is read once per process and path (parallel code generation links it into
 * every kernel's module: each worker parses the shared, read-only bytes in its own context);
 * entries are never freed, so a borrowed nv_libdevice_t stays valid. */
static char *dupstr(const char *s) {
  size_t n = strlen(s) + 1;
  char *p = malloc(n);
  if (!p) drk_fatal_internal(__FILE__, __LINE__, "out of memory");
  return memcpy(p, s, n);
}

static char *libdevice_path(void) {
  const char *env = getenv("DRK_LIBDEVICE");
  char buf[1024];
  if (env && *env) return dupstr(env);
  const char *ch = getenv("CUDA_HOME");
  if (ch && *ch) {
    snprintf(buf, sizeof buf, "%s/nvvm/libdevice/libdevice.10.bc", ch);
    FILE *f = fopen(buf, "rb");
    if (f) {
      fclose(f);
      return dupstr(buf);
    }
  }
  FILE *f = fopen("/usr/local/cuda/nvvm/libdevice/libdevice.10.bc", "rb");
  if (f) {
    fclose(f);
    return dupstr("/usr/local/cuda/nvvm/libdevice/libdevice.10.bc");
  }
  return NULL;
}

typedef struct ld_entry {
  struct ld_entry *next;
  nv_libdevice_t lib;
  char *error; /* the file could not be read: the message */
  bool order_done;
} ld_entry_t;

static pthread_mutex_t ld_mu = PTHREAD_MUTEX_INITIALIZER;
static ld_entry_t *ld_list;

/* The entry for path (read on first use), under ld_mu. */
static ld_entry_t *ld_entry(const char *path) {
  for (ld_entry_t *e = ld_list; e; e = e->next)
    if (strcmp(e->lib.path, path) == 0) return e;
  ld_entry_t *e = calloc(1, sizeof *e);
  if (!e) drk_fatal_internal(__FILE__, __LINE__, "out of memory");
  e->lib.path = dupstr(path);
  errno = 0;
  FILE *f = fopen(path, "rb");
  char *data = NULL;
  long n = -1;
  if (f && fseek(f, 0, SEEK_END) == 0 && (n = ftell(f)) >= 0 && fseek(f, 0, SEEK_SET) == 0) {
    data = malloc((size_t)n + 1);
    if (!data) drk_fatal_internal(__FILE__, __LINE__, "out of memory");
    if (fread(data, 1, (size_t)n, f) != (size_t)n) free(data), data = NULL;
  }
  if (data) {
    e->lib.data = data, e->lib.size = (size_t)n;
    char h[72];
    drk_modfile_sha256_string(data, (size_t)n, h);
    snprintf(e->lib.hash, sizeof e->lib.hash, "%s", h);
  } else {
    char msg[600];
    snprintf(msg, sizeof msg, "%s: %s", path, errno ? strerror(errno) : "read error");
    e->error = dupstr(msg);
  }
  if (f) fclose(f);
  e->next = ld_list;
  ld_list = e;
  return e;
}

const nv_libdevice_t *nv_libdevice_get(char **out_error) {
  char *path = libdevice_path();
  if (!path) return NULL;
  pthread_mutex_lock(&ld_mu);
  ld_entry_t *e = ld_entry(path);
  pthread_mutex_unlock(&ld_mu);
  free(path);
  if (e->error) {
    if (out_error) *out_error = e->error;
    return NULL;
  }
  return &e->lib;
}

/* Links lib into mod. All of it (what the one-module path has always done; the optimizer
 * drops what no kernel calls), or with needed_only only the functions mod declares and
 * what they reach: the bitcode is read lazily and every other function made linkonce_odr,
 * which the linker only brings in when something it links refers to it. A kernel's math
 * then costs the few functions it uses instead of all ~350 of them. The code is the same
 * either way (libdevice's functions are alwaysinline); the order of its tables in the
 * module may differ, which drk_nvptx_ptx_join puts back (nv_libdevice_order). */
static bool ld_link(LLVMModuleRef mod, const nv_libdevice_t *lib, bool needed_only, drk_diag_t *d) {
  LLVMContextRef ctx = LLVMGetModuleContext(mod);
  /* the buffer only points at the shared bytes; a lazily read module owns it */
  LLVMMemoryBufferRef buf = LLVMCreateMemoryBufferWithMemoryRange(lib->data, lib->size, lib->path, 0);
  LLVMModuleRef m = NULL;
  bool bad = needed_only ? LLVMGetBitcodeModuleInContext2(ctx, buf, &m) : LLVMParseBitcodeInContext2(ctx, buf, &m);
  if (!needed_only) LLVMDisposeMemoryBuffer(buf);
  if (bad) {
    drk_diag_error(d, drk_loc_none, "nvptx: cannot parse libdevice %s", lib->path);
    return false;
  }
  if (needed_only)
    for (LLVMValueRef f = LLVMGetFirstFunction(m); f; f = LLVMGetNextFunction(f)) {
      size_t n;
      const char *nm = LLVMGetValueName2(f, &n);
      LLVMValueRef df = LLVMGetNamedFunction(mod, nm);
      if (!LLVMIsDeclaration(f) && !(df && LLVMIsDeclaration(df)) && LLVMGetLinkage(f) == LLVMExternalLinkage)
        LLVMSetLinkage(f, LLVMLinkOnceODRLinkage);
    }
  LLVMSetTarget(m, LLVMGetTarget(mod));
  LLVMSetDataLayout(m, LLVMGetDataLayoutStr(mod));
  if (LLVMLinkModules2(mod, m)) {
    drk_diag_error(d, drk_loc_none, "nvptx: linking libdevice %s failed", lib->path);
    return false;
  }
  return true;
}

static void names_push(nv_libdevice_t *lib, size_t *cap, const char *nm) {
  if (lib->n_order == *cap) {
    *cap = *cap ? 2 * *cap : 64;
    lib->order = realloc(lib->order, *cap * sizeof *lib->order);
    if (!lib->order) drk_fatal_internal(__FILE__, __LINE__, "out of memory");
  }
  lib->order[lib->n_order++] = dupstr(nm);
}

const char *const *nv_libdevice_order(const nv_libdevice_t *lib, size_t *out_n) {
  ld_entry_t *e = (ld_entry_t *)((char *)lib - offsetof(ld_entry_t, lib));
  pthread_mutex_lock(&ld_mu);
  if (!e->order_done) {
    /* The order globals and functions take when all of libdevice is linked into a module,
     * as the one-module path links it: what the PTX of a whole module lists them in. */
    LLVMContextRef ctx = LLVMContextCreate();
    drk_diag_t q;
    drk_diag_init(&q, NULL);
    LLVMModuleRef mod = drk_nvptx_module_create(ctx, "order", &q);
    size_t cap = 0, n;
    if (mod && ld_link(mod, lib, false, &q)) {
      for (LLVMValueRef g = LLVMGetFirstGlobal(mod); g; g = LLVMGetNextGlobal(g))
        names_push(&e->lib, &cap, LLVMGetValueName2(g, &n));
      for (LLVMValueRef f = LLVMGetFirstFunction(mod); f; f = LLVMGetNextFunction(f))
        names_push(&e->lib, &cap, LLVMGetValueName2(f, &n));
    }
    if (mod) LLVMDisposeModule(mod);
    LLVMContextDispose(ctx);
    e->order_done = true;
  }
  pthread_mutex_unlock(&ld_mu);
  *out_n = e->lib.n_order;
  return (const char *const *)e->lib.order;
}

bool nv_needs_libdevice(LLVMModuleRef mod) {
  for (LLVMValueRef f = LLVMGetFirstFunction(mod); f; f = LLVMGetNextFunction(f)) {
    size_t n;
    const char *nm = LLVMGetValueName2(f, &n);
    if (LLVMIsDeclaration(f) && n > 5 && strncmp(nm, "__nv_", 5) == 0) return true;
  }
  return false;
}

static bool link_libdevice(LLVMModuleRef mod, bool needed_only, drk_diag_t *d) {
  if (!nv_needs_libdevice(mod)) return true;
  char *err = NULL;
  const nv_libdevice_t *lib = nv_libdevice_get(&err);
  if (!lib) {
    if (err)
      drk_diag_error(d, drk_loc_none, "nvptx: cannot read libdevice %s", err);
    else
      drk_diag_error(d, drk_loc_none,
                     "nvptx: math functions need CUDA's libdevice, not found (set DRK_LIBDEVICE or "
                     "CUDA_HOME; looked in /usr/local/cuda/nvvm/libdevice/libdevice.10.bc)");
    return false;
  }
  if (!ld_link(mod, lib, needed_only, d)) return false;
  /* Only kernels stay visible: the optimizer then drops the unused libdevice functions. */
  for (LLVMValueRef f = LLVMGetFirstFunction(mod); f; f = LLVMGetNextFunction(f))
    if (!LLVMIsDeclaration(f) && LLVMGetFunctionCallConv(f) != DRK_NVPTX_CC_KERNEL)
      LLVMSetLinkage(f, LLVMInternalLinkage);
  for (LLVMValueRef g = LLVMGetFirstGlobal(mod); g; g = LLVMGetNextGlobal(g))
    if (!LLVMIsDeclaration(g) && LLVMGetLinkage(g) != LLVMInternalLinkage &&
        LLVMGetLinkage(g) != LLVMPrivateLinkage && LLVMGetLinkage(g) != LLVMExternalLinkage)
      LLVMSetLinkage(g, LLVMInternalLinkage);
  return true;
}

bool nv_link_libdevice(LLVMModuleRef mod, drk_diag_t *d) { return link_libdevice(mod, false, d); }
bool nv_link_libdevice_needed(LLVMModuleRef mod, drk_diag_t *d) { return link_libdevice(mod, true, d); }
