#include <stdio.h>
#include "ir/graph.h"
int main(void) { drk_graph_t *g = drk_graph_create("x"); drk_graph_destroy(g); return 0; }
