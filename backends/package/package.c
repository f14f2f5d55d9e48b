/* The back half of the pipeline (see build.h): lower, plan, generate, pack. */
#include "build.h"

#include <llvm-c/Core.h>
#include <stdlib.h>
#include <string.h>

#include "backends/nvptx/nvptx.h"
#include "backends/package/build_amd.h"
#include "backends/package/build_precision.h"
#include "backends/package/fatbin.h"
#include "backends/package/module.h"
#include "backends/targets.h"
#include "lower/lower.h"
#include "passes/plan_memory.h"
#include "passes/precision.h"

/* One NVIDIA target's code. */
typedef struct nv_code {
  const drk_target_info_t *t;
  char *ptx;
  void *cubin;
  size_t cubin_size;
} nv_code_t;

static bool text_result(char *text, size_t len, void **out_data, size_t *out_size) {
  *out_data = text;
  *out_size = len;
  return true;
}

/* The text a printer of the lowered module writes (--emit=tile, --emit=schedules). */
static bool print_lowered(const drk_lowered_t *l, void (*print)(const drk_lowered_t *, FILE *), void **out_data,
                          size_t *out_size) {
  char *buf = NULL;
  size_t len = 0;
  FILE *f = open_memstream(&buf, &len);
  if (!f) return false;
  print(l, f);
  fclose(f);
  return text_result(buf, len, out_data, out_size);
}

static bool print_llvm(const drk_lowered_t *l, const char *arch, void **out_data, size_t *out_size,
                       drk_diag_t *d) {
  LLVMContextRef ctx = LLVMContextCreate();
  LLVMModuleRef mod;
  bool ok = drk_nvptx_lower_module(ctx, l->module, arch, &mod, d);
  if (ok) {
    char *s = LLVMPrintModuleToString(mod);
    char *copy = strdup(s);
    LLVMDisposeMessage(s);
    LLVMDisposeModule(mod);
    ok = text_result(copy, strlen(copy), out_data, out_size);
  }
  LLVMContextDispose(ctx);
  return ok;
}

static uint64_t param_scalar(drk_modfile_param_t *p, const drk_larg_t *a) {
  p->kind = DRK_MODFILE_PARAM_SCALAR;
  if (a->kind == DRK_LARG_I32) {
    int32_t v = (int32_t)a->i;
    p->scalar_size = 4;
    memcpy(p->scalar, &v, 4);
  } else if (a->kind == DRK_LARG_I64) {
    p->scalar_size = 8;
    memcpy(p->scalar, &a->i, 8);
  } else {
    float v = (float)a->f;
    p->scalar_size = 4;
    memcpy(p->scalar, &v, 4);
  }
  return 0;
}

/* CUDA driver enum values (cuda.h: CUtensorMapDataType, CUtensorMapSwizzle,
 * CUtensorMapL2promotion); the module stores them as they are. */
static uint32_t tma_dtype(drk_dtype_t t) {
  switch (t) {
  case DRK_DT_U8: case DRK_DT_I8: case DRK_DT_F8E4M3: case DRK_DT_F8E5M2: case DRK_DT_BOOL: return 0; /* UINT8 */
  case DRK_DT_I16: return 1;                                                                         /* UINT16 */
  case DRK_DT_I32: return 3;                                                                         /* INT32 */
  case DRK_DT_I64: return 5;                                                                         /* INT64 */
  case DRK_DT_F16: return 6;                                                                         /* FLOAT16 */
  case DRK_DT_F32: return 7;                                                                         /* FLOAT32 */
  case DRK_DT_F64: return 8;                                                                         /* FLOAT64 */
  case DRK_DT_BF16: return 9;                                                                        /* BFLOAT16 */
  default: DRK_ASSERT(!"TMA of a sub-byte dtype"); return 0;
  }
}

static void tma_fill(drk_modfile_tma_t *t, const drk_larg_tma_t *s, uint64_t offset) {
  memset(t, 0, sizeof *t);
  t->data_type = tma_dtype(s->dtype);
  t->rank = (uint32_t)s->rank;
  t->offset = offset;
  for (int i = 0; i < s->rank; i++) {
    t->dims[i] = (uint64_t)s->dims[i];
    if (i) t->strides[i - 1] = (uint64_t)s->strides[i - 1];
    t->box[i] = (uint32_t)s->box[i];
    t->elem_strides[i] = 1;
  }
  t->interleave = 0; /* CU_TENSOR_MAP_INTERLEAVE_NONE */
  t->swizzle = s->swizzle == 128 ? 3 : s->swizzle == 64 ? 2 : s->swizzle == 32 ? 1 : 0;
  t->l2_promotion = s->l2_promotion == 256 ? 3 : s->l2_promotion == 128 ? 2 : s->l2_promotion == 64 ? 1 : 0;
  t->oob_fill = s->oob_nan ? 1 : 0; /* CU_TENSOR_MAP_FLOAT_OOB_FILL_NAN_REQUEST_ZERO_FMA : _NONE (zeros) */
}

