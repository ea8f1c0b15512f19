// The compute side of the Slurm executor (slurm_executor.h): what a job's
// script runs, `densefeed slurm-serve DIR`. It runs DIR/launch-0000.json,
// launch-0001.json, ... in order as they appear (written whole by rename),
// each through launch_untrusted exactly as the local
// executor does, and writes DIR/launch-NNNN.result.json (launch_json.h) with
// where it ran: "slurm job $SLURM_JOB_ID on HOST" and the CUDA_VISIBLE_DEVICES
// the job was given. It writes nothing else (no SQL: the ledger stays with
// the collecting process). It ends when DIR/release exists and no next launch
// does, or when no launch came for `idle_s` seconds (its collector is gone),
// with the last launch's status: its exit code, 128 + N for signal N, 124 for
// a timeout, 1 when it could not start; 0 when none ran.
#pragma once

#include <filesystem>

namespace densefeed {

// Returns the process's exit status (above). Throws InfraError only when
// DIR cannot be read or a result cannot be written.
int slurm_serve(const std::filesystem::path& dir, double idle_s = 600);

}  // namespace densefeed
