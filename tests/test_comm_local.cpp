// The local backend (ranks as threads) — and, through it, everything the backends share: the
// handshake, timeouts, aborts and argument checks live in the Communicator base class.
#include <chrono>
#include <mutex>

#include "comm/comm.h"
#include "comm/thread_ranks.h"
#include "test_util.h"

using namespace brigade;
using test::all_ok;
using comm::P2P;
using comm::Shapes;
using Catch::Contains;

namespace {

auto ms(int n) { return std::chrono::milliseconds(n); }

double seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

}  // namespace

TEST_CASE("local: send and recv carry values, shape and dtype", "[comm][local]") {
  auto comms = comm::local_group(2);
  Tensor x = test::random({3, 5}, 1, DType::f32);
  Tensor got, into = zeros({3, 5}, DType::f32);
  Tensor ints = arange(0, 12, 1, DType::i64).reshape({2, 6});
  Tensor got_ints;
  auto errors = test::run_ranks(comms, [&](comm::Communicator& c) {
    if (c.rank() == 0) {
      c.send(x, 1);
      c.send(x, 1, /*tag=*/7);
      c.send(ints, 1, 3);
    } else {
      got = c.recv(0);
      c.recv_into(into, 0, 7);
      got_ints = c.recv(0, 3);
    }
  });
  REQUIRE(all_ok(errors));
  test::require_equal(got, x);
  test::require_equal(into, x);
  test::require_equal(got_ints, ints);
}

TEST_CASE("local: non-contiguous tensors are sent and received densely", "[comm][local]") {
  auto comms = comm::local_group(2);
  Tensor x = test::transposed(test::random({4, 6}, 2, DType::f64));
  Tensor buffer = zeros({4, 12}, DType::f64);
  Tensor strided_out = buffer.slice(1, 0, 12, 2);
  Tensor got;
  auto errors = test::run_ranks(comms, [&](comm::Communicator& c) {
    if (c.rank() == 0) {
      c.send(x, 1);
      c.send(x, 1, 1);
    } else {
      got = c.recv(0);
      c.recv_into(strided_out, 0, 1);
    }
  });
  REQUIRE(all_ok(errors));
  REQUIRE(got.is_contiguous());
  test::require_equal(got, x);
  test::require_equal(strided_out, x);
}

TEST_CASE("local: messages on one channel arrive in order; tags keep channels apart", "[comm][local]") {
  auto comms = comm::local_group(2);
  std::vector<double> got_a, got_b;
  auto errors = test::run_ranks(comms, [&](comm::Communicator& c) {
    if (c.rank() == 0) {
      for (int i = 0; i < 5; ++i) {
        c.send(scalar(i), 1, /*tag=*/0);
        c.send(scalar(100 + i), 1, /*tag=*/1);
      }
    } else {
      for (int i = 0; i < 5; ++i) got_b.push_back(c.recv(0, 1).item());  // tag 1 first: no cross-talk
      for (int i = 0; i < 5; ++i) got_a.push_back(c.recv(0, 0).item());
    }
  });
  REQUIRE(all_ok(errors));
  REQUIRE(got_a == std::vector<double>{0, 1, 2, 3, 4});
  REQUIRE(got_b == std::vector<double>{100, 101, 102, 103, 104});
}

TEST_CASE("local: a ring of grouped sends and receives", "[comm][local]") {
  const int n = 5;
  auto comms = comm::local_group(n);
  std::vector<Tensor> received(n);
  auto errors = test::run_ranks(comms, [&](comm::Communicator& c) {
    int next = (c.rank() + 1) % n, prev = (c.rank() + n - 1) % n;
    Tensor token = full({4}, c.rank(), DType::f32);
    // Every rank sends before it receives: blocking calls would all be stuck in send. A batch isn't.
    std::vector<P2P> ops = {P2P::send(token, next), P2P::recv(prev)};
    for (int step = 0; step < n; ++step) {
      c.exchange(ops);
      ops[0].tensor = ops[1].tensor;
      ops[1] = P2P::recv(prev);
    }
    received[size_t(c.rank())] = ops[0].tensor;
  });
  REQUIRE(all_ok(errors));
  // After n steps every token went round once.
  for (int r = 0; r < n; ++r) test::require_equal(received[size_t(r)], full({4}, r, DType::f32));
}

