/* The C header of a host object (hostobj.h, docs/deploy.md): the model's inputs and outputs
 * as constants and a typed API over libdrkrt.
 *
 * The functions are static inline in the header, so the object stays pure data (one object
 * serves any compiler and C or C++), and an application needs nothing beyond the object, the
 * header and libdrkrt. The header is made from the module's bytes (parsed back with the
 * reader), so it cannot disagree with the module it describes. */
#include "backends/package/hostobj.h"

#include <ctype.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backends/package/module.h"

/* ONNX TensorProto.DataType: the C element type an application passes, and the name. */
static const char *c_type(int32_t dt) {
  switch (dt) {
  case 1: return "float";
  case 2: return "uint8_t";
  case 3: return "int8_t";
  case 4: return "uint16_t";
  case 5: return "int16_t";
  case 6: return "int32_t";
  case 7: return "int64_t";
  case 9: return "uint8_t";  /* bool: one byte, 0 or 1 */
  case 10: return "uint16_t"; /* float16 bits */
  case 11: return "double";
  case 12: return "uint32_t";
  case 13: return "uint64_t";
  case 16: return "uint16_t"; /* bfloat16 bits */
  default: return "uint8_t";  /* float8 and others: raw bytes */
  }
}

static const char *dtype_name(int32_t dt) {
  switch (dt) {
  case 1: return "float32";
  case 2: return "uint8";
  case 3: return "int8";
  case 4: return "uint16";
  case 5: return "int16";
  case 6: return "int32";
  case 7: return "int64";
  case 9: return "bool";
  case 10: return "float16 (IEEE half, as uint16_t bits)";
  case 11: return "float64";
  case 12: return "uint32";
  case 13: return "uint64";
  case 16: return "bfloat16 (as uint16_t bits)";
  case 17: return "float8e4m3fn (bytes)";
  case 19: return "float8e5m2 (bytes)";
  default: return "raw bytes";
  }
}

static bool is_keyword(const char *s) {
  static const char *const kw[] = {"auto", "break", "case", "char", "const", "continue", "default", "do", "double",
                                   "else", "enum", "extern", "float", "for", "goto", "if", "inline", "int", "long",
                                   "register", "restrict", "return", "short", "signed", "sizeof", "static",
                                   "struct", "switch", "typedef", "union", "unsigned", "void", "volatile", "while",
                                   "bool", "class", "new", "delete", "template", "this", "m", "st", NULL};
  for (const char *const *k = kw; *k; k++)
    if (strcmp(s, *k) == 0) return true;
  return false;
}

/* A parameter name for tensor t: its name made an identifier; "in_"/"out_" + index when that
 * is empty, a keyword or taken by an earlier parameter. */
static void param_name(const drk_modfile_t *m, bool output, uint32_t idx, char *buf, size_t n) {
  const drk_modfile_tensor_t *t = output ? &m->outputs[idx] : &m->inputs[idx];
  size_t k = 0;
  for (const char *c = t->name; *c && k + 1 < n && k < 48; c++) buf[k++] = isalnum((unsigned char)*c) ? *c : '_';
  buf[k] = 0;
  bool bad = k == 0 || isdigit((unsigned char)buf[0]) || is_keyword(buf);
  /* unique among all parameters before this one */
  for (uint32_t pass = 0; !bad && pass < 2; pass++) {
    uint32_t lim = pass == 0 ? (output ? m->n_inputs : idx) : (output ? idx : 0);
    for (uint32_t j = 0; j < lim && !bad; j++) {
      char other[64];
      param_name(m, pass == 1, j, other, sizeof other);
      bad = strcmp(other, buf) == 0;
    }
  }
  if (bad) snprintf(buf, n, "%s_%" PRIu32, output ? "out" : "in", idx);
}

static void upper(const char *s, char *buf, size_t n) {
  size_t k = 0;
  for (; s[k] && k + 1 < n; k++) buf[k] = (char)toupper((unsigned char)s[k]);
  buf[k] = 0;
}

