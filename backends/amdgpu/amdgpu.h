/* AMDGPU backend: LLVM module -> gfx942 relocatable object -> code object (.hsaco), plus
 * builders for the GPU primitives that tile IR lowering needs. Mirrors backends/nvptx/nvptx.h:
 * target.c (archs, target machines, modules), emit.c (module -> object in memory), link.c
 * (ld.lld subprocess, in place of ptxas; resource usage from the code object's metadata),
 * intrinsics.c (builders), lower.c + lower_math.c + lower_mem.c (tile IR -> LLVM IR, private
 * state in lower_internal.h).
 *
 * Requires LLVM 22's C API (AMDGPU target) and, for linking, the ld.lld program. Every
 * function that can fail takes a drk_diag_t, reports there and returns false/NULL; out_*
 * parameters are written only on success. Buffers returned through out_* are malloc'ed: the
 * caller frees them with free(). The LLVM target is initialised once, thread-safely.
 * Kernels are marked with the amdgpu_kernel calling convention (91); modules carry the
 * module flag amdhsa_code_object_version = 500 (code object v5: ROCm 5.x/6.x loaders;
 * LLVM 22 would otherwise emit v6). Code is wave64 (gfx942's native wavefront). */
#ifndef DRK_BACKENDS_AMDGPU_H
#define DRK_BACKENDS_AMDGPU_H

#include <stdbool.h>
#include <stddef.h>

#include <llvm-c/Core.h>
#include <llvm-c/TargetMachine.h>

#include "ir/support.h"
#include "ir/tile.h"

#define DRK_AMDGPU_TRIPLE "amdgcn-amd-amdhsa"
#define DRK_AMDGPU_CC_KERNEL 91 /* LLVM's CallingConv::AMDGPU_KERNEL */
#define DRK_AMDGPU_CODE_OBJECT_VERSION 500
#define DRK_AMDGPU_WAVE 64

/* Address spaces of the AMDGPU backend. */
enum {
  DRK_AMDGPU_AS_FLAT = 0,
  DRK_AMDGPU_AS_GLOBAL = 1,
  DRK_AMDGPU_AS_REGION = 2, /* GDS */
  DRK_AMDGPU_AS_LDS = 3,    /* local data share = CUDA shared memory */
  DRK_AMDGPU_AS_CONST = 4,
  DRK_AMDGPU_AS_PRIVATE = 5,
  DRK_AMDGPU_AS_BUFFER_RSRC = 8, /* 128-bit buffer resource ("ptr addrspace(8)") */
};

/* ---- architectures ---- */
typedef struct drk_amdgpu_arch {
  const char *name;     /* "gfx942": what llc -mcpu takes */
  int gfx;              /* 942 */
  int wave_size;        /* 64 */
  unsigned lds_bytes;   /* LDS per workgroup: 65536 */
  int n_cu;             /* compute units of the largest part (MI300X: 304) */
  int n_xcd;            /* accelerator complex dies, each with its own L2 (MI300X: 8) */
  bool has_fp8;         /* MFMA fp8/bf8 forms */
  const char *features; /* LLVM target features */
  const char *bundle_id; /* offload bundle target ID: "hipv4-amdgcn-amd-amdhsa--gfx942" */
} drk_amdgpu_arch_t;

/* The supported architectures; *out_n receives the count. */
const drk_amdgpu_arch_t *drk_amdgpu_arch_all(size_t *out_n);
/* The arch named `name` ("gfx942"), or NULL with an error listing the supported ones. */
const drk_amdgpu_arch_t *drk_amdgpu_arch_find(const char *name, drk_diag_t *d);

/* ---- target machine and modules ---- */
/* Initialises LLVM's AMDGPU target (idempotent, thread-safe). */
void drk_amdgpu_init(void);
/* A target machine for `arch` at LLVM codegen level 0..3. Caller disposes it with
 * LLVMDisposeTargetMachine. NULL + diagnostic for an unknown arch. */
LLVMTargetMachineRef drk_amdgpu_target_machine_create(const char *arch, int opt_level,
                                                      drk_diag_t *d);
/* An empty module with the AMDGPU triple, data layout and the code object v5 module flag.
 * Caller disposes it. */