TEST_CASE("local: a 4-stage pipeline exchanges activations forward and gradients backward", "[comm][local]") {
  // Stage s computes y = x * (s + 2); backward sends g * (s + 2) to the previous stage. Each middle
  // stage sends its output to the next stage while receiving the next micro-batch from the previous
  // one, in one batch — the pattern a 1F1B schedule runs.
  const int stages = 4, micro_batches = 6;
  auto comms = comm::local_group(stages);
  std::vector<std::vector<Tensor>> outputs(micro_batches), input_grads(micro_batches);
  std::mutex mutex;
  auto errors = test::run_ranks(comms, [&](comm::Communicator& c) {
    int s = c.rank();
    bool first = s == 0, last = s == stages - 1;
    const int kActivation = 0, kGradient = 1;
    double factor = s + 2;
    // Forward: receive x_m from the previous stage while sending y_{m-1} to the next.
    Tensor pending;  // this stage's output waiting to be sent
    for (int m = 0; m <= micro_batches; ++m) {
      std::vector<P2P> ops;
      if (pending.defined()) ops.push_back(P2P::send(pending, s + 1, kActivation));
      if (m < micro_batches && !first) ops.push_back(P2P::recv(s - 1, kActivation));
      c.exchange(ops);
      if (m == micro_batches) break;
      Tensor x = first ? full({2, 3}, m + 1, DType::f32) : ops.back().tensor;
      Tensor y = ops::scale_shift(x, factor, 0);
      if (last) {
        std::lock_guard<std::mutex> lock(mutex);
        outputs[size_t(m)].push_back(y);
        pending = Tensor();
      } else {
        pending = y;
      }
    }
    // Backward, the same shape of exchange in the other direction.
    pending = Tensor();
    for (int m = 0; m <= micro_batches; ++m) {
      std::vector<P2P> ops;
      if (pending.defined()) ops.push_back(P2P::send(pending, s - 1, kGradient));
      if (m < micro_batches && !last) ops.push_back(P2P::recv(s + 1, kGradient));
      c.exchange(ops);
      if (m == micro_batches) break;
      Tensor g = last ? ones({2, 3}, DType::f32) : ops.back().tensor;
      Tensor dx = ops::scale_shift(g, factor, 0);
      if (first) {
        std::lock_guard<std::mutex> lock(mutex);
        input_grads[size_t(m)].push_back(dx);
        pending = Tensor();
      } else {
        pending = dx;
      }
    }
  });
  REQUIRE(all_ok(errors));
  double product = 2 * 3 * 4 * 5;
  for (int m = 0; m < micro_batches; ++m) {
    REQUIRE(outputs[size_t(m)].size() == 1);
    test::require_equal(outputs[size_t(m)][0], full({2, 3}, (m + 1) * product, DType::f32));
    test::require_equal(input_grads[size_t(m)][0], full({2, 3}, product, DType::f32));
  }
}

TEST_CASE("local: a rank can send to itself", "[comm][local]") {
  auto comms = comm::local_group(1);
  std::vector<P2P> ops = {P2P::send(tensor({1, 2}), 0), P2P::recv(0)};
  comms[0]->exchange(ops);
  test::require_equal(ops[1].tensor, tensor({1, 2}));
}

