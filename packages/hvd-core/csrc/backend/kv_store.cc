#include "backend/kv_store.h"

#include <chrono>
#include <cstdlib>
#include <cstring>

namespace hvdcore {
namespace {

int StoreSet(void* ctx, const char* key, const void* value, size_t len) {
  auto* store = static_cast<KVStore*>(ctx);
  const uint8_t* p = static_cast<const uint8_t*>(value);
  return store->Set(key, std::vector<uint8_t>(p, p + len)).ok() ? HVD_OK : HVD_ERR_INTERNAL;
}

int StoreGet(void* ctx, const char* key, void** value, size_t* len, int64_t timeout_ms) {
  auto* store = static_cast<KVStore*>(ctx);
  std::vector<uint8_t> v;
  Status s = store->Get(key, timeout_ms, &v);
  if (!s.ok()) return HVD_ERR_TIMEOUT;
  void* buf = std::malloc(v.empty() ? 1 : v.size());
  if (!buf) return HVD_ERR_INTERNAL;
  if (!v.empty()) std::memcpy(buf, v.data(), v.size());
  *value = buf;
  *len = v.size();
  return HVD_OK;
}

void StoreRelease(void*, void* value) { std::free(value); }

}  // namespace

// Filled once: engines sharing a store (test-kit ranks, process sets) hand it to backends from
// several threads, which read it while another engine connects.
KVStore::KVStore() : c_store_{this, StoreSet, StoreGet, StoreRelease} {}

Status InMemoryStore::Set(const std::string& key, const std::vector<uint8_t>& value) {
  {
    std::lock_guard<std::mutex> lk(mu_);
    data_[key] = value;
  }
  cv_.notify_all();
  return Status::Ok();
}

Status InMemoryStore::Get(const std::string& key, int64_t timeout_ms, std::vector<uint8_t>* value) {
  std::unique_lock<std::mutex> lk(mu_);
  bool found = cv_.wait_for(lk, std::chrono::milliseconds(timeout_ms), [&] { return data_.count(key) > 0; });
  if (!found)
    return Status::Aborted("timed out after " + std::to_string(timeout_ms) + " ms waiting for store key '" + key + "'");
  *value = data_[key];
  return Status::Ok();
}

size_t InMemoryStore::size() {
  std::lock_guard<std::mutex> lk(mu_);
  return data_.size();
}

}  // namespace hvdcore
