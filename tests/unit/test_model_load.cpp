// load_model: a file, a folder (config.json + hf_quant_config.json), a preset, or an error.
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "moetune/error.hpp"
#include "moetune/model.hpp"
#include "model_test_util.hpp"

namespace moetune {
namespace {

using testing::input_error;
using testing::contains;
namespace fs = std::filesystem;
using nlohmann::json;

const std::string kConfigs = std::string(MOETUNE_TEST_DATA) + "/model_configs/";

// A fresh folder per test, removed afterwards.
class LoadModel : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("moetune_model_" + std::to_string(::getpid()) + "_" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  fs::path write(const std::string& name, const std::string& text) {
    const fs::path p = dir_ / name;
    std::ofstream(p) << text;
    return p;
  }
  fs::path copy_config(const std::string& file, const std::string& name = "config.json") {
    fs::copy_file(kConfigs + file, dir_ / name);
    return dir_ / name;
  }

  fs::path dir_;
};

TEST_F(LoadModel, File) {
  const MoeShape s = load_model(kConfigs + "mixtral-8x7b-v0.1.json", {});
  EXPECT_EQ(s.E, 8);
  EXPECT_EQ(s.N, 14336);
  EXPECT_EQ(s.source, kConfigs + "mixtral-8x7b-v0.1.json");
}

TEST_F(LoadModel, FolderReadsConfigJson) {
  copy_config("qwen3-30b-a3b.json");
  const MoeShape s = load_model(dir_.string(), {});
  EXPECT_EQ(s.E, 128);
  EXPECT_EQ(s.dtype, Dtype::bf16);
  EXPECT_EQ(s.source, (dir_ / "config.json").string());
}

TEST_F(LoadModel, FolderWithoutConfigJson) {
  const InputError e = input_error([&] { load_model(dir_.string(), {}); });
  EXPECT_EQ(e.field(), "model");
  EXPECT_TRUE(contains(e.what(), "config.json"));
}

// Only regular files are read: a config.json that is a folder was "invalid JSON ... unexpected
// end of input"; a FIFO blocked forever; /dev/zero grew memory without bound.
TEST_F(LoadModel, NotARegularFileIsSaidSo) {
  fs::create_directory(dir_ / "config.json");
  const InputError folder = input_error([&] { load_model(dir_.string(), {}); });
  EXPECT_EQ(folder.field(), "model");
  EXPECT_EQ(folder.value(), (dir_ / "config.json").string());
  EXPECT_EQ(folder.reason(), "a folder, not a regular file");

  const fs::path fifo = dir_ / "fifo.json";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  const InputError f = input_error([&] { load_model(fifo.string(), {}); });
  EXPECT_EQ(f.field(), "model");
  EXPECT_EQ(f.value(), fifo.string());
  EXPECT_TRUE(contains(f.reason(), "not a regular file")) << f.reason();

  if (fs::exists("/dev/zero")) {
    EXPECT_TRUE(contains(input_error([] { load_model("/dev/zero", {}); }).what(),
                         "model=/dev/zero: not a regular file"));
  }
  // hf_quant_config.json is read the same way.
  fs::remove(dir_ / "config.json");
  copy_config("qwen3-30b-a3b.json");
  fs::create_directory(dir_ / "hf_quant_config.json");
  EXPECT_EQ(input_error([&] { load_model(dir_.string(), {}); }).value(),
            (dir_ / "hf_quant_config.json").string());
}

TEST_F(LoadModel, HfQuantConfigFp8IsPerTensor) {
  copy_config("qwen3-30b-a3b.json");
  write("hf_quant_config.json",
        R"({"producer": {"name": "modelopt"}, "quantization": {"quant_algo": "FP8",
            "kv_cache_quant_algo": null}})");
  const MoeShape s = load_model(dir_.string(), {});
  EXPECT_EQ(s.dtype, Dtype::fp8_w8a8);
  EXPECT_FALSE(s.block_shape.has_value());
  // Also when the config file itself is named.
  EXPECT_EQ(load_model((dir_ / "config.json").string(), {}).dtype, Dtype::fp8_w8a8);
}

