// The field -> flag mapping of usage errors: a message below the CLI names an options field, the
// user reads the flag; and through the binary, one refused value of each options struct.
#include <gtest/gtest.h>

#include "cli/flag_names.h"
#include "test_util/chexscale_cli.h"

namespace chexscale::cli {
namespace {

// A command with some of the flags of bench, commbench and k8s render.
struct CommandWithFlags {
  CLI::App cmd;
  CommandWithFlags() {
    for (const char* flag : {"--bucket-mb", "--grad-compression", "--image", "--image-size",
                             "-n,--iters", "--namespace"}) {
      cmd.add_option(flag);
    }
  }
};

TEST(FlagNames, ALeadingFieldBecomesItsFlag) {
  const CommandWithFlags with;
  const CLI::App* cmd = &with.cmd;
  EXPECT_EQ(with_flag_name("bucket_mb 0 must be > 0", cmd), "--bucket-mb 0 must be > 0");
  EXPECT_EQ(with_flag_name("compression 'zip': choose none, fp16 or bf16", cmd),
            "--grad-compression 'zip': choose none, fp16 or bf16");
  EXPECT_EQ(with_flag_name("image: required", cmd), "--image: required");
  EXPECT_EQ(with_flag_name("image_size 15 must be >= 16", cmd), "--image-size 15 must be >= 16");
  EXPECT_EQ(with_flag_name("iterations 0 must be >= 1", cmd), "-n/--iters 0 must be >= 1");
  EXPECT_EQ(with_flag_name("namespace_name 'A': expected a DNS label", cmd),
            "--namespace 'A': expected a DNS label");
}

TEST(FlagNames, OtherMessagesAreUnchanged) {
  const CommandWithFlags with;
  const CLI::App* cmd = &with.cmd;
  EXPECT_EQ(with_flag_name("images are missing", cmd), "images are missing");      // not the field
  EXPECT_EQ(with_flag_name("a bucket_mb of 0", cmd), "a bucket_mb of 0");          // not leading
  EXPECT_EQ(with_flag_name("steps 0 must be >= 1", cmd), "steps 0 must be >= 1");  // no --steps
  EXPECT_EQ(with_flag_name("", cmd), "");
}

// A field set by different flags in different commands gets the flag of the command at hand; a
// field between backticks is named wherever it is in the message.
TEST(FlagNames, TheCommandChoosesTheFlagAndBacktickedFieldsAreNamedToo) {
  CLI::App train;
  for (const char* flag : {"--loader-threads", "--max-steps", "--amp", "--device"})
    train.add_option(flag);
  CLI::App prepare;
  for (const char* flag : {"--threads", "--size"})
    prepare.add_option(flag);
  EXPECT_EQ(with_flag_name("threads 0 is not in [1, 1024]", &train),
            "--loader-threads 0 is not in [1, 1024]");
  EXPECT_EQ(with_flag_name("threads 0 is not in [1, 1024]", &prepare),
            "--threads 0 is not in [1, 1024]");
  EXPECT_EQ(with_flag_name("image_size 7 is not in [8, 4096]", &prepare),
            "--size 7 is not in [8, 4096]");
  EXPECT_EQ(with_flag_name("max_steps must be >= 0", &train), "--max-steps must be >= 0");
  EXPECT_EQ(
      with_flag_name("amp fp16 needs a CUDA device: use `amp` bf16, or `device` cuda", &train),
      "--amp fp16 needs a CUDA device: use --amp bf16, or --device cuda");
  EXPECT_EQ(with_flag_name("an output folder is needed (`out_dir`)", &train),
            "an output folder is needed (out_dir)");  // this command has no --out
}

// One refused value of each options struct the CLI fills, through the real binary: exit 2 and
// the flag named on the first line.
TEST(FlagNames, TheBinaryNamesTheFlagOfEachRefusedOption) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"env --backend ucc", "--backend 'ucc': choose auto, gloo, nccl or mpi"},
      {"env --device tpu", "--device 'tpu': choose auto, cpu or cuda"},
      {"env --mpi-allreduce tree", "--mpi-allreduce 'tree': choose auto, ring or library"},
      {"commbench --mpi-allreduce ring -b 1K -e 1K -n 1 -w 0",
       "--mpi-allreduce ring is for --backend mpi, and this job's is gloo"},
      {"env --rdzv-timeout 0", "--rdzv-timeout 0 s must be at least 1 s"},
      {"env --local-world-size -2", "--local-world-size -2 must be -1 (from the environment)"},
      {"commbench --first-bucket-mb 0", "--first-bucket-mb 0 must be > 0"},
      {"commbench -n 0", "-n/--iters 0 must be >= 1"},
      {"commbench --path nccl", "--path 'nccl': choose raw or reducer"},
      {"bench --steps 0 --threads 1", "--steps 0 must be >= 1"},
      {"bench --loader-threads 0", "--loader-threads 0 is not in [1, 1024]"},
      {"bench --workers 1,0", "--workers '1,0': expected worker counts >= 1"},
      {"bench --workers 1,2 --steps 0", "--steps 0 must be >= 1"},  // before any run starts
      {"launch --nproc-per-node 0 -- env", "--nproc-per-node 0 must be at least 1"},
      {"launch --max-restarts -1 -- env", "--max-restarts -1 must be at least 0"},
      {"k8s render --job-name Bad -- bench", "--job-name 'Bad': expected lower-case letters"},
      {"k8s render --flavor mpijob -- bench", "--flavor 'mpijob': choose indexed-job, pytorchjob"},
      {"k8s render --image-pull-policy always -- bench", "--image-pull-policy 'always': choose"},
      {"k8s render --shm-size 2GB -- bench", "--shm-size '2GB': expected a Kubernetes quantity"},
      {"doctor --master-port 0", "--master-port 0 must be in [1, 65535]"},
  };
  for (const auto& [args, expected] : cases) {
    const auto r = test_util::run_chexscale(args);
    EXPECT_EQ(r.exit_code, 2) << args << "\n" << r.output;
    const std::string first = r.output.substr(0, r.output.find('\n'));
    EXPECT_NE(first.find(expected), std::string::npos) << args << "\n" << r.output;
  }
}

