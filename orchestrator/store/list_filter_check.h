// ledger list's filters, checked before any row is read: a typo must not
// read as "no such experiments".
#pragma once

#include "ledger.h"

namespace densefeed {

// Throws InputError (--since) unless `since` is empty or a UTC date or time,
// YYYY-MM-DD[THH:MM[:SS]][Z], with real ranges (leap days included); throws
// InputError (--verdict) unless `verdict` is empty, an overall verdict or a state.
void check_list_filter(const Ledger::ListFilter& filter);

}  // namespace densefeed
