// Gloo's rendezvous::Store on top of the key-value store the engine passes to comm_create.
#pragma once

#include <chrono>
#include <map>
#include <string>
#include <vector>

#include <gloo/rendezvous/store.h>

#include "comm.h"

namespace hvd_gloo {

// Every key lives under "<key_prefix>/gloo/" (key_prefix is unique per communicator in a job).
// The engine's store has get-with-timeout but no separate wait: wait() fetches the values and
// keeps them for the get() that follows (Gloo always waits before it gets). All waits share one
// deadline, the communicator's timeout from construction, which bounds connection set-up.
class StoreAdapter : public gloo::rendezvous::Store {
 public:
  StoreAdapter(const hvd_store_v1* store, std::string prefix, const hvd_comm* comm);

  // Publishes this member's arrival and waits (until the deadline) for every other member's, so
  // that a member that never comes is named as such.
  void Arrive();
  // Time left until the deadline (at least 1 ms).
  std::chrono::milliseconds Left() const;

  void set(const std::string& key, const std::vector<char>& data) override;
  std::vector<char> get(const std::string& key) override;
  void wait(const std::vector<std::string>& keys) override;
  void wait(const std::vector<std::string>& keys, const std::chrono::milliseconds& timeout) override;

 private:
  std::vector<char> Fetch(const std::string& key);
  std::string Describe(const std::string& key) const;

  const hvd_store_v1* store_;
  std::string prefix_;
  const hvd_comm* comm_;
  std::chrono::steady_clock::time_point deadline_;
  std::map<std::string, std::vector<char>> fetched_;
};

}  // namespace hvd_gloo
