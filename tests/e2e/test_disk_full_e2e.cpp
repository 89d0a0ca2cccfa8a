// A full disk at checkpoint time, with real processes on a real small file system: the run
// directory is a tmpfs mounted for the test, most of it taken by a filler file, so the second
// checkpoint of `chexscale train` finds no room. The run ends naming the checkpoint's path, the
// bytes it needs and those free; the first checkpoint is left intact, with no partial file beside
// it; once the filler is removed, `--resume auto` continues from it and ends with checkpoints
// byte-identical to those of a run that never ran out of space.

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <regex>

#include "test_util/chexscale_cli.h"
#include "test_util/full_disk.h"
#include "test_util/read_file.h"
#include "test_util/temp_dir.h"

namespace chexscale {
namespace {

namespace fs = std::filesystem;
using test_util::allocate_file;
using test_util::run_chexscale;
using test_util::sorted_names_in;
using test_util::TmpfsMount;

std::string flags(const std::string& data, const std::string& out) {
  return fmt::format(
      "train --data {} --out {} --arch resnet18 --image-size 32 --crop-size 32 --batch-size 8 "
      "--epochs 1 --checkpoint-every 4 --keep-checkpoints 1 --loader-threads 1 --val-threads 1 "
      "--intra-op-threads 1 --seed 5",
      data, out);
}

std::string newest_step_manifest(const std::string& dir) {
  std::string newest;
  for (const std::string& n : sorted_names_in(dir)) {
    if (n.rfind("step-", 0) == 0 && fs::path(n).extension() == ".json") newest = n;
  }
  return newest;
}

TEST(DiskFullE2E, ACheckpointWithoutRoomFailsClearlyKeepsThePreviousAndResumesOnceFreed) {
  test_util::TempDir dir;
  const std::string data = dir.path() + "/data";
  ASSERT_EQ(run_chexscale("synth --out " + data + " --images 160 --size 32 --seed 4").exit_code, 0);

  // The reference run, on a disk with room; its checkpoints give the size of one (C).
  const std::string a = dir.path() + "/a";
  const auto full = run_chexscale(flags(data, a));
  ASSERT_EQ(full.exit_code, 0) << full.output;
  const std::string last = newest_step_manifest(a + "/checkpoints");
  ASSERT_GT(last, "step-000000008.json") << "the run needs more than 8 steps";
  const uintmax_t c = fs::file_size(a + "/checkpoints/" +
                                    fs::path(last).replace_extension(".safetensors").string());

  // 4.5 C of room, 2.8 C taken: step 4's checkpoint fits (0.7 C left), step 8's does not. Once the
  // filler is gone, 3.5 C hold the step checkpoint being replaced, its successor and best.*.
  const std::string disk = dir.path() + "/disk";
  const TmpfsMount tmpfs(disk, c * 9 / 2);
  ASSERT_TRUE(tmpfs.mounted());
  const std::string filler = disk + "/filler";
  allocate_file(filler, c * 28 / 10);
  const std::string b = disk + "/run";
  const auto failed = run_chexscale(flags(data, b));
  EXPECT_EQ(failed.exit_code, 1) << failed.output;
  const std::string step8 = b + "/checkpoints/step-000000008.safetensors";
  std::smatch m;
  ASSERT_TRUE(std::regex_search(failed.output, m,
                                std::regex("no space for " + step8 +
                                           ": it needs ([0-9]+) bytes \\([0-9.]+ MiB\\), ([0-9]+) "
                                           "bytes \\([0-9.]+ MiB\\) free on the file system of " +
                                           b + "/checkpoints")))
      << failed.output;
  const uintmax_t needed = std::stoull(m[1]);
  const uintmax_t free = std::stoull(m[2]);
  EXPECT_GT(needed, c);  // the tensors and their manifest
  EXPECT_LT(free, needed);
  // The previous checkpoint is all there is: no temp file, no tensors of step 8.
  EXPECT_EQ(sorted_names_in(b + "/checkpoints"),
            (std::vector<std::string>{"step-000000004.json", "step-000000004.safetensors"}));

  fs::remove(filler);
  const auto resumed = run_chexscale(flags(data, b) + " --resume auto");
  ASSERT_EQ(resumed.exit_code, 0) << resumed.output;
  EXPECT_NE(resumed.output.find("resumed from " + b + "/checkpoints/step-000000004.json"),
            std::string::npos)
      << resumed.output;
  EXPECT_EQ(newest_step_manifest(b + "/checkpoints"), last);
  for (const std::string& file : {last, fs::path(last).replace_extension(".safetensors").string(),
                                  std::string("best.safetensors")}) {
    const std::string ref = test_util::file_contents(a + "/checkpoints/" + file);
    ASSERT_FALSE(ref.empty()) << file;
    EXPECT_TRUE(ref == test_util::file_contents(b + "/checkpoints/" + file))
        << file << " differs between the reference run and the one that ran out of space";
  }
}

}  // namespace
}  // namespace chexscale