TEST_CASE("local: varying shapes need Shapes::varying; fixed channels check every message", "[comm][local]") {
  SECTION("varying: each message brings its own shape") {
    auto comms = comm::local_group(2);
    std::vector<Shape> shapes;
    auto errors = test::run_ranks(comms, [&](comm::Communicator& c) {
      for (int64_t n = 1; n <= 4; ++n) {
        if (c.rank() == 0) c.send(zeros({n, 2}), 1, 0, Shapes::varying);
        else shapes.push_back(c.recv(0, 0, Shapes::varying).shape());
      }
    });
    REQUIRE(all_ok(errors));
    REQUIRE(shapes == std::vector<Shape>{{1, 2}, {2, 2}, {3, 2}, {4, 2}});
  }
  SECTION("fixed: a sender changing shape is refused before anything moves, and stays usable") {
    auto comms = comm::local_group(2);
    comms[0]->send(zeros({2, 2}), 1);
    REQUIRE_THROWS_WITH(comms[0]->send(zeros({3, 2}), 1),
                        Contains("comm send to rank 1, tag 0 (rank 0 of 2, local)") &&
                            Contains("carries [2, 2] f32") && Contains("this send is [3, 2] f32") &&
                            Contains("Shapes::varying"));
    REQUIRE(!comms[0]->aborted());
    comms[0]->send(ones({2, 2}), 1);
    REQUIRE(comms[1]->recv(0).shape() == Shape{2, 2});
    test::require_equal(comms[1]->recv(0), ones({2, 2}));
  }
  SECTION("fixed: a receiver expecting another shape is refused, naming the channel") {
    auto comms = comm::local_group(2);
    comms[0]->send(zeros({2, 2}), 1);
    comms[1]->recv(0);
    comms[0]->send(zeros({2, 2}), 1);
    REQUIRE_THROWS_WITH(comms[1]->recv_into(zeros({2, 5}), 0),
                        Contains("comm recv from rank 0, tag 0 (rank 1 of 2, local)") &&
                            Contains("expects [2, 5] f32") && Contains("carries [2, 2] f32"));
  }
}

TEST_CASE("local: a mismatch on the first message names both sides, the peer and the tag", "[comm][local]") {
  auto run = [](Tensor sent, Tensor expected, Shapes send_kind = Shapes::fixed, Shapes recv_kind = Shapes::fixed) {
    auto comms = comm::local_group(2, Device::cpu(), std::chrono::seconds(5));
    auto errors = test::run_ranks(comms, [&](comm::Communicator& c) {
      if (c.rank() == 0) c.send(sent, 1, 4, send_kind);
      else c.recv_into(expected, 0, 4, recv_kind);
    });
    REQUIRE(errors[0].empty());
    REQUIRE(comms[1]->aborted());  // data was in flight: the channel state can't be trusted any more
    return errors[1];
  };
  SECTION("shape") {
    std::string e = run(zeros({2, 8}), zeros({2, 4}));
    REQUIRE_THAT(e, Contains("comm recv from rank 0, tag 4 (rank 1 of 2, local)") &&
                        Contains("rank 0 sent [2, 8] f32 but this receive expects [2, 4] f32"));
  }
  SECTION("dtype") {
    std::string e = run(zeros({3}, DType::bf16), zeros({3}, DType::f32));
    REQUIRE_THAT(e, Contains("rank 0 sent [3] bf16 but this receive expects [3] f32"));
  }
  SECTION("channel kind") {
    std::string e = run(zeros({3}), zeros({3}), Shapes::varying, Shapes::fixed);
    REQUIRE_THAT(e, Contains("rank 0 sends on a varying-shape channel but this receive is fixed-shape"));
  }
  SECTION("a preset receive of another tensor") {
    std::string e = run(zeros({2, 8}), zeros({2, 4}), Shapes::preset, Shapes::preset);
    REQUIRE_THAT(e, Contains("rank 0 sent [2, 8] f32 but this receive expects [2, 4] f32"));
  }
  SECTION("a preset receive whose sender sends a header") {
    std::string e = run(zeros({3}), zeros({3}), Shapes::fixed, Shapes::preset);
    REQUIRE_THAT(e, Contains("rank 0 sends on a fixed-shape channel but this receive is preset-shape"));
  }
}

