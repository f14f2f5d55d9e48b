/* NVPTX backend: LLVM module -> PTX text -> cubin, plus builders for the GPU primitives
 * that tile IR lowering needs.
 *
 * Requires LLVM 22's C API (NVPTX target). Every function that can fail takes a drk_diag_t,
 * reports there and returns false/NULL; out_* parameters are written only on success.
 * Buffers returned through out_* are malloc'ed: the caller frees them with free().
 * The LLVM target is initialised once, thread-safely, by the first call that needs it.
 * Kernels built here are marked with the ptx_kernel calling convention (71): in-memory
 * modules never see the nvvm.annotations upgrade that the .ll parser applies. */
#ifndef DRK_BACKENDS_NVPTX_H
#define DRK_BACKENDS_NVPTX_H

#include <stdbool.h>
#include <stddef.h>

#include <llvm-c/Core.h>
#include <llvm-c/TargetMachine.h>

#include "backends/common/kcache.h"
#include "ir/support.h"

#define DRK_NVPTX_TRIPLE "nvptx64-nvidia-cuda"
#define DRK_NVPTX_CC_KERNEL 71 /* LLVM's CallingConv::PTX_Kernel */

/* Address spaces of the NVPTX backend. */
enum {
  DRK_NVPTX_AS_GENERIC = 0,
  DRK_NVPTX_AS_GLOBAL = 1,
  DRK_NVPTX_AS_SHARED = 3,
  DRK_NVPTX_AS_CONST = 4,
  DRK_NVPTX_AS_LOCAL = 5,
  DRK_NVPTX_AS_PARAM = 101,
  DRK_NVPTX_AS_SHARED_CLUSTER = 7,
};

/* ---- architectures ---- */
typedef struct drk_nvptx_arch {
  const char *name;     /* "sm_90a": what ptxas -arch takes */
  int sm;               /* 90 */
  bool arch_specific;   /* the 'a' suffix: wgmma, setmaxnreg, TMA multicast */
  int ptx_version;      /* PTX ISA emitted, e.g. 86 for .version 8.6 */
  const char *features; /* LLVM target features, e.g. "+ptx86" */
  int ptxas_major;      /* 0: any ptxas; else the CUDA major release its cubins must come from
                         * (sm_87: 12, what Jetson Orin's JetPack 6 driver loads) */
} drk_nvptx_arch_t;

/* The supported architectures, in ascending order; *out_n receives the count. */
const drk_nvptx_arch_t *drk_nvptx_arch_all(size_t *out_n);
/* The arch named `name` ("sm_87"), or NULL with an error listing the supported ones. */
const drk_nvptx_arch_t *drk_nvptx_arch_find(const char *name, drk_diag_t *d);

/* ---- target machine and modules ---- */
/* Initialises LLVM's NVPTX target (idempotent, thread-safe). */
void drk_nvptx_init(void);
/* A target machine for `arch` at LLVM codegen level 0..3. Caller disposes it with
 * LLVMDisposeTargetMachine. NULL + diagnostic for an unknown arch. */
LLVMTargetMachineRef drk_nvptx_target_machine_create(const char *arch, int opt_level,
                                                     drk_diag_t *d);
/* An empty module with the NVPTX triple and data layout set. Caller disposes it. */
LLVMModuleRef drk_nvptx_module_create(LLVMContextRef ctx, const char *name, drk_diag_t *d);

/* ---- LLVM module -> PTX ---- */
typedef struct drk_nvptx_opts {
  int opt_level;  /* LLVM pipeline default<O{n}> and codegen level; 0..3 (default 3) */
  bool no_verify; /* skip LLVMVerifyModule (the lowering is trusted) */
} drk_nvptx_opts_t;

/* Verifies `m`, runs the LLVM optimisation pipeline on a copy of it (m is left as it is, so
 * it can be compiled for several archs), and emits PTX for `arch`. *out_ptx is NUL-terminated (free() it); *out_len excludes the NUL.
 * An invalid module is reported through d (it means a lowering bug, but the compiler
 * reports it rather than aborting). opts may be NULL for the defaults. */
