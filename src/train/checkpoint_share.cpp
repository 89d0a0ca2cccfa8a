// One rank's checkpoint sent to every rank (see checkpoint_share.h).
#include "train/checkpoint_share.h"

#include <cstring>
#include <exception>
#include <string>
#include <string_view>

#include "common/error.h"
#include "models/safetensors.h"

namespace chexscale::train {
namespace {

// Rank `root`'s `bytes` on every rank (two broadcasts: the length, then the bytes).
std::string broadcast_bytes(distributed::DistContext& ctx, int root, const std::string& bytes) {
  std::vector<torch::Tensor> length{
      torch::tensor({static_cast<int64_t>(bytes.size())}, torch::kInt64).to(ctx.device())};
  ctx.broadcast_(length, root);
  const int64_t n = length[0].item<int64_t>();
  if (n == 0) return "";
  torch::Tensor buffer = torch::empty({n}, torch::kUInt8);
  if (ctx.rank() == root) std::memcpy(buffer.data_ptr<uint8_t>(), bytes.data(), bytes.size());
  std::vector<torch::Tensor> payload{buffer.to(ctx.device())};
  ctx.broadcast_(payload, root);
  const torch::Tensor received = payload[0].cpu().contiguous();
  return {reinterpret_cast<const char*>(received.data_ptr<uint8_t>()), static_cast<size_t>(n)};
}

// What rank 0 found: no checkpoint, a checkpoint, or an error of one of chexscale's kinds.
enum class Outcome { kNone, kCheckpoint, kUsageError, kDataError, kIoError, kError };

constexpr Outcome kOutcomes[] = {Outcome::kNone,      Outcome::kCheckpoint, Outcome::kUsageError,
                                 Outcome::kDataError, Outcome::kIoError,    Outcome::kError};

const char* to_string(Outcome outcome) {
  switch (outcome) {
    case Outcome::kNone:
      return "none";
    case Outcome::kCheckpoint:
      return "checkpoint";
    case Outcome::kUsageError:
      return "usage";
    case Outcome::kDataError:
      return "data";
    case Outcome::kIoError:
      return "io";
    case Outcome::kError:
      break;
  }
  return "error";
}

// The outcome named in rank 0's message (Error for a name rank 0 never sends).
Outcome parse_outcome(std::string_view name) {
  for (const Outcome outcome : kOutcomes) {
    if (name == to_string(outcome)) return outcome;
  }
  throw Error(fmt::format("rank 0 sent an unknown checkpoint outcome '{}'", name));
}

nlohmann::json failure_json(Outcome kind, const std::exception& e, std::exception_ptr& failure) {
  failure = std::current_exception();
  return {{"kind", to_string(kind)}, {"message", e.what()}};
}

// What rank 0 found, as the other ranks learn it.
nlohmann::json outcome_of(const std::function<std::optional<Checkpoint>()>& read,
                          std::optional<Checkpoint>& ckpt, std::exception_ptr& failure) {
  try {
    ckpt = read();
    if (!ckpt) return {{"kind", to_string(Outcome::kNone)}};
    return {
        {"kind", to_string(Outcome::kCheckpoint)}, {"state", ckpt->state}, {"path", ckpt->path}};
  } catch (const UsageError& e) {
    return failure_json(Outcome::kUsageError, e, failure);
  } catch (const DataError& e) {
    return failure_json(Outcome::kDataError, e, failure);
  } catch (const IoError& e) {
    return failure_json(Outcome::kIoError, e, failure);
  } catch (const std::exception& e) {
    return failure_json(Outcome::kError, e, failure);
  }
}

[[noreturn]] void throw_remote(Outcome kind, const nlohmann::json& outcome, int root) {
  // Not "rank 0 ...": a usage error's leading word names an option field, and rank is one.
  const std::string message = fmt::format("worker rank {} could not read the checkpoint: {}", root,
                                          outcome.at("message").get<std::string>());
  switch (kind) {
    case Outcome::kUsageError:
      throw UsageError(message);
    case Outcome::kDataError:
      throw DataError(message);
    case Outcome::kIoError:
      throw IoError(message);
    default:
      throw Error(message);
  }
}

}  // namespace

std::optional<Checkpoint> share_checkpoint(distributed::DistContext& ctx, int root,
                                           const std::function<std::optional<Checkpoint>()>& read) {
  if (ctx.world_size() == 1) return read();
  const bool reader = ctx.rank() == root;
  std::optional<Checkpoint> ckpt;
  std::exception_ptr failure;
  nlohmann::json outcome;
  if (reader) outcome = outcome_of(read, ckpt, failure);
  outcome = nlohmann::json::parse(broadcast_bytes(ctx, root, reader ? outcome.dump() : ""));
  if (failure) std::rethrow_exception(failure);
  const Outcome kind = parse_outcome(outcome.at("kind").get<std::string>());
  if (kind == Outcome::kNone) return std::nullopt;
  if (kind != Outcome::kCheckpoint) throw_remote(kind, outcome, root);
  const std::string tensors =
      broadcast_bytes(ctx, root, reader ? models::serialize_safetensors(ckpt->tensors) : "");
  if (reader) return ckpt;
  Checkpoint received;
  received.state = outcome.at("state");
  received.path = outcome.at("path").get<std::string>();
  received.tensors =
      models::parse_safetensors(reinterpret_cast<const uint8_t*>(tensors.data()), tensors.size())
          .tensors;
  return received;
}

}  // namespace chexscale::train