TEST_CASE("local: preset shapes — the receiver names the tensor, and no header travels", "[comm][local]") {
  auto comms = comm::local_group(2);
  auto errors = test::run_ranks(comms, [&](comm::Communicator& c) {
    for (int64_t n = 1; n <= 3; ++n) {  // each message may have its own shape: the receiver knows it
      if (c.rank() == 0) {
        c.send(full({n, 2}, double(n)), 1, 0, Shapes::preset);
      } else {
        Tensor got = zeros({n, 2});
        c.recv_into(got, 0, 0, Shapes::preset);
        test::require_equal(got, full({n, 2}, double(n)));
      }
    }
  });
  REQUIRE(all_ok(errors));
  REQUIRE_THROWS_WITH(comms[1]->recv(0, 1, Shapes::preset),
                      Contains("comm recv from rank 0, tag 1 (rank 1 of 2, local)") &&
                          Contains("a preset-shape receive names its tensor (P2P::recv_into)"));
  REQUIRE(!comms[1]->aborted());  // refused before anything moved
}

TEST_CASE("local: a receive with no sender times out, names the op, and aborts the group", "[comm][local]") {
  auto comms = comm::local_group(3, Device::cpu(), ms(300));
  auto start = std::chrono::steady_clock::now();
  auto errors = test::run_ranks(comms, [&](comm::Communicator& c) {
    if (c.rank() == 1) c.recv(0, 9);                      // rank 0 never sends
    if (c.rank() == 2) {
      comms[2]->set_timeout(std::chrono::seconds(30));  // would wait far longer...
      c.recv(1, 2);                                     // ...but rank 1's abort wakes it
    }
  });
  double elapsed = seconds_since(start);
  REQUIRE(errors[0].empty());
  REQUIRE_THAT(errors[1], Contains("comm recv from rank 0, tag 9 (rank 1 of 3, local): timed out after 0.3 s") &&
                              Contains("aborted"));
  REQUIRE_THAT(errors[2], Contains("comm recv from rank 1, tag 2 (rank 2 of 3, local)") &&
                              Contains("aborted by another rank") && Contains("timed out"));
  REQUIRE(elapsed < 10);
  REQUIRE(comms[1]->aborted());
  // Later calls fail at once, with the original reason.
  REQUIRE_THROWS_WITH(comms[1]->send(zeros({1}), 0), Contains("aborted earlier") && Contains("tag 9"));
}

TEST_CASE("local: rendezvous sends wait for their receiver; queued sends do not", "[comm][local]") {
  // Both ranks send first and receive in a later call: queued sends let both through; rendezvous
  // sends (gloo, NCCL at their strictest) wait for each other, and the timeout names the peer.
  auto crossed = [](comm::Communicator& c) {
    const int peer = 1 - c.rank();
    c.send(full({2}, double(c.rank()), DType::f32), peer, 5);
    Tensor got = c.recv(peer, 5);
    if (got.to_vector() != std::vector<double>{double(peer), double(peer)}) throw Error("wrong values");
  };
  auto queued = comm::local_group(2, Device::cpu(), ms(2000));
  REQUIRE(queued[0]->queues_sends());
  REQUIRE(all_ok(test::run_ranks(queued, crossed)));

  auto strict = comm::local_group(2, Device::cpu(), ms(300), comm::LocalSends::rendezvous);
  REQUIRE_FALSE(strict[0]->queues_sends());
  auto start = std::chrono::steady_clock::now();
  auto errors = test::run_ranks(strict, crossed);
  REQUIRE(seconds_since(start) < 10);
  // One rank times out; the other may see its abort first (and quotes it).
  const bool zero_timed_out = errors[0].find("aborted by another rank") == std::string::npos;
  const std::string& e = zero_timed_out ? errors[0] : errors[1];
  const int me = zero_timed_out ? 0 : 1;
  REQUIRE_THAT(e, Contains("comm send to rank " + std::to_string(1 - me) + ", tag 5") &&
                      Contains("timed out after 0.3 s waiting for rank " + std::to_string(1 - me) + " to receive it"));

  // The same messages in one exchange per rank move together, like Megatron's combined exchange.
  auto paired = comm::local_group(2, Device::cpu(), ms(2000), comm::LocalSends::rendezvous);
  REQUIRE(all_ok(test::run_ranks(paired, [](comm::Communicator& c) {
    const int peer = 1 - c.rank();
    std::vector<P2P> ops = {P2P::send(full({2}, double(c.rank()), DType::f32), peer, 5), P2P::recv(peer, 5)};
    c.exchange(ops);
    if (ops[1].tensor.to_vector() != std::vector<double>{double(peer), double(peer)}) throw Error("wrong values");
  })));
  // Groups split from a rendezvous group are rendezvous too.
  auto parent = comm::local_group(2, Device::cpu(), ms(2000), comm::LocalSends::rendezvous);
  REQUIRE(all_ok(test::run_ranks(parent, [](comm::Communicator& c) {
    auto child = c.split(0, c.rank());
    if (child->queues_sends()) throw Error("the split group queues sends");
  })));
}

