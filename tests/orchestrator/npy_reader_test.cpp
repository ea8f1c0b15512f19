#include <gtest/gtest.h>

#include <cstring>

#include "npy_reader.h"
#include "test_support.h"

namespace densefeed {
namespace {

// A version-1.0 .npy file with a header dict `dict` (padded as the spec says).
std::string npy_bytes(const std::string& dict, const std::string& data) {
  std::string header = dict;
  const std::size_t total = 10 + header.size() + 1;
  header += std::string((64 - total % 64) % 64, ' ') + "\n";
  std::string out = "\x93NUMPY";
  out += '\x01';
  out += '\x00';
  out += static_cast<char>(header.size() & 0xff);
  out += static_cast<char>(header.size() >> 8);
  return out + header + data;
}

std::string floats(std::initializer_list<float> v) {
  std::string s(v.size() * 4, '\0');
  std::memcpy(s.data(), std::data(v), s.size());
  return s;
}

TEST(NpyReader, ReadsFloat32InCOrder) {
  testing::TempDir dir;
  testing::write_file(dir / "a.npy", npy_bytes("{'descr': '<f4', 'fortran_order': False, 'shape': (2, 2), }",
                                              floats({1.5f, -2.0f, 0.25f, 3.0f})));
  const Tensor t = read_npy(dir / "a.npy");
  EXPECT_EQ(t.dtype, "float32");
  EXPECT_EQ(t.shape, (std::vector<std::size_t>{2, 2}));
  EXPECT_EQ(t.data, (std::vector<double>{1.5, -2.0, 0.25, 3.0}));
}

TEST(NpyReader, ScalarAndOneDimensionalShapes) {
  testing::TempDir dir;
  testing::write_file(dir / "s.npy", npy_bytes("{'descr': '<f4', 'fortran_order': False, 'shape': (), }", floats({7.0f})));
  EXPECT_EQ(read_npy(dir / "s.npy").data, std::vector<double>{7.0});
  testing::write_file(dir / "v.npy", npy_bytes("{'descr': '<f4', 'fortran_order': False, 'shape': (3,), }", floats({1, 2, 3})));
  EXPECT_EQ(read_npy(dir / "v.npy").shape, std::vector<std::size_t>{3});
}

void expect_error(const std::string& bytes, const std::string& needle) {
  testing::TempDir dir;
  testing::write_file(dir / "bad.npy", bytes);
  try {
    read_npy(dir / "bad.npy");
    FAIL() << "no error for " << needle;
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("bad.npy"), std::string::npos) << e.what();
  }
}

TEST(NpyReader, RefusesMalformedFiles) {
  const std::string dict = "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 2), }";
  expect_error("not numpy at all", "bad magic");
  expect_error(npy_bytes(dict, floats({1, 2, 3})), "data truncated: shape [2, 2] float32 needs 16 bytes");
  expect_error(npy_bytes(dict, floats({1, 2, 3, 4, 5})), "trailing bytes");
  expect_error(npy_bytes("{'descr': '<f4', 'fortran_order': True, 'shape': (2, 2), }", floats({1, 2, 3, 4})), "Fortran");
  expect_error(npy_bytes("{'descr': '>f4', 'fortran_order': False, 'shape': (1,), }", floats({1})), "big-endian");
  expect_error(npy_bytes("{'descr': '<c8', 'fortran_order': False, 'shape': (1,), }", floats({1, 2})), "unsupported dtype");
}

TEST(NpyReader, MissingFileNamesIt) {
  testing::TempDir dir;
  try {
    read_npy(dir / "final_state.npy");
    FAIL();
  } catch (const std::runtime_error& e) {
    EXPECT_EQ(std::string(e.what()), (dir / "final_state.npy").string() + ": missing or unreadable (the harness did not write it)");
  }
}

}  // namespace
}  // namespace densefeed
