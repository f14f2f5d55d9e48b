/* The PRECISION section's records from a lowered graph (see build_precision.h). */
#include "build_precision.h"

#include <stdlib.h>
#include <string.h>

#include "lower/fuse.h"
#include "passes/precision.h"

static uint32_t prec_code(drk_dtype_t t) {
  switch (t) {
  case DRK_DT_F64: return DRK_MODFILE_PREC_F64;
  case DRK_DT_F32: return DRK_MODFILE_PREC_F32;
  case DRK_DT_F16: return DRK_MODFILE_PREC_F16;
  case DRK_DT_BF16: return DRK_MODFILE_PREC_BF16;
  case DRK_DT_F8E4M3: return DRK_MODFILE_PREC_F8E4M3;
  case DRK_DT_F8E5M2: return DRK_MODFILE_PREC_F8E5M2;
  case DRK_DT_COUNT: return DRK_MODFILE_PREC_NONE;
  default: return DRK_MODFILE_PREC_INT;
  }
}

static uint16_t bit(drk_dtype_t t) { return (uint16_t)(1u << prec_code(t)); }
static uint16_t float_bit(drk_dtype_t t) { return drk_dtype_is_float(t) ? bit(t) : 0; }

/* No default: a new fusion kind warns here (-Wswitch) and needs a code in the format. */
static uint32_t group_code(drk_fusion_kind_t k) {
  switch (k) {
  case DRK_FUSION_SINGLE: return DRK_MODFILE_GROUP_SINGLE;
  case DRK_FUSION_FLAT: return DRK_MODFILE_GROUP_FLAT;
  case DRK_FUSION_ROWS: return DRK_MODFILE_GROUP_ROWS;
  case DRK_FUSION_ATTENTION: return DRK_MODFILE_GROUP_ATTENTION;
  case DRK_FUSION_MM: return DRK_MODFILE_GROUP_MM;
  }
  drk_unreachable();
}

/* What the ops of r (and of the regions inside) compute in. Integer arithmetic is index
 * math in almost every kernel, so math and reductions count floats only; a dot counts
 * whatever it multiplies (int8 products: "int"). f32 operands of a tensor-core dot (any kind
 * but fma) are tf32 on NVIDIA (docs/tile-ir.md). */
static void scan_region(const drk_tile_region_t *r, drk_modfile_kernel_prec_t *k) {
  for (size_t i = 0; i < r->n_ops; i++) {
    const drk_tile_op_t *op = r->ops[i];
    for (int j = 0; j < op->n_regions; j++) scan_region(op->regions[j], k);
    if (op->code == DRK_TOP_DOT) {
      drk_dtype_t a = op->operands[0]->type.dtype;
      bool tensor_cores = strcmp(drk_tile_op_attr_ident(op, "kind", "fma"), "fma") != 0;
      k->dot |= a == DRK_DT_F32 && tensor_cores ? (uint16_t)(1u << DRK_MODFILE_PREC_TF32) : bit(a);
      k->acc |= bit(op->results[0]->type.dtype);
    } else if (op->code == DRK_TOP_REDUCE) {
      k->acc |= float_bit(op->results[0]->type.dtype);
    } else if (op->code == DRK_TOP_CMP) {
      k->math |= float_bit(op->operands[0]->type.dtype);
    } else if (drk_tile_op_info(op->code)->flags & (DRK_TOPF_EWB | DRK_TOPF_EWU)) {
      k->math |= float_bit(op->results[0]->type.dtype);
    }
  }
}

static void scan_kernel(const drk_tile_kernel_t *tk, drk_modfile_kernel_prec_t *k) {
  for (int i = 0; i < tk->n_params; i++) {
    const drk_tile_type_t *t = &tk->params[i]->type;
    if (t->is_ptr || t->kind == DRK_TT_TMADESC) k->io |= bit(t->dtype);
  }
  scan_region(tk->body, k);
}

