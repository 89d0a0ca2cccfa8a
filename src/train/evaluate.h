// Evaluation on a split: the model's outputs for every example, gathered from all ranks and
// de-duplicated by dataset index (the sampler pads the epoch), so that the loss and AUROC do not
// depend on the number of workers.
#pragma once

#include <torch/torch.h>

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "data/loader.h"
#include "distributed/context.h"
#include "models/classifier.h"
#include "train/auroc.h"
#include "train/loss.h"

namespace chexscale::train {

// One row per distinct example, sorted by dataset index.
struct SplitOutputs {
  torch::Tensor logits;                  // [N, C] float32 (ten-crop: logit of the mean probability)
  torch::Tensor labels;                  // [N, C] float32: 1, 0 or NaN (not known)
  torch::Tensor indices;                 // [N] int64
  std::vector<std::string> label_names;  // C names: the data set's label set
};

// The rows of a pass that this rank has computed, batch by batch: what it keeps of a pass that
// was abandoned.
struct PassRows {
  std::vector<torch::Tensor> logits;
  std::vector<torch::Tensor> labels;
  std::vector<int64_t> indices;
};

// Runs the model (eval mode, no grad) over one epoch of `loader` (epoch 0, no shuffle expected)
// and gathers the outputs across ranks; every rank gets the full result. `ctx` may be null.
// `before_batch`, when set, is called before each batch: an exception it throws abandons the
// pass before the gathering collectives (the model back in its mode; the loader's next
// start_epoch begins a new pass), so a rank may leave a long evaluation its group will redo.
// `kept`, when set, holds this rank's rows of an abandoned pass with the same model (or none)
// and gains the rows this call computes, also when it is abandoned: the ranks first gather which
// examples any of them kept (collective) and share out only the others, each rank taking every
// world-th of them, so a pass goes on in a new world without computing an example again.
SplitOutputs predict_split(models::ClassifierImpl& model, data::Loader& loader,
                           distributed::DistContext* ctx, torch::Device device,
                           const std::function<void()>& before_batch = {},
                           PassRows* kept = nullptr);

struct EvalMetrics {
  double loss = 0;
  AurocReport auroc;
  int64_t examples = 0;
};

EvalMetrics evaluate_outputs(const SplitOutputs& outputs, const BceWithLogitsLoss& loss);

// The rows i with keep[i] (e.g. the labelled images of an image list).
SplitOutputs select_rows(const SplitOutputs& outputs, const std::vector<bool>& keep);

// The study of an image: the folder of its name ("valid/patient64541/study1/view1_frontal.jpg"
// -> "valid/patient64541/study1"); "" for a name without a folder.
std::string study_of_image(const std::string& image_name);

// One row per study, as the CheXpert paper (Irvin et al., 2019) scores a study: rows with the
// same study[i] are combined, in the order their studies first appear. Probability: the maximum
// over the study's views (logits: their maximum, the same order); labels: 1 where any view is
// labelled 1, else 0 where any is 0, else NaN (CheXpert's labels are the study's, the same for
// every view); index: the smallest of the views'.
SplitOutputs combine_study_views(const SplitOutputs& outputs,
                                 const std::vector<std::string>& study);

// predictions.csv: "image", then prob_<label> x C, then label_<label> x C (the names of
// outputs.label_names), a row per example; names[i] is the image of row i. A probability has 9
// significant digits ("{:.9g}"), so it reads back as the float32 it was. A label that is not
// known, and every label of a row with labelled[i] false, is an empty cell (an empty `labelled`
// means every row is labelled).
std::string predictions_csv(const std::vector<std::string>& names, const SplitOutputs& outputs,
                            const std::vector<bool>& labelled = {});

}  // namespace chexscale::train
