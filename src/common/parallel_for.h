// parallel_for: one loop body run over an index range by a few threads, the caller's among them.
#pragma once

#include <cstddef>
#include <functional>

namespace chexscale {

// Calls body(i) exactly once for every i in [first, last), on `threads` threads (0 = one per
// hardware core; never more than there are indices). The calling thread is one of them, and
// indices are handed out in increasing order, so `threads` == 1 runs the body in order on the
// calling thread. Returns when every thread has stopped.
//
// The first exception a body throws stops the handing out of further indices; the bodies already
// running finish, and that exception is rethrown here once every thread has stopped.
//
// `progress`, when set, is called on the calling thread after each body it ran, with the number of
// bodies finished so far by all threads (for progress output that must not be called concurrently).
void parallel_for(std::size_t first, std::size_t last, int threads,
                  const std::function<void(std::size_t)>& body,
                  const std::function<void(std::size_t done)>& progress = {});

}  // namespace chexscale
