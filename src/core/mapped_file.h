// A read-only memory mapping of a whole file (RAII). Checkpoints are mapped, never read into
// memory, so a 80 GB model costs no RAM until a backend touches its pages.
#pragma once
#include <cstddef>
#include <filesystem>
#include <span>
#include <string>

namespace striker {

class MappedFile {
 public:
  // Maps `path` read-only; throws striker::Error naming the file when it cannot be opened,
  // is not a regular file, or cannot be mapped. An empty file maps to an empty span.
  explicit MappedFile(const std::filesystem::path& path);
  ~MappedFile();
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;
  MappedFile(MappedFile&& other) noexcept;
  MappedFile& operator=(MappedFile&& other) noexcept;

  const std::byte* data() const { return data_; }
  size_t size() const { return size_; }
  std::span<const std::byte> bytes() const { return {data_, size_}; }
  const std::filesystem::path& path() const { return path_; }
  // True when [p, p+n) lies inside this mapping.
  bool contains(const void* p, size_t n) const;

 private:
  void release() noexcept;

  std::filesystem::path path_;
  const std::byte* data_ = nullptr;
  size_t size_ = 0;
};

}  // namespace striker
