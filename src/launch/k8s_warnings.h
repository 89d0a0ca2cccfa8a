// What the rendered manifests need of the cluster beyond their schemas: fields and integrations
// that an older or default-configured controller ignores without an error, so that the job would
// run without what it was rendered for (gang scheduling, admission, its workers per pod); and a
// worker setting the renderer cannot see (the Gloo backend an in-place job on GPUs needs).
// `chexscale k8s render` prints each as one line on stderr; the manifests are written regardless.
#pragma once

#include <string>
#include <vector>

#include "launch/k8s_render.h"

namespace chexscale::launch {

// The cluster requirements of these options that a cluster could silently miss, one sentence
// each (no "warning:" prefix); empty when every rendered field works on any supported release.
std::vector<std::string> render_warnings(const K8sRenderOptions& options);

}  // namespace chexscale::launch