TEST_CASE("local: timeouts are typed, and collectives name who never came", "[comm][local]") {
  auto comms = comm::local_group(3, Device::cpu(), ms(200));
  std::vector<std::string> kinds(3);
  auto errors = test::run_ranks(comms, [&](comm::Communicator& c) {
    if (c.rank() == 2) return;  // never joins
    try {
      c.all_reduce(ones({2}));
    } catch (const comm::TimeoutError&) {
      kinds[size_t(c.rank())] = "timeout";
      throw;
    }
  });
  // One of ranks 0, 1 times out first and aborts; the other may see the timeout or the abort.
  REQUIRE((kinds[0] == "timeout" || kinds[1] == "timeout"));
  std::string timed_out = kinds[0] == "timeout" ? errors[0] : errors[1];
  REQUIRE_THAT(timed_out, Contains("comm all_reduce") && Contains("timed out after 0.2 s waiting for rank(s) 2"));
}

TEST_CASE("local: argument errors throw without aborting", "[comm][local]") {
  auto comms = comm::local_group(2);
  comm::Communicator& c = *comms[0];
  REQUIRE_THROWS_WITH(c.send(zeros({1}), 2),
                      Contains("comm send to rank 2, tag 0 (rank 0 of 2, local): peer 2 is outside the group"));
  REQUIRE_THROWS_WITH(c.send(zeros({1}), 1, -1), Contains("tags must be >= 0"));
  REQUIRE_THROWS_WITH(c.send(Tensor(), 1), Contains("the tensor is undefined"));
  REQUIRE_THROWS_WITH(c.all_reduce(zeros({2}, DType::i32), comm::ReduceOp::average),
                      Contains("average needs a floating-point tensor, got i32"));
  REQUIRE_THROWS_WITH(c.set_timeout(ms(0)), Contains("must be positive"));
  REQUIRE_THROWS_WITH(c.connect_collectives({comm::CollectiveUse::all_reduce(2, DType::i32, comm::ReduceOp::average)}),
                      Contains("connect of 1 collectives (rank 0 of 2, local): average needs a floating-point dtype, got i32"));
  REQUIRE_THROWS_WITH(c.connect_collectives({comm::CollectiveUse::broadcast(0, DType::f32)}),
                      Contains("a collective of 0 elements"));
  c.connect_collectives({comm::CollectiveUse::broadcast(3, DType::f32)});  // local: nothing to connect
  // A refused op in a batch leaves the channel state untouched: the next first message still
  // carries its handshake, and the receiver sees the right shape.
  std::vector<P2P> ops = {P2P::send(zeros({4}), 1), P2P::send(zeros({1}), 5)};
  REQUIRE_THROWS(c.exchange(ops));
  REQUIRE(!c.aborted());
  c.send(zeros({3}), 1);
  REQUIRE(comms[1]->recv(0).shape() == Shape{3});
}

