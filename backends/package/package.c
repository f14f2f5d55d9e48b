/* Packaging, the pipeline's last stage (package.h): the fat binary of the NVIDIA targets'
 * code, and the module file describing the launches, the arena plan, the weights and the
 * code images. */
#include "backends/package/package.h"

#include <stdlib.h>
#include <string.h>

#include "backends/package/build_precision.h"
#include "backends/package/fatbin.h"
#include "passes/precision.h"
#include "passes/precision_auto.h"

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
    t->elem_strides[i] = s->elem_strides[i] > 1 ? (uint32_t)s->elem_strides[i] : 1;
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

void drk_package_report(FILE *out, const drk_graph_t *g, const drk_lowered_t *l, const drk_mem_plan_t *plan) {
  size_t nodes = 0, mix[DRK_DT_COUNT] = {0};
  for (size_t i = 0; i < g->n_nodes; i++) {
    const drk_node_t *n = g->nodes[i];
    if (n->dead) continue;
    nodes++;
    drk_dtype_t t = drk_precision_node_dtype(n); /* f8 matmuls count as f8, not by their f32 result */
    if (t < DRK_DT_COUNT) mix[t]++;
  }
  uint64_t act = plan->arena_size - plan->weights_size;
  fprintf(out, "report: %zu graph nodes -> %zu kernels (%zu nodes need no kernel: views of another tensor); %zu "
               "distinct, compiled once each (the others are twins up to names)\n",
          nodes, l->n_launches, l->n_aliases, l->module->n_kernels);
  fprintf(out, "report: activations %.2f MiB planned vs %.2f MiB naive sum (%.0f%%); weights %.2f MiB; arena %.2f MiB\n",
          act / 1048576.0, plan->naive_size / 1048576.0, plan->naive_size ? 100.0 * (double)act / (double)plan->naive_size : 0.0,
          plan->weights_size / 1048576.0, plan->arena_size / 1048576.0);
  /* kernel forms (schedule kind / mma kind) in order of first launch: which attention became
   * a flash kernel and which matmuls run on the sm_90a TMA + wgmma kernel (mm_ws) */
  const char *fk[32];
  size_t fn[32], nf = 0, flash = 0;
  char names[32][48];
  for (size_t i = 0; i < l->n_launches; i++) {
    const drk_schedule_t *S = &l->launches[i].sched;
    char nm[48];
    snprintf(nm, sizeof nm, "%s%s%s", S->kind ? S->kind : "other", S->mma ? "/" : "", S->mma ? S->mma : "");
    flash += S->kind && !strcmp(S->kind, "attention");
    size_t j = 0;
    while (j < nf && strcmp(names[j], nm)) j++;
    if (j == nf && nf < 32) {
      memcpy(names[nf], nm, sizeof nm);
      fk[nf] = names[nf];
      fn[nf++] = 0;
    }
    if (j < nf) fn[j]++;
  }
  fprintf(out, "report: %zu flash-attention kernels; kernel forms:", flash);
  for (size_t j = 0; j < nf; j++) fprintf(out, " %zu %s", fn[j], fk[j]);
  fprintf(out, "\n");
  fprintf(out, "report: precision mix (float nodes by compute dtype):");
  for (int t = 0; t < DRK_DT_COUNT; t++)
    if (mix[t]) fprintf(out, " %zu %s", mix[t], drk_dtype_name((drk_dtype_t)t));
  fprintf(out, "\n");
  for (size_t i = 0; i < l->n_launches; i++)
    if (l->launches[i].sched.note) fprintf(out, "report: %s: %s\n", l->launches[i].kernel->name, l->launches[i].sched.note);
}

/* The PRECISION_AUTO records of a (arrays malloc'ed into *out_ag, *out_ao; free()). */
static uint8_t auto_code(drk_precision_t p) {
  switch (p) {
    case DRK_PREC_TF32: return DRK_MODFILE_PREC_TF32;
    case DRK_PREC_FP16: return DRK_MODFILE_PREC_F16;
    case DRK_PREC_BF16: return DRK_MODFILE_PREC_BF16;
    case DRK_PREC_FP8: return DRK_MODFILE_PREC_F8E4M3;
    default: return DRK_MODFILE_PREC_F32;
  }
}

/* The FALLBACK section (module.h): the fallback module, written again without its weights when
 * they are mf's byte for byte (the same entries at the same arena offsets), so the module
 * carries them once. *out_bytes: what that rewrite allocated (free() once mf is written). */