static void fill_tensor(drk_modfile_tensor_t *t, const drk_value_t *v, const drk_mem_plan_t *plan) {
  t->name = v->name;
  t->dtype = drk_dtype_to_onnx(v->dtype);
  t->rank = (uint32_t)v->shape.rank;
  for (int i = 0; i < v->shape.rank; i++) t->dims[i] = v->shape.dims[i].size;
  t->offset = plan->offset[v->id];
  t->size = plan->size[v->id];
}

static char *targets_string(unsigned set) {
  char buf[256] = "";
  for (int t = 0; t < DRK_TARGET_COUNT; t++)
    if (set & (1u << t)) {
      if (buf[0]) strcat(buf, ",");
      strcat(buf, drk_target_info((drk_target_t)t)->name);
    }
  return strdup(buf);
}

/* --report: what the compiler did with the model. */
static bool report(FILE *out, const drk_graph_t *g, const drk_lowered_t *l, drk_diag_t *d) {
  drk_mem_plan_t pl, *plan = &pl;
  if (!drk_lowered_plan_memory(g, l, plan, d)) return false;
  size_t nodes = 0, mix[DRK_DT_COUNT] = {0};
  for (size_t i = 0; i < g->n_nodes; i++) {
    const drk_node_t *n = g->nodes[i];
    if (n->dead) continue;
    nodes++;
    drk_dtype_t t = drk_precision_node_dtype(n); /* f8 matmuls count as f8, not by their f32 result */
    if (t < DRK_DT_COUNT) mix[t]++;
  }
  uint64_t act = plan->arena_size - plan->weights_size;
  fprintf(out, "report: %zu graph nodes -> %zu kernels (%zu nodes need no kernel: views of another tensor)\n",
          nodes, l->n_launches, l->n_aliases);
  fprintf(out, "report: activations %.2f MiB planned vs %.2f MiB naive sum (%.0f%%); weights %.2f MiB; arena %.2f MiB\n",
          act / 1048576.0, plan->naive_size / 1048576.0, plan->naive_size ? 100.0 * (double)act / (double)plan->naive_size : 0.0,
          plan->weights_size / 1048576.0, plan->arena_size / 1048576.0);
  fprintf(out, "report: precision mix (float nodes by compute dtype):");
  for (int t = 0; t < DRK_DT_COUNT; t++)
    if (mix[t]) fprintf(out, " %zu %s", mix[t], drk_dtype_name((drk_dtype_t)t));
  fprintf(out, "\n");
  drk_mem_plan_free(plan);
  return true;
}

