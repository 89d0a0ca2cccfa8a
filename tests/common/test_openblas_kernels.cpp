// OpenBLAS's kernels for this CPU: which core replaces OpenBLAS's SSE3 fallback for which
// instruction sets, and the replacement itself in this process against the real OpenBLAS that
// LibTorch calls: matrix products and a 1x1 convolution on LibTorch's BLAS path equal a
// double-precision reference before and after it.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <cstdlib>

#include "common/openblas_kernels.h"

namespace chexscale {
namespace {

CpuVectorSets avx512() {
  CpuVectorSets s;
  s.avx = s.avx2 = s.fma = true;
  s.avx512f = s.avx512bw = s.avx512vl = s.avx512dq = s.avx512cd = true;
  return s;
}

TEST(OpenBlasCoreInsteadOf, ReplacesOnlyThePrescottFallbackByTheCpusBestKernels) {
  EXPECT_EQ(openblas_core_instead_of("Prescott", avx512()), "SkylakeX");
  EXPECT_EQ(openblas_core_instead_of("PRESCOTT", avx512()), "SkylakeX");
  CpuVectorSets no_bw = avx512();
  no_bw.avx512bw = false;  // AVX-512F alone (Knights Landing): not SkylakeX's set
  EXPECT_EQ(openblas_core_instead_of("Prescott", no_bw), "Haswell");
  CpuVectorSets avx2 = avx512();
  avx2.avx512f = avx2.avx512bw = avx2.avx512vl = avx2.avx512dq = avx2.avx512cd = false;
  EXPECT_EQ(openblas_core_instead_of("Prescott", avx2), "Haswell");
  CpuVectorSets avx_only;
  avx_only.avx = true;
  EXPECT_EQ(openblas_core_instead_of("Prescott", avx_only), "Sandybridge");
  EXPECT_EQ(openblas_core_instead_of("Prescott", CpuVectorSets{}), std::nullopt);
  // A core OpenBLAS chose knowing the CPU stays, even below what the CPU could run.
  EXPECT_EQ(openblas_core_instead_of("Haswell", avx512()), std::nullopt);
  EXPECT_EQ(openblas_core_instead_of("Zen", avx512()), std::nullopt);
  EXPECT_EQ(openblas_core_instead_of("", avx512()), std::nullopt);
  EXPECT_EQ(openblas_core_instead_of("Prescot", avx512()), std::nullopt);
}

// a (n x k) times b (k x m) in double, element by element.
torch::Tensor reference_product(const torch::Tensor& a, const torch::Tensor& b) {
  return torch::matmul(a.to(torch::kFloat64), b.to(torch::kFloat64));
}

// The largest difference of LibTorch's float products (mm, and a 1x1 convolution of 8 images on
// one thread, which LibTorch 1.13 sends to the BLAS, not oneDNN) from the double reference.
double worst_error() {
  torch::manual_seed(7);
  const torch::Tensor a = torch::randn({67, 129});
  const torch::Tensor b = torch::randn({129, 45});
  double worst =
      (torch::mm(a, b).to(torch::kFloat64) - reference_product(a, b)).abs().max().item<double>();
  const torch::Tensor images = torch::randn({8, 32, 5, 7});
  const torch::Tensor weight = torch::randn({24, 32, 1, 1});
  const torch::Tensor conv = torch::conv2d(images, weight);
  const torch::Tensor by_pixel = reference_product(images.permute({0, 2, 3, 1}).reshape({-1, 32}),
                                                   weight.reshape({24, 32}).t());
  const torch::Tensor expected = by_pixel.reshape({8, 5, 7, 24}).permute({0, 3, 1, 2});
  worst = std::max(worst, (conv.to(torch::kFloat64) - expected).abs().max().item<double>());
  return worst;
}

// Forces the fallback, then lets choose_openblas_kernels() replace it, as chexscale's main()
// does on a CPU that OpenBLAS does not know.
TEST(OpenBlasKernels, ReplacingTheFallbackKeepsProductsRight) {
  at::set_num_threads(1);
  ASSERT_EQ(use_openblas_core("Prescott"), "Prescott")
      << "no OpenBLAS built for many CPUs under LibTorch (Debian's libopenblas0 is one)";
  EXPECT_EQ(openblas_kernels(), "Prescott");
  EXPECT_LT(worst_error(), 1e-3);

  // An explicit OPENBLAS_CORETYPE is the user's: nothing is replaced.
  OpenBlasChoice kept = choose_openblas_kernels();
  EXPECT_EQ(kept.loaded, "Prescott");
  EXPECT_FALSE(kept.replaced);
  EXPECT_EQ(openblas_kernels(), "Prescott");

  ::unsetenv("OPENBLAS_CORETYPE");
  const std::optional<std::string> better = openblas_core_instead_of("Prescott", cpu_vector_sets());
  const OpenBlasChoice choice = choose_openblas_kernels();
  EXPECT_EQ(choice.loaded, "Prescott");
  if (better) {
    EXPECT_TRUE(choice.replaced);
    EXPECT_EQ(choice.now, *better);
    EXPECT_EQ(openblas_kernels(), *better);
    const char* set = std::getenv("OPENBLAS_CORETYPE");
    EXPECT_EQ(std::string(set != nullptr ? set : ""), *better) << "children would load Prescott";
  } else {  // a CPU without AVX: Prescott's kernels are its own
    EXPECT_FALSE(choice.replaced);
    EXPECT_EQ(choice.now, "Prescott");
  }
  EXPECT_LT(worst_error(), 1e-3);
}

}  // namespace
}  // namespace chexscale
