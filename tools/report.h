/* `drkc report`: the tuner's JSON-lines event logs (search/tune.h, drkc tune's summary events)
 * as one self-contained HTML page (docs/tuning.md, "The report"). */
#ifndef DRKC_REPORT_H
#define DRKC_REPORT_H

/* argv[1] is "report". Exit status: 0 written, 1 error (unreadable log, unwritable output),
 * 2 usage error or a malformed log line (reported as FILE:LINE: error: ...). */
int drkc_report_main(int argc, char **argv);

#endif
