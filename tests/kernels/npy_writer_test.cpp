// .npy files checked byte by byte against the format spec
// (https://numpy.org/devdocs/reference/generated/numpy.lib.format.html).
#include "npy_writer.h"

#include <stdlib.h>

#include <cstring>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include <gtest/gtest.h>

namespace densefeed {
namespace {

class NpyWriter : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string templ =
        (std::filesystem::temp_directory_path() / "npy_writer_test.XXXXXX").string();
    ASSERT_NE(mkdtemp(templ.data()), nullptr);
    dir_ = templ;
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  std::string read(const std::filesystem::path& p) {
    std::ifstream in(p, std::ios::binary);
    return std::string(std::istreambuf_iterator<char>(in), {});
  }

  std::filesystem::path dir_;
};

TEST_F(NpyWriter, Float32HeaderAndDataAreExact) {
  const std::vector<float> data = {1.0f, -2.5f, 3.0f, 0.0f, 1e-30f, 7.0f};
  const std::vector<std::size_t> shape = {2, 3};
  write_npy(dir_ / "a.npy", data, shape);
  const std::string bytes = read(dir_ / "a.npy");
  // The dict is 59 characters; 10 + 59 + '\n' = 70 pads to 128, so the header
  // length field says 118 (0x76), as NumPy itself writes for this array.
  const std::string dict = "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }";
  ASSERT_EQ(bytes.size(), 128u + 6 * 4);
  EXPECT_EQ(bytes.substr(0, 6), std::string("\x93NUMPY", 6));
  EXPECT_EQ(bytes[6], '\x01');
  EXPECT_EQ(bytes[7], '\x00');
  EXPECT_EQ(static_cast<unsigned char>(bytes[8]), 118u);
  EXPECT_EQ(bytes[9], '\x00');
  EXPECT_EQ(bytes.substr(10, 118), dict + std::string(118 - dict.size() - 1, ' ') + "\n");
  EXPECT_EQ(0, std::memcmp(bytes.data() + 128, data.data(), data.size() * sizeof(float)));
}

TEST_F(NpyWriter, Float64FourDimensions) {
  std::vector<double> data(3 * 1 * 4 * 2);
  for (std::size_t i = 0; i < data.size(); ++i) data[i] = 0.5 * static_cast<double>(i);
  const std::vector<std::size_t> shape = {3, 1, 4, 2};
  write_npy(dir_ / "b.npy", data, shape);
  const std::string bytes = read(dir_ / "b.npy");
  ASSERT_EQ(bytes.size() % 8, 0u);
  const std::size_t header_len =
      static_cast<unsigned char>(bytes[8]) |
      (static_cast<std::size_t>(static_cast<unsigned char>(bytes[9])) << 8);
  EXPECT_EQ((10 + header_len) % 64, 0u);
  const std::string header = bytes.substr(10, header_len);
  EXPECT_EQ(header.rfind("{'descr': '<f8', 'fortran_order': False, 'shape': (3, 1, 4, 2), }", 0),
            0u);
  EXPECT_EQ(header.back(), '\n');
  ASSERT_EQ(bytes.size(), 10 + header_len + data.size() * 8);
  EXPECT_EQ(0, std::memcmp(bytes.data() + 10 + header_len, data.data(), data.size() * 8));
}

TEST_F(NpyWriter, OneAndZeroDimensionalShapesUsePythonTupleSyntax) {
  const std::vector<std::size_t> one = {5};
  EXPECT_NE(npy_header("<f4", one).find("'shape': (5,), }"), std::string::npos);
  EXPECT_NE(npy_header("<f4", {}).find("'shape': (), }"), std::string::npos);
  const std::vector<float> scalar = {42.0f};
  write_npy(dir_ / "s.npy", scalar, {});
  // The 0-d dict is 55 characters: 10 + 55 + '\n' = 66 pads to 128.
  EXPECT_EQ(read(dir_ / "s.npy").size(), 128u + 4);
}

TEST_F(NpyWriter, ShapeMismatchAndUnwritablePathThrowNamingTheFile) {
  const std::vector<float> data(5);
  const std::vector<std::size_t> shape = {2, 3};
  try {
    write_npy(dir_ / "bad.npy", data, shape);
    FAIL() << "expected NpyWriteError";
  } catch (const NpyWriteError& e) {
    EXPECT_NE(std::string(e.what()).find("bad.npy"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("6 elements"), std::string::npos) << e.what();
  }
  EXPECT_FALSE(std::filesystem::exists(dir_ / "bad.npy"));
  const std::vector<std::size_t> five = {5};
  try {
    write_npy(dir_ / "missing" / "x.npy", data, five);
    FAIL() << "expected NpyWriteError";
  } catch (const NpyWriteError& e) {
    EXPECT_NE(std::string(e.what()).find("x.npy"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace densefeed