LLVMModuleRef drk_amdgpu_module_create(LLVMContextRef ctx, const char *name, drk_diag_t *d);

/* ---- LLVM module -> relocatable object (emit.c) ---- */
typedef struct drk_amdgpu_opts {
  int opt_level;  /* LLVM pipeline default<O{n}> and codegen level; 0..3 (default 3) */
  bool no_verify; /* skip LLVMVerifyModule (the lowering is trusted) */
} drk_amdgpu_opts_t;

/* Verifies `m`, optimises a clone of it (m is left as it is) and emits a relocatable ELF
 * object for `arch` into *out_obj (free()). Not loadable yet: drk_amdgpu_link makes the
 * code object. An invalid module is reported through d (a lowering bug, reported rather
 * than aborting). opts may be NULL for the defaults. */
bool drk_amdgpu_compile_module_opts(LLVMModuleRef m, const char *arch,
                                    const drk_amdgpu_opts_t *opts, void **out_obj,
                                    size_t *out_size, drk_diag_t *d);
bool drk_amdgpu_compile_module(LLVMModuleRef m, const char *arch, void **out_obj,
                               size_t *out_size, drk_diag_t *d);
/* The same, as AMDGPU assembly text (for --dump and tests); *out_asm is NUL-terminated. */
bool drk_amdgpu_compile_module_asm(LLVMModuleRef m, const char *arch,
                                   const drk_amdgpu_opts_t *opts, char **out_asm,
                                   size_t *out_len, drk_diag_t *d);

/* ---- object -> code object (link.c: ld.lld subprocess) ---- */
/* Path of ld.lld: $DRK_LD_LLD, /usr/lib/llvm-22/bin/ld.lld, then ld.lld-22 and ld.lld on
 * $PATH. Returns a malloc'ed path, or NULL + "ld.lld not found (looked in ...)". */
char *drk_amdgpu_lld_find(drk_diag_t *d);
/* Links one relocatable object into a code object with `ld.lld -shared --no-undefined`.
 * On success *out_hsaco (free()) holds the ELF; out_log (may be NULL) receives the
 * linker's output (free()). On failure the diagnostic quotes the log. */
bool drk_amdgpu_link(const void *obj, size_t obj_size, void **out_hsaco, size_t *out_size,
                     char **out_log, drk_diag_t *d);

/* Resource usage of kernel `name` (NULL: the first one), read from the code object's
 * AMDGPU metadata note (msgpack, NT_AMDGPU_METADATA). Counts are as the loader sees them. */
typedef struct drk_amdgpu_usage {
  int sgpr_count, vgpr_count, agpr_count;
  int sgpr_spill_count, vgpr_spill_count;
  int group_segment;   /* LDS bytes, static */
  int private_segment; /* scratch bytes per work-item: > 0 means spills or stack */
  int wavefront_size;
  int max_flat_workgroup_size;
  int kernarg_segment_size;
} drk_amdgpu_usage_t;
/* Returns false (out untouched) when the bytes are not an AMDGPU code object with such a
 * kernel; never reads outside [hsaco, hsaco + size). */
bool drk_amdgpu_usage_read(const void *hsaco, size_t size, const char *name,
                           drk_amdgpu_usage_t *out);

/* ---- kernel builders (intrinsics.c) ----
 * All helpers build at the current position of `b` inside a function of module `m`.
 * Pointers are typed by address space: global = AS 1, LDS = AS 3, constant = AS 4. */
typedef struct drk_amdgpu_cg {
  LLVMContextRef ctx;
  LLVMModuleRef mod;
  LLVMBuilderRef b;
  const drk_amdgpu_arch_t *arch; /* may be NULL when no arch-dependent choice is made */
} drk_amdgpu_cg_t;

/* Adds a kernel (amdgpu_kernel CC, external linkage, void return) to cg->mod, with
 * "uniform-work-group-size"="true" (the runtime always launches whole workgroups). */
LLVMValueRef drk_amdgpu_kernel_add(drk_amdgpu_cg_t *cg, const char *name, LLVMTypeRef *params,
                                   unsigned n_params);
