// Built by ctest's Layers.AnUpwardIncludeDoesNotBuild against the judge
// layer only: its own header is found, the ledger's (store, a higher layer)
// must not be. This file never builds; that is what the test checks.
#include "tensor_compare.h"
#include "ledger.h"

int layers_upward_probe() { return 0; }