static void fill_node(drk_modfile_node_prec_t *q, const drk_node_t *n) {
  q->name = n->n_outputs && n->outputs[0] ? n->outputs[0]->name : "";
  q->onnx = n->loc.node_name ? n->loc.node_name : "";
  q->op = drk_op_name(n->op);
  q->kernel = DRK_MODFILE_NO_KERNEL;
  q->compute = (uint8_t)prec_code(drk_precision_node_dtype(n));
  if (drk_node_attr_int(n, "tf32", 0)) q->compute = DRK_MODFILE_PREC_TF32; /* precision auto's tf32 */
  if (n->op == DRK_OP_CAST && n->n_inputs && n->inputs[0]) q->from = (uint8_t)prec_code(n->inputs[0]->dtype);
}

bool drk_build_precision(const drk_graph_t *g, const drk_lowered_t *l, drk_build_precision_t *out) {
  memset(out, 0, sizeof *out);
  const drk_fusion_t *fu = l->fusion; /* the partition the kernels were lowered from */
  /* node records: live nodes in graph order; rec[pos] is a node position's record */
  int64_t *rec = malloc(sizeof(int64_t) * (g->n_nodes + 1));
  size_t *pos_of_id = calloc((size_t)g->next_node_id + 1, sizeof *pos_of_id);
  int *first = malloc(sizeof(int) * ((size_t)fu->n_groups + 1));
  out->nodes = calloc(g->n_nodes + 1, sizeof *out->nodes);
  out->kernels = calloc(l->n_launches + 1, sizeof *out->kernels);
  if (!rec || !pos_of_id || !first || !out->nodes || !out->kernels) {
    free(rec), free(pos_of_id), free(first);
    drk_build_precision_free(out);
    return false;
  }
  for (size_t i = 0; i < g->n_nodes; i++) {
    const drk_node_t *n = g->nodes[i];
    rec[i] = -1;
    if (n->dead) continue;
    pos_of_id[n->id] = i;
    rec[i] = out->n_nodes;
    fill_node(&out->nodes[out->n_nodes++], n);
  }
  /* kernels: a group's launches are consecutive (it is lowered at once) */
  for (int gi = 0; gi < fu->n_groups; gi++) first[gi] = -1;
  for (size_t i = 0; i < l->n_launches; i++) {
    const drk_launch_t *la = &l->launches[i];
    size_t pos = pos_of_id[la->node->id];
    DRK_ASSERT(g->nodes[pos] == la->node && rec[pos] >= 0);
    int gi = fu->group[pos];
    DRK_ASSERT(first[gi] < 0 || fu->group[pos_of_id[l->launches[i - 1].node->id]] == gi);
    if (first[gi] < 0) first[gi] = (int)i;
    const drk_fusion_group_t *gr = &fu->groups[gi];
    drk_modfile_kernel_prec_t *k = &out->kernels[i];
    /* named after the group's reduction/normalization (ROWS), Softmax (ATTENTION) or matmul
     * (MM: the launch's node), else the node it launches at */
    k->anchor = (uint32_t)rec[gr->anchor >= 0 ? (size_t)gr->anchor : pos];
    k->group = group_code(gr->kind);
    scan_kernel(la->kernel, k);
    for (int j = 0; j < gr->n_nodes; j++) {
      drk_modfile_node_prec_t *q = &out->nodes[rec[gr->nodes[j]]];
      q->kernel = (uint32_t)first[gi];
      q->n_kernels = (uint32_t)(i + 1 - (size_t)first[gi]);
    }
  }
  out->n_kernels = (uint32_t)l->n_launches;
  free(first);
  free(pos_of_id);
  free(rec);
  return true;
}

void drk_build_precision_attach(const drk_build_precision_t *p, drk_modfile_t *mf) {
  DRK_ASSERT(mf->n_kernels == p->n_kernels);
  mf->precision_version = DRK_MODFILE_PRECISION_VERSION;
  mf->kernel_precision = p->kernels;
  mf->node_precision = p->nodes;
  mf->n_node_precision = p->n_nodes;
}

void drk_build_precision_free(drk_build_precision_t *p) {
  free(p->kernels);
  free(p->nodes);
  memset(p, 0, sizeof *p);
}