bool drk_nvptx_compile_module_opts(LLVMModuleRef m, const char *arch, const drk_nvptx_opts_t *opts,
                                   char **out_ptx, size_t *out_len, drk_diag_t *d);
bool drk_nvptx_compile_module(LLVMModuleRef m, const char *arch, char **out_ptx,
                              size_t *out_len, drk_diag_t *d);

/* One module's PTX from the PTX of its kernels, each compiled alone (emit.c): ptx[i] is what
 * drk_nvptx_compile_module prints for a module holding only kernel i (and the libdevice
 * helpers it calls). Writes what it prints for the module of all n (> 0) kernels in that
 * order, byte for byte: the header once (all must have the same); the module-scope
 * declarations of all once (function declarations, the kernels' own variables in order of
 * first appearance, then libdevice's variables); every kernel with its labels renumbered as
 * function i; then each helper function once, numbered from n. lib_order names libdevice's
 * variables and functions in the order a module that links it has them (the order of the
 * rest is that of first appearance). A name that several kernels declare or define must be
 * declared or defined the same way; false + an internal error naming it otherwise (the
 * optimizer can specialise a shared helper for its callers; then only one module of all
 * kernels gives the same PTX). *out_ptx is malloc'ed (free()). */
bool drk_nvptx_ptx_join(const char *const *ptx, size_t n, const char *const *lib_order, size_t n_lib,
                        char **out_ptx, size_t *out_len, drk_diag_t *d);

/* ---- PTX -> cubin (ptxas subprocess) ---- */
/* Path of ptxas: $DRK_PTXAS, $CUDA_HOME/bin/ptxas, /usr/local/cuda/bin/ptxas, then $PATH.
 * Returns a malloc'ed path, or NULL + "ptxas not found (looked in ...)". */
char *drk_nvptx_ptxas_find(drk_diag_t *d);
/* The ptxas that assembles for arch: for an arch with ptxas_major (sm_87), $DRK_PTXAS_CUDA12
 * when set (then the only candidate), else the first of the CUDA 12 ptxas found at build time (PyPI nvidia-cuda-nvcc-cu12 in the
 * project's venv), $DRK_PTXAS, $CUDA_HOME/bin, /usr/local/cuda-12*\/bin, /usr/local/cuda/bin
 * and $PATH whose `--version` is that major release; an error naming every one tried (with
 * its release) and how to get one when none is. Other archs: drk_nvptx_ptxas_find. Sets
 * *out_release (may be NULL) to "12.9" etc. when known (borrowed). Malloc'ed path. */
char *drk_nvptx_ptxas_find_for(const char *arch, const char **out_release, drk_diag_t *d);
/* Assembles `ptx` for `arch` with `ptxas -arch=<arch> -O3 -v`. On success *out_cubin
 * (free()) holds the ELF; out_log (may be NULL) receives ptxas's output (free()), which
 * includes the register/spill/smem report of -v. On failure the diagnostic quotes the log. */
bool drk_nvptx_ptxas(const char *ptx, const char *arch, void **out_cubin, size_t *out_size,
                     char **out_log, drk_diag_t *d);
/* What `<exe> --version` prints (all of it: the release and build lines), run once per
 * process and path; NULL + error when it does not run. Borrowed for the process's life. */
const char *drk_nvptx_ptxas_version(const char *exe, drk_diag_t *d);
/* drk_nvptx_ptxas without the log, through cache c (may be NULL: always runs ptxas): a hit
 * returns the cubin stored for this PTX, arch, ptxas version and options; a run stores it. */
bool drk_nvptx_ptxas_cached(const char *ptx, size_t ptx_len, const char *arch, drk_kcache_t *c, void **out_cubin,
                            size_t *out_size, drk_diag_t *d);

/* Resource usage parsed from a `ptxas -v` log for kernel `name` (NULL: the first one). */
typedef struct drk_nvptx_usage {
  int registers;
  int spill_stores, spill_loads; /* bytes */
  int smem;                      /* static shared memory, bytes */
  int stack;                     /* stack frame, bytes */
} drk_nvptx_usage_t;
bool drk_nvptx_usage_parse(const char *log, const char *name, drk_nvptx_usage_t *out);

