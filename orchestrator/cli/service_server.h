// `densefeed serve`: a densefeed service for one project (issue 28). It runs
// as its own user and owns, in its state folder (mode 0700), its clone of the
// repository, the ledger, the ledger's key, the head log, builds and run
// folders. Agents and people reach it only through its unix socket
// (ServiceConfig::socket, mode 0660 to socket_group): the kernel names each
// peer's uid (SO_PEERCRED), service_call.h decides what that peer may run,
// and the service runs it as a child densefeed process on its own clone, in
// a request folder holding only the files the request carried. A worker it
// supervises runs the queue; a watcher appends the chain's head to the head
// log (store/head_log.h) after every write and offers it to head_witness.
#pragma once

#include "service_config.h"

namespace densefeed {

// Prepares the state folder (created 0700; an existing one must be this
// user's and is made 0700), refreshes the clone, listens, and serves until
// SIGTERM or SIGINT (the process runner's handler ends the worker and every
// request's child first). Throws InputError / InfraError when it cannot
// start; never returns otherwise.
[[noreturn]] void serve(const ServiceConfig& config);

}  // namespace densefeed
