// --dataset, --uncertain and --views (see dataset_flags.h).
#include "cli/dataset_flags.h"

namespace chexscale::cli {

data::DatasetOptions DatasetFlags::resolved() const {
  data::DatasetOptions o;
  o.kind = data::parse_dataset_kind(dataset);
  o.uncertain = data::parse_uncertain_policy(uncertain);
  o.views = data::parse_view_filter(views);
  return o;
}

void add_dataset_flags(CLI::App& cmd, DatasetFlags& flags) {
  cmd.add_option("--dataset", flags.dataset,
                 "The data set --data holds: nih (ChestX-ray14), chexpert, mimic-cxr, padchest, "
                 "or auto (found from its CSV files)")
      ->capture_default_str();
  cmd.add_option("--uncertain", flags.uncertain,
                 "CheXpert and MIMIC-CXR labels marked uncertain (-1): ones (positive), zeros "
                 "(negative) or ignore (left out of the loss and of AUROC)")
      ->capture_default_str();
  cmd.add_option("--views", flags.views, "Images used: all, or frontal (PA and AP) only")
      ->capture_default_str();
}

}  // namespace chexscale::cli