/* ---- kernel builders (intrinsics.c) ----
 * All helpers build at the current position of `b` inside a function of module `m`.
 * Pointers are typed by address space: global = AS 1, shared = AS 3. */
typedef struct drk_nvptx_cg {
  LLVMContextRef ctx;
  LLVMModuleRef mod;
  LLVMBuilderRef b;
  const drk_nvptx_arch_t *arch; /* may be NULL when no arch-dependent choice is made */
} drk_nvptx_cg_t;

/* Adds a kernel (ptx_kernel CC, external linkage, void return) to cg->mod. */
LLVMValueRef drk_nvptx_kernel_add(drk_nvptx_cg_t *cg, const char *name, LLVMTypeRef *params,
                                  unsigned n_params);
/* Launch-bound attributes ("nvvm.maxntid" etc.); values <= 0 leave the attribute out. */
void drk_nvptx_kernel_set_maxntid(drk_nvptx_cg_t *cg, LLVMValueRef fn, int x, int y, int z);
void drk_nvptx_kernel_set_reqntid(drk_nvptx_cg_t *cg, LLVMValueRef fn, int x, int y, int z);
void drk_nvptx_kernel_set_minctasm(drk_nvptx_cg_t *cg, LLVMValueRef fn, int n);
void drk_nvptx_kernel_set_maxnreg(drk_nvptx_cg_t *cg, LLVMValueRef fn, int n);
void drk_nvptx_kernel_set_cluster_dim(drk_nvptx_cg_t *cg, LLVMValueRef fn, int x, int y, int z);
/* Flush f32 denormals to zero in fn (ftz variants of PTX instructions). */
void drk_nvptx_kernel_set_ftz(drk_nvptx_cg_t *cg, LLVMValueRef fn);
/* Marks parameter `idx` (declared as `ptr`) as a __grid_constant__ 128-byte CUtensorMap:
 * byval([128 x i8]) align 64 "nvvm.grid_constant". Without the attribute LLVM copies the
 * map to local memory and TMA reads garbage. */
void drk_nvptx_param_set_tensormap(drk_nvptx_cg_t *cg, LLVMValueRef fn, unsigned idx);

/* Static shared memory: a fresh internal addrspace(3) array of `bytes` bytes. */
LLVMValueRef drk_nvptx_smem_static(drk_nvptx_cg_t *cg, const char *name, unsigned bytes,
                                   unsigned align);
/* The module's dynamic shared memory (`extern __shared__`), created on first use. */
LLVMValueRef drk_nvptx_smem_dynamic(drk_nvptx_cg_t *cg);

/* Special registers; axis 0..2 = x, y, z. Results are i32. */
LLVMValueRef drk_nvptx_tid(drk_nvptx_cg_t *cg, int axis);
LLVMValueRef drk_nvptx_ctaid(drk_nvptx_cg_t *cg, int axis);
LLVMValueRef drk_nvptx_ntid(drk_nvptx_cg_t *cg, int axis);
LLVMValueRef drk_nvptx_nctaid(drk_nvptx_cg_t *cg, int axis);
LLVMValueRef drk_nvptx_laneid(drk_nvptx_cg_t *cg);
/* tid.x / 32, made warp-uniform (PTX's %warpid is not stable, so it is not used). */
LLVMValueRef drk_nvptx_warp_index(drk_nvptx_cg_t *cg);

/* bar.sync id (all threads of the CTA, one static instruction); with n_threads > 0 the
 * unaligned barrier.sync id, n_threads (participants may come from different code). */
void drk_nvptx_bar_sync(drk_nvptx_cg_t *cg, unsigned id, unsigned n_threads);

typedef enum { DRK_NVPTX_SHFL_BFLY, DRK_NVPTX_SHFL_DOWN, DRK_NVPTX_SHFL_UP, DRK_NVPTX_SHFL_IDX } drk_nvptx_shfl_t;
/* shfl.sync over the full warp. v is i32 or float (other 32-bit types are bitcast by the
 * caller); lane_or_delta is an i32 value. */
