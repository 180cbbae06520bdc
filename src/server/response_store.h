// The responses kept for GET /v1/responses/{id} and previous_response_id (`store`, on by default
// as in OpenAI's API): each response's JSON and the chat conversation that continues from it, in
// memory, the least recently used dropped first beyond a count and a byte budget, so a server
// that answers for weeks does not grow without bound (vLLM's store has no bound and is off by
// default for that reason).
#pragma once
#include <cstddef>
#include <list>
#include <mutex>
#include <optional>
#include <string>
#include <unordered_map>

#include <nlohmann/json.hpp>

namespace striker::server {

struct StoredResponse {
  nlohmann::ordered_json response;      // the Response object as it was returned
  nlohmann::ordered_json conversation;  // chat messages after the instructions, the output included
};

class ResponseStore {
 public:
  ResponseStore(size_t max_entries, size_t max_bytes) : max_entries_(max_entries), max_bytes_(max_bytes) {}

  // Keeps `r` under `id` (replacing an entry of that id); an entry larger than the byte budget
  // is not kept.
  void put(const std::string& id, StoredResponse r);
  std::optional<StoredResponse> get(const std::string& id);
  bool erase(const std::string& id);
  size_t size() const;

 private:
  struct Entry {
    std::string id;
    StoredResponse value;
    size_t bytes = 0;
  };
  void evict();

  const size_t max_entries_, max_bytes_;
  mutable std::mutex mu_;
  std::list<Entry> lru_;  // most recently used first
  std::unordered_map<std::string, std::list<Entry>::iterator> index_;
  size_t bytes_ = 0;
};

}  // namespace striker::server
