#include "held_allocation.h"

namespace densefeed {
namespace {

class HeldExecutor : public Executor {
 public:
  HeldExecutor(Allocation& held, const Executor& under) : held_(held), name_(under.name()) {}

  class Proxy : public Allocation {
   public:
    explicit Proxy(HeldExecutor& ex) : ex_(ex) {}
    LaunchResult run(const Launch& launch) override {
      std::lock_guard lock(ex_.mutex_);
      return ex_.held_.run(launch);
    }

   private:
    HeldExecutor& ex_;
  };

  std::unique_ptr<Allocation> allocate(const AllocationRequest&) override { return std::make_unique<Proxy>(*this); }
  bool assigns_gpus() const override { return false; }
  int concurrency(int, std::size_t) const override { return 1; }
  std::string name() const override { return name_; }

 private:
  Allocation& held_;
  std::string name_;
  std::mutex mutex_;
};

}  // namespace

std::unique_ptr<Executor> make_held_executor(Allocation& held, const Executor& under) {
  return std::make_unique<HeldExecutor>(held, under);
}

}  // namespace densefeed