static void tensor_consts(FILE *f, const char *NAME, const char *what, uint32_t i, const drk_modfile_tensor_t *t) {
  uint64_t numel = 1;
  fprintf(f, "/* %s %" PRIu32 " '%s': %s [", what, i, t->name, dtype_name(t->dtype));
  for (uint32_t k = 0; k < t->rank; k++) fprintf(f, "%s%" PRId64, k ? ", " : "", t->dims[k]), numel *= (uint64_t)t->dims[k];
  fprintf(f, "] */\n");
  char W[16];
  upper(what, W, sizeof W);
  fprintf(f, "#define %s_%s_%" PRIu32 "_NAME \"%s\"\n", NAME, W, i, t->name);
  fprintf(f, "#define %s_%s_%" PRIu32 "_DTYPE %" PRId32 " /* ONNX TensorProto.DataType: %s */\n", NAME, W, i, t->dtype,
          dtype_name(t->dtype));
  fprintf(f, "#define %s_%s_%" PRIu32 "_RANK %" PRIu32 "\n", NAME, W, i, t->rank);
  fprintf(f, "#define %s_%s_%" PRIu32 "_DIMS {", NAME, W, i);
  for (uint32_t k = 0; k < t->rank; k++) fprintf(f, "%s%" PRId64, k ? ", " : "", t->dims[k]);
  fprintf(f, "%s}\n", t->rank ? "" : "1");
  fprintf(f, "#define %s_%s_%" PRIu32 "_NUMEL %" PRIu64 "\n", NAME, W, i, numel);
  fprintf(f, "#define %s_%s_%" PRIu32 "_BYTES %" PRIu64 "\n", NAME, W, i, t->size);
}

