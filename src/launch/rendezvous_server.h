// The elastic job's rendezvous server: a c10d TCPStore served by a process of its own (its own
// host or pod, outside the workers), so that the job's rendezvous state outlives any worker
// node. The launchers (elastic_rendezvous.h) and their workers are its clients.
#pragma once

namespace chexscale::launch {

// Serves the store on `port` (every address) until SIGTERM or SIGINT; prints one line when it
// listens. Returns the signal that ended it. Throws DistError when the port cannot be bound.
int serve_rendezvous(int port);

}  // namespace chexscale::launch
