/*
 * Forwarding header: the JSON writer is lib/jsonw.h. It goes once
 * query/logs.c and query/traces.c include lib/jsonw.h themselves (issue 10,
 * the split of those files).
 */
#include "lib/jsonw.h"
