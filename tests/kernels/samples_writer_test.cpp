#include "samples_writer.h"

#include <stdlib.h>

#include <cmath>
#include <fstream>
#include <limits>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

namespace densefeed {
namespace {

class SamplesWriter : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string templ =
        (std::filesystem::temp_directory_path() / "samples_writer_test.XXXXXX").string();
    ASSERT_NE(mkdtemp(templ.data()), nullptr);
    dir_ = templ;
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  std::filesystem::path dir_;
};

TEST_F(SamplesWriter, WritesUnitAndSamplesInOrder) {
  const std::vector<double> samples = {1.25, 0.5, 1234.0625};
  write_samples_json(dir_ / "samples.json", samples);
  std::ifstream in(dir_ / "samples.json");
  const nlohmann::json doc = nlohmann::json::parse(in);
  EXPECT_EQ(doc.size(), 2u);
  EXPECT_EQ(doc.at("unit"), "ms");
  ASSERT_EQ(doc.at("samples").size(), 3u);
  for (std::size_t i = 0; i < samples.size(); ++i) {
    EXPECT_EQ(doc.at("samples")[i].get<double>(), samples[i]);
  }
}

TEST_F(SamplesWriter, RefusesTimesThatAreNotTimes) {
  for (double bad : {std::numeric_limits<double>::quiet_NaN(),
                     std::numeric_limits<double>::infinity(), -0.001}) {
    const std::vector<double> samples = {1.0, bad};
    try {
      write_samples_json(dir_ / "samples.json", samples);
      FAIL() << "expected SamplesWriteError for " << bad;
    } catch (const SamplesWriteError& e) {
      EXPECT_NE(std::string(e.what()).find("samples.json: sample 1"), std::string::npos)
          << e.what();
    }
  }
  EXPECT_FALSE(std::filesystem::exists(dir_ / "samples.json"));
}

TEST_F(SamplesWriter, UnwritablePathThrowsNamingTheFile) {
  const std::vector<double> samples = {1.0};
  try {
    write_samples_json(dir_ / "no" / "samples.json", samples);
    FAIL() << "expected SamplesWriteError";
  } catch (const SamplesWriteError& e) {
    EXPECT_NE(std::string(e.what()).find("samples.json: cannot open"), std::string::npos)
        << e.what();
  }
}

}  // namespace
}  // namespace densefeed
