/* `drkc report` (tools/report.h). Being written: for now it only says so. */
#include "tools/report.h"

#include <stdio.h>

int drkc_report_main(int argc, char **argv) {
  (void)argc;
  (void)argv;
  fprintf(stderr, "drkc report: not implemented yet\n");
  return 1;
}