LLVMValueRef drk_nvptx_shfl(drk_nvptx_cg_t *cg, drk_nvptx_shfl_t kind, LLVMValueRef v,
                            LLVMValueRef lane_or_delta);

typedef enum { DRK_NVPTX_RED_ADD, DRK_NVPTX_RED_MAX, DRK_NVPTX_RED_MIN } drk_nvptx_red_t;
/* Butterfly reduction of a float or i32 (signed) value over groups of `width` consecutive
 * lanes (power of two, 2..32); every lane of a group receives the result. Float max/min
 * propagate NaN (llvm.maximum/minimum). */
LLVMValueRef drk_nvptx_warp_reduce(drk_nvptx_cg_t *cg, drk_nvptx_red_t op, LLVMValueRef v,
                                   unsigned width);

/* cp.async.{ca,cg}.shared.global of `bytes` (4, 8 or 16; cg needs 16). With src_size
 * (i32, may be NULL) the bytes beyond src_size are zero-filled: masked loads. */
void drk_nvptx_cp_async(drk_nvptx_cg_t *cg, LLVMValueRef dst_smem, LLVMValueRef src_global,
                        unsigned bytes, LLVMValueRef src_size);
void drk_nvptx_cp_async_commit(drk_nvptx_cg_t *cg);
void drk_nvptx_cp_async_wait(drk_nvptx_cg_t *cg, unsigned n_pending);

/* ldmatrix.sync.aligned.m8n8.x{n}[.trans].shared.b16: n = 1, 2 or 4 i32 registers written
 * to out[0..n-1]. */
void drk_nvptx_ldmatrix(drk_nvptx_cg_t *cg, LLVMValueRef smem, unsigned n, bool trans,
                        LLVMValueRef *out);
/* stmatrix.sync.aligned.m8n8.x{n}[.trans].shared.b16 (sm_90+): n = 1, 2 or 4 registers. */
void drk_nvptx_stmatrix(drk_nvptx_cg_t *cg, LLVMValueRef smem, unsigned n, bool trans,
                        LLVMValueRef *regs);

typedef enum { DRK_NVPTX_MMA_BF16, DRK_NVPTX_MMA_F16 } drk_nvptx_mma_in_t;
/* mma.sync.aligned.m16n8k16.row.col.f32.{bf16,f16}.{...}.f32: a[4], b[2] i32 (packed
 * pairs), c[4] float; writes d[4] float. */
void drk_nvptx_mma_m16n8k16(drk_nvptx_cg_t *cg, drk_nvptx_mma_in_t in, LLVMValueRef a[4],
                            LLVMValueRef bm[2], LLVMValueRef c[4], LLVMValueRef d[4]);

/* mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32: a[4], b[2] i32 holding tf32 values
 * (drk_nvptx_cvt_tf32), c[4] float; writes d[4] float. */
void drk_nvptx_mma_m16n8k8_tf32(drk_nvptx_cg_t *cg, LLVMValueRef a[4], LLVMValueRef bm[2], LLVMValueRef c[4],
                                LLVMValueRef d[4]);
/* mma.sync.aligned.m16n8k32.row.col.f32.{e4m3,e5m2}.{e4m3,e5m2}.f32 (sm_89+, PTX 8.4): a[4],
 * b[2] i32 (four f8 bytes each, the lowest K first), c[4] float; writes d[4] float. */
void drk_nvptx_mma_m16n8k32_f8(drk_nvptx_cg_t *cg, bool a_e5m2, bool b_e5m2, LLVMValueRef a[4], LLVMValueRef bm[2],
                               LLVMValueRef c[4], LLVMValueRef d[4]);
/* cvt.rna.tf32.f32: f (float) rounded to tf32 (nearest, ties away), as the i32 an mma takes. */
LLVMValueRef drk_nvptx_cvt_tf32(drk_nvptx_cg_t *cg, LLVMValueRef f);

/* mbarrier on a 64-bit shared-memory word (AS 3 pointer). */
void drk_nvptx_mbarrier_init(drk_nvptx_cg_t *cg, LLVMValueRef bar, LLVMValueRef count);
/* arrive + expect_tx(bytes) (sm_90); returns the i64 state. */
LLVMValueRef drk_nvptx_mbarrier_arrive_expect_tx(drk_nvptx_cg_t *cg, LLVMValueRef bar,
                                                 LLVMValueRef bytes);
