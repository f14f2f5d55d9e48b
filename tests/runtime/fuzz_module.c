/* libFuzzer target for the module reader (drk_modfile_read) and, on what it accepts, the
 * fat binary parser (on the raw input and on the images of accepted modules) and the
 * PRECISION table printer (which trusts what the reader validated). Built with
 * DRK_MODFILE_FUZZING so checksums do not stop the fuzzer. Any crash, sanitizer report or leak is a bug. */
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "backends/package/fatbin.h"
#include "backends/package/module.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  drk_modfile_t *m = NULL;
  char err[512];
  drk_fatbin_image_t fe[8];
  size_t fn = 0;
  drk_fatbin_parse(data, size, fe, 8, &fn, err, sizeof err);
  if (drk_modfile_read(data, size, NULL, &m, err, sizeof err) != DRK_MODFILE_OK) return 0;
  for (uint32_t i = 0; i < m->n_images; i++) {
    drk_fatbin_image_t e[8];
    size_t n = 0;
    drk_fatbin_parse(m->images[i].data, (size_t)m->images[i].size, e, 8, &n, err, sizeof err);
  }
  static FILE *sink;
  if (!sink) sink = fopen("/dev/null", "w");
  if (sink) drk_modfile_print_precision(m, sink, "");
  drk_modfile_free(NULL, m);
  return 0;
}
