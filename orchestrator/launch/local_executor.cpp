// The local executor (executor.h): launches run on this machine through
// untrusted_launch.h, as they always did.
#include <mutex>
#include <thread>

#include "executor.h"

namespace densefeed {
namespace {

class LocalAllocation : public Allocation {
 public:
  LaunchResult run(const Launch& launch_in) override {
    Launch launch = launch_in;
    // A cancel of the whole run reaches every process the stages start.
    if (!launch.untrusted.cancel) launch.untrusted.cancel = &cancel_requested();
    LaunchResult r;
    r.placement = local_placement();
    r.result = launch_untrusted(launch.untrusted);
    auto it = launch.untrusted.env.find("CUDA_VISIBLE_DEVICES");
    if (it != launch.untrusted.env.end()) r.gpu = it->second;
    return r;
  }
};

class LocalExecutor : public Executor {
 public:
  std::unique_ptr<Allocation> allocate(const AllocationRequest&) override { return std::make_unique<LocalAllocation>(); }
  bool assigns_gpus() const override { return true; }
  int concurrency(int requested, std::size_t) const override { return requested; }
  std::string name() const override { return "local"; }
};

std::atomic<bool> g_cancel{false};
std::atomic<int> g_interrupt{0};
static_assert(std::atomic<bool>::is_always_lock_free && std::atomic<int>::is_always_lock_free,
              "request_interrupt is called from a signal handler");

}  // namespace

std::unique_ptr<Executor> make_local_executor() { return std::make_unique<LocalExecutor>(); }

Executor& given_or_local(Executor* given) {
  static LocalExecutor local;
  return given ? *given : local;
}

void request_cancel() { g_cancel = true; }

const std::atomic<bool>& cancel_requested() { return g_cancel; }

void request_interrupt(int signal_number) {
  g_interrupt = signal_number;
  g_cancel = true;
}

int interrupt_signal() { return g_interrupt; }

std::vector<LaunchResult> Executor::run_batch(const std::vector<BatchLaunch>& batch, int requested,
                                              const std::function<void(std::size_t)>& ended) {
  std::vector<LaunchResult> results(batch.size());
  std::atomic<std::size_t> next{0};
  std::exception_ptr failure;
  std::mutex failure_mutex;
  const int n = std::max(1, concurrency(std::max(1, requested), batch.size()));
  std::vector<std::thread> threads;
  for (int t = 0; t < n && static_cast<std::size_t>(t) < batch.size(); ++t) {
    threads.emplace_back([&] {
      for (std::size_t i = next++; i < batch.size(); i = next++) {
        try {
          results[i] = run_launch(*this, batch[i].launch, batch[i].request);
          if (ended) ended(i);
        } catch (...) {
          std::lock_guard lock(failure_mutex);
          if (!failure) failure = std::current_exception();
        }
      }
    });
  }
  for (auto& t : threads) t.join();
  if (failure) std::rethrow_exception(failure);
  return results;
}

LaunchResult run_launch(Executor& executor, const Launch& launch, AllocationRequest request) {
  request.launches = 1;
  return executor.allocate(request)->run(launch);
}

}  // namespace densefeed
