/* Fat binary writer: builds sm_90a + sm_87 cubins (ptxas) and sm_90a PTX into a fat binary,
 * parses it back, compares the ELF-only form byte for byte with `fatbinary`, and checks
 * that `cuobjdump --list-elf --list-ptx` lists every entry.
 * usage: test_fatbin WORKDIR PTXAS FATBINARY CUOBJDUMP (tools may be "" or *-NOTFOUND:
 * ptxas missing -> skip (77); fatbinary/cuobjdump missing -> that comparison is skipped
 * with a message). */
#include "tests/runtime/test_util.h"

#include <unistd.h>

static int have(const char *tool) { return tool && *tool && !strstr(tool, "NOTFOUND") && access(tool, X_OK) == 0; }

static void *slurp(const char *path, size_t *n) {
  FILE *f = fopen(path, "rb");
  if (!f) return NULL;
  fseek(f, 0, SEEK_END);
  long sz = ftell(f);
  fseek(f, 0, SEEK_SET);
  void *b = malloc(sz > 0 ? (size_t)sz : 1);
  *n = fread(b, 1, (size_t)sz, f);
  fclose(f);
  return b;
}

static int write_file(const char *path, const void *d, size_t n) {
  FILE *f = fopen(path, "wb");
  int ok = f && fwrite(d, 1, n, f) == n;
  if (f) fclose(f);
  return ok;
}

static int run(const char *cmd) {
  int rc = system(cmd);
  if (rc) fprintf(stderr, "command failed (%d): %s\n", rc, cmd);
  return rc;
}