static bool pack_module(const drk_graph_t *g, const drk_lowered_t *l, const drk_build_options_t *o,
                        const drk_modfile_image_t *images, uint32_t n_images,
                        void **out_data, size_t *out_size, drk_diag_t *d) {
  drk_mem_plan_t plan;
  if (!drk_lowered_plan_memory(g, l, &plan, d)) return false;

  drk_modfile_kernel_t *ks = calloc(l->n_launches + 1, sizeof *ks);
  size_t n_params = 0, n_tmas = 0;
  for (size_t i = 0; i < l->n_launches; i++) n_params += (size_t)l->launches[i].n_args;
  drk_modfile_param_t *ps = calloc(n_params + 1, sizeof *ps), *p = ps;
  drk_modfile_tma_t *tmas = calloc(n_params + 1, sizeof *tmas);
  drk_modfile_tensor_t *ins = calloc(g->n_inputs + 1, sizeof *ins), *outs = calloc(g->n_outputs + 1, sizeof *outs);
  drk_modfile_weight_t *ws = calloc(g->n_consts + 1, sizeof *ws);
  void *weights = drk_mem_plan_weights(&plan, g);
  char *tstr = targets_string(o->targets);
  drk_build_precision_t prec = {0};
  bool ok = ks && ps && tmas && ins && outs && ws && (weights || !plan.weights_size) && tstr && drk_build_precision(g, l, &prec);
  if (!ok) {
    drk_diag_error(d, drk_loc_none, "out of memory packing the module (%zu kernels, %zu parameters)", l->n_launches, n_params);
    goto done;
  }
  for (size_t i = 0; i < l->n_launches; i++) {
    const drk_launch_t *la = &l->launches[i];
    drk_modfile_kernel_t *k = &ks[i];
    k->name = la->kernel->name;
    k->slot = 0;
    /* the tile kernel's cluster; one CTA (1 1 1) is none: 0 0 0 in the module, a plain
     * launch (and one HIP can make) */
    const int64_t *cl = la->kernel->cluster;
    bool clustered = cl[0] * cl[1] * cl[2] > 1;
    for (int j = 0; j < 3; j++) {
      k->grid[j] = la->grid[j] ? la->grid[j] : 1;
      k->cluster[j] = clustered ? (uint32_t)cl[j] : 0;
    }
    k->block[0] = la->block;
    k->block[1] = k->block[2] = 1;
    k->dyn_smem = la->smem_bytes;
    k->params = p;
    k->n_params = (uint32_t)la->n_args;
    for (int j = 0; j < la->n_args; j++, p++) {
      const drk_larg_t *a = &la->args[j];
      if (a->kind == DRK_LARG_BUFFER) {
        p->kind = DRK_MODFILE_PARAM_BUFFER;
        p->offset = plan.offset[a->value->id];
        p->size = plan.size[a->value->id];
      } else if (a->kind == DRK_LARG_SCRATCH) { /* an arena range like any buffer */
        DRK_ASSERT(a->i >= 0 && (size_t)a->i < l->n_scratch);
        p->kind = DRK_MODFILE_PARAM_BUFFER;
        p->offset = plan.scratch_offset[a->i];
        p->size = l->scratch[a->i].bytes;
      } else if (a->kind == DRK_LARG_TMA) {
        DRK_ASSERT(a->i >= 0 && a->i < la->n_tmas);
        p->kind = DRK_MODFILE_PARAM_TMA;
        p->tma = (uint32_t)n_tmas;
        tma_fill(&tmas[n_tmas++], &la->tmas[a->i], plan.offset[a->value->id]);
      } else {
        param_scalar(p, a);
      }
    }
  }
  for (size_t i = 0; i < g->n_inputs; i++) fill_tensor(&ins[i], g->inputs[i], &plan);
  for (size_t i = 0; i < g->n_outputs; i++) fill_tensor(&outs[i], g->outputs[i], &plan);
  for (size_t i = 0; i < g->n_consts; i++)
    ws[i] = (drk_modfile_weight_t){g->consts[i]->name, plan.offset[g->consts[i]->id], plan.size[g->consts[i]->id]};

  char hash[72] = "sha256:unknown";
  const char *mh = o->model_hash ? o->model_hash(o->model_hash_ctx) : NULL;
  if (mh) snprintf(hash, sizeof hash, "%s", mh);
  drk_modfile_t mf = {
      .prov = {DRK_VERSION_STRING, o->command_line ? o->command_line : "", hash, tstr},
      .arena_size = plan.arena_size ? plan.arena_size : 256,
      .weights_offset = 0,
      .weights = weights,
      .weights_size = plan.weights_size,
      .weight_entries = ws,
      .n_weight_entries = (uint32_t)g->n_consts,
      .kernels = ks,
      .n_kernels = (uint32_t)l->n_launches,
      .inputs = ins,
      .n_inputs = (uint32_t)g->n_inputs,
      .outputs = outs,
      .n_outputs = (uint32_t)g->n_outputs,
      .tmas = tmas,
      .n_tmas = (uint32_t)n_tmas,
      .images = images,
      .n_images = n_images,
  };
  drk_build_precision_attach(&prec, &mf);
  char err[512];
  drk_modfile_result_t r = drk_modfile_write(&mf, out_data, out_size, err, sizeof err);
  if (r != DRK_MODFILE_OK) drk_diag_error(d, drk_loc_none, "writing the module: %s", err);
  ok = r == DRK_MODFILE_OK;
done:
  drk_build_precision_free(&prec);
  free(tstr);
  free(weights);
  free(ws);
  free(ins);
  free(outs);
  free(ps);
  free(tmas);
  free(ks);
  drk_mem_plan_free(&plan);
  return ok;
}