LLVMValueRef drk_nvptx_mbarrier_arrive(drk_nvptx_cg_t *cg, LLVMValueRef bar);
/* Spins on mbarrier.try_wait.parity until phase `parity` (i32 0/1) completes. Leaves the
 * builder in a new block after the loop. */
void drk_nvptx_mbarrier_wait_parity(drk_nvptx_cg_t *cg, LLVMValueRef bar, LLVMValueRef parity);
/* fence.mbarrier_init.release.cluster: makes mbarrier.init visible to the async proxy. */
void drk_nvptx_fence_mbarrier_init(drk_nvptx_cg_t *cg);

/* TMA (sm_90): cp.async.bulk.tensor.{rank}d.shared::cluster.global.tile.mbarrier
 * global -> shared; tmap is the grid-constant param; coords are i32, rank 1..5. multicast:
 * 0, or the mask of the cluster's CTAs that each get the box at dst_smem's offset, with
 * complete_tx on the mbarrier at bar's offset in each of them (.multicast::cluster). */
void drk_nvptx_tma_load(drk_nvptx_cg_t *cg, LLVMValueRef dst_smem, LLVMValueRef bar,
                        LLVMValueRef tmap, LLVMValueRef *coords, unsigned rank, unsigned multicast);
/* barrier.cluster.arrive (release) then barrier.cluster.wait (acquire): every thread of
 * every CTA of the cluster. */
void drk_nvptx_cluster_sync(drk_nvptx_cg_t *cg);
/* shared -> global, then bulk_group commit/wait via the two helpers below. */
void drk_nvptx_tma_store(drk_nvptx_cg_t *cg, LLVMValueRef src_smem, LLVMValueRef tmap,
                         LLVMValueRef *coords, unsigned rank);
void drk_nvptx_bulk_commit(drk_nvptx_cg_t *cg);
void drk_nvptx_bulk_wait(drk_nvptx_cg_t *cg, unsigned n_pending, bool read_only);
/* fence.proxy.async.shared::cta: generic-proxy smem writes become visible to TMA/wgmma. */
void drk_nvptx_fence_proxy_async(drk_nvptx_cg_t *cg);

/* wgmma (sm_90a). */
void drk_nvptx_wgmma_fence(drk_nvptx_cg_t *cg);
void drk_nvptx_wgmma_commit(drk_nvptx_cg_t *cg);
void drk_nvptx_wgmma_wait(drk_nvptx_cg_t *cg, unsigned n_pending);
/* wgmma.mma_async.sync.aligned.m64n{n}k16.f32.{bf16,f16}.{...} d, desc_a, desc_b, p, 1, 1,
 * tnsp_a, tnsp_b through inline asm with tied accumulators. n is 8..256 (multiple of 8);
 * acc holds n/2 floats (in) and receives n/2 floats (out). desc_a/desc_b are i64 smem
 * matrix descriptors; scale_d is an i32 (0: D = A*B, else D = A*B + D); tnsp_x = true
 * when that operand is MN-major in shared memory rather than K-major. */
void drk_nvptx_wgmma_mma_async(drk_nvptx_cg_t *cg, drk_nvptx_mma_in_t in, unsigned n,
                               LLVMValueRef desc_a, LLVMValueRef desc_b, LLVMValueRef scale_d,
                               bool tnsp_a, bool tnsp_b, LLVMValueRef *acc);
/* A wgmma shared-memory matrix descriptor (i64) for `smem` (AS 3 pointer):
 * leading/stride byte offsets and swizzle mode (0 none, 1 128B, 2 64B, 3 32B). */
LLVMValueRef drk_nvptx_wgmma_desc(drk_nvptx_cg_t *cg, LLVMValueRef smem, unsigned lead_bytes,
                                  unsigned stride_bytes, unsigned swizzle);