bool drk_host_header(const void *module, size_t size, const char *name, char **out_text, drk_diag_t *d) {
  drk_modfile_t *m = NULL;
  char err[512];
  if (drk_modfile_read(module, size, NULL, &m, err, sizeof err) != DRK_MODFILE_OK) {
    drk_diag_error(d, drk_loc_none, "the header: reading the module back: %s", err);
    return false;
  }
  char NAME[256], pn[64];
  upper(name, NAME, sizeof NAME);
  char *text = NULL;
  size_t len = 0;
  FILE *f = open_memstream(&text, &len);
  if (!f) {
    drk_modfile_free(NULL, m);
    drk_diag_error(d, drk_loc_none, "out of memory writing the header");
    return false;
  }
  const char *n = name;
  fprintf(f,
          "/* %s.h: the model '%s' compiled by drkc %s for %s, embedded in the object that came with this\n"
          " * header (symbols %s_drkm, %s_drkm_size). Model %s.\n"
          " *\n"
          " * Link: cc app.c %s.o -ldrkrt -ldl (libdrkrt static or shared; nothing else). %s\n"
          " * The GPU driver is opened with dlopen: the app builds and starts on a machine without a\n"
          " * GPU, and %s_create then returns DRK_STATUS_NO_DRIVER or NO_DEVICE.\n"
          " *\n"
          " *   %s_t *m; drk_status_t st = %s_create(&m, NULL);   (NULL options: device 0, malloc)\n"
          " *   if (!st) st = %s_run(m, <inputs>, <outputs>);      (host pointers, shapes below)\n"
          " *   if (st) { fprintf(stderr, \"%%s\\n\", drk_status_message(st)); drk_status_destroy(st); }\n"
          " *   %s_destroy(m);\n"
          " *\n"
          " * Every status that is not NULL is the caller's (drk_status_destroy); %s_destroy takes NULL.\n"
          " * %s_run copies the inputs to the GPU, replays the model's launches and copies the outputs\n"
          " * back before it returns; it allocates nothing. A %s_t is not thread-safe. The weights, the\n"
          " * plan and the GPU code are the module's: see drkrun --list for what it holds.\n"
          " * Generated: do not edit; recompile the model to change it. */\n",
          n, n, m->prov.drkc_version, m->prov.targets, n, n, m->prov.model_hash, n,
          m->weights_file ? "The one file read at\n * run time is the weights (below)."
                          : "No file is read at run\n * time: the weights are in the object.",
          n, n, n, n, n, n, n, n);
  fprintf(f, "#ifndef %s_DRKC_H\n#define %s_DRKC_H\n\n#include <stddef.h>\n#include <stdint.h>\n#include <stdlib.h>\n\n"
             "#include <drk/drkrt.h>\n\n#ifdef __cplusplus\nextern \"C\" {\n#endif\n\n",
          NAME, NAME);
  fprintf(f, "/* The module bytes (in the object) and their size. */\nextern const unsigned char %s_drkm[];\n"
             "extern const uint64_t %s_drkm_size;\n\n",
          n, n);
  fprintf(f, "#define %s_NUM_INPUTS %" PRIu32 "\n#define %s_NUM_OUTPUTS %" PRIu32 "\n#define %s_TARGETS \"%s\"\n", NAME,
          m->n_inputs, NAME, m->n_outputs, NAME, m->prov.targets);
  if (m->weights_file)
    fprintf(f, "/* The weights are not in the object (--weights=external): %s_create reads this file,\n"
               " * %" PRIu64 " bytes (or the one options.weights_path names), and checks its size and SHA-256. */\n"
               "#define %s_WEIGHTS_FILE \"%s\"\n",
            n, m->weights_size, NAME, m->weights_file);
  else
    fprintf(f, "#define %s_WEIGHTS_FILE NULL /* the weights are in the object */\n", NAME);
  fprintf(f, "\n");
  for (uint32_t i = 0; i < m->n_inputs; i++) tensor_consts(f, NAME, "input", i, &m->inputs[i]);
  for (uint32_t i = 0; i < m->n_outputs; i++) tensor_consts(f, NAME, "output", i, &m->outputs[i]);

  fprintf(f,
          "\ntypedef struct %s {\n"
          "  drk_allocator_t alloc; /* the caller's allocator (has_alloc), else unused: malloc */\n"
          "  int has_alloc;\n"
          "  drk_module_t *module;\n  drk_runtime_t *runtime;\n  drk_session_t *session;\n} %s_t;\n\n"
          "typedef struct %s_options {\n"
          "  int device;                       /* GPU ordinal (0: the first) */\n"
          "  const drk_allocator_t *allocator; /* host memory of the runtime and this API; NULL: malloc */\n"
          "  const char *driver_library;       /* NULL: libcuda.so.1 ($DRK_CUDA_DRIVER) */\n"
          "  const char *weights_path;         /* --weights=external: the side file (NULL: %s_WEIGHTS_FILE\n"
          "                                     * in the current directory); unused otherwise */\n"
          "} %s_options_t;\n\n"
          "static inline void %s_destroy(%s_t *m);\n\n",
          n, n, n, NAME, n, n, n);
  fprintf(f,
          "/* The embedded module, without a GPU (shapes, provenance: drk_module_*); the caller\n"
          " * destroys it with drk_module_destroy. */\n"
          "static inline drk_status_t %s_module(const drk_allocator_t *alloc, drk_module_t **out_module) {\n"
          "  return drk_module_load_memory(alloc, %s_drkm, (size_t)%s_drkm_size, out_module);\n}\n\n",
          n, n, n);
  fprintf(f,
          "/* Loads the module, opens the GPU, uploads the weights and prepares the launches. On\n"
          " * success *out is the caller's (%s_destroy); on failure *out is untouched. */\n"
          "static inline drk_status_t %s_create(%s_t **out, const %s_options_t *opts) {\n"
          "  const drk_allocator_t *ua = opts ? opts->allocator : NULL;\n"
          "  %s_t *m = (%s_t *)(ua ? ua->alloc(ua->user, sizeof(%s_t), 16) : malloc(sizeof(%s_t)));\n"
          "  if (!m) return drk_status_create(ua, DRK_STATUS_OUT_OF_MEMORY, \"%s_create: out of host memory\");\n"
          "  m->has_alloc = ua != NULL;\n  if (ua) m->alloc = *ua;\n"
          "  m->module = NULL;\n  m->runtime = NULL;\n  m->session = NULL;\n"
          "  drk_runtime_options_t ro = {ua ? &m->alloc : NULL, opts ? opts->device : 0, opts ? opts->driver_library : NULL};\n"
          "  drk_status_t st = %s_module(ro.allocator, &m->module);\n"
          "  if (!st && drk_module_weights_file(m->module))\n"
          "    st = drk_module_load_weights(m->module, opts ? opts->weights_path : NULL);\n"
          "  if (!st) st = drk_runtime_create(&ro, &m->runtime);\n"
          "  if (!st) st = drk_session_create(m->runtime, m->module, &m->session);\n"
          "  if (st) {\n    %s_destroy(m);\n    return st;\n  }\n"
          "  *out = m;\n  return NULL;\n}\n\n",
          n, n, n, n, n, n, n, n, n, n, n);
  /* the typed run */
  fprintf(f, "/* Runs the model once: ");
  for (uint32_t i = 0; i < m->n_inputs; i++) {
    param_name(m, false, i, pn, sizeof pn);
    fprintf(f, "%s%s (%s_INPUT_%" PRIu32 "_NUMEL elements)", i ? ", " : "", pn, NAME, i);
  }
  fprintf(f, " in; ");
  for (uint32_t i = 0; i < m->n_outputs; i++) {
    param_name(m, true, i, pn, sizeof pn);
    fprintf(f, "%s%s (%s_OUTPUT_%" PRIu32 "_NUMEL elements)", i ? ", " : "", pn, NAME, i);
  }
  fprintf(f, " out.\n * Host memory, in the layout of the dims above (row-major). */\n");
  fprintf(f, "static inline drk_status_t %s_run(%s_t *m", n, n);
  for (uint32_t i = 0; i < m->n_inputs; i++) {
    param_name(m, false, i, pn, sizeof pn);
    fprintf(f, ", const %s *%s", c_type(m->inputs[i].dtype), pn);
  }
  for (uint32_t i = 0; i < m->n_outputs; i++) {
    param_name(m, true, i, pn, sizeof pn);
    fprintf(f, ", %s *%s", c_type(m->outputs[i].dtype), pn);
  }
  fprintf(f, ") {\n  drk_status_t st = NULL;\n");
  for (uint32_t i = 0; i < m->n_inputs; i++) {
    param_name(m, false, i, pn, sizeof pn);
    fprintf(f, "  if (!st) st = drk_session_bind_input(m->session, %" PRIu32 ", (void *)%s, %s_INPUT_%" PRIu32
               "_BYTES, DRK_MEMORY_HOST);\n",
            i, pn, NAME, i);
  }
  for (uint32_t i = 0; i < m->n_outputs; i++) {
    param_name(m, true, i, pn, sizeof pn);
    fprintf(f, "  if (!st) st = drk_session_bind_output(m->session, %" PRIu32 ", %s, %s_OUTPUT_%" PRIu32
               "_BYTES, DRK_MEMORY_HOST);\n",
            i, pn, NAME, i);
  }
  fprintf(f, "  return st ? st : drk_session_run(m->session);\n}\n\n");
  fprintf(f,
          "/* Releases everything %s_create made; NULL is a no-op. */\n"
          "static inline void %s_destroy(%s_t *m) {\n  if (!m) return;\n"
          "  drk_session_destroy(m->session);\n  drk_runtime_destroy(m->runtime);\n  drk_module_destroy(m->module);\n"
          "  if (m->has_alloc) {\n    drk_allocator_t a = m->alloc;\n    a.free(a.user, m, sizeof *m);\n"
          "  } else {\n    free(m);\n  }\n}\n\n",
          n, n, n);
  fprintf(f, "#ifdef __cplusplus\n}\n#endif\n\n#endif\n");
  drk_modfile_free(NULL, m);
  if (fclose(f) != 0 || !text) {
    free(text);
    drk_diag_error(d, drk_loc_none, "out of memory writing the header");
    return false;
  }
  *out_text = text;
  return true;
}
