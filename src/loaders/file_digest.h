// Checksums the Hub publishes for a file, computed over a file on disk: SHA-256 (the etag of an
// LFS file) and the git blob SHA-1 (the etag of a regular file: sha1("blob <size>\0" + bytes)).
#pragma once
#include <filesystem>
#include <string>

namespace striker {

// Lowercase hex digests; throw striker::Error naming the file when it cannot be read.
std::string sha256_file_hex(const std::filesystem::path& path);
std::string git_blob_sha1_file_hex(const std::filesystem::path& path);

}  // namespace striker
