#include "tcp/store_adapter.h"

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <utility>

#include "errors.h"

namespace hvd_gloo {
namespace {

const std::string kArrived = "arrived/";

}  // namespace

StoreAdapter::StoreAdapter(const hvd_store_v1* store, std::string prefix, const hvd_comm* comm)
    : store_(store),
      prefix_(std::move(prefix) + "/gloo/"),
      comm_(comm),
      deadline_(std::chrono::steady_clock::now() + comm->timeout) {}

void StoreAdapter::set(const std::string& key, const std::vector<char>& data) {
  std::string full = prefix_ + key;
  int rc = store_->set(store_->ctx, full.c_str(), data.data(), data.size());
  if (rc != HVD_OK)
    throw StoreFailure("could not publish store key '" + full + "' (status " + std::to_string(rc) + ")");
}

std::vector<char> StoreAdapter::get(const std::string& key) {
  auto it = fetched_.find(key);
  if (it != fetched_.end()) {
    std::vector<char> value = std::move(it->second);
    fetched_.erase(it);
    return value;
  }
  return Fetch(key);
}

void StoreAdapter::wait(const std::vector<std::string>& keys) {
  for (const std::string& key : keys) {
    if (!fetched_.count(key)) fetched_[key] = Fetch(key);
  }
}

void StoreAdapter::wait(const std::vector<std::string>& keys, const std::chrono::milliseconds&) {
  wait(keys);  // the shared deadline bounds the whole set-up, whatever each call asks for
}

void StoreAdapter::Arrive() {
  set(kArrived + std::to_string(comm_->rank), {});
  for (int32_t r = 0; r < comm_->size; ++r) {
    if (r != comm_->rank) Fetch(kArrived + std::to_string(r));
  }
}

std::chrono::milliseconds StoreAdapter::Left() const {
  auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline_ - std::chrono::steady_clock::now());
  return std::max(left, std::chrono::milliseconds(1));  // the store contract wants a positive timeout
}

std::vector<char> StoreAdapter::Fetch(const std::string& key) {
  std::string full = prefix_ + key;
  int64_t timeout_ms = Left().count();
  void* value = nullptr;
  size_t len = 0;
  int rc = store_->get(store_->ctx, full.c_str(), &value, &len, timeout_ms);
  if (rc == HVD_ERR_TIMEOUT) {
    char seconds[32];
    std::snprintf(seconds, sizeof seconds, "%g s", (double)comm_->timeout.count() / 1000.0);
    const std::string why =
        " (HOROVOD_GLOO_TIMEOUT_SECONDS): it has not started, has failed, or is connecting "
        "through another store (store key '";
    throw StoreTimeout(Describe(key) + " within " + seconds + why + full + "')");
  }
  if (rc != HVD_OK) throw StoreFailure("could not read store key '" + full + "' (status " + std::to_string(rc) + ")");
  std::vector<char> out(static_cast<char*>(value), static_cast<char*>(value) + len);
  if (value) store_->release(store_->ctx, value);
  return out;
}

// Arrivals are "arrived/<rank>"; Gloo's full-mesh set-up publishes each member's host name under
// "rank_<rank>" and its addresses under "<rank>".
std::string StoreAdapter::Describe(const std::string& key) const {
  bool arrival = key.compare(0, kArrived.size(), kArrived) == 0;
  std::string number = arrival ? key.substr(kArrived.size()) : key;
  if (number.compare(0, 5, "rank_") == 0) number.erase(0, 5);
  bool digits = !number.empty() && number.size() < 10;
  for (char c : number) digits = digits && std::isdigit(static_cast<unsigned char>(c));
  if (digits) {
    int32_t r = std::stoi(number);
    if (r >= 0 && r < comm_->size)
      return RankName(comm_, r) + (arrival ? " did not arrive" : " did not publish its Gloo address");
  }
  return "no member published store key '" + key + "'";
}

}  // namespace hvd_gloo
