#include <gtest/gtest.h>

#include <sys/stat.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <functional>
#include <limits>

#include <nlohmann/json.hpp>

#include "tensor_file.h"
#include "test_support.h"

namespace densefeed {
namespace {

// ---------------------------------------------------------------------------
// Byte builders. Every file in these tests is assembled byte by byte, so the
// expected values are exact and nothing depends on the host's byte order.

template <typename T>
std::string bytes_of(std::initializer_list<T> values, bool big_endian = false) {
  std::string out;
  for (const T v : values) {
    std::uint64_t bits = 0;
    if constexpr (std::is_same_v<T, double>) bits = std::bit_cast<std::uint64_t>(v);
    else if constexpr (std::is_same_v<T, float>) bits = std::bit_cast<std::uint32_t>(v);
    else bits = static_cast<std::uint64_t>(static_cast<std::make_unsigned_t<T>>(v));
    for (std::size_t i = 0; i < sizeof(T); ++i) {
      const std::size_t shift = 8 * (big_endian ? sizeof(T) - 1 - i : i);
      out += static_cast<char>((bits >> shift) & 0xff);
    }
  }
  return out;
}

std::string le(std::uint64_t v, std::size_t n) {
  std::string out;
  for (std::size_t i = 0; i < n; ++i) out += static_cast<char>((v >> (8 * i)) & 0xff);
  return out;
}

// A .npy file of format version major.0 with header dict `dict`, padded with
// spaces and a newline as numpy/lib/format.py does (to 64 bytes unless
// `align` is false, which NumPy's reader never relies on and neither do we).
std::string npy(int major, const std::string& dict, const std::string& data, bool align = true) {
  const std::size_t preamble = 8 + (major == 1 ? 2 : 4);
  std::string header = dict;
  if (align) header += std::string((64 - (preamble + header.size() + 1) % 64) % 64, ' ');
  header += '\n';
  std::string out = "\x93NUMPY";
  out += static_cast<char>(major);
  out += '\0';
  return out + le(header.size(), preamble - 8) + header + data;
}

std::string npy_dict(const std::string& descr, const std::string& shape, bool fortran = false) {
  return "{'descr': '" + descr + "', 'fortran_order': " + (fortran ? "True" : "False") + ", 'shape': " + shape + ", }";
}

struct StTensor {
  std::string name;
  std::string dtype;
  std::vector<std::size_t> shape;
  std::string data;
};

std::string safetensors_raw(const std::string& header, const std::string& buffer) {
  return le(header.size(), 8) + header + buffer;
}

// As the safetensors library writes: tensors back to back, header padded
// with spaces to a multiple of 8 bytes.
std::string safetensors(const std::vector<StTensor>& tensors, const nlohmann::json& metadata = nullptr) {
  nlohmann::json header = nlohmann::json::object();
  std::string buffer;
  for (const auto& t : tensors) {
    header[t.name] = {{"dtype", t.dtype}, {"shape", t.shape}, {"data_offsets", {buffer.size(), buffer.size() + t.data.size()}}};
    buffer += t.data;
  }
  if (!metadata.is_null()) header["__metadata__"] = metadata;
  std::string text = header.dump();
  text += std::string((8 - text.size() % 8) % 8, ' ');
  return safetensors_raw(text, buffer);
}

std::vector<double> read_all(const TensorFile& f) {
  std::vector<double> out(f.size());
  f.read_doubles(0, f.size(), out.data());
  return out;
}

// Exact equality, with NaN equal to NaN.
void expect_values(const std::vector<double>& got, const std::vector<double>& want) {
  ASSERT_EQ(got.size(), want.size());
  for (std::size_t i = 0; i < got.size(); ++i) {
    if (std::isnan(want[i])) {
      EXPECT_TRUE(std::isnan(got[i])) << "element " << i << ": " << got[i];
    } else {
      EXPECT_EQ(got[i], want[i]) << "element " << i;
      EXPECT_EQ(std::signbit(got[i]), std::signbit(want[i])) << "element " << i;
    }
  }
}

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
constexpr double kInf = std::numeric_limits<double>::infinity();

class TensorFileTest : public ::testing::Test {
 protected:
  std::filesystem::path write(const std::string& name, const std::string& bytes) {
    testing::write_file(dir_ / name, bytes);
    return dir_ / name;
  }

  TensorFile open_npy(const std::string& bytes, std::optional<std::string> declared = {}) {
    return TensorFile::open_npy(write("t.npy", bytes), std::move(declared));
  }

  // The message of the TensorFileError that `fn` throws; it must start with
  // the path of the file.
  std::string error_of(const std::filesystem::path& path, const std::function<void()>& fn) {
    try {
      fn();
    } catch (const TensorFileError& e) {
      const std::string what = e.what();
      EXPECT_EQ(what.rfind(path.string() + ": ", 0), 0u) << what;
      EXPECT_EQ(e.path(), path);
      return what;
    } catch (const std::exception& e) {
      ADD_FAILURE() << "not a TensorFileError: " << e.what();
      return e.what();
    }
    return "no error";
  }

  std::string npy_error(const std::string& bytes, std::optional<std::string> declared = {}) {
    const auto path = write("bad.npy", bytes);
    return error_of(path, [&] { TensorFile::open_npy(path, declared); });
  }

  std::string st_error(const std::string& bytes, const std::string& name = "a") {
    const auto path = write("bad.safetensors", bytes);
    return error_of(path, [&] { TensorFile::open_safetensors(path, name); });
  }