/* "amdgpu-flat-work-group-size"="min,max": the register allocator assumes max threads per
 * workgroup (the default, 1024, halves the VGPR budget compared with 256). */
void drk_amdgpu_kernel_set_workgroup_size(drk_amdgpu_cg_t *cg, LLVMValueRef fn, int min, int max);
/* "amdgpu-waves-per-eu"="min,max" (occupancy hint); max <= 0 leaves max out. */
void drk_amdgpu_kernel_set_waves_per_eu(drk_amdgpu_cg_t *cg, LLVMValueRef fn, int min, int max);
/* Flush f32 denormals (MFMA ignores the mode; VALU gets faster on some ops). */
void drk_amdgpu_kernel_set_ftz(drk_amdgpu_cg_t *cg, LLVMValueRef fn);

/* Static LDS: a fresh internal addrspace(3) array of `bytes` bytes. */
LLVMValueRef drk_amdgpu_lds_static(drk_amdgpu_cg_t *cg, const char *name, unsigned bytes,
                                   unsigned align);
/* The module's dynamic LDS (HIP's extern __shared__), created on first use. */
LLVMValueRef drk_amdgpu_lds_dynamic(drk_amdgpu_cg_t *cg);

/* Work-item and workgroup ids; axis 0..2 = x, y, z. Results are i32. */
LLVMValueRef drk_amdgpu_workitem_id(drk_amdgpu_cg_t *cg, int axis);
LLVMValueRef drk_amdgpu_workgroup_id(drk_amdgpu_cg_t *cg, int axis);
/* Workgroup size and number of workgroups, from the code object v5 implicit kernel
 * arguments (hidden_group_size_*, hidden_block_count_*). */
LLVMValueRef drk_amdgpu_workgroup_size(drk_amdgpu_cg_t *cg, int axis);
LLVMValueRef drk_amdgpu_num_workgroups(drk_amdgpu_cg_t *cg, int axis);
/* The XCD remap of workgroup ids (the lowering's xcd_remap knob): workgroups are dispatched
 * round-robin over n_xcd dies in linear order (x fastest), so hardware id p runs on XCD
 * p % n_xcd. With G workgroups and q = G / n_xcd, p < n_xcd q becomes p' = (p % n_xcd) q +
 * p / n_xcd (each XCD runs the contiguous logical ids [j q, (j + 1) q)), the other ids stay.
 * ids[3]: hardware workgroup ids, n[3]: grid dims (i32); out[3]: the logical ids (x, y, z)
 * of p'. A bijection of the grid. With constant operands everything folds (tests). */
void drk_amdgpu_xcd_remap(drk_amdgpu_cg_t *cg, int n_xcd, LLVMValueRef n[3], LLVMValueRef ids[3], LLVMValueRef out[3]);
/* Lane within the wavefront, 0..63 (mbcnt.lo + mbcnt.hi). */
LLVMValueRef drk_amdgpu_lane_id(drk_amdgpu_cg_t *cg);
/* workitem.x / 64, made wave-uniform (readfirstlane: lives in an SGPR). */
LLVMValueRef drk_amdgpu_wave_index(drk_amdgpu_cg_t *cg);
/* v.readfirstlane: an i32 that is known to be uniform, moved to a scalar register. */
LLVMValueRef drk_amdgpu_readfirstlane(drk_amdgpu_cg_t *cg, LLVMValueRef v);

/* Workgroup barrier with LDS visibility: release fence, s_barrier, acquire fence (all at
 * workgroup scope), the form HIP's __syncthreads takes. */
void drk_amdgpu_barrier(drk_amdgpu_cg_t *cg);
/* s_barrier alone (no memory ordering): only for callers that fence themselves. */
void drk_amdgpu_s_barrier(drk_amdgpu_cg_t *cg);

/* Marks the loop whose back edge is branch latch_br as not to be unrolled (a loop id with
 * llvm.loop.unroll.disable; full, partial and runtime unrolling all read it). */
void drk_amdgpu_loop_no_unroll(drk_amdgpu_cg_t *cg, LLVMValueRef latch_br);

/* ds_bpermute: every lane reads `v` (i32 or float) from lane `src_lane` (i32, 0..63;
 * out-of-range lanes wrap modulo 64). Goes through the LDS crossbar but touches no LDS. */
