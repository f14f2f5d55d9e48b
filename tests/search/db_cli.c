/* `drkc db` without the rest of drkc: the command line of the kernel database
 * (drk_search_db_main), for tests/search/db_cli.sh. usage: drkc_db_cli db COMMAND ... */
#include "search/db.h"

int main(int argc, char **argv) { return drk_search_db_main(argc - 1, argv + 1); }