TEST_F(LoadModel, HfQuantConfigNvfp4IsRefusedByName) {
  copy_config("qwen3-30b-a3b.json");
  write("hf_quant_config.json", R"({"quantization": {"quant_algo": "NVFP4", "group_size": 16}})");
  const InputError e = input_error([&] { load_model(dir_.string(), {}); });
  EXPECT_EQ(e.field(), "quantization");
  EXPECT_EQ(e.value(), "NVFP4");
  EXPECT_TRUE(contains(e.what(), "--dtype bf16"));
  ModelOptions bf16;
  bf16.dtype = "bf16";
  EXPECT_EQ(load_model(dir_.string(), bf16).dtype, Dtype::bf16);
}

TEST_F(LoadModel, ConfigQuantizationWinsOverHfQuantConfig) {
  copy_config("qwen3-30b-a3b-fp8.json");
  write("hf_quant_config.json", R"({"quantization": {"quant_algo": "NVFP4"}})");
  const MoeShape s = load_model(dir_.string(), {});
  EXPECT_EQ(s.dtype, Dtype::fp8_w8a8);
  EXPECT_TRUE(s.block_shape.has_value());
}

TEST_F(LoadModel, BadHfQuantConfig) {
  copy_config("qwen3-30b-a3b.json");
  write("hf_quant_config.json", R"({"producer": {}})");
  EXPECT_TRUE(
      contains(input_error([&] { load_model(dir_.string(), {}); }).what(), "hf_quant_config.json"));
  write("hf_quant_config.json", "{not json");
  EXPECT_TRUE(contains(input_error([&] { load_model(dir_.string(), {}); }).what(), "invalid JSON"));
}

TEST_F(LoadModel, InvalidJsonNamesTheFile) {
  const fs::path p = write("broken.json", R"({"num_experts": 8,)");
  const InputError e = input_error([&] { load_model(p.string(), {}); });
  EXPECT_EQ(e.field(), "model");
  EXPECT_EQ(e.value(), p.string());
  EXPECT_TRUE(contains(e.what(), "invalid JSON"));
  const fs::path empty = write("empty.json", "");
  EXPECT_EQ(input_error([&] { load_model(empty.string(), {}); }).value(), empty.string());
}

// A --model naming nothing: a path gets no preset list, a preset's start names the presets it
// starts, anything else gets the list.
TEST_F(LoadModel, MissingModelSaysWhatItLooksLike) {
  const std::string missing_dir = (dir_ / "no_such_dir").string() + "/";
  const InputError path = input_error([&] { load_model(missing_dir, {}); });
  EXPECT_EQ(path.field(), "model");
  EXPECT_TRUE(contains(path.what(), "no such file or folder")) << path.what();
  EXPECT_FALSE(contains(path.what(), "presets")) << path.what();
  EXPECT_FALSE(contains(input_error([&] { load_model("my_model.json", {}); }).what(), "presets"));
  EXPECT_FALSE(contains(input_error([&] { load_model("MY_MODEL.JSON", {}); }).what(), "presets"));

  const InputError start = input_error([&] { load_model("Qwen3.5-122b", {}); });
  EXPECT_TRUE(contains(start.what(),
                       "did you mean qwen3.5-122b-a10b or qwen3.5-122b-a10b-fp8?"))
      << start.what();

  // Near misses: a preset the name starts with, two edits, '_' for '-'.
  for (const char* typed : {"deepseek-v3.1", "deepseek-v3-0324", "deepsek-v3", "DeepSeek_V3"}) {
    const InputError near = input_error([&] { load_model(typed, {}); });
    EXPECT_TRUE(contains(near.what(), "did you mean deepseek-v3?")) << typed << ": " << near.what();
  }
  const InputError other = input_error([&] { load_model("zzz", {}); });
  EXPECT_TRUE(contains(other.what(), "presets: dbrx-instruct, deepseek-r1")) << other.what();

  // An org/name id: not downloaded, and the preset its name is.
  const InputError hub = input_error([&] { load_model("deepseek-ai/DeepSeek-V3", {}); });
  EXPECT_TRUE(contains(hub.what(), "Hugging Face ids are not downloaded")) << hub.what();
  EXPECT_TRUE(contains(hub.what(), "a preset: deepseek-v3")) << hub.what();
  EXPECT_TRUE(contains(input_error([&] { load_model("Qwen/Qwen3-30B", {}); }).what(),
                       "; presets: qwen3-30b-a3b or qwen3-30b-a3b-fp8"));
  const InputError slash = input_error([&] { load_model("qwen3-30b-a3b/", {}); });
  EXPECT_FALSE(contains(slash.what(), "Hugging Face")) << slash.what();
  EXPECT_TRUE(contains(slash.what(), "a preset: qwen3-30b-a3b")) << slash.what();
  EXPECT_TRUE(contains(input_error([&] { load_model("", {}); }).what(), "empty"));
}

