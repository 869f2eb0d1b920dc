/* GDS_MT's entry: the descriptor lives in gds_engine.c, which GDS and GDS_MT share. */
#include "gds.h"

IXL_PLUGIN_EXPORT(gds_desc_mt)