int main(int argc, char **argv) {
  if (argc < 5) { fprintf(stderr, "usage: test_fatbin WORKDIR PTXAS FATBINARY CUOBJDUMP\n"); return 2; }
  const char *dir = argv[1], *ptxas = argv[2], *fatbinary = argv[3], *cuobjdump = argv[4];
  char path[4096], cmd[16384], err[256];
  /* arch names */
  unsigned sm;
  bool a;
  CHECK(drk_fatbin_parse_arch("sm_90a", &sm, &a) && sm == 90 && a);
  CHECK(drk_fatbin_parse_arch("compute_87", &sm, &a) && sm == 87 && !a);
  CHECK(drk_fatbin_parse_arch("sm_100a", &sm, &a) && sm == 100 && a);
  CHECK(!drk_fatbin_parse_arch("sm_9", &sm, &a) && !drk_fatbin_parse_arch("gfx942", &sm, &a) && !drk_fatbin_parse_arch("sm_90b", &sm, &a));
  /* the writer rejects bad images */
  drk_fatbin_image_t bad = {DRK_FATBIN_ELF, 90, true, false, "not elf", 7};
  void *out = NULL;
  size_t on = 0;
  CHECK(drk_fatbin_build(&bad, 1, &out, &on, err, sizeof err) == -1);
  CHECK_CONTAINS(err, "ELF magic");
  CHECK(drk_fatbin_parse("garbage", 7, NULL, 0, &on, err, sizeof err) == -1);

  if (!have(ptxas)) {
    printf("SKIP: ptxas not found (configure with CUDA_HOME or /usr/local/cuda/bin/ptxas); the checks above passed\n");
    return failures ? 1 : 77;
  }
  char *p90 = test_ptx("sm_90a", "8.0"), *p87 = test_ptx("sm_87", "7.4");
  snprintf(path, sizeof path, "%s/k90a.ptx", dir);
  CHECK(write_file(path, p90, strlen(p90)));
  snprintf(path, sizeof path, "%s/k87.ptx", dir);
  CHECK(write_file(path, p87, strlen(p87)));
  snprintf(cmd, sizeof cmd, "'%s' -arch=sm_90a '%s/k90a.ptx' -o '%s/k90a.cubin' && '%s' -arch=sm_87 '%s/k87.ptx' -o '%s/k87.cubin'", ptxas, dir, dir, ptxas, dir, dir);
  if (run(cmd)) return 1;
  size_t n90, n87;
  snprintf(path, sizeof path, "%s/k90a.cubin", dir);
  void *c90 = slurp(path, &n90);
  snprintf(path, sizeof path, "%s/k87.cubin", dir);
  void *c87 = slurp(path, &n87);
  if (!c90 || !c87) return 1;
  drk_fatbin_image_t im[3] = {{DRK_FATBIN_ELF, 90, true, false, c90, n90},
                              {DRK_FATBIN_PTX, 90, true, false, p90, strlen(p90)},
                              {DRK_FATBIN_ELF, 87, false, false, c87, n87}};
  CHECK(drk_fatbin_build(im, 3, &out, &on, err, sizeof err) == 0);
  if (!out) { fprintf(stderr, "build: %s\n", err); return 1; }
  drk_fatbin_image_t back[4];
  size_t nb = 0;
  CHECK(drk_fatbin_parse(out, on, back, 4, &nb, err, sizeof err) == 0 && nb == 3);
  for (size_t i = 0; i < 3 && i < nb; i++)
    CHECK(back[i].kind == im[i].kind && back[i].sm == im[i].sm && back[i].arch_specific == im[i].arch_specific && !back[i].compressed &&
          back[i].size == im[i].size && !memcmp(back[i].data, im[i].data, im[i].size));
  /* every truncation is rejected (never read past the end) */
  for (size_t len = 0; len < on; len += 7) CHECK(drk_fatbin_parse(out, len, back, 4, &nb, err, sizeof err) == -1 || len >= 16);
  snprintf(path, sizeof path, "%s/drkc.fatbin", dir);
  CHECK(write_file(path, out, on));

  if (have(fatbinary)) {
    /* cubin entries: identical to the vendor tool's output */
    void *o2 = NULL;
    size_t n2 = 0;
    drk_fatbin_image_t elf[2] = {im[0], im[2]};
    CHECK(drk_fatbin_build(elf, 2, &o2, &n2, err, sizeof err) == 0);
    snprintf(cmd, sizeof cmd, "'%s' -64 --compress=false --create='%s/ref.fatbin' --image3=kind=elf,sm=90a,file='%s/k90a.cubin' --image3=kind=elf,sm=87,file='%s/k87.cubin'",
             fatbinary, dir, dir, dir);
    if (!run(cmd)) {
      size_t nr;
      snprintf(path, sizeof path, "%s/ref.fatbin", dir);
      void *ref = slurp(path, &nr);
      CHECK(ref && nr == n2 && !memcmp(ref, o2, nr));
      free(ref);
    } else failures++;
    free(o2);
    /* the vendor's fat binary (PTX compressed by default) parses, and its PTX is flagged */
    snprintf(cmd, sizeof cmd, "'%s' -64 --create='%s/ref2.fatbin' --image3=kind=elf,sm=90a,file='%s/k90a.cubin' --image3=kind=ptx,sm=90a,file='%s/k90a.ptx'", fatbinary, dir, dir, dir);
    if (!run(cmd)) {
      size_t nr;
      snprintf(path, sizeof path, "%s/ref2.fatbin", dir);
      void *ref = slurp(path, &nr);
      CHECK(ref && drk_fatbin_parse(ref, nr, back, 4, &nb, err, sizeof err) == 0 && nb == 2 && back[0].kind == DRK_FATBIN_ELF && back[0].sm == 90 && back[1].kind == DRK_FATBIN_PTX);
      free(ref);
    }
  } else {
    printf("note: fatbinary not found, byte comparison with the vendor tool skipped\n");
  }
  if (have(cuobjdump)) {
    snprintf(cmd, sizeof cmd, "'%s' --list-elf --list-ptx '%s/drkc.fatbin' > '%s/list.txt' 2>&1", cuobjdump, dir, dir);
    CHECK(run(cmd) == 0);
    size_t nl;
    snprintf(path, sizeof path, "%s/list.txt", dir);
    char *list = slurp(path, &nl);
    if (list) {
      list = realloc(list, nl + 1);
      list[nl] = 0;
      printf("%s", list);
      CHECK_CONTAINS(list, "ELF file    1: drkc.1.sm_90a.cubin");
      CHECK_CONTAINS(list, "PTX file    1: drkc.1.sm_90a.ptx");
      CHECK_CONTAINS(list, "ELF file    2: drkc.2.sm_87.cubin");
      free(list);
    }
  } else {
    printf("note: cuobjdump not found (configure with -DDRK_CUOBJDUMP=...), listing check skipped\n");
  }
  free(out), free(c90), free(c87), free(p90), free(p87);
  if (!failures) printf("test_fatbin: ok\n");
  return check_status("test_fatbin");
}