/* Calls intrinsic `name` (overloaded on `over`, may be 0 of them). */
LLVMValueRef drk_nvptx_call_intrinsic(drk_nvptx_cg_t *cg, const char *name, LLVMTypeRef *over,
                                      unsigned n_over, LLVMValueRef *args, unsigned n_args);

/* ---- tile IR lowering (lower.c, lower_math.c, lower_mem.c) ----
 * Kernel parameters, in order: ptr<T> -> `ptr addrspace(1)`, scalars by value (bool as i1),
 * tmadesc -> `ptr byval([128 x i8]) align 64 "nvvm.grid_constant"`. Dynamic shared memory
 * (local_alloc offsets) is the module's `drk_dsmem`; the launcher passes kernel->smem bytes.
 * Unsupported op/layout/dtype/arch combinations are located errors ("nvptx: cannot lower
 * 'op' ..."), never aborts. Math functions come from CUDA's libdevice ($DRK_LIBDEVICE,
 * $CUDA_HOME/nvvm/libdevice/libdevice.10.bc, /usr/local/cuda/nvvm/libdevice/...): a kernel
 * using exp/log/tanh/erf... is an error when it is missing. docs/backend-nvptx.md lists what
 * lowers. */
typedef struct drk_tile_module drk_tile_module_t;
typedef struct drk_tile_kernel drk_tile_kernel_t;
/* Adds kernel k of verified module m to cg->mod as a ptx_kernel function named k->name.
 * cg->arch must be set. On failure nothing is left in cg->mod for k. Does not link
 * libdevice (drk_nvptx_lower_module does). */
bool drk_nvptx_lower_kernel(drk_nvptx_cg_t *cg, const drk_tile_module_t *m, const drk_tile_kernel_t *k,
                            drk_diag_t *d);
/* One LLVM function per kernel of the verified module m, in a fresh module of ctx, with
 * libdevice linked in where needed and verified (LLVMVerifyModule). The caller disposes
 * *out_mod (LLVMDisposeModule) before ctx. Errors for every kernel that does not lower. */
bool drk_nvptx_lower_module(LLVMContextRef ctx, const drk_tile_module_t *m, const char *arch,
                            LLVMModuleRef *out_mod, drk_diag_t *d);
/* lower -> PTX (*out_ptx, free()) -> with out_cubin != NULL also ptxas (*out_cubin,
 * *out_cubin_size, free()); out_cubin NULL: PTX only.
 *
 * Every kernel is lowered into its own LLVM module in its own LLVM context, linked with
 * libdevice, verified and compiled to PTX, on o->jobs worker threads (backends/common/
 * kcache.h: drk_codegen_opts_t; NULL: the defaults); the kernels' PTX is then joined into
 * one text (drk_nvptx_ptx_join), byte for byte what drk_nvptx_lower_module +
 * drk_nvptx_compile_module print, whatever the job count. Each kernel's PTX and the
 * module's cubin come from the cache when it has them, keyed on the kernel's tile IR text
 * (with the layouts it names), the arch and features, the compiler (drk_kcache_compiler_id),
 * LLVM's version and libdevice's SHA-256; the cubin on the PTX, the arch, ptxas's version
 * and options. m is only read, from several threads. Diagnostics go to d in kernel order,
 * as the one-module path reports them: every kernel's lowering errors; then, when all
 * lowered, the first later failure (libdevice, verifier, LLVM codegen) only. Parts that do
 * not join (see drk_nvptx_ptx_join) make it compile the module as one module instead, with
 * the same result (o->stats->whole_modules, whole_reason). The ptxas log (-v) is not
 * returned. The cache is on by default (also for the wrapper below): the defaults are
 * those of drkc. */
bool drk_nvptx_compile_tile_module_opts(const drk_tile_module_t *m, const char *arch, const drk_codegen_opts_t *o,
                                        char **out_ptx, void **out_cubin, size_t *out_cubin_size, drk_diag_t *d);
/* The same with the default options (NULL). */
bool drk_nvptx_compile_tile_module(const drk_tile_module_t *m, const char *arch, char **out_ptx,
                                   void **out_cubin, size_t *out_cubin_size, drk_diag_t *d);

#endif