LLVMValueRef drk_amdgpu_bpermute(drk_amdgpu_cg_t *cg, LLVMValueRef v, LLVMValueRef src_lane);

typedef enum { DRK_AMDGPU_SHFL_BFLY, DRK_AMDGPU_SHFL_DOWN, DRK_AMDGPU_SHFL_UP, DRK_AMDGPU_SHFL_IDX } drk_amdgpu_shfl_t;
/* CUDA-style shuffles over the whole wave64, built on ds_bpermute (no DPP): BFLY reads lane
 * ^ x, DOWN lane + x, UP lane - x (lanes past the edge keep their own value), IDX lane x. */
LLVMValueRef drk_amdgpu_shfl(drk_amdgpu_cg_t *cg, drk_amdgpu_shfl_t kind, LLVMValueRef v,
                             LLVMValueRef lane_or_delta);

typedef enum { DRK_AMDGPU_RED_ADD, DRK_AMDGPU_RED_MAX, DRK_AMDGPU_RED_MIN } drk_amdgpu_red_t;
/* Butterfly reduction of a float or i32 (signed) value over groups of `width` consecutive
 * lanes (power of two, 2..64); every lane of a group receives the result. Float max/min
 * propagate NaN (llvm.maximum/minimum). */
LLVMValueRef drk_amdgpu_wave_reduce(drk_amdgpu_cg_t *cg, drk_amdgpu_red_t op, LLVMValueRef v,
                                    unsigned width);

/* MFMA (matrix fused multiply-add on the matrix cores), one wavefront:
 * D[MxN] = A[MxK] * B[KxN] + C. Operand types per kind (A and B per lane, C/D per lane):
 *   F32_32X32X8_BF16   <4 x i16> (bf16 bits)  <16 x float>
 *   F32_16X16X16_BF16  <4 x i16>              <4 x float>
 *   F32_32X32X8_F16    <4 x half>             <16 x float>
 *   F32_16X16X16_F16   <4 x half>             <4 x float>
 *   F32_16X16X32_FP8   i64 (8 x e4m3)         <4 x float>
 *   F32_32X32X16_FP8   i64 (8 x e4m3)         <16 x float>
 *   F32_16X16X32_BF8 / F32_32X32X16_BF8: as FP8 with e5m2 operands.
 *   F32_16X16X4_F32    float                  <4 x float>
 *   F32_32X32X2_F32    float                  <16 x float>
 * Register layouts are in docs/backend-amdgpu.md. */
typedef enum {
  DRK_AMDGPU_MFMA_F32_32X32X8_BF16,
  DRK_AMDGPU_MFMA_F32_16X16X16_BF16,
  DRK_AMDGPU_MFMA_F32_32X32X8_F16,
  DRK_AMDGPU_MFMA_F32_16X16X16_F16,
  DRK_AMDGPU_MFMA_F32_16X16X32_FP8,
  DRK_AMDGPU_MFMA_F32_32X32X16_FP8,
  DRK_AMDGPU_MFMA_F32_16X16X32_BF8,
  DRK_AMDGPU_MFMA_F32_32X32X16_BF8,
  DRK_AMDGPU_MFMA_F32_16X16X4_F32, /* float A/B per lane: full f32 products (not tf32) */
  DRK_AMDGPU_MFMA_F32_32X32X2_F32,
  DRK_AMDGPU_MFMA_COUNT
} drk_amdgpu_mfma_t;

typedef struct drk_amdgpu_mfma_info {
  const char *intrinsic; /* "llvm.amdgcn.mfma.f32.32x32x8bf16.1k" */
  unsigned m, n, k;      /* per instruction, for one wavefront */
  unsigned ab_elems;     /* A/B elements per lane (4 or 8) */
  unsigned acc_elems;    /* C/D floats per lane: m*n/64 */
  bool fp8;              /* needs an fp8-capable arch */
} drk_amdgpu_mfma_info_t;
const drk_amdgpu_mfma_info_t *drk_amdgpu_mfma_info(drk_amdgpu_mfma_t kind);
/* The A/B operand type of `kind` in cg's context. */
LLVMTypeRef drk_amdgpu_mfma_ab_type(drk_amdgpu_cg_t *cg, drk_amdgpu_mfma_t kind);
/* Returns D (a <acc_elems x float> vector) = A*B + C. cbsz/abid/blgp are 0 (no broadcast). */
LLVMValueRef drk_amdgpu_mfma(drk_amdgpu_cg_t *cg, drk_amdgpu_mfma_t kind, LLVMValueRef a,
                             LLVMValueRef bm, LLVMValueRef c);

