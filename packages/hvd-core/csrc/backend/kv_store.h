// The key-value store the engine hands to backends (hvd_store_v1) for connection set-up.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "core/common.h"
#include "horovod/hvd_backend.h"

namespace hvdcore {

class KVStore {
 public:
  KVStore();
  KVStore(const KVStore&) = delete;  // the C view points at this object
  KVStore& operator=(const KVStore&) = delete;
  virtual ~KVStore() = default;
  virtual Status Set(const std::string& key, const std::vector<uint8_t>& value) = 0;
  // Blocks until the key exists; kAborted with a timeout message after timeout_ms.
  virtual Status Get(const std::string& key, int64_t timeout_ms, std::vector<uint8_t>* value) = 0;

  // The C view of this store, valid while the store lives.
  const hvd_store_v1* c_store() const { return &c_store_; }

 private:
  const hvd_store_v1 c_store_;
};

// All ranks in one process (tests, the in-memory backend): a map guarded by a mutex.
class InMemoryStore : public KVStore {
 public:
  Status Set(const std::string& key, const std::vector<uint8_t>& value) override;
  Status Get(const std::string& key, int64_t timeout_ms, std::vector<uint8_t>* value) override;
  size_t size();

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  std::map<std::string, std::vector<uint8_t>> data_;
};

}  // namespace hvdcore