TEST_CASE("local: all_reduce, broadcast and barrier", "[comm][local]") {
  const int n = 4;
  auto comms = comm::local_group(n);
  std::vector<Tensor> sums(n), averages(n), halves(n), ints(n), bcast(n);
  auto errors = test::run_ranks(comms, [&](comm::Communicator& c) {
    size_t r = size_t(c.rank());
    sums[r] = test::random({7, 3}, 10 + r, DType::f32);
    averages[r] = ops::clone(sums[r]);
    halves[r] = ops::to_dtype(sums[r], DType::bf16);
    ints[r] = full({5}, c.rank() + 1, DType::i64);
    bcast[r] = c.rank() == 2 ? test::random({6}, 99, DType::f64) : zeros({6}, DType::f64);
    c.all_reduce(sums[r]);
    c.all_reduce(averages[r], comm::ReduceOp::average);
    c.all_reduce(halves[r]);
    c.all_reduce(ints[r]);
    c.broadcast(bcast[r], 2);
    c.barrier();
  });
  REQUIRE(all_ok(errors));
  // Reference: rank order, accumulated in f32.
  Tensor expected = test::random({7, 3}, 10, DType::f32);
  for (int r = 1; r < n; ++r) ops::add_(expected, test::random({7, 3}, 10 + uint64_t(r), DType::f32));
  Tensor expected_half = ops::to_dtype(test::random({7, 3}, 10, DType::bf16), DType::f32);
  for (int r = 1; r < n; ++r)
    ops::add_(expected_half, ops::to_dtype(test::random({7, 3}, 10 + uint64_t(r), DType::bf16), DType::f32));
  for (int r = 0; r < n; ++r) {
    test::require_equal(sums[size_t(r)], expected);
    test::require_close(averages[size_t(r)], ops::scale_shift(expected, 1.0 / n, 0), 1e-6, 1e-6);
    test::require_equal(halves[size_t(r)], ops::to_dtype(expected_half, DType::bf16));
    test::require_equal(ints[size_t(r)], full({5}, 1 + 2 + 3 + 4, DType::i64));
    test::require_equal(bcast[size_t(r)], test::random({6}, 99, DType::f64));
    test::require_equal(averages[size_t(r)], averages[0]);  // bitwise the same everywhere
  }
}

TEST_CASE("local: split forms groups by color, ordered by key", "[comm][local]") {
  // 2 pipeline stages x 3 replicas: rank = replica * 2 + stage. split(stage, replica) groups a
  // stage's replicas; split(replica, stage) groups one replica's stages.
  const int n = 6;
  auto comms = comm::local_group(n);
  std::vector<int> stage_rank(n), stage_size(n), replica_rank(n);
  std::vector<Tensor> grads(n);
  // char, not bool: std::vector<bool> packs its elements into shared words, and six rank threads
  // writing neighbouring elements would race.
  std::vector<char> left_out(n);
  auto errors = test::run_ranks(comms, [&](comm::Communicator& c) {
    size_t r = size_t(c.rank());
    int stage = c.rank() % 2, replica = c.rank() / 2;
    auto same_stage = c.split(stage, replica);
    auto same_replica = c.split(replica, stage);
    auto only_even = c.split(c.rank() % 2 == 0 ? 0 : -1);
    stage_rank[r] = same_stage->rank();
    stage_size[r] = same_stage->size();
    replica_rank[r] = same_replica->rank();
    left_out[r] = only_even == nullptr;
    grads[r] = full({3}, c.rank(), DType::f32);
    same_stage->all_reduce(grads[r], comm::ReduceOp::average);
    // Point to point inside a sub-group uses the sub-group's ranks.
    if (same_replica->rank() == 0) same_replica->send(full({1}, 42), 1);
    else if (same_replica->recv(0).item() != 42) throw std::runtime_error("wrong value in the sub-group");
  });
  REQUIRE(all_ok(errors));
  for (int r = 0; r < n; ++r) {
    REQUIRE(stage_rank[size_t(r)] == r / 2);
    REQUIRE(stage_size[size_t(r)] == 3);
    REQUIRE(replica_rank[size_t(r)] == r % 2);
    REQUIRE(bool(left_out[size_t(r)]) == (r % 2 == 1));
    double mean = r % 2 == 0 ? (0 + 2 + 4) / 3.0 : (1 + 3 + 5) / 3.0;
    test::require_close(grads[size_t(r)], full({3}, mean, DType::f32), 1e-6, 1e-6);
  }
}