static bool attach_fallback(const drk_package_options_t *o, drk_modfile_t *mf, void **out_bytes, drk_diag_t *d) {
  drk_modfile_t *fb = NULL;
  char err[512];
  if (drk_modfile_read(o->fallback, o->fallback_size, NULL, &fb, err, sizeof err) != DRK_MODFILE_OK) {
    drk_diag_error(d, drk_loc_none, "the fallback module: %s", err);
    return false;
  }
  bool same = !fb->weights_file && (fb->weights || !fb->weights_size) && fb->weights_offset == mf->weights_offset &&
              fb->weights_size == mf->weights_size && fb->n_weight_entries == mf->n_weight_entries;
  for (uint32_t i = 0; same && i < mf->n_weight_entries; i++) {
    const drk_modfile_weight_t *a = &mf->weight_entries[i], *b = &fb->weight_entries[i];
    const uint8_t *fw = (const uint8_t *)fb->weights + b->offset;
    uint64_t data = a->data ? a->data_size : 0;
    same = a->offset == b->offset && a->size == b->size && !strcmp(a->name ? a->name : "", b->name ? b->name : "") &&
           (!data || !memcmp(fw, a->data, (size_t)data));
    for (uint64_t k = data; same && k < a->size; k++) same = fw[k] == 0;
  }
  bool ok = true;
  if (same) {
    drk_modfile_t w = *fb;
    w.weights = NULL, w.weights_size = 0, w.weight_entries = NULL, w.n_weight_entries = 0;
    size_t n = 0;
    if (drk_modfile_write(&w, out_bytes, &n, err, sizeof err) != DRK_MODFILE_OK) {
      drk_diag_error(d, drk_loc_none, "writing the fallback module: %s", err);
      ok = false;
    } else {
      mf->fallback = *out_bytes, mf->fallback_size = n, mf->fallback_shares_weights = true;
    }
  } else {
    mf->fallback = o->fallback, mf->fallback_size = o->fallback_size, mf->fallback_shares_weights = false;
  }
  drk_modfile_free(NULL, fb);
  return ok;
}

static bool attach_auto(const drk_precision_auto_t *a, drk_modfile_t *mf, drk_modfile_auto_group_t **out_ag,
                        drk_modfile_auto_output_t **out_ao) {
  drk_modfile_auto_group_t *ag = calloc(a->n_groups + 1, sizeof *ag);
  drk_modfile_auto_output_t *ao = calloc(a->n_outputs + 1, sizeof *ao);
  *out_ag = ag, *out_ao = ao;
  if (!ag || !ao) return false;
  for (size_t i = 0; i < a->n_groups; i++) {
    const drk_precision_group_t *g = &a->groups[i];
    ag[i] = (drk_modfile_auto_group_t){g->name, g->op, (uint32_t)g->n_nodes, auto_code(g->levels[g->level])};
  }
  for (size_t i = 0; i < a->n_outputs; i++)
    ao[i] = (drk_modfile_auto_output_t){a->outputs[i].name, a->outputs[i].absolute, a->outputs[i].error};
  mf->auto_version = DRK_MODFILE_AUTO_VERSION;
  mf->auto_budget = a->budget;
  mf->auto_groups = ag, mf->n_auto_groups = (uint32_t)a->n_groups;
  mf->auto_outputs = ao, mf->n_auto_outputs = (uint32_t)a->n_outputs;
  return true;
}