// The same for the data, model and training options (train, prepare, synth, eval, export-weights,
// models): a field is named by the flag of the command that refused it.
TEST(FlagNames, TheBinaryNamesTheFlagOfEachRefusedDataModelAndTrainingOption) {
  const std::string train = "train --data /nonexistent/data --out /nonexistent/run ";
  const std::string prepare = "prepare --data /nonexistent/data --out /nonexistent/shards ";
  const std::string synth = "synth --out /nonexistent/synth ";
  const std::vector<std::pair<std::string, std::string>> cases = {
      {train + "--loader-threads 0", "--loader-threads 0 is not in [1, 1024]"},
      {train + "--prefetch 0", "--prefetch must be at least 1, got 0"},
      {train + "--lr nan", "--lr nan must be a positive number"},
      {train + "--plateau-factor 1", "--plateau-factor 1 must be in (0, 1)"},
      {train + "--optimizer adamw", "--optimizer 'adamw': choose adam or sgd"},
      {train + "--on-nan retry", "--on-nan 'retry': choose stop, skip or ignore"},
      {train + "--on-nan ignore", "--on-nan must be stop or skip in training, not 'ignore'"},
      {train + "--val-fraction 2", "--val-fraction must be in [0, 1], got 2"},
      {train + "--dropout 1", "--dropout must be in [0, 1), got 1"},
      {prepare + "--size 7", "--size 7 is not in [8, 4096]"},
      {prepare + "--shard-records 0", "--shard-records must be at least 1, got 0"},
      {prepare + "--test-fraction -1", "--test-fraction must be in [0, 1], got -1"},
      {synth + "--images 0", "--images 0 < 1"},
      {synth + "--size 8", "--size 8 is not in [16, 4096]"},
      {synth + "--threads -1", "--threads -1 is not in [0, 1024]"},
      {"eval --checkpoint /nonexistent/best.json --data /nonexistent --out /nonexistent/eval "
       "--split holdout",
       "--split 'holdout': choose train, val or test"},
      {"export-weights --dtype f8 --out /nonexistent/w.safetensors",
       "--dtype 'f8': choose f32, f16, bf16 or f64"},
      {"models --num-classes 0", "--num-classes must be at least 1, got 0"},
      {"train --out /nonexistent/run", "a data set is needed (--data)"},
      {"train --data /nonexistent/data", "a run directory is needed (--out)"},
      {"synth --images 3", "an output folder is needed (--out)"},
  };
  for (const auto& [args, expected] : cases) {
    const auto r = test_util::run_chexscale(args);
    EXPECT_EQ(r.exit_code, 2) << args << "\n" << r.output;
    const std::string first = r.output.substr(0, r.output.find('\n'));
    EXPECT_NE(first.find(expected), std::string::npos) << args << "\n" << r.output;
  }
}

}  // namespace
}  // namespace chexscale::cli