/* The NVIDIA half: a cubin per NVIDIA target (or the PTX/cubin --emit asked for), packed into
 * a fat binary with PTX of the newest portable target. Returns the fat binary in *out_fb
 * and the image's target list, or, when o->stop ends here, the result in out_data. */
static bool build_nvidia(const drk_lowered_t *l, const drk_build_options_t *o, unsigned nv, void **out_fb,
                         size_t *out_fb_size, char *image_targets, void **out_data, size_t *out_size, bool *out_done,
                         drk_diag_t *d) {
  nv_code_t code[DRK_TARGET_COUNT];
  size_t n_code = 0;
  bool ok = false;
  memset(code, 0, sizeof code);
  *out_done = false;
  for (int t = 0; t < DRK_TARGET_COUNT; t++) {
    if (!(nv & (1u << t))) continue;
    nv_code_t *c = &code[n_code++];
    c->t = drk_target_info((drk_target_t)t);
    bool need_cubin = o->stop != DRK_BUILD_PTX;
    if (!drk_nvptx_compile_tile_module(l->module, c->t->name, &c->ptx, need_cubin ? &c->cubin : NULL,
                                       need_cubin ? &c->cubin_size : NULL, d))
      goto done;
    if (o->stop == DRK_BUILD_PTX || o->stop == DRK_BUILD_CUBIN) {
      /* The first NVIDIA target's code is the result. */
      if (o->stop == DRK_BUILD_PTX) {
        *out_data = c->ptx;
        *out_size = strlen(c->ptx);
        c->ptx = NULL;
      } else {
        *out_data = c->cubin;
        *out_size = c->cubin_size;
        c->cubin = NULL;
      }
      *out_done = ok = true;
      goto done;
    }
  }
  {
    drk_fatbin_image_t imgs[DRK_TARGET_COUNT + 1];
    size_t n_img = 0;
    char arch[32];
    image_targets[0] = 0;
    for (size_t i = 0; i < n_code; i++) {
      imgs[n_img++] = (drk_fatbin_image_t){DRK_FATBIN_ELF, (unsigned)code[i].t->number, code[i].t->arch_specific,
                                           false, code[i].cubin, code[i].cubin_size};
      if (image_targets[0]) strcat(image_targets, ",");
      strcat(image_targets, code[i].t->name);
    }
    /* Arch-specific PTX (compute_90a) cannot be JIT-compiled for later GPUs: prefer the
     * newest portable target. */
    const nv_code_t *newest = &code[n_code - 1];
    for (size_t i = n_code; i-- > 0;)
      if (!code[i].t->arch_specific) {
        newest = &code[i];
        break;
      }
    imgs[n_img++] = (drk_fatbin_image_t){DRK_FATBIN_PTX, (unsigned)newest->t->number, newest->t->arch_specific,
                                         false, newest->ptx, strlen(newest->ptx)};
    drk_fatbin_format_arch((unsigned)newest->t->number, newest->t->arch_specific, arch, sizeof arch);
    strcat(image_targets, ",compute_");
    strcat(image_targets, arch + 3);
    char err[512];
    if (drk_fatbin_build(imgs, n_img, out_fb, out_fb_size, err, sizeof err) != 0) {
      drk_diag_error(d, drk_loc_none, "building the fat binary: %s", err);
      goto done;
    }
    ok = true;
  }
done:
  for (size_t i = 0; i < n_code; i++) {
    free(code[i].ptx);
    free(code[i].cubin);
  }
  return ok;
}

static bool need(bool have, const char *what, const char *emit, drk_diag_t *d) {
  if (!have) drk_diag_error(d, drk_loc_none, "--emit=%s needs %s target (e.g. %s)", emit, what,
                            strcmp(what, "an NVIDIA") == 0 ? "--target=sm_90" : "--target=gfx942");
  return have;
}

