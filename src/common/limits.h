// Upper bounds that catch a typo'd count (a thread count of 100000) before it exhausts the
// machine: far above any real node, far below what hangs one.
#pragma once

namespace chexscale {

// Threads of one pool (LibTorch intra-op threads, decoding threads per worker).
constexpr int kMaxThreads = 1024;

}  // namespace chexscale
