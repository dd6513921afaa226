// safetensors: the file format for named tensors that most of the ecosystem reads and writes.
//
//   bytes 0..7       N, the header length: a little-endian uint64
//   bytes 8..8+N-1   a JSON object (UTF-8), padded with spaces:
//                      {"__metadata__": {"step": "1200"},                 <- optional, string -> string
//                       "wte": {"dtype": "F32", "shape": [50, 16], "data_offsets": [0, 3200]}, ...}
//   bytes 8+N..      the data area: each tensor's elements, row-major and little-endian, at
//                    [begin, end) relative to the start of the data area. The tensors must cover
//                    the area exactly: no gaps, no overlaps, in any order.
// dtypes: "F64", "F32", "BF16", "F16", "I64", "I32".
//
// There is no code in the format, only a JSON header and raw bytes, so loading an untrusted file is
// safe as long as the header is validated — and load_safetensors validates all of it, throwing
// brigade::Error (never crashing) on a malformed file.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <string>

#include "core/tensor.h"

namespace brigade {

struct Safetensors {
  std::map<std::string, Tensor> tensors;
  std::map<std::string, std::string> metadata;
};

// Writes `tensors` (any dtype, shape, layout or device: each is written contiguous) and `metadata`
// to `path`, atomically: the bytes go to a temporary file in the same directory, which is flushed to
// disk (fsync) and then renamed over `path`. A reader sees the old file or the complete new one,
// never a torn write; on any error the temporary file is removed, `path` is untouched, and Error is
// thrown. Tensor names must be non-empty UTF-8 and not "__metadata__".
void save_safetensors(const std::string& path, const std::map<std::string, Tensor>& tensors,
                      const std::map<std::string, std::string>& metadata = {});

// Reads a safetensors file into contiguous CPU tensors. Every part of the file is checked (header
// length, JSON syntax, dtypes, shapes, offsets, exact coverage of the data area) before any data is
// read; problems throw Error naming the file and what is wrong.
Safetensors load_safetensors(const std::string& path);

// The same, but reads the data of only the tensors `wanted` names: the header is read and checked
// whole, then only those tensors' byte ranges. The others are absent from the result, and so are
// names `wanted` accepts that the file does not hold (the caller says what is missing). For a reader
// that needs a part of a large file: a pipeline rank resuming its own layers from a shard.
Safetensors load_safetensors(const std::string& path, const std::function<bool(const std::string&)>& wanted);

// A file's header alone: each tensor's dtype and shape, and the metadata, checked as load_safetensors
// checks them; no tensor data is read. What a reader needs to size a model before it reads its part.
struct SafetensorsHeader {
  struct TensorInfo {
    DType dtype = DType::f32;
    Shape shape;
  };
  std::map<std::string, TensorInfo> tensors;
  std::map<std::string, std::string> metadata;
};
SafetensorsHeader read_safetensors_header(const std::string& path);

namespace testing {
// Test hook: the next save_safetensors fails (as if the disk were full) after writing `bytes` bytes
// of its temporary file. A negative value disarms it.
void fail_next_save_after(int64_t bytes);
}  // namespace testing

}  // namespace brigade