  testing::TempDir dir_;
};

#define EXPECT_HAS(text, needle) EXPECT_NE(std::string(text).find(needle), std::string::npos) << (text)

// ---------------------------------------------------------------------------
// .npy

TEST_F(TensorFileTest, NpyVersion1Float32) {
  const auto f = open_npy(npy(1, npy_dict("<f4", "(2, 2)"), bytes_of<float>({1.5f, -2.0f, 0.25f, 3.0f})));
  EXPECT_EQ(f.dtype(), "float32");
  EXPECT_EQ(f.shape(), (std::vector<std::size_t>{2, 2}));
  EXPECT_EQ(f.size(), 4u);
  EXPECT_EQ(f.element_bytes(), 4u);
  EXPECT_FALSE(f.fortran_order());
  EXPECT_FALSE(f.big_endian());
  expect_values(read_all(f), {1.5, -2.0, 0.25, 3.0});
  std::vector<double> part(2);
  f.read_doubles(1, 2, part.data());
  expect_values(part, {-2.0, 0.25});
}

TEST_F(TensorFileTest, NpyVersions2And3TakeTheHeaderLengthFromTheHeader) {
  // Unaligned headers of odd lengths: the length field is all we go by.
  const std::string data = bytes_of<double>({0.1, -7.0, 1e300});
  for (int major : {1, 2, 3}) {
    for (bool align : {true, false}) {
      const auto f = open_npy(npy(major, "{\"shape\": (3,),'descr':'<f8','fortran_order':False}", data, align));
      EXPECT_EQ(f.dtype(), "float64");
      expect_values(read_all(f), {0.1, -7.0, 1e300});
    }
  }
  // A version-2.0 header longer than 65535 bytes is beyond NumPy's limit;
  // one just under NumPy's 10000-byte limit is read.
  const std::string padded = npy_dict("<f8", "(3,)") + std::string(9000, ' ');
  expect_values(read_all(open_npy(npy(2, padded, data))), {0.1, -7.0, 1e300});
}

TEST_F(TensorFileTest, NpyHeaderDictSyntax) {
  const std::string data = bytes_of<std::int32_t>({-1, 2});
  for (const std::string dict : {
           "{'descr': '<i4', 'fortran_order': False, 'shape': (2,), }",
           "{'descr': '<i4', 'fortran_order': False, 'shape': (2,)}",
           "{'shape':(2,),'fortran_order':False,'descr':'<i4'}",
           "  {\n 'fortran_order' : False ,\t\"descr\" : \"<i4\" , 'shape' : ( 2 , ) , }  ",
       }) {
    const auto f = open_npy(npy(1, dict, data));
    EXPECT_EQ(f.dtype(), "int32") << dict;
    expect_values(read_all(f), {-1.0, 2.0});
  }
  // Python 2's long suffix, as NumPy accepts it in 1.0 and 2.0 headers.
  EXPECT_EQ(open_npy(npy(1, npy_dict("<i4", "(1L, 2L)"), data)).shape(), (std::vector<std::size_t>{1, 2}));
  EXPECT_HAS(npy_error(npy(3, npy_dict("<i4", "(1L, 2L)"), data)), "expected a plain decimal integer");
}

TEST_F(TensorFileTest, NpyBigEndian) {
  const auto f32 = open_npy(npy(1, npy_dict(">f4", "(3,)"), bytes_of<float>({1.5f, -0.1f, 3e38f}, true)));
  EXPECT_TRUE(f32.big_endian());
  expect_values(read_all(f32), {1.5, static_cast<double>(-0.1f), static_cast<double>(3e38f)});
  expect_values(read_all(open_npy(npy(1, npy_dict(">f8", "(2,)"), bytes_of<double>({0.1, -1e-310}, true)))),
                {0.1, -1e-310});
  expect_values(read_all(open_npy(npy(1, npy_dict(">i2", "(2,)"), bytes_of<std::int16_t>({-300, 0x1234}, true)))),
                {-300.0, 0x1234});
  expect_values(read_all(open_npy(npy(1, npy_dict(">u8", "(1,)"), bytes_of<std::uint64_t>({0x0102030405060708}, true)))),
                {static_cast<double>(0x0102030405060708)});
  expect_values(read_all(open_npy(npy(1, npy_dict(">f2", "(2,)"), std::string("\x3c\x00\xc0\x00", 4)))), {1.0, -2.0});
  // '=' and '|' are the writer's native order (little-endian here, as NumPy
  // on the machines densefeed supports); one byte has no order.
  if constexpr (std::endian::native == std::endian::little) {
    expect_values(read_all(open_npy(npy(1, npy_dict("=i4", "(1,)"), bytes_of<std::int32_t>({-5})))), {-5.0});
    expect_values(read_all(open_npy(npy(1, npy_dict("|i4", "(1,)"), bytes_of<std::int32_t>({-5})))), {-5.0});
  }
  expect_values(read_all(open_npy(npy(1, npy_dict(">i1", "(2,)"), "\x80\x7f"))), {-128.0, 127.0});
  expect_values(read_all(open_npy(npy(1, npy_dict("|u1", "(2,)"), "\x80\x7f"))), {128.0, 127.0});
}

TEST_F(TensorFileTest, NpyFortranOrderReadsBackInCOrder) {
  // a[i][j] = 10 i + j, 2x3, stored column by column.
  const auto f = open_npy(npy(1, npy_dict("<f4", "(2, 3)", true), bytes_of<float>({0, 10, 1, 11, 2, 12})));
  EXPECT_TRUE(f.fortran_order());
  EXPECT_EQ(f.shape(), (std::vector<std::size_t>{2, 3}));
  expect_values(read_all(f), {0, 1, 2, 10, 11, 12});
}

TEST_F(TensorFileTest, NpyFortranOrderThreeDimensionsInBlocks) {
  // v(i, j, k) = 100 i + 10 j + k, shape (2, 3, 4); Fortran storage puts
  // (i, j, k) at i + 2 (j + 3 k). Big-endian float64 at the same time.
  std::vector<double> storage(24), c_order;
  for (std::size_t i = 0; i < 2; ++i)
    for (std::size_t j = 0; j < 3; ++j)
      for (std::size_t k = 0; k < 4; ++k) {
        storage[i + 2 * (j + 3 * k)] = 100.0 * i + 10.0 * j + k;
        c_order.push_back(100.0 * i + 10.0 * j + k);
      }
  std::string data;
  for (const double v : storage) data += bytes_of<double>({v}, true);
  const auto f = open_npy(npy(1, npy_dict(">f8", "(2, 3, 4)", true), data));
  expect_values(read_all(f), c_order);
  // Blocks that start and end mid-row carry the multi-index correctly.
  for (const std::size_t block : {1u, 3u, 5u, 7u, 11u}) {
    std::vector<double> got(24);
    for (std::size_t b = 0; b < 24; b += block) f.read_doubles(b, std::min(block, 24 - b), got.data() + b);
    expect_values(got, c_order);
  }
  // One dimension: Fortran and C order are the same.
  expect_values(read_all(open_npy(npy(1, npy_dict("<i2", "(3,)", true), bytes_of<std::int16_t>({1, 2, 3})))),
                {1, 2, 3});
}

TEST_F(TensorFileTest, NpyZeroDimensionalAndZeroSize) {
  const auto scalar = open_npy(npy(1, npy_dict("<f8", "()"), bytes_of<double>({42.5})));
  EXPECT_TRUE(scalar.shape().empty());
  EXPECT_EQ(scalar.size(), 1u);
  expect_values(read_all(scalar), {42.5});

  const auto empty = open_npy(npy(1, npy_dict("<f4", "(0, 3)"), ""));
  EXPECT_EQ(empty.shape(), (std::vector<std::size_t>{0, 3}));
  EXPECT_EQ(empty.size(), 0u);
  EXPECT_TRUE(read_all(empty).empty());
  const auto empty_f = open_npy(npy(1, npy_dict("<f4", "(3, 0, 2)", true), ""));
  EXPECT_EQ(empty_f.size(), 0u);
  empty_f.read_doubles(0, 0, nullptr);
  EXPECT_THROW(empty_f.read_doubles(0, 1, nullptr), std::out_of_range);
}

TEST_F(TensorFileTest, NpyEveryIntegerDtypeAndBool) {
  expect_values(read_all(open_npy(npy(1, npy_dict("|i1", "(3,)"), bytes_of<std::int8_t>({-128, 0, 127})))),
                {-128, 0, 127});
  expect_values(read_all(open_npy(npy(1, npy_dict("<i2", "(2,)"), bytes_of<std::int16_t>({-32768, 32767})))),
                {-32768, 32767});
  expect_values(read_all(open_npy(npy(1, npy_dict("<i4", "(2,)"),
                                      bytes_of<std::int32_t>({std::numeric_limits<std::int32_t>::min(), 2147483647})))),
                {-2147483648.0, 2147483647.0});
  // int64 beyond 2^53 rounds to nearest (ties to even).
  expect_values(read_all(open_npy(npy(1, npy_dict("<i8", "(3,)"),
                                      bytes_of<std::int64_t>({std::numeric_limits<std::int64_t>::min(),
                                                              9007199254740993LL, -9007199254740992LL})))),
                {-9223372036854775808.0, 9007199254740992.0, -9007199254740992.0});
  expect_values(read_all(open_npy(npy(1, npy_dict("|u1", "(2,)"), bytes_of<std::uint8_t>({0, 255})))), {0, 255});
  expect_values(read_all(open_npy(npy(1, npy_dict("<u2", "(1,)"), bytes_of<std::uint16_t>({65535})))), {65535});
  expect_values(read_all(open_npy(npy(1, npy_dict("<u4", "(1,)"), bytes_of<std::uint32_t>({4294967295u})))),
                {4294967295.0});
  expect_values(read_all(open_npy(npy(1, npy_dict("<u8", "(2,)"),
                                      bytes_of<std::uint64_t>({std::numeric_limits<std::uint64_t>::max(), 1})))),
                {18446744073709551616.0, 1});
  const auto b = open_npy(npy(1, npy_dict("|b1", "(4,)"), std::string("\x00\x01\x01\x00", 4)));
  EXPECT_EQ(b.dtype(), "bool");
  expect_values(read_all(b), {0, 1, 1, 0});
}

TEST_F(TensorFileTest, NpyFloat16IncludingSubnormalsInfAndNaN) {
  const auto f = open_npy(npy(1, npy_dict("<f2", "(12,)"),
                              bytes_of<std::uint16_t>({0x3c00, 0xc000, 0x3c01, 0x7bff, 0x0400, 0x0001, 0x03ff, 0x8000,
                                                       0x7c00, 0xfc00, 0x7e00, 0xfc01})));
  EXPECT_EQ(f.dtype(), "float16");
  expect_values(read_all(f), {1.0, -2.0, 1.0 + std::ldexp(1.0, -10), 65504.0, std::ldexp(1.0, -14),
                              std::ldexp(1.0, -24), std::ldexp(1023.0, -24), -0.0, kInf, -kInf, kNaN, kNaN});
}

// All 65536 binary16 patterns against the textbook formula.
TEST_F(TensorFileTest, NpyFloat16EveryBitPattern) {
  std::string data;
  for (std::uint32_t h = 0; h < 65536; ++h) data += bytes_of<std::uint16_t>({static_cast<std::uint16_t>(h)});
  const auto got = read_all(open_npy(npy(1, npy_dict("<f2", "(65536,)"), data)));
  for (std::uint32_t h = 0; h < 65536; ++h) {
    const int e = (h >> 10) & 0x1f, m = h & 0x3ff;
    double want = e == 0 ? std::ldexp(m, -24) : e == 31 ? (m ? kNaN : kInf) : std::ldexp(1024 + m, e - 25);
    if (h & 0x8000) want = -want;
    if (std::isnan(want)) {
      ASSERT_TRUE(std::isnan(got[h])) << std::hex << h;
    } else {
      ASSERT_EQ(got[h], want) << std::hex << h;
      ASSERT_EQ(std::signbit(got[h]), std::signbit(want)) << std::hex << h;
    }
  }
}

TEST_F(TensorFileTest, NpyBfloat16AsDeclaredRawRecords) {
  const std::initializer_list<std::uint16_t> bits = {0x3f80, 0xc000, 0x7f7f, 0x0080, 0x0001, 0x8000, 0x7f80, 0xff80, 0x7fc0};
  const std::vector<double> want = {1.0, -2.0, std::ldexp(255.0, 120), std::ldexp(1.0, -126), std::ldexp(1.0, -133),
                                    -0.0, kInf, -kInf, kNaN};
  for (const std::string descr : {"<u2", "<i2", "|V2", "<V2"}) {
    const auto f = open_npy(npy(1, npy_dict(descr, "(9,)"), bytes_of<std::uint16_t>(bits)), "bfloat16");
    EXPECT_EQ(f.dtype(), "bfloat16") << descr;
    expect_values(read_all(f), want);
  }
  expect_values(read_all(open_npy(npy(1, npy_dict(">u2", "(9,)"), bytes_of<std::uint16_t>(bits, true)), "bfloat16")),
                want);
  // Undeclared, the same '<u2' file is uint16.
  EXPECT_EQ(open_npy(npy(1, npy_dict("<u2", "(9,)"), bytes_of<std::uint16_t>(bits))).dtype(), "uint16");
}

TEST_F(TensorFileTest, NpyFloat8E4m3fn) {
  // OCP OFP8 E4M3: 1.0, max 448 and -448, 256 (exponent 15 is finite), min
  // normal 2^-6, min and max subnormal, -0, and the two NaNs S.1111.111.
  const std::string bits("\x38\x7e\xfe\x78\x08\x01\x07\x80\x7f\xff", 10);
  const std::vector<double> want = {1.0, 448.0, -448.0, 256.0, std::ldexp(1.0, -6), std::ldexp(1.0, -9),
                                    std::ldexp(7.0, -9), -0.0, kNaN, kNaN};
  for (const std::string descr : {"|u1", "|i1", "|V1"}) {
    const auto f = open_npy(npy(1, npy_dict(descr, "(10,)"), bits), "float8_e4m3fn");
    EXPECT_EQ(f.dtype(), "float8_e4m3fn");
    expect_values(read_all(f), want);
  }
}

TEST_F(TensorFileTest, NpyFloat8E5m2) {
  // OCP OFP8 E5M2: 1.0, max 57344, min normal 2^-14, min and max subnormal,
  // -0, +-inf, NaNs.
  const std::string bits("\x3c\x7b\xfb\x04\x01\x03\x80\x7c\xfc\x7d\x7f\xff", 12);
  const std::vector<double> want = {1.0,  57344.0, -57344.0, std::ldexp(1.0, -14), std::ldexp(1.0, -16), std::ldexp(3.0, -16),
                                    -0.0, kInf,    -kInf,    kNaN,                 kNaN,                 kNaN};
  const auto f = open_npy(npy(1, npy_dict("|u1", "(12,)"), bits), "float8_e5m2");
  EXPECT_EQ(f.dtype(), "float8_e5m2");
  expect_values(read_all(f), want);
}

TEST_F(TensorFileTest, NpyDeclaredDtypeMustFit) {
  const std::string f4 = npy(1, npy_dict("<f4", "(1,)"), bytes_of<float>({1}));
  EXPECT_EQ(open_npy(f4, "float32").dtype(), "float32");
  EXPECT_HAS(npy_error(f4, "bfloat16"), "declared dtype bfloat16 but the file holds '<f4' (float32): expected raw "
                                        "2-byte records ('<u2', '<i2' or '|V2')");
  EXPECT_HAS(npy_error(f4, "float64"), "declared dtype float64 but the file holds '<f4' (float32)");
  EXPECT_HAS(npy_error(f4, "float128"), "unknown declared dtype 'float128'");
  EXPECT_HAS(npy_error(npy(1, npy_dict("<u2", "(1,)"), std::string(2, '\0')), "float8_e4m3fn"), "expected raw 1-byte records");
  EXPECT_HAS(npy_error(npy(1, npy_dict("|V2", "(1,)"), std::string(2, '\0'))),
             "'|V2' holds raw 2-byte records with no dtype: the gate must declare bfloat16");
  EXPECT_HAS(npy_error(npy(1, npy_dict("|V1", "(1,)"), std::string(1, '\0'))),
             "the gate must declare float8_e4m3fn or float8_e5m2");
  EXPECT_HAS(npy_error(npy(1, npy_dict("|V2", "(1,)"), std::string(2, '\0')), "uint16"),
             "declared dtype uint16 but the file holds '|V2' (raw records)");
}

TEST_F(TensorFileTest, NpyRefusesMalformedFiles) {
  const std::string dict = npy_dict("<f4", "(2, 3)");
  const std::string six = bytes_of<float>({1, 2, 3, 4, 5, 6});
  EXPECT_HAS(npy_error("not numpy at all"), "bad magic 'not nu': expected '\\x93NUMPY'");
  EXPECT_HAS(npy_error("\x93NUM"), "bad magic");
  EXPECT_HAS(npy_error("\x93NUMPY\x01"), "truncated");
  EXPECT_HAS(npy_error(std::string("\x93NUMPY\x01\x00\x10", 9)), "ends inside the header length");
  std::string v4 = npy(1, dict, six);
  v4[6] = 4;
  EXPECT_HAS(npy_error(v4), "unsupported .npy format version 4.0 (expected 1.0, 2.0 or 3.0)");
  std::string v11 = npy(1, dict, six);
  v11[7] = 1;
  EXPECT_HAS(npy_error(v11), "version 1.1");
  EXPECT_HAS(npy_error(std::string("\x93NUMPY\x01\x00\xff\x00{'descr'", 17)),
             "truncated: the header of 255 bytes runs past the end of the file (17 bytes)");
  EXPECT_HAS(npy_error(std::string("\x93NUMPY\x02\x00\x00\x00\x01\x00", 12) + std::string(70000, ' ')),
             "header too long: 65536 bytes");
  EXPECT_HAS(npy_error(npy(1, dict, six.substr(0, 20))),
             "data truncated: shape [2, 3] float32 needs 24 bytes, file has 20 (after its 128-byte header)");
  EXPECT_HAS(npy_error(npy(1, dict, six + "xy")), "trailing bytes: shape [2, 3] float32 needs 24 bytes, file has 26");
  for (const std::string descr : {"<c8", "|O", "<M8[ns]", "<U4", "f4", "<f16", "<V4"})
    EXPECT_HAS(npy_error(npy(1, npy_dict(descr, "(1,)"), "abcd")), "unsupported dtype '" + descr + "'");
  EXPECT_HAS(npy_error(npy(1, "{'descr': [('a', '<f4')], 'fortran_order': False, 'shape': (1,)}", "abcd")),
             "a list is not accepted (structured dtypes are not supported");
  EXPECT_HAS(npy_error(npy(3, npy_dict("<f4", "(1,)") + "\xc3\xa9", "abcd")), "non-ASCII byte 0xc3");
  EXPECT_HAS(npy_error(npy(1, npy_dict("<f4", "(1, 2, 3, 0)") + " x", "")), "unexpected text after the header dict");
}

TEST_F(TensorFileTest, NpyHeaderParserIsNotFooled) {
  const std::string four = bytes_of<float>({1, 2, 3, 4});
  const auto error = [&](const std::string& dict) { return npy_error(npy(1, dict, four)); };
  EXPECT_HAS(error("['descr', '<f4']"), "the header is not a dict");
  EXPECT_HAS(error("{'descr': '<f4', 'fortran_order': False}"), "missing key 'shape'");
  EXPECT_HAS(error("{'descr': '<f4', 'fortran_order': False, 'shape': (4,), 'extra': 1}"),
             "unexpected key 'extra' in the header dict (expected exactly 'descr', 'fortran_order' and 'shape')");
  EXPECT_HAS(error("{'descr': '<f4', 'fortran_order': False, 'shape': (4,), 'shape': (1,)}"), "duplicate key 'shape'");
  // Text that a regular expression for 'shape': (...) would pick up is
  // inside a string: it is the descr, an unsupported dtype.
  EXPECT_HAS(error("{'descr': \"<f4', 'shape': (1,), 'x': '\", 'fortran_order': False, 'shape': (4,)}"),
             "unsupported dtype '<f4', 'shape': (1,), 'x': ''");
  EXPECT_HAS(error("{'descr': '<f4', 'fortran_order': False, 'shape': (4)}"),
             "'shape' must be a tuple, got the int 4 (a 1-d shape is written (N,))");
  EXPECT_HAS(error("{'descr': '<f4', 'fortran_order': False, 'shape': 4}"), "'shape' must be a tuple, got the int 4");
  EXPECT_HAS(error("{'descr': '<f4', 'fortran_order': False, 'shape': [4]}"), "a list is not accepted");
  EXPECT_HAS(error("{'descr': '<f4', 'fortran_order': False, 'shape': (-4,)}"), "expected a non-negative integer");
  EXPECT_HAS(error("{'descr': '<f4', 'fortran_order': False, 'shape': (4.0,)}"), "expected a plain decimal integer");
  EXPECT_HAS(error("{'descr': '<f4', 'fortran_order': False, 'shape': (04,)}"), "leading zero");
  EXPECT_HAS(error("{'descr': '<f4', 'fortran_order': False, 'shape': ((4,),)}"), "expected a non-negative integer");
  EXPECT_HAS(error("{'descr': '<f4', 'fortran_order': 0, 'shape': (4,)}"), "'fortran_order' must be True or False");
  EXPECT_HAS(error("{'descr': '<f4', 'fortran_order': false, 'shape': (4,)}"), "unexpected name 'false'");
  EXPECT_HAS(error("{'descr': 4, 'fortran_order': False, 'shape': (4,)}"), "'descr' must be a dtype string");
  EXPECT_HAS(error("{'descr': '<f4' 'fortran_order': False, 'shape': (4,)}"), "expected ',' or '}' after a value");
  EXPECT_HAS(error("{'descr': '<f4', 'fortran_order': False, 'shape': (4,),,}"), "expected a quoted key or '}'");
  EXPECT_HAS(error("{'descr': '<\\x66\\x34', 'fortran_order': False, 'shape': (4,)}"), "escape sequences");
  EXPECT_HAS(error("{'descr': '<f4, 'fortran_order': False, 'shape': (4,)}"), "expected ',' or '}' after a value");
  EXPECT_HAS(error("{'descr': '<f4', 'fortran_order': False, 'shape': (4,"), "at byte");
  EXPECT_HAS(error("{'descr': '<f4', 'fortran_order': False, 'shape': (99999999999999999999,)}"),
             "integer too large for 64 bits");
  EXPECT_HAS(error("{'descr': '<f4', 'fortran_order': False, 'shape': (4294967296, 4294967296, 16)}"),
             "does not fit in 64 bits");
  std::string many = "(";
  for (int i = 0; i < 65; ++i) many += "1,";
  EXPECT_HAS(error("{'descr': '<f4', 'fortran_order': False, 'shape': " + many + ")}"), "shape has 65 dimensions");
}

// ---------------------------------------------------------------------------
// .safetensors

TEST_F(TensorFileTest, SafetensorsTwoTensorsAndMetadata) {
  const auto path = write("out.safetensors",
                          safetensors({{"final_state", "F32", {2, 2}, bytes_of<float>({1.5f, -2.0f, 0.25f, 3.0f})},
                                       {"steps", "I64", {3}, bytes_of<std::int64_t>({-1, 0, 1LL << 40})}},
                                      {{"format", "pt"}, {"seed", "42"}}));
  const auto a = TensorFile::open_safetensors(path, "final_state");
  EXPECT_EQ(a.dtype(), "float32");
  EXPECT_EQ(a.shape(), (std::vector<std::size_t>{2, 2}));
  expect_values(read_all(a), {1.5, -2.0, 0.25, 3.0});
  const auto b = TensorFile::open(path, "steps");
  EXPECT_EQ(b.dtype(), "int64");
  expect_values(read_all(b), {-1.0, 0.0, std::ldexp(1.0, 40)});
  EXPECT_EQ(TensorFile::open(path, "steps", "int64").size(), 3u);
  EXPECT_HAS(error_of(path, [&] { TensorFile::open(path, "steps", "int32"); }),
             "tensor 'steps': declared dtype int32 but the file holds I64 (int64)");
}

TEST_F(TensorFileTest, SafetensorsEveryDtype) {
  const std::vector<StTensor> tensors = {
      {"F64", "F64", {2}, bytes_of<double>({0.1, -1e-310})},
      {"F32", "F32", {2}, bytes_of<float>({0.1f, -3e38f})},
      {"F16", "F16", {2}, bytes_of<std::uint16_t>({0x7bff, 0x0001})},
      {"BF16", "BF16", {2}, bytes_of<std::uint16_t>({0x3f80, 0x7f7f})},
      {"F8_E4M3", "F8_E4M3", {2}, "\x7e\x01"},
      {"F8_E5M2", "F8_E5M2", {2}, "\x7b\x7c"},
      {"I64", "I64", {2}, bytes_of<std::int64_t>({-5, 1LL << 62})},
      {"I32", "I32", {2}, bytes_of<std::int32_t>({-5, 1 << 30})},
      {"I16", "I16", {2}, bytes_of<std::int16_t>({-5, 1 << 14})},
      {"I8", "I8", {2}, bytes_of<std::int8_t>({-5, 100})},
      {"U64", "U64", {2}, bytes_of<std::uint64_t>({5, 1ULL << 63})},
      {"U32", "U32", {2}, bytes_of<std::uint32_t>({5, 1u << 31})},
      {"U16", "U16", {2}, bytes_of<std::uint16_t>({5, 1u << 15})},
      {"U8", "U8", {2}, bytes_of<std::uint8_t>({5, 200})},
      {"BOOL", "BOOL", {2}, std::string("\x01\x00", 2)},
      {"scalar", "F32", {}, bytes_of<float>({7.0f})},
      {"empty", "F32", {0, 4}, ""},
  };
  const std::map<std::string, std::pair<std::string, std::vector<double>>> want = {
      {"F64", {"float64", {0.1, -1e-310}}},
      {"F32", {"float32", {static_cast<double>(0.1f), static_cast<double>(-3e38f)}}},
      {"F16", {"float16", {65504.0, std::ldexp(1.0, -24)}}},
      {"BF16", {"bfloat16", {1.0, std::ldexp(255.0, 120)}}},
      {"F8_E4M3", {"float8_e4m3fn", {448.0, std::ldexp(1.0, -9)}}},
      {"F8_E5M2", {"float8_e5m2", {57344.0, kInf}}},
      {"I64", {"int64", {-5.0, std::ldexp(1.0, 62)}}},
      {"I32", {"int32", {-5.0, std::ldexp(1.0, 30)}}},
      {"I16", {"int16", {-5.0, 16384.0}}},
      {"I8", {"int8", {-5.0, 100.0}}},
      {"U64", {"uint64", {5.0, std::ldexp(1.0, 63)}}},
      {"U32", {"uint32", {5.0, std::ldexp(1.0, 31)}}},
      {"U16", {"uint16", {5.0, 32768.0}}},
      {"U8", {"uint8", {5.0, 200.0}}},
      {"BOOL", {"bool", {1.0, 0.0}}},
      {"scalar", {"float32", {7.0}}},
      {"empty", {"float32", {}}},
  };
  const auto path = write("all.safetensors", safetensors(tensors));
  for (const auto& [name, expected] : want) {
    const auto f = TensorFile::open_safetensors(path, name);
    EXPECT_EQ(f.dtype(), expected.first) << name;
    EXPECT_FALSE(f.big_endian());
    expect_values(read_all(f), expected.second);
  }
  EXPECT_TRUE(TensorFile::open_safetensors(path, "scalar").shape().empty());
}

std::string entry(const std::string& name, const std::string& dtype, const std::string& shape, std::size_t begin,
                  std::size_t end) {
  return "\"" + name + "\": {\"dtype\": \"" + dtype + "\", \"shape\": " + shape + ", \"data_offsets\": [" +
         std::to_string(begin) + ", " + std::to_string(end) + "]}";
}

TEST_F(TensorFileTest, SafetensorsRefusesMalformedFiles) {
  const std::string f32x2 = bytes_of<float>({1, 2});
  const auto one = [&](const std::string& e, const std::string& buffer) { return safetensors_raw("{" + e + "}", buffer); };
  EXPECT_HAS(st_error(std::string("\x05\0\0\0\0", 5)), "truncated: 5 bytes, shorter than the 8-byte header size");
  EXPECT_HAS(st_error(le(1000, 8) + "{\"a\": {}}"), "header size 1000 bytes runs past the end of the file (17 bytes)");
  EXPECT_HAS(st_error(le(100'000'001, 8) + "{}"), "header size 100000001 bytes is too long");
  EXPECT_HAS(st_error(le(~0ULL, 8) + "{}"), "is too long");
  EXPECT_HAS(st_error(safetensors_raw("{not json}", "")), "the header is not valid JSON");
  EXPECT_HAS(st_error(safetensors_raw("[1, 2]", "")), "the header does not start with '{'");
  EXPECT_HAS(st_error(safetensors_raw("{\"a\": 1} x", "")), "not valid JSON");
  EXPECT_HAS(st_error(safetensors_raw(std::string("{\"a\xff\": 1}"), "")), "not valid JSON");
  EXPECT_HAS(st_error(one(entry("a", "F32", "[2]", 0, 8), f32x2.substr(0, 4))),
             "tensor 'a': data_offsets [0, 8] run past the end of the 4-byte data buffer");
  EXPECT_HAS(st_error(one(entry("a", "F32", "[3]", 0, 8), f32x2)),
             "tensor 'a': shape [3] F32 needs 12 bytes, data_offsets [0, 8] hold 8");
  EXPECT_HAS(st_error(one(entry("a", "F32", "[2]", 8, 0), f32x2)), "data_offsets [8, 0] end before they begin");
  EXPECT_HAS(st_error(one(entry("a", "F32", "[2]", 0, 8), f32x2 + "xyz")),
             "trailing bytes: the tensors cover 8 bytes, the data buffer has 11");
  EXPECT_HAS(st_error(safetensors_raw("{" + entry("a", "F32", "[2]", 0, 8) + ", " + entry("b", "F32", "[2]", 4, 12) + "}",
                                      f32x2 + f32x2.substr(0, 4))),
             "tensors 'a' [0, 8) and 'b' [4, 12) overlap in the data buffer");
  EXPECT_HAS(st_error(safetensors_raw("{" + entry("b", "F32", "[2]", 0, 8) + ", " + entry("a", "F32", "[2]", 0, 8) + "}",
                                      f32x2)),
             "overlap");
  EXPECT_HAS(st_error(safetensors_raw("{" + entry("a", "F32", "[2]", 0, 8) + ", " + entry("b", "F32", "[2]", 12, 20) + "}",
                                      f32x2 + "gap!" + f32x2)),
             "bytes [8, 12) of the data buffer belong to no tensor");
  EXPECT_HAS(st_error(one(entry("a", "F8_E8M0", "[2]", 0, 2), "ab")),
             "tensor 'a': unsupported dtype 'F8_E8M0' (expected one of F64, F32, F16, BF16, F8_E4M3, F8_E5M2, I8");
  EXPECT_HAS(st_error(one(entry("a", "f32", "[2]", 0, 8), f32x2)), "unsupported dtype 'f32'");
  // A tensor of a dtype densefeed does not read does not stop the others.
  const auto mixed = write("mixed.safetensors", safetensors({{"a", "F32", {2}, f32x2}, {"c", "C64", {1}, "12345678"}}));
  expect_values(read_all(TensorFile::open_safetensors(mixed, "a")), {1, 2});
  EXPECT_HAS(error_of(mixed, [&] { TensorFile::open_safetensors(mixed, "b"); }),
             "no tensor named 'b'; the file holds 'a', 'c'");
  EXPECT_HAS(error_of(mixed, [&] { TensorFile::open(mixed, ""); }),
             "a tensor name is needed to read a .safetensors file; it holds 'a', 'c'");
  EXPECT_HAS(error_of(mixed, [&] { TensorFile::open(mixed, "__metadata__"); }), "no tensor named '__metadata__'");
  EXPECT_HAS(st_error(safetensors_raw("{" + entry("a", "F32", "[2]", 0, 8) + ", " + entry("a", "F32", "[2]", 0, 8) + "}",
                                      f32x2)),
             "duplicate key 'a' in the header JSON");
  EXPECT_HAS(st_error(safetensors_raw("{\"a\": {\"dtype\": \"F32\", \"dtype\": \"F64\", \"shape\": [1], "
                                      "\"data_offsets\": [0, 8]}}",
                                      f32x2)),
             "duplicate key 'dtype'");
  EXPECT_HAS(st_error(one(entry("a", "F32", "[2]", 0, 8) + ", \"__metadata__\": {\"seed\": 42}", f32x2)),
             "'__metadata__' value of 'seed' must be a string, got 42");
  EXPECT_HAS(st_error(one(entry("a", "F32", "[2]", 0, 8) + ", \"__metadata__\": [1]", f32x2)),
             "'__metadata__' must be an object of string values");
  EXPECT_HAS(st_error(one(entry("a", "F32", "[-2]", 0, 8), f32x2)),
             "tensor 'a': shape must be an array of non-negative integers, got [-2]");
  EXPECT_HAS(st_error(one(entry("a", "F32", "[2.0]", 0, 8), f32x2)), "shape must be an array of non-negative integers");
  EXPECT_HAS(st_error(one(entry("a", "F32", "2", 0, 8), f32x2)), "shape must be an array");
  EXPECT_HAS(st_error(one(entry("a", "F32", "[4294967296, 4294967296]", 0, 8), f32x2)), "does not fit in 64 bits");
  EXPECT_HAS(st_error(one("\"a\": {\"dtype\": \"F32\", \"shape\": [2], \"data_offsets\": [0, 4, 8]}", f32x2)),
             "tensor 'a': data_offsets must be [begin, end], got [0,4,8]");
  EXPECT_HAS(st_error(one("\"a\": {\"dtype\": \"F32\", \"shape\": [2], \"data_offsets\": [-1, 8]}", f32x2)),
             "data_offsets[0] holds -1, expected a non-negative integer");
  EXPECT_HAS(st_error(one("\"a\": {\"dtype\": \"F32\", \"shape\": [2], \"data_offsets\": [0, 1e20]}", f32x2)),
             "data_offsets[1] holds 1e+20");
  EXPECT_HAS(st_error(one("\"a\": {\"dtype\": \"F32\", \"shape\": [2]}", f32x2)), "tensor 'a': missing 'data_offsets'");
  EXPECT_HAS(st_error(one("\"a\": {\"dtype\": 32, \"shape\": [2], \"data_offsets\": [0, 8]}", f32x2)),
             "dtype must be a string");
  EXPECT_HAS(st_error(one("\"a\": {\"dtype\": \"F32\", \"shape\": [2], \"data_offsets\": [0, 8], \"x\": 1}", f32x2)),
             "tensor 'a': unexpected key 'x'");
  EXPECT_HAS(st_error(one("\"a\": [1]", f32x2)), "tensor 'a': expected an object {dtype, shape, data_offsets}");
  EXPECT_HAS(st_error(safetensors_raw("{\"a\": " + std::string(100, '[') + std::string(100, ']') + "}", "")),
             "header JSON nests deeper than 16 levels");
}

// ---------------------------------------------------------------------------
// Files that are not tensor files at all.

TEST_F(TensorFileTest, NotAFile) {
  const auto missing = dir_ / "final_state.npy";
  EXPECT_HAS(error_of(missing, [&] { TensorFile::open(missing, "final_state"); }),
             "missing: no such file (expected a .npy file)");
  std::filesystem::create_directories(dir_ / "sub.npy");
  EXPECT_HAS(error_of(dir_ / "sub.npy", [&] { TensorFile::open_npy(dir_ / "sub.npy"); }),
             "is a directory, expected a .npy file");
  std::filesystem::create_directories(dir_ / "sub.safetensors");
  EXPECT_HAS(error_of(dir_ / "sub.safetensors", [&] { TensorFile::open(dir_ / "sub.safetensors", "a"); }),
             "is a directory, expected a .safetensors file");
  const auto empty_npy = write("empty.npy", "");
  EXPECT_HAS(error_of(empty_npy, [&] { TensorFile::open_npy(empty_npy); }), "empty file (0 bytes), expected a .npy file");
  const auto empty_st = write("empty.safetensors", "");
  EXPECT_HAS(error_of(empty_st, [&] { TensorFile::open_safetensors(empty_st, "a"); }), "empty file (0 bytes)");
  // A FIFO must not block the reader.
  const auto fifo = dir_ / "fifo.npy";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  EXPECT_HAS(error_of(fifo, [&] { TensorFile::open_npy(fifo); }), "is not a regular file");
  const auto text = write("out.txt", "1 2 3");
  EXPECT_HAS(error_of(text, [&] { TensorFile::open(text, "out"); }),
             "unknown tensor file type '.txt': expected NAME.npy or a .safetensors file");
}

TEST_F(TensorFileTest, MovableAndReadableAfterMove) {
  std::vector<TensorFile> files;
  for (int i = 0; i < 8; ++i) {
    const auto path = write("m" + std::to_string(i) + ".npy", npy(1, npy_dict("<i4", "(2,)"), bytes_of<std::int32_t>({i, -i})));
    files.push_back(TensorFile::open(path, ""));
  }
  for (int i = 0; i < 8; ++i) expect_values(read_all(files[i]), {double(i), double(-i)});
  TensorFile moved = std::move(files[3]);
  expect_values(read_all(moved), {3.0, -3.0});
  moved = std::move(files[5]);
  expect_values(read_all(moved), {5.0, -5.0});
  EXPECT_EQ(moved.path(), dir_ / "m5.npy");
  EXPECT_EQ(files[5].size(), 0u);  // moved-from: empty
  EXPECT_THROW(files[5].read_doubles(0, 1, nullptr), std::out_of_range);
}

TEST_F(TensorFileTest, ReadOutOfRangeThrows) {
  const auto f = open_npy(npy(1, npy_dict("<f4", "(2, 2)"), bytes_of<float>({1, 2, 3, 4})));
  std::vector<double> out(5);
  EXPECT_THROW(f.read_doubles(0, 5, out.data()), std::out_of_range);
  EXPECT_THROW(f.read_doubles(4, 1, out.data()), std::out_of_range);
  EXPECT_THROW(f.read_doubles(2, std::numeric_limits<std::size_t>::max(), out.data()), std::out_of_range);
  f.read_doubles(4, 0, out.data());
}

TEST_F(TensorFileTest, BlocksMatchOneRead) {
  // Blocks of any size give what one read gives, for the vectorised path and
  // the byte-swapped one.
  std::vector<float> values(1000);
  for (std::size_t i = 0; i < values.size(); ++i) values[i] = std::ldexp(static_cast<float>(i) - 500.5f, int(i % 40) - 20);
  for (const bool big : {false, true}) {
    std::string data;
    for (const float v : values) data += bytes_of<float>({v}, big);
    const auto f = open_npy(npy(1, npy_dict(big ? ">f4" : "<f4", "(1000,)"), data));
    const auto all = read_all(f);
    for (std::size_t i = 0; i < values.size(); ++i) ASSERT_EQ(all[i], static_cast<double>(values[i]));
    std::vector<double> blocks(values.size());
    for (std::size_t b = 0; b < values.size(); b += 64) f.read_doubles(b, std::min<std::size_t>(64, 1000 - b), blocks.data() + b);
    EXPECT_EQ(blocks, all);
  }
}

// Every prefix of a valid file, and valid files with any byte changed, either
// open or give a TensorFileError; nothing else, and never a crash.
TEST_F(TensorFileTest, DamagedFilesNeverCrash) {
  const std::string good_npy = npy(1, npy_dict("<f4", "(2, 3)", true), bytes_of<float>({1, 2, 3, 4, 5, 6}));
  const std::string good_st = safetensors({{"a", "F16", {2, 2}, "abcdefgh"}, {"b", "U8", {3}, "xyz"}}, {{"k", "v"}});
  const std::pair<std::string, std::string> files[] = {{"d.npy", good_npy}, {"d.safetensors", good_st}};
  const auto attempt = [&](const std::string& name, const std::string& bytes) {
    const auto path = write(name, bytes);
    try {
      const auto f = TensorFile::open(path, "a", std::nullopt);
      read_all(f);
      return true;
    } catch (const TensorFileError& e) {
      EXPECT_EQ(std::string(e.what()).rfind(path.string(), 0), 0u);
      return false;
    }
  };
  for (const auto& [name, good] : files) {
    ASSERT_TRUE(attempt(name, good)) << name;
    for (std::size_t n = 0; n < good.size(); ++n) EXPECT_FALSE(attempt(name, good.substr(0, n))) << name << " prefix " << n;
    const std::string replacements = std::string("\0\x01\x7f\x80\xff", 5) + "0 9,:()[]{}'\"\\eL-";
    for (std::size_t i = 0; i < good.size(); ++i)
      for (const char r : replacements) {
        std::string damaged = good;
        damaged[i] = r;
        attempt(name, damaged);
      }
  }
}

}  // namespace
}  // namespace densefeed
