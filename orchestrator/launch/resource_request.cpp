#include "resource_request.h"

namespace densefeed {

ResourceRequest overlay(const ResourceRequest& under, const ResourceRequest& over) {
  ResourceRequest r = under;
  if (over.cpus) r.cpus = over.cpus;
  if (!over.mem.empty()) r.mem = over.mem;
  if (over.gpus) r.gpus = over.gpus;
  if (!over.gpu_type.empty()) r.gpu_type = over.gpu_type;
  if (!over.constraint.empty()) r.constraint = over.constraint;
  if (!over.partition.empty()) r.partition = over.partition;
  if (over.time_min) r.time_min = over.time_min;
  if (over.exclusive) r.exclusive = over.exclusive;
  if (over.array_throttle) r.array_throttle = over.array_throttle;
  return r;
}

}  // namespace densefeed