bool drk_package_module(const drk_graph_t *g, const drk_lowered_t *l, const drk_mem_plan_t *pl,
                        const drk_package_options_t *o, const drk_modfile_image_t *images, uint32_t n_images,
                        void **out_data, size_t *out_size, void **out_weights, size_t *out_weights_size,
                        drk_diag_t *d) {
  const drk_mem_plan_t plan = *pl;

  drk_modfile_kernel_t *ks = calloc(l->n_launches + 1, sizeof *ks);
  size_t n_params = 0, n_tmas = 0;
  for (size_t i = 0; i < l->n_launches; i++) n_params += (size_t)l->launches[i].n_args;
  drk_modfile_param_t *ps = calloc(n_params + 1, sizeof *ps), *p = ps;
  drk_modfile_tma_t *tmas = calloc(n_params + 1, sizeof *tmas);
  drk_modfile_tensor_t *ins = calloc(g->n_inputs + 1, sizeof *ins), *outs = calloc(g->n_outputs + 1, sizeof *outs);
  drk_modfile_weight_t *ws = calloc(g->n_consts + 1, sizeof *ws);
  char *tstr = targets_string(o->targets);
  drk_build_precision_t prec = {0};
  drk_modfile_auto_group_t *ag = NULL; /* PRECISION_AUTO records (attach_auto) */
  drk_modfile_auto_output_t *ao = NULL;
  bool ok = ks && ps && tmas && ins && outs && ws && tstr && drk_build_precision(g, l, &prec);
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
  for (size_t i = 0; i < g->n_consts; i++) { /* the writer copies each into the blob: no copy of the blob here */
    const drk_value_t *c = g->consts[i];
    uint64_t sz = plan.size[c->id];
    ws[i] = (drk_modfile_weight_t){c->name, plan.offset[c->id], sz, c->nbytes ? c->data : NULL, sz < c->nbytes ? sz : c->nbytes};
  }

  char hash[72] = "sha256:unknown";
  if (o->model_hash) snprintf(hash, sizeof hash, "%s", o->model_hash);
  drk_modfile_t mf = {
      .prov = {DRK_VERSION_STRING, o->command_line ? o->command_line : "", hash, tstr},
      .arena_size = plan.arena_size ? plan.arena_size : 256,
      .weights_offset = 0,
      .weights = NULL, /* from weight_entries */
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
  if (o->precision_auto && !attach_auto(o->precision_auto, &mf, &ag, &ao)) {
    drk_diag_error(d, drk_loc_none, "out of memory packing the precision choice");
    ok = false;
    goto done;
  }
  /* --weights=external: the blob goes to the caller (the side file), its hash into the module */
  void *blob = NULL;
  size_t blob_size = 0;
  if (o->weights_file) {
    if (!drk_modfile_weights_blob(&mf, &blob, &blob_size)) {
      drk_diag_error(d, drk_loc_none, "out of memory for the weights blob (%llu bytes)", (unsigned long long)mf.weights_size);
      ok = false;
      goto done;
    }
    drk_modfile_sha256(blob, blob_size, mf.weights_sha256);
    mf.weights_file = o->weights_file;
  }
  char err[512];
  void *fb_bytes = NULL;
  if (o->fallback && !attach_fallback(o, &mf, &fb_bytes, d)) {
    free(blob);
    ok = false;
    goto done;
  }
  drk_modfile_result_t r = drk_modfile_write(&mf, out_data, out_size, err, sizeof err);
  free(fb_bytes);
  if (r != DRK_MODFILE_OK) drk_diag_error(d, drk_loc_none, "writing the module: %s", err);
  ok = r == DRK_MODFILE_OK;
  if (ok && blob) {
    *out_weights = blob;
    *out_weights_size = blob_size;
  } else {
    free(blob);
  }
done:
  free(ag);
  free(ao);
  drk_build_precision_free(&prec);
  free(tstr);
  free(ws);
  free(ins);
  free(outs);
  free(ps);
  free(tmas);
  free(ks);
  return ok;
}


bool drk_package_fatbin(const drk_nv_code_t *code, size_t n_code, void **out_fb, size_t *out_fb_size,
                        char *image_targets, size_t cap, drk_diag_t *d) {
  drk_fatbin_image_t imgs[DRK_TARGET_COUNT + 1];
  size_t n_img = 0;
  char arch[32];
  DRK_ASSERT(n_code > 0 && n_code <= DRK_TARGET_COUNT);
  image_targets[0] = 0;
  for (size_t i = 0; i < n_code; i++) {
    imgs[n_img++] = (drk_fatbin_image_t){DRK_FATBIN_ELF, (unsigned)code[i].t->number, code[i].t->arch_specific, false,
                                         code[i].cubin, code[i].cubin_size};
    size_t len = strlen(image_targets);
    snprintf(image_targets + len, cap - len, "%s%s", len ? "," : "", code[i].t->name);
  }
  /* Arch-specific PTX (compute_90a) cannot be JIT-compiled for later GPUs: prefer the newest
   * portable target. */
  const drk_nv_code_t *newest = &code[n_code - 1];
  for (size_t i = n_code; i-- > 0;)
    if (!code[i].t->arch_specific) {
      newest = &code[i];
      break;
    }
  imgs[n_img++] = (drk_fatbin_image_t){DRK_FATBIN_PTX, (unsigned)newest->t->number, newest->t->arch_specific, false,
                                       newest->ptx, strlen(newest->ptx)};
  drk_fatbin_format_arch((unsigned)newest->t->number, newest->t->arch_specific, arch, sizeof arch);
  size_t len = strlen(image_targets);
  snprintf(image_targets + len, cap - len, ",compute_%s", arch + 3);
  char err[512];
  if (drk_fatbin_build(imgs, n_img, out_fb, out_fb_size, err, sizeof err) != 0) {
    drk_diag_error(d, drk_loc_none, "building the fat binary: %s", err);
    return false;
  }
  return true;
}

void drk_package_report_cuda_cores(FILE *out, const drk_graph_t *g, const drk_lowered_t *l) {
  /* f32 matrix products on CUDA cores are the usual reason an f32 model runs far below a
   * GPU's tensor-core peak (the default keeps f32 math exact); say so and name the way out.
   * Read from the kernels' tile IR, as the module's PRECISION section is. */
  drk_build_precision_t prec = {0};
  if (!drk_build_precision(g, l, &prec)) return;
  size_t fma = 0;
  for (uint32_t i = 0; i < prec.n_kernels; i++) fma += (prec.kernels[i].dot & (1u << DRK_MODFILE_PREC_F32)) != 0;
  if (fma)
    fprintf(out, "report: %zu of %zu kernels multiply f32 matrices on CUDA cores (f32 FMA, not tensor cores); "
                 "--matmul-precision=high (TF32) or --precision=bf16|fp16 puts them on tensor cores\n",
            fma, l->n_launches);
  drk_build_precision_free(&prec);
}
