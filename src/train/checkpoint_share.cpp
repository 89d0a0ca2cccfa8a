// One rank's checkpoint sent to every rank (see checkpoint_share.h).
#include "train/checkpoint_share.h"

#include <sys/mman.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <new>
#include <string>
#include <string_view>

#include "common/error.h"
#include "models/safetensors.h"

namespace chexscale::train {
namespace {

// Rank `root`'s `flat` (a CPU byte tensor of the same size on every rank) on every rank.
void broadcast_flat(distributed::DistContext& ctx, int root, torch::Tensor& flat) {
  std::vector<torch::Tensor> payload{flat.to(ctx.device())};
  ctx.broadcast_(payload, root);
  if (payload[0].device() != flat.device()) flat.copy_(payload[0].cpu());
}

// Rank `root`'s `bytes` on every rank (two broadcasts: the length, then the bytes).
std::string broadcast_bytes(distributed::DistContext& ctx, int root, const std::string& bytes) {
  std::vector<torch::Tensor> length{
      torch::tensor({static_cast<int64_t>(bytes.size())}, torch::kInt64).to(ctx.device())};
  ctx.broadcast_(length, root);
  const int64_t n = length[0].item<int64_t>();
  if (n == 0) return "";
  torch::Tensor buffer = torch::empty({n}, torch::kUInt8);
  if (ctx.rank() == root) std::memcpy(buffer.data_ptr<uint8_t>(), bytes.data(), bytes.size());
  broadcast_flat(ctx, root, buffer);
  return {reinterpret_cast<const char*>(buffer.data_ptr<uint8_t>()), static_cast<size_t>(n)};
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
    int64_t total = 0;
    nlohmann::json table = flat_tensor_table(ckpt->tensors, total);
    return {{"kind", to_string(Outcome::kCheckpoint)},
            {"state", ckpt->state},
            {"path", ckpt->path},
            {"tensors", std::move(table)},
            {"bytes", total}};
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

// Each tensor's bytes start at a multiple of this in the flat buffer (any dtype's alignment).
constexpr int64_t kAlign = 64;

int64_t aligned(int64_t bytes) {
  return (bytes + kAlign - 1) / kAlign * kAlign;
}

}  // namespace

nlohmann::json flat_tensor_table(const std::vector<models::NamedTensor>& tensors, int64_t& total) {
  nlohmann::json table = nlohmann::json::array();
  total = 0;
  for (const models::NamedTensor& t : tensors) {
    const auto dtype = models::to_safetensors_dtype(t.tensor.scalar_type());
    table.push_back({{"name", t.name},
                     {"dtype", models::safetensors::to_string(dtype)},
                     {"shape", t.tensor.sizes().vec()},
                     {"offset", total}});
    total += aligned(static_cast<int64_t>(t.tensor.nbytes()));
  }
  return table;
}

torch::Tensor flat_buffer(int64_t bytes) {
  constexpr size_t kHugePage = size_t{2} << 20;
  const size_t rounded =
      (static_cast<size_t>(std::max<int64_t>(bytes, 1)) + kHugePage - 1) / kHugePage * kHugePage;
  void* memory = nullptr;
  if (::posix_memalign(&memory, kHugePage, rounded) != 0) throw std::bad_alloc();
  ::madvise(memory, rounded, MADV_HUGEPAGE);  // fails harmlessly where huge pages are off
  return torch::from_blob(
      memory, {bytes}, [](void* p) { std::free(p); }, torch::kUInt8);
}

torch::Tensor pack_flat(const std::vector<models::NamedTensor>& tensors,
                        const nlohmann::json& table, int64_t total) {
  CHX_CHECK(table.size() == tensors.size(), "a flat table lists other tensors than those packed");
  torch::Tensor flat = flat_buffer(total);
  uint8_t* out = flat.data_ptr<uint8_t>();
  for (size_t i = 0; i < tensors.size(); ++i) {
    const torch::Tensor c = tensors[i].tensor.cpu().contiguous();
    const auto offset = table[i].at("offset").get<int64_t>();
    const auto bytes = static_cast<int64_t>(c.nbytes());
    CHX_CHECK(offset + aligned(bytes) <= total, "a packed tensor lies past the flat buffer");
    if (bytes > 0) std::memcpy(out + offset, c.data_ptr(), static_cast<size_t>(bytes));
    std::memset(out + offset + bytes, 0, static_cast<size_t>(aligned(bytes) - bytes));
  }
  return flat;
}

std::vector<models::NamedTensor> unpack_flat(const torch::Tensor& flat,
                                             const nlohmann::json& table) {
  std::vector<models::NamedTensor> tensors;
  for (const nlohmann::json& entry : table) {
    const std::string name = entry.at("name").get<std::string>();
    const auto dtype = models::safetensors::parse_dtype(entry.at("dtype").get<std::string>());
    if (!dtype) throw DataError(fmt::format("the state's tensor {} has an unknown dtype", name));
    const auto shape = entry.at("shape").get<std::vector<int64_t>>();
    const auto offset = entry.at("offset").get<int64_t>();
    const auto options = torch::TensorOptions(models::to_scalar_type(*dtype));
    int64_t bytes = static_cast<int64_t>(options.dtype().itemsize());
    for (const int64_t size : shape)
      bytes *= size;
    if (offset < 0 || offset + bytes > flat.numel() || offset % kAlign != 0)
      throw DataError(fmt::format("the state's tensor {} lies past its buffer", name));
    tensors.push_back(
        {name, torch::from_blob(
                   flat.data_ptr<uint8_t>() + offset, shape, [flat](void*) {}, options)});
  }
  return tensors;
}

namespace {

// share_checkpoint() to every rank (`receivers` null) or to `receivers` only.
std::optional<Checkpoint> share_to(distributed::DistContext& ctx, int root,
                                   const std::vector<int>* receivers,
                                   const std::function<std::optional<Checkpoint>()>& read) {
  if (ctx.world_size() == 1) return read();
  const bool reader = ctx.rank() == root;
  const bool receiving = receivers == nullptr || std::find(receivers->begin(), receivers->end(),
                                                           ctx.rank()) != receivers->end();
  std::optional<Checkpoint> ckpt;
  std::exception_ptr failure;
  nlohmann::json outcome;
  if (reader) outcome = outcome_of(read, ckpt, failure);
  outcome = nlohmann::json::parse(broadcast_bytes(ctx, root, reader ? outcome.dump() : ""));
  if (failure) std::rethrow_exception(failure);
  const Outcome kind = parse_outcome(outcome.at("kind").get<std::string>());
  if (kind == Outcome::kNone) return std::nullopt;
  if (kind != Outcome::kCheckpoint) throw_remote(kind, outcome, root);
  // The tensors in one message: packed on the root, views of the buffer elsewhere.
  const auto total = outcome.at("bytes").get<int64_t>();
  torch::Tensor flat;
  if (reader) {
    flat = pack_flat(ckpt->tensors, outcome.at("tensors"), total);
  } else if (receiving) {
    flat = flat_buffer(total);
  }
  if (total > 0 && receivers == nullptr) broadcast_flat(ctx, root, flat);
  if (total > 0 && receivers != nullptr) ctx.send_from_(flat, root, *receivers);
  if (reader) return ckpt;
  if (!receiving) return std::nullopt;
  Checkpoint received;
  received.state = outcome.at("state");
  received.path = outcome.at("path").get<std::string>();
  received.tensors = unpack_flat(flat, outcome.at("tensors"));
  return received;
}

}  // namespace

std::optional<Checkpoint> share_checkpoint(distributed::DistContext& ctx, int root,
                                           const std::function<std::optional<Checkpoint>()>& read) {
  return share_to(ctx, root, nullptr, read);
}

std::optional<Checkpoint> send_checkpoint(distributed::DistContext& ctx, int root,
                                          const std::vector<int>& receivers,
                                          const std::function<std::optional<Checkpoint>()>& read) {
  return share_to(ctx, root, &receivers, read);
}

}  // namespace chexscale::train
