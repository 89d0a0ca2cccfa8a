// Precompiled header: LibTorch's umbrella header and the standard library, parsed once per build.
#pragma once
#include <torch/torch.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>