// nlohmann keeps the last of two equal keys; a config.json with hidden_size twice is refused,
// and so is a key repeated in a nested object. The same key in two sibling objects is fine.
TEST_F(LoadModel, DuplicateKeysAreInvalidJson) {
  const fs::path p = write("dup.json", R"({"num_experts": 8, "num_experts_per_tok": 2,
    "moe_intermediate_size": 256, "hidden_size": 512, "hidden_size": 1024})");
  const InputError e = input_error([&] { load_model(p.string(), {}); });
  EXPECT_EQ(e.field(), "model");
  EXPECT_EQ(e.value(), p.string());
  EXPECT_TRUE(contains(e.what(), "invalid JSON: duplicate key \"hidden_size\"")) << e.what();
  const fs::path nested = write("nested.json", R"({"text_config": {"num_experts": 8,
    "num_experts": 16, "num_experts_per_tok": 2, "moe_intermediate_size": 256,
    "hidden_size": 512}})");
  EXPECT_TRUE(contains(input_error([&] { load_model(nested.string(), {}); }).what(),
                       "duplicate key \"num_experts\""));
  const fs::path siblings = write("siblings.json", R"({"num_experts": 8, "num_experts_per_tok": 2,
    "moe_intermediate_size": 256, "hidden_size": 512, "a": {"x": 1}, "b": {"x": 2}})");
  EXPECT_EQ(load_model(siblings.string(), {}).K, 512);
}

TEST_F(LoadModel, DenseFileNamesTheFile) {
  const fs::path p = write("dense.json", R"({"hidden_size": 4096, "num_hidden_layers": 32})");
  const InputError e = input_error([&] { load_model(p.string(), {}); });
  EXPECT_EQ(e.value(), p.string());
  EXPECT_TRUE(contains(e.what(), "not a MoE model"));
}

TEST_F(LoadModel, UnknownNameListsPresets) {
  const InputError e = input_error([] { load_model("no-such-model-xyz", {}); });
  EXPECT_EQ(e.field(), "model");
  EXPECT_EQ(e.value(), "no-such-model-xyz");
  EXPECT_TRUE(contains(e.what(), "deepseek-v3"));
  EXPECT_TRUE(contains(e.what(), "qwen3.5-122b-a10b-fp8"));
}

TEST_F(LoadModel, ExistingPathWinsOverPresetName) {
  copy_config("mixtral-8x7b-v0.1.json", "deepseek-v3");
  const fs::path old = fs::current_path();
  fs::current_path(dir_);
  const MoeShape s = load_model("deepseek-v3", {});
  fs::current_path(old);
  EXPECT_EQ(s.E, 8);  // the Mixtral file, not the preset
  EXPECT_EQ(load_model("deepseek-v3", {}).E, 256);
}

}  // namespace
}  // namespace moetune
