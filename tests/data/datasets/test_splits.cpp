// Patient-wise splits: no patient in two splits, reproducible from the seed, official lists
// honoured.
#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <set>

#include "common/error.h"
#include "data/datasets/chestxray14_dataset.h"
#include "data/datasets/splits.h"
#include "test_util/error_message.h"

namespace chexscale::data {
namespace {

// 200 patients with 1-4 images each.
std::vector<CsvRecord> make_records() {
  std::vector<CsvRecord> records;
  for (int p = 1; p <= 200; ++p) {
    for (int f = 0; f < 1 + p % 4; ++f) {
      CsvRecord r;
      r.image = std::to_string(p) + "_" + std::to_string(f) + ".png";
      r.patient_id = p;
      records.push_back(r);
    }
  }
  return records;
}

// Every patient's images share one split.
void expect_patient_wise(const std::vector<CsvRecord>& records, const std::vector<Split>& splits) {
  std::map<int64_t, Split> of_patient;
  for (size_t i = 0; i < records.size(); ++i) {
    const auto [it, fresh] = of_patient.emplace(records[i].patient_id, splits[i]);
    EXPECT_EQ(it->second, splits[i]) << "patient " << records[i].patient_id << " in two splits";
  }
}

std::map<Split, std::set<int64_t>> patients_by_split(const std::vector<CsvRecord>& records,
                                                     const std::vector<Split>& splits) {
  std::map<Split, std::set<int64_t>> out;
  for (size_t i = 0; i < records.size(); ++i)
    out[splits[i]].insert(records[i].patient_id);
  return out;
}

TEST(Splits, RandomPatientWiseSplitHasFractionsAndNoOverlap) {
  const auto records = make_records();
  DataIssues issues;
  const auto splits = assign_splits(records, false, {}, {}, {0.1, 0.2, 7}, issues);
  expect_patient_wise(records, splits);
  auto by = patients_by_split(records, splits);
  EXPECT_EQ(by[Split::kTest].size(), 40u);  // 20 % of 200 patients
  EXPECT_EQ(by[Split::kVal].size(), 20u);   // 10 % of 200
  EXPECT_EQ(by[Split::kTrain].size(), 140u);
  EXPECT_EQ(by.count(Split::kNone), 0u);
}

TEST(Splits, FractionOutsideZeroOneOrNaNIsAUsageError) {
  EXPECT_THROW(choose_patients({1, 2, 3}, 1.5, 0), UsageError);
  EXPECT_THROW(choose_patients({1, 2, 3}, std::nan(""), 0), UsageError);  // was an empty split
  EXPECT_EQ(choose_patients({1, 2, 3}, 1.0, 0).size(), 3u);
}

TEST(Splits, EveryNameRoundTripsAndABadOneListsTheValidOnes) {
  for (const Split split : {Split::kTrain, Split::kVal, Split::kTest}) {
    EXPECT_EQ(parse_split(to_string(split)), split) << to_string(split);
  }
  EXPECT_EQ(test_util::message_of<UsageError>([] { parse_split("validation"); }),
            "split 'validation': choose train, val or test");
  EXPECT_THROW(parse_split("none"), UsageError);  // kNone names no split a user can choose
}

TEST(Splits, OptionsRefuseFractionsOutsideZeroOneNamingTheField) {
  EXPECT_NO_THROW(SplitOptions{}.validate());
  for (const double bad : {-0.1, 1.5, std::nan("")}) {
    const std::string val = test_util::message_of<UsageError>([&] {
      SplitOptions{bad, 0.2, 0}.validate();
    });
    EXPECT_EQ(val.rfind("val_fraction ", 0), 0u) << val;
    const std::string test = test_util::message_of<UsageError>([&] {
      SplitOptions{0.1, bad, 0}.validate();
    });
    EXPECT_EQ(test.rfind("test_fraction ", 0), 0u) << test;
  }
}

TEST(Splits, ReproducibleForASeedAndDifferentForAnother) {
  const auto records = make_records();
  DataIssues issues;
  const auto a = assign_splits(records, false, {}, {}, {0.1, 0.2, 7}, issues);
  const auto b = assign_splits(records, false, {}, {}, {0.1, 0.2, 7}, issues);
  const auto c = assign_splits(records, false, {}, {}, {0.1, 0.2, 8}, issues);
  EXPECT_EQ(a, b);
  EXPECT_NE(a, c);
  // Input order does not matter: the split is a function of the patient set.
  std::vector<CsvRecord> reversed(records.rbegin(), records.rend());
  const auto r = assign_splits(reversed, false, {}, {}, {0.1, 0.2, 7}, issues);
  for (size_t i = 0; i < records.size(); ++i)
    EXPECT_EQ(a[i], r[records.size() - 1 - i]);
}

TEST(Splits, OfficialListsWithValidationCarvedByPatient) {
  const auto records = make_records();
  std::unordered_set<std::string> train_val;
  std::unordered_set<std::string> test;
  for (const auto& r : records) {
    if (r.patient_id <= 150)
      train_val.insert(r.image);
    else if (r.patient_id <= 190)
      test.insert(r.image);  // patients 191-200 are in no list
  }
  DataIssues issues;
  const auto splits = assign_splits(records, true, train_val, test, {0.2, 0.0, 3}, issues);
  expect_patient_wise(records, splits);
  auto by = patients_by_split(records, splits);
  EXPECT_EQ(by[Split::kVal].size(), 30u);  // 20 % of the 150 train_val patients
  EXPECT_EQ(by[Split::kTrain].size(), 120u);
  std::set<int64_t> listed_test;
  for (int64_t p = 151; p <= 190; ++p)
    listed_test.insert(p);
  EXPECT_EQ(by[Split::kTest], listed_test);
  for (int64_t p : by[Split::kVal])
    EXPECT_LE(p, 150);
  EXPECT_EQ(by[Split::kNone].size(), 10u);
  ASSERT_EQ(issues.warnings().size(), 1u);
  EXPECT_NE(issues.warnings()[0].message.find("in neither split list"), std::string::npos);
}

TEST(Splits, ParseSplitNames) {
  EXPECT_EQ(parse_split("val"), Split::kVal);
  EXPECT_THROW(parse_split("validation"), UsageError);
}

}  // namespace
}  // namespace chexscale::data