/* Buffer resource for `base` (global pointer) covering `num_bytes` (i64 or i32 value): loads
 * through it beyond num_bytes return 0 and stores are dropped, which makes masked tile
 * loads free of branches. Returns a ptr addrspace(8). */
LLVMValueRef drk_amdgpu_buffer_rsrc(drk_amdgpu_cg_t *cg, LLVMValueRef base, LLVMValueRef num_bytes);
/* raw buffer load/store of type `t` (i32, float, <2/4 x i32>, <4 x float>, ...) at byte
 * offset `voffset` (i32, per lane). */
LLVMValueRef drk_amdgpu_buffer_load(drk_amdgpu_cg_t *cg, LLVMTypeRef t, LLVMValueRef rsrc,
                                    LLVMValueRef voffset);
void drk_amdgpu_buffer_store(drk_amdgpu_cg_t *cg, LLVMValueRef v, LLVMValueRef rsrc,
                             LLVMValueRef voffset);
/* Plain global load/store of `t` at `ptr` + `index` elements (GEP + load with `align`). */
LLVMValueRef drk_amdgpu_global_load(drk_amdgpu_cg_t *cg, LLVMTypeRef t, LLVMValueRef ptr,
                                    LLVMValueRef index, unsigned align);
void drk_amdgpu_global_store(drk_amdgpu_cg_t *cg, LLVMValueRef v, LLVMValueRef ptr,
                             LLVMValueRef index, unsigned align);

/* ---- tile IR -> LLVM IR (lower.c) ---- */
/* Lowers every kernel of the verified tile module `tm` into a new LLVM module in ctx for
 * `arch` (caller disposes it). A construct not supported (an NVIDIA-only op, an f64
 * transcendental, a layout or dtype) is reported at its location (`file:line:col: error:
 * amdgpu: cannot lower 'wgmma_fence' ...`, the first per kernel) and NULL is returned; it
 * never aborts. Kernels' shared memory is static LDS (no dynamic LDS at launch); mma_sync
 * and mfma dots become MFMA (docs/backend-amdgpu.md, "Lowering"). */
LLVMModuleRef drk_amdgpu_lower_module(const drk_tile_module_t *tm, LLVMContextRef ctx, const char *arch,
                                      drk_diag_t *d);

/* Schedule knobs of the lowering (docs/backend-amdgpu.md, "How the default schedule accounts
 * for the chip"). xcd_remap: renumber program ids so that each XCD (its own L2) runs a
 * contiguous range of logical programs: DEFAULT for kernels with a `dot` (GEMM tiles share
 * operands), OFF never, ALL every kernel. Only the placement of programs changes, never a
 * result. drk_amdgpu_lower_module uses the defaults. */
typedef enum drk_amdgpu_xcd_remap {
  DRK_AMDGPU_XCD_REMAP_DEFAULT,
  DRK_AMDGPU_XCD_REMAP_OFF,
  DRK_AMDGPU_XCD_REMAP_ALL
} drk_amdgpu_xcd_remap_t;
typedef struct drk_amdgpu_lower_opts {
  drk_amdgpu_xcd_remap_t xcd_remap;
} drk_amdgpu_lower_opts_t;
LLVMModuleRef drk_amdgpu_lower_module_opts(const drk_tile_module_t *tm, LLVMContextRef ctx, const char *arch,
                                           const drk_amdgpu_lower_opts_t *o, drk_diag_t *d);

/* Calls intrinsic `name` (overloaded on `over`, may be 0 of them). */
LLVMValueRef drk_amdgpu_call_intrinsic(drk_amdgpu_cg_t *cg, const char *name, LLVMTypeRef *over,
                                       unsigned n_over, LLVMValueRef *args, unsigned n_args);

#endif