bool drk_build(const drk_graph_t *g, const drk_build_options_t *o, void **out_data, size_t *out_size,
               drk_diag_t *d) {
  unsigned amd = o->targets & (1u << DRK_TARGET_GFX942), nv = o->targets & ~amd;
  /* Tile kernels are lowered once for all targets of the module (one plan serves every
   * image): for the oldest NVIDIA target, Hopper-only kernels only when sm_90a is the only
   * one. With gfx942 in the set, the common sm_80 form, which the AMD backend maps to MFMA. */
  drk_lower_options_t lo = {.target_sm = 80, .allow_tf32 = o->allow_tf32, .fusion_set = o->fusion_set,
                            .fusion_level = o->fusion_level, .max_group_depth = o->max_group_depth,
                            .knobs = o->knobs, .schedules = o->schedules};
  for (int t = 0; t < DRK_TARGET_COUNT && nv && !amd; t++)
    if (nv & (1u << t)) {
      lo.target_sm = drk_target_info((drk_target_t)t)->number;
      lo.arch_specific = drk_target_info((drk_target_t)t)->arch_specific;
      break;
    }
  const char *first_nv = NULL;
  for (int t = 0; t < DRK_TARGET_COUNT && !first_nv; t++)
    if (nv & (1u << t)) first_nv = drk_target_info((drk_target_t)t)->name;
  static const char *const stop_names[] = {"tile", "llvm", "ptx", "cubin", "fatbin", "hsaco", "bundle", "module",
                                           "schedules"};
  const char *emit = stop_names[o->stop];
  if ((o->stop == DRK_BUILD_PTX || o->stop == DRK_BUILD_CUBIN || o->stop == DRK_BUILD_FATBIN) &&
      !need(nv != 0, "an NVIDIA", emit, d))
    return false;
  if ((o->stop == DRK_BUILD_HSACO || o->stop == DRK_BUILD_BUNDLE) && !need(amd != 0, "the gfx942", emit, d))
    return false;

  drk_lowered_t l;
  if (!drk_lower_graph(g, &lo, &l, d)) return false;
  if (o->report && !report(o->report, g, &l, d)) {
    drk_lowered_destroy(&l);
    return false;
  }
  bool ok = false, done = false;
  void *fb = NULL, *hsaco = NULL, *bundle = NULL;
  size_t fb_size = 0, hsaco_size = 0, bundle_size = 0;
  char nv_targets[256] = "";
  switch (o->stop) {
    case DRK_BUILD_TILE:
      ok = print_lowered(&l, drk_lowered_print, out_data, out_size);
      goto out;
    case DRK_BUILD_SCHEDULES:
      ok = print_lowered(&l, drk_lowered_print_schedules, out_data, out_size);
      goto out;
    case DRK_BUILD_LLVM:
      if (first_nv) {
        ok = print_llvm(&l, first_nv, out_data, out_size, d);
      } else {
        char *text;
        ok = drk_build_amd_llvm(l.module, "gfx942", &text, d) && text_result(text, strlen(text), out_data, out_size);
      }
      goto out;
    default:
      break;
  }
  if (nv && o->stop != DRK_BUILD_HSACO && o->stop != DRK_BUILD_BUNDLE) {
    if (!build_nvidia(&l, o, nv, &fb, &fb_size, nv_targets, out_data, out_size, &done, d)) goto out;
    if (done) {
      ok = true;
      goto out;
    }
    if (o->stop == DRK_BUILD_FATBIN) {
      *out_data = fb;
      *out_size = fb_size;
      fb = NULL;
      ok = true;
      goto out;
    }
  }
  if (amd) {
    if (!drk_build_amd(l.module, "gfx942", &hsaco, &hsaco_size, &bundle, &bundle_size, d)) goto out;
    if (o->verbose) drk_build_amd_report(l.module, hsaco, hsaco_size, stderr);
    if (o->stop == DRK_BUILD_HSACO || o->stop == DRK_BUILD_BUNDLE) {
      bool h = o->stop == DRK_BUILD_HSACO;
      *out_data = h ? hsaco : bundle;
      *out_size = h ? hsaco_size : bundle_size;
      if (h) hsaco = NULL;
      else bundle = NULL;
      ok = true;
      goto out;
    }
  }
  {
    /* One code slot, one image per platform: the runtime picks the one for its device. */
    drk_modfile_image_t imgs[2];
    uint32_t n = 0;
    if (fb) imgs[n++] = (drk_modfile_image_t){DRK_MODFILE_IMAGE_FATBIN, 0, nv_targets, fb, fb_size};
    if (bundle) imgs[n++] = (drk_modfile_image_t){DRK_MODFILE_IMAGE_OFFLOAD_BUNDLE, 0, "gfx942", bundle, bundle_size};
    ok = pack_module(g, &l, o, imgs, n, out_data, out_size, d);
  }
out:
  free(fb);
  free(hsaco);
  free(bundle);
  drk_lowered_destroy(&l);
  return ok;
}
