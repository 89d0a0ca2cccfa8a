// Atomic file writes: write a temp file beside the target, fsync it, rename over, fsync the folder.
// A reader (or a crash) never sees a half-written file under the final name.
#pragma once

#include <string>
#include <string_view>

namespace chexscale {

void write_file_atomic(const std::string& path, std::string_view contents);

// Reads a whole file; throws IoError naming the path.
std::string read_file(const std::string& path);

// Creates a directory and its parents; throws IoError on failure.
void make_dirs(const std::string& path);

}  // namespace chexscale
