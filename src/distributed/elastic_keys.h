// The rendezvous server's keys that an elastic job's launchers (launch/elastic_rendezvous.h) and,
// with `--elastic in-place`, their workers (distributed/elastic_round.h) both read: everything of
// one job lives under "chexscale/elastic/<job id>/", a round's end under "r<R>/end_kind" and
// "r<R>/end_reason", and each agent's mailbox to and from its own workers under
// "agent/<agent id>/".
#pragma once

#include <string>

namespace chexscale::distributed {

// How a round ended (its end_kind's value is the number).
enum class RoundEndKind {
  kRestart = 0,  // membership change (a node waits to join): every rank is alive
  kFailure = 1,  // a worker or node was lost: collectives of the round cannot complete
  kStopped = 2,  // a stop signal: the workers stop at a checkpoint and the job ends
};

// "chexscale/elastic/<job>/<name>".
std::string elastic_key(const std::string& job, const std::string& name);
// The keys that say round `round` ended, and how.
std::string round_end_reason_key(const std::string& job, int round);
std::string round_end_kind_key(const std::string& job, int round);
// An agent's mailbox: "chexscale/elastic/<job>/agent/<agent>/<name>". Its workers post
// "regroup/<R>" (why their collective failed in round R); the agent posts "latest" (the newest
// round it joined in place) and "place/<R>" (its workers' place in round R, ElasticPlace).
std::string agent_key(const std::string& job, const std::string& agent, const std::string& name);

}  // namespace chexscale::distributed
