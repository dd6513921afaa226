#include "bench_step/command.h"

#include <algorithm>
#include <chrono>
#include <ctime>
#include <optional>
#include <ostream>

#include "bench/environment.h"
#include "bench/stats.h"
#include "bench_step/launches.h"
#include "bench_step/memory_floor.h"
#include "brigade.h"
#include "core/atomic_file.h"
#include "core/device_memory.h"
#include "core/format.h"
#include "core/json.h"
#include "core/stream.h"
#include "tools/cli/command.h"
#include "tools/cli/device_choice.h"
#include "tools/cli/gpt_flags.h"
#include "tools/cli/matmul_choice.h"
#include "tools/cli/precision_choice.h"

namespace brigade::bench_step {
namespace {

struct Options {
  int64_t layers = 2, embd = 64, heads = 4, seq = 24, batch = 32, vocab = 16;
  int64_t steps = 20, warmup = 3, threads = 0;
  double clip = 0;
  Device device = Device::cpu();
  DType precision = DType::f32;
  std::string attention = "fused";
  ops::MatmulBackend matmul = ops::MatmulBackend::automatic;
  bool cuda_graph = false;
  bool launch_names = false;
  bool memory = false;
  std::string json_path;
};

using Parsed = cli::Parsed<Options>;

std::vector<cli::Flag<Options>> flags() {
  auto named = [](const char* name, int64_t Options::*field, int64_t min) {
    return [name, field, min](Options& o, const std::string& v) { o.*field = cli::parse_int(name, v, min); };
  };
  auto show = [](int64_t Options::*field) { return [field](const Options& o) { return std::to_string(o.*field); }; };
  auto word = [](std::string Options::*field, std::vector<std::string> allowed, const char* name) {
    return [field, allowed, name](Options& o, const std::string& v) {
      if (std::find(allowed.begin(), allowed.end(), v) == allowed.end()) {
        std::string choices;
        for (const std::string& a : allowed) choices += (choices.empty() ? "" : ", ") + a;
        throw cli::UsageError(std::string(name) + ": expected one of " + choices + ", got '" + v + "'");
      }
      o.*field = v;
    };
  };
  auto text = [](std::string Options::*field) { return [field](const Options& o) { return o.*field; }; };
  return {
      {"--layers", "N", "transformer blocks", named("--layers", &Options::layers, 1), show(&Options::layers)},
      {"--embd", "C", "model width", named("--embd", &Options::embd, 1), show(&Options::embd)},
      {"--heads", "H", "attention heads (must divide --embd)", named("--heads", &Options::heads, 1),
       show(&Options::heads)},
      {"--seq", "T", "tokens per sequence", named("--seq", &Options::seq, 1), show(&Options::seq)},
      {"--batch", "B", "sequences per step", named("--batch", &Options::batch, 1), show(&Options::batch)},
      {"--vocab", "V", "vocabulary size", named("--vocab", &Options::vocab, 2), show(&Options::vocab)},
      {"--steps", "N", "timed steps (the report gives their median)", named("--steps", &Options::steps, 1),
       show(&Options::steps)},
      {"--warmup", "K", "untimed steps first", named("--warmup", &Options::warmup, 0), show(&Options::warmup)},
      {"--threads", "N", "CPU worker threads (0: all cores, or BRIGADE_NUM_THREADS)",
       named("--threads", &Options::threads, 0), show(&Options::threads)},
      {"--device", "DEV", "cpu or cuda",
       [](Options& o, const std::string& v) { o.device = *cli::parse_device("--device", v, false); },
       [](const Options& o) { return o.device.str(); }},
      {"--precision", "P", "f32 or bf16 compute (weights stay f32)",
       [](Options& o, const std::string& v) { o.precision = *cli::parse_precision("--precision", v, false); },
       [](const Options& o) { return std::string(dtype_name(o.precision)); }},
      {"--attention", "HOW", "fused (one kernel each way) or composed (separate ops)",
       word(&Options::attention, {"fused", "composed"}, "--attention"), text(&Options::attention)},
      {"--matmul", "GEMM", cli::matmul_choices() + ": the GEMM behind GPU matmuls (as brigade train's --matmul)",
       [](Options& o, const std::string& v) { o.matmul = cli::matmul_backend_of(v); },
       [](const Options& o) { return cli::matmul_choice_name(o.matmul); }},
      {"--clip", "NORM", "clip the gradients' global norm to NORM, as brigade train --clip does (0: off)",
       [](Options& o, const std::string& v) { o.clip = cli::parse_number("--clip", v, 0); },
       [](const Options& o) { return cli::show_number(o.clip); }},
      {"--cuda-graph", "", "replay the whole step (forward, loss, backward, clipping, AdamW) as one CUDA graph, "
       "captured after the warm-up",
       [](Options& o, const std::string&) { o.cuda_graph = true; },
       [](const Options& o) { return std::string(o.cuda_graph ? "on" : "off"); }},
      {"--launch-names", "", "also list the launches per step by kernel or call name (GPU emulator builds count them)",
       [](Options& o, const std::string&) { o.launch_names = true; },
       [](const Options& o) { return std::string(o.launch_names ? "on" : "off"); }},
      {"--memory", "", "also print the analytic floor of the step's memory term by term beside the measured peak",
       [](Options& o, const std::string&) { o.memory = true; },
       [](const Options& o) { return std::string(o.memory ? "on" : "off"); }},
      cli::text_flag("--json", "FILE", "also write the numbers as JSON (atomically)", &Options::json_path),
  };
}

std::string usage() {
  return "usage: brigade bench step [flags]\n\n"
         "Times training steps of a GPT on one device — forward, cross-entropy loss, backward, AdamW — on\n"
         "random tokens, after untimed warm-up steps, and reports the median step time, tokens/s and the\n"
         "peak memory its tensors held, against the least a step must hold (--memory: term by term).\n"
         "bench/compare_pytorch.py runs the same models in PyTorch beside it.\n\n"
         "example: brigade bench step --layers 4 --embd 256 --heads 4 --seq 128 --batch 8 --threads 1\n\n"
         "flags:\n" +
         cli::flag_lines(flags());
}

Parsed parse(const std::vector<std::string>& args) {
  Parsed p;
  cli::parse_flags(args, flags(), p.options, p.help);
  const Options& o = p.options;
  if (o.embd % o.heads != 0)
    throw cli::UsageError("--heads " + std::to_string(o.heads) + " must divide --embd " + std::to_string(o.embd));
  if (o.cuda_graph && !o.device.is_cuda()) throw cli::UsageError("--cuda-graph needs --device cuda");
  const std::string matmul = cli::matmul_choice_name(o.matmul);
  if (o.device.is_cuda() && !ops::matmul_backend_available(o.matmul, o.device))
    throw cli::UsageError("--matmul " + matmul + ": " + o.device.str() + " cannot run it");
  if (o.precision == DType::f32 && (o.matmul == ops::MatmulBackend::tensor_core || o.matmul == ops::MatmulBackend::hopper))
    throw cli::UsageError("--matmul " + matmul + " has kernels for bf16 and f16 only; use --precision bf16");
  if (o.cuda_graph && o.warmup < 1)
    throw cli::UsageError("--cuda-graph needs --warmup 1 or more: the graph is captured after an eager step");
  return p;
}

// CPU time used so far by every thread of this process, in milliseconds.
double process_cpu_ms() {
  timespec t{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
  return double(t.tv_sec) * 1e3 + double(t.tv_nsec) / 1e6;
}

// Bytes tensors hold on the device: the allocator's counters.
size_t memory_in_use(Device device, bool peak) {
  if (device.is_cuda()) {
    const CudaMemoryStats s = cuda_memory_stats(device);
    return peak ? s.peak_allocated : s.allocated;
  }
  const HostMemoryStats s = host_memory_stats();
  return peak ? s.peak_allocated : s.allocated;
}

// One more step, after the timed ones, measured two ways: the allocator's peak of bytes held by
// tensors, and on a GPU the runtime's own count (cudaMemGetInfo) of what the process holds once the
// allocator's cache was emptied before the step — its rise is every block the step made the
// allocator obtain, an outside check of the first number (the two differ by rounding and by blocks
// freed and cached at one size while another is wanted).
struct StepMemory {
  MemoryFloor floor;
  size_t peak = 0;             // the allocator's high-water mark over the step
  // GPU only: the runtime's count after the step, less what it held before besides tensors (its count
  // then, less the allocator's bytes in use): every block held for tensors once the step is done —
  // the weights and state it kept, and what the step made the allocator obtain.
  size_t runtime_bytes = 0;
  bool replayed = false;  // the step was a CUDA graph's replay, whose memory was obtained at capture
};

// cuBLAS's workspace when the step's GEMMs may run there (kernels/cuda/gemm_cublas.cpp's size).
size_t cublas_workspace(const Options& o, Device device) {
  const bool cublas = o.matmul == ops::MatmulBackend::automatic || o.matmul == ops::MatmulBackend::cublas;
  return device.is_cuda() && cublas ? size_t(32) << 20 : 0;
}

template <class Step>
StepMemory measure_step_memory(const Options& o, Device device, nn::GPT& model, Step& step) {
  StepMemory m;
  m.floor = step_memory_floor({.layers = o.layers, .embd = o.embd, .heads = o.heads, .seq = o.seq, .batch = o.batch,
                               .vocab = o.vocab, .block = o.seq, .parameters = model.parameter_count(),
                               .compute = o.precision, .gemm_workspace = cublas_workspace(o, device)});
  size_t runtime_before = 0;
  if (device.is_cuda()) {
    cuda_empty_cache();
    const size_t total = cuda_runtime_bytes_in_use(device), tensors = memory_in_use(device, false);
    runtime_before = total > tensors ? total - tensors : 0;
    reset_peak_memory(device);
  } else {
    reset_host_peak_memory();
  }
  step();
  m.peak = memory_in_use(device, true);
  if (device.is_cuda()) {
    // Another process on the GPU may free memory in between: never a wrapped-around count.
    const size_t after = cuda_runtime_bytes_in_use(device);
    m.runtime_bytes = after > runtime_before ? after - runtime_before : 0;
  }
  m.replayed = o.cuda_graph;
  return m;
}

std::string mib(size_t bytes) { return format_fixed(double(bytes) / (1 << 20), 2) + " MiB"; }

void print_step_memory(std::ostream& out, const StepMemory& m, bool terms) {
  const size_t floor = m.floor.bytes();
  out << "memory floor: " << mib(floor) << " (the least a step must hold); measured peak "
      << format_fixed(double(m.peak) / double(floor), 3) << "x of it";
  if (m.runtime_bytes > 0) out << "; the runtime counted " << mib(m.runtime_bytes) << " held for tensors after it";
  if (m.replayed) out << " (a graph replay: its blocks were obtained at capture and stay with the graph)";
  out << "\n";
  if (!terms) return;
  out << "  at the start of the backward (" << mib(m.floor.backward_start_bytes) << "):\n";
  for (const MemoryTerm& t : m.floor.backward_start) out << "    " << mib(t.bytes) << "  " << t.what << "\n";
  out << "  at AdamW's update: " << mib(m.floor.optimizer_step_bytes)
      << " (weights, gradients, m and v, f32)\n";
}

std::string step_memory_json(const StepMemory& m, const std::string& indent) {
  std::string terms;
  for (const MemoryTerm& t : m.floor.backward_start)
    terms += std::string(terms.empty() ? "" : ", ") + "{\"what\": " + json_string(t.what) +
             ", \"bytes\": " + std::to_string(t.bytes) + "}";
  return indent + "\"memory\": {\"peak_bytes\": " + std::to_string(m.peak) +
         ", \"runtime_bytes\": " + std::to_string(m.runtime_bytes) + ", \"floor_bytes\": " +
         std::to_string(m.floor.bytes()) + ", \"peak_over_floor\": " +
         json_number(double(m.peak) / double(m.floor.bytes())) + ",\n" + indent + "  \"backward_start_terms\": [" +
         terms + "],\n" + indent + "  \"optimizer_step_bytes\": " + std::to_string(m.floor.optimizer_step_bytes) + "}\n";
}

int run(const Options& o, std::ostream& out) {
  if (o.threads > 0) set_num_threads(int(o.threads));
  const Device device = cli::usable_device(o.device);
  nn::GPTConfig c = cli::gpt_config({.layers = o.layers, .heads = o.heads, .embd = o.embd, .vocab = o.vocab, .context = o.seq},
                                    device, o.precision, 1);
  c.fused_attention = o.attention == "fused";
  const cli::ScopedMatmulBackend matmul(o.matmul);
  nn::GPT model(c);
  optim::AdamW optimizer(model.named_parameters(), optim::AdamWOptions{.lr = 1e-4});
  Generator gen(2);
  const auto tokens = [&] {
    return to_dtype(uniform({o.batch, o.seq}, 0, double(o.vocab) - 0.5, DType::f32, Device::cpu(), &gen), DType::i64)
        .to(device);
  };
  const Tensor idx = tokens(), targets = tokens();
  optimizer.set_capturable(o.cuda_graph);
  const auto eager_step = [&] {
    optimizer.zero_grad();
    Tape tape;
    const Tensor loss = tape.record([&] { return model.loss(idx, targets); });
    tape.backward(loss);
    if (o.clip > 0) (void)optim::clip_grad_norm_on_device(optimizer.parameters(), o.clip);  // no wait for the norm
    optimizer.step();
    return loss.detach();
  };
  std::optional<optim::CapturedStep> captured;  // set after the warm-up with --cuda-graph
  const auto step = [&] {
    (void)(captured ? captured->run() : eager_step());
    if (device.is_cuda()) device_synchronize(device);
  };
  for (int64_t i = 0; i < o.warmup; ++i) step();
  if (o.cuda_graph) {
    captured.emplace(optimizer, eager_step);
    step();  // captures, then replays: one more warm-up step
  }
  const size_t resident = memory_in_use(device, false);  // weights, gradients' absence, optimizer state
  if (device.is_cuda()) reset_peak_memory(device);
  else reset_host_peak_memory();
  // Wall time is what a user waits for; the process's CPU time (all its threads) is what the step
  // cost the machine, and on a shared machine it barely moves when other processes take turns on
  // the cores — with one thread, the steadier number to compare.
  std::vector<double> ms, cpu_ms;
  start_counting_launches();
  for (int64_t i = 0; i < o.steps; ++i) {
    const auto start = std::chrono::steady_clock::now();
    const double cpu_start = process_cpu_ms();
    step();
    cpu_ms.push_back(process_cpu_ms() - cpu_start);
    ms.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count());
  }
  const bench::Summary s = bench::summarize(ms), cpu = bench::summarize(cpu_ms);
  const double tokens_per_s = double(o.batch * o.seq) / (s.median / 1e3);
  const size_t peak = memory_in_use(device, true);
  const std::optional<StepLaunches> launches =
      launches_counted() ? std::optional(launches_per_step(o.steps)) : std::nullopt;
  const StepMemory memory = measure_step_memory(o, device, model, step);

  out << "model: GPT, " << o.layers << " layers, " << o.embd << " wide, " << o.heads << " heads, vocab " << o.vocab
      << ", " << model.parameter_count() << " parameters; " << o.attention << " attention"
      << (o.matmul != ops::MatmulBackend::automatic ? ", matmul " + cli::matmul_choice_name(o.matmul) : std::string())
      << (o.clip > 0 ? "; gradients clipped to norm " + cli::show_number(o.clip) : std::string())
      << (captured ? "; the whole step as one CUDA graph of " + std::to_string(captured->graph().operations()) +
                         " operations"
                   : std::string()) << "\n";
  out << "step: " << o.batch << " x " << o.seq << " tokens on " << device.str() << ", " << dtype_name(o.precision)
      << (device.is_cpu() ? ", " + std::to_string(num_threads()) + " threads" : "") << "\n";
  out << "step time: median " << format_fixed(s.median, 3) << " ms (min " << format_fixed(s.min, 3) << ", max "
      << format_fixed(s.max, 3) << ") over " << s.count << " steps after " << o.warmup << " warm-up\n";
  out << "CPU time: median " << format_fixed(cpu.median, 3) << " ms per step (all threads of the process)\n";
  out << "tokens/s: " << format_fixed(tokens_per_s, 0) << "\n";
  out << "peak memory: " << format_fixed(double(peak) / (1 << 20), 2) << " MiB held by tensors ("
      << format_fixed(double(resident) / (1 << 20), 2) << " MiB between steps)\n";
  if (launches) {
    out << launches_line(*launches) << "\n";
    if (o.launch_names)
      for (const auto& [name, count] : launches->by_name) out << "  " << format_fixed(count, 1) << "  " << name << "\n";
  }
  print_step_memory(out, memory, o.memory);
  if (!o.json_path.empty()) {
    std::string j = "{\n";
    j += "  \"benchmark\": \"brigade bench step\",\n";
    j += bench::environment_json(bench::describe_environment(device), "  ");
    j += "  \"config\": {\"layers\": " + std::to_string(o.layers) + ", \"embd\": " + std::to_string(o.embd) +
         ", \"heads\": " + std::to_string(o.heads) + ", \"seq\": " + std::to_string(o.seq) +
         ", \"batch\": " + std::to_string(o.batch) + ", \"vocab\": " + std::to_string(o.vocab) +
         ", \"device\": " + json_string(device.str()) + ", \"precision\": " + json_string(dtype_name(o.precision)) +
         ", \"attention\": " + json_string(o.attention) + ", \"matmul\": " + json_string(cli::matmul_choice_name(o.matmul)) +
         ", \"cuda_graph\": " + std::string(o.cuda_graph ? "true" : "false") + ", \"clip\": " + json_number(o.clip) + ", \"threads\": " + std::to_string(num_threads()) + "},\n";
    j += "  \"parameters\": " + std::to_string(model.parameter_count()) + ",\n";
    if (captured) j += "  \"graph_operations\": " + std::to_string(captured->graph().operations()) + ",\n";
    j += "  \"step_ms\": {\"median\": " + json_number(s.median) + ", \"min\": " + json_number(s.min) +
         ", \"max\": " + json_number(s.max) + ", \"steps\": " + std::to_string(s.count) + "},\n";
    j += "  \"cpu_ms\": {\"median\": " + json_number(cpu.median) + ", \"min\": " + json_number(cpu.min) + "},\n";
    j += "  \"tokens_per_s\": " + json_number(tokens_per_s) + ",\n";
    if (launches) j += "  \"launches_per_step\": " + launches_json(*launches) + ",\n";
    j += "  \"peak_bytes\": " + std::to_string(peak) + ",\n";
    j += "  \"resident_bytes\": " + std::to_string(resident) + ",\n";
    j += step_memory_json(memory, "  ") + "}\n";
    write_file_atomically(o.json_path, j, "--json");
  }
  return 0;
}

}  // namespace

int bench_step_command(const std::vector<std::string>& args, std::ostream& out, std::ostream& err) {
  return cli::run_command(
      "brigade bench step", out, err, [&] { return parse(args); }, usage,
      [&](const Options& o) { return run(o, out); });
}

}  // namespace brigade::bench_step
