// chexscale's version, kept in step with project(VERSION) in CMakeLists.txt.
#pragma once

namespace chexscale {
inline constexpr const char* kVersion = "0.1.0";
}  // namespace chexscale