TEST_CASE("local: recv gets the very tensor that was sent (so the sender must not modify it)", "[comm][local]") {
  auto comms = comm::local_group(2);
  Tensor x = ones({3});
  uint64_t version = x.storage().version();
  comms[0]->send(x, 1);
  Tensor got = comms[1]->recv(0);
  REQUIRE(got.storage().same_as(x.storage()));  // handed over, not copied
  // Receiving does not count as writing it: had the sender's tape saved x for backward, that
  // backward must still run.
  REQUIRE(x.storage().version() == version);
}

TEST_CASE("comm: the header wire format round-trips and rejects garbage", "[comm]") {
  comm::TensorMeta meta{DType::bf16, {3, 0, 7, 1}, Shapes::varying};
  comm::TensorMeta back = comm::decode_header(comm::encode_header(meta), "rank 1");
  REQUIRE(back.same_tensor(meta));
  REQUIRE(back.shapes == Shapes::varying);
  comm::WireHeader garbage;
  garbage.words[0] = 12345;
  REQUIRE_THROWS_WITH(comm::decode_header(garbage, "rank 3"), Contains("header from rank 3 is garbled"));
  REQUIRE_THROWS_WITH(comm::encode_header({DType::f32, Shape(16, 1), Shapes::fixed}), Contains("at most 15 dims"));
}

TEST_CASE("comm: timeouts parse from seconds", "[comm]") {
  REQUIRE(comm::parse_seconds("2.5", "X") == ms(2500));
  REQUIRE(comm::parse_seconds("30", "X") == std::chrono::seconds(30));
  REQUIRE_THROWS_WITH(comm::parse_seconds("soon", "BRIGADE_COMM_TIMEOUT"),
                      Contains("BRIGADE_COMM_TIMEOUT: expected a positive number of seconds, got 'soon'"));
  REQUIRE_THROWS(comm::parse_seconds("-1", "X"));
  REQUIRE(comm::seconds_str(ms(250)) == "0.25 s");
}

TEST_CASE("comm: connecting gets its own timeout, never under a minute unless asked", "[comm]") {
  // Starts without BRIGADE_CONNECT_TIMEOUT and puts back whatever the caller had, whatever happens.
  struct Restore {
    std::optional<std::string> saved;
    Restore() {
      if (const char* v = std::getenv("BRIGADE_CONNECT_TIMEOUT")) saved = v;
      ::unsetenv("BRIGADE_CONNECT_TIMEOUT");
    }
    ~Restore() {
      if (saved) ::setenv("BRIGADE_CONNECT_TIMEOUT", saved->c_str(), 1);
      else ::unsetenv("BRIGADE_CONNECT_TIMEOUT");
    }
  } restore;
  CHECK(comm::connect_timeout(std::chrono::seconds(300)) == std::chrono::seconds(300));
  CHECK(comm::connect_timeout(std::chrono::seconds(1)) == std::chrono::seconds(60));  // slow starters still join
  CHECK(comm::connect_timeout(std::chrono::seconds(900)) == std::chrono::seconds(900));
  CHECK(comm::connect_timeout(std::chrono::seconds(1), ms(200)) == ms(200));  // chosen in code wins
  ::setenv("BRIGADE_CONNECT_TIMEOUT", "2.5", 1);  // then the variable, even under a minute
  CHECK(comm::connect_timeout(std::chrono::seconds(900)) == ms(2500));
  CHECK(comm::connect_timeout(std::chrono::seconds(900), ms(200)) == ms(200));
  ::setenv("BRIGADE_CONNECT_TIMEOUT", "never", 1);
  REQUIRE_THROWS_WITH(comm::connect_timeout(std::chrono::seconds(1)),
                      Contains("BRIGADE_CONNECT_TIMEOUT: expected a positive number of seconds, got 'never'"));
}
