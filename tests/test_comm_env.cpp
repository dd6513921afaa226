// Reading the launch environment (brigade launch, torchrun, Open MPI, PMI, PMIx, Slurm) and the rendezvous
// stores. The variables are those the real launchers set; tests/test_comm_clusters.cpp runs them.
#include <map>
#include <thread>

#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include "comm/comm.h"
#include "test_util.h"

using namespace brigade;
using Catch::Contains;

namespace {

comm::LaunchEnv read(const std::map<std::string, std::string>& vars) {
  return comm::read_launch_env([&](const char* name) -> const char* {
    auto it = vars.find(name);
    return it == vars.end() ? nullptr : it->second.c_str();
  });
}

auto ms(int n) { return std::chrono::milliseconds(n); }

std::string fresh_dir() {
  char pattern[] = "/tmp/brigade-test-store-XXXXXX";
  REQUIRE(mkdtemp(pattern) != nullptr);
  return pattern;
}

int free_port() {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  REQUIRE(bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0);
  socklen_t len = sizeof addr;
  getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
  close(fd);
  return ntohs(addr.sin_port);
}

}  // namespace

TEST_CASE("launch env: nothing set is a single process", "[comm][env]") {
  comm::LaunchEnv env = read({});
  REQUIRE(env.rank == 0);
  REQUIRE(env.world_size == 1);
  REQUIRE(env.local_rank == 0);
  REQUIRE(env.launcher == "none");
  REQUIRE(env.store_dir.empty());
  REQUIRE(env.master_addr.empty());
}

TEST_CASE("launch env: brigade launch and torchrun variables", "[comm][env]") {
  comm::LaunchEnv env = read({{"RANK", "3"}, {"WORLD_SIZE", "8"}, {"LOCAL_RANK", "1"}, {"LOCAL_WORLD_SIZE", "2"},
                              {"MASTER_ADDR", "10.0.0.1"}, {"MASTER_PORT", "29500"}});
  REQUIRE(env.rank == 3);
  REQUIRE(env.world_size == 8);
  REQUIRE(env.local_rank == 1);
  REQUIRE(env.local_world_size == 2);
  REQUIRE(env.launcher == "torchrun");
  REQUIRE(env.master_addr == "10.0.0.1");
  REQUIRE(env.master_port == 29500);
  REQUIRE(env.str() == "rank 3 of 8 (local rank 1 of 2, torchrun; store: 10.0.0.1:29500)");

  env = read({{"RANK", "1"}, {"WORLD_SIZE", "2"}, {"BRIGADE_LAUNCH", "1"}, {"BRIGADE_COMM_STORE", "/tmp/s"}});
  REQUIRE(env.launcher == "brigade launch");
  REQUIRE(env.local_rank == 1);  // defaults to the rank: everything on one machine
  REQUIRE(env.local_world_size == 2);
  REQUIRE(env.store_dir == "/tmp/s");
}

TEST_CASE("launch env: Slurm variables", "[comm][env]") {
  comm::LaunchEnv env = read({{"SLURM_PROCID", "5"}, {"SLURM_NTASKS", "8"}, {"SLURM_LOCALID", "1"}, {"SLURM_STEP_ID", "0"},
                              {"SLURM_TASKS_PER_NODE", "4(x2)"}, {"SLURM_JOB_NODELIST", "gpu[07-08]"},
                              {"SLURM_JOB_ID", "123456"}});
  REQUIRE(env.rank == 5);
  REQUIRE(env.world_size == 8);
  REQUIRE(env.local_rank == 1);
  REQUIRE(env.local_world_size == 4);
  REQUIRE(env.launcher == "slurm");
  REQUIRE(env.master_addr == "gpu07");
  REQUIRE(env.master_port == 29500 + 456);
  // A step meets on its own first node, on a port of its own: steps side by side in one allocation
  // (srun ... & srun ... &) must not share a rendezvous, and a step need not include the first node.
  // Its tasks per node are the step's, not the batch script's request.
  env = read({{"SLURM_PROCID", "0"}, {"SLURM_NTASKS", "2"}, {"SLURM_STEP_ID", "3"}, {"SLURM_JOB_ID", "123456"},
              {"SLURM_JOB_NODELIST", "gpu[07-09]"}, {"SLURM_STEP_NODELIST", "gpu[08-09]"},
              {"SLURM_NTASKS_PER_NODE", "4"}, {"SLURM_STEP_TASKS_PER_NODE", "1(x2)"}, {"SLURM_TASKS_PER_NODE", "4(x3)"}});
  REQUIRE(env.master_addr == "gpu08");
  REQUIRE(env.master_port == 29500 + (123456 + 101 * 3) % 1000);
  REQUIRE(env.local_world_size == 1);
  // Slurm's special step ids are past 2^31 (batch: 2^32 - 2): a port all the same, not an error.
  env = read({{"SLURM_PROCID", "0"}, {"SLURM_NTASKS", "2"}, {"SLURM_STEP_ID", "4294967294"}, {"SLURM_JOB_ID", "7"},
              {"SLURM_JOB_NODELIST", "n1"}});
  REQUIRE(env.master_port == 29500 + (7 + 101 * (4294967294ull % 1000)) % 1000);
  // An explicit MASTER_ADDR/PORT, or a shared store directory, wins over the derived ones.
  env = read({{"SLURM_PROCID", "0"}, {"SLURM_NTASKS", "2"}, {"SLURM_STEP_ID", "0"}, {"SLURM_JOB_NODELIST", "a,b"}, {"MASTER_ADDR", "head"},
              {"MASTER_PORT", "4000"}});
  REQUIRE(env.master_addr == "head");
  REQUIRE(env.master_port == 4000);
  env = read({{"SLURM_PROCID", "0"}, {"SLURM_NTASKS", "2"}, {"SLURM_STEPID", "0"}, {"BRIGADE_COMM_STORE", "/shared/run1"}});
  REQUIRE(env.store_dir == "/shared/run1");
  REQUIRE(env.master_addr.empty());
  // torchrun inside an allocation: RANK/WORLD_SIZE win.
  env = read({{"SLURM_PROCID", "0"}, {"SLURM_NTASKS", "1"}, {"SLURM_STEP_ID", "0"}, {"RANK", "2"}, {"WORLD_SIZE", "4"}});
  REQUIRE(env.rank == 2);
  REQUIRE(env.world_size == 4);
  // A batch script's environment (sbatch -n 4: no step) is one process, not task 0 of 4.
  env = read({{"SLURM_PROCID", "0"}, {"SLURM_NTASKS", "4"}, {"SLURM_LOCALID", "0"}, {"SLURM_JOB_ID", "7"}});
  REQUIRE(env.world_size == 1);
  REQUIRE(env.launcher == "none");
}

TEST_CASE("launch env: Open MPI's mpirun on one machine meets on loopback, at a port named by the job",
          "[comm][env]") {
  // What Open MPI 4.1's mpirun -n 4 gives rank 2 (as printed by `mpirun env`).
  std::map<std::string, std::string> vars = {
      {"OMPI_COMM_WORLD_RANK", "2"},      {"OMPI_COMM_WORLD_SIZE", "4"},       {"OMPI_COMM_WORLD_LOCAL_RANK", "2"},
      {"OMPI_COMM_WORLD_LOCAL_SIZE", "4"}, {"OMPI_MCA_ess_base_jobid", "1154547713"}, {"PMIX_NAMESPACE", "1154547713"},
      {"PMIX_RANK", "2"}};
  comm::LaunchEnv env = read(vars);
  REQUIRE(env.str() ==
          "rank 2 of 4 (local rank 2 of 4, Open MPI; store: 127.0.0.1:" + std::to_string(env.master_port) + ")");
  REQUIRE(env.master_port >= 20000);
  REQUIRE(env.master_port < 30000);
  // Every rank of the job derives the same port; another job another one.
  vars["OMPI_COMM_WORLD_RANK"] = vars["OMPI_COMM_WORLD_LOCAL_RANK"] = vars["PMIX_RANK"] = "0";
  REQUIRE(read(vars).rank == 0);
  REQUIRE(read(vars).master_port == env.master_port);
  vars["PMIX_NAMESPACE"] = "1154547714";
  REQUIRE(read(vars).master_port != env.master_port);
  // What the user exports wins.
  vars["MASTER_PORT"] = "4000";
  REQUIRE(read(vars).master_port == 4000);
  vars["BRIGADE_COMM_STORE"] = "/tmp/s";
  REQUIRE(read(vars).store_dir == "/tmp/s");
  REQUIRE(read(vars).master_addr.empty());
}

TEST_CASE("launch env: an MPI job across machines needs MASTER_ADDR, and is told so", "[comm][env]") {
  std::map<std::string, std::string> vars = {{"OMPI_COMM_WORLD_RANK", "3"},       {"OMPI_COMM_WORLD_SIZE", "4"},
                                             {"OMPI_COMM_WORLD_LOCAL_RANK", "1"}, {"OMPI_COMM_WORLD_LOCAL_SIZE", "2"},
                                             {"PMIX_NAMESPACE", "77"}};
  REQUIRE_THROWS_WITH(read(vars), Contains("rank 3 of 4") && Contains("2 of its 4 ranks on this one") &&
                                      Contains("mpirun -x MASTER_ADDR=node0 -x MASTER_PORT=29400") &&
                                      Contains("BRIGADE_COMM_STORE"));
  // MASTER_ADDR alone is enough: the port still comes from the job's name.
  vars["MASTER_ADDR"] = "10.0.0.1";
  comm::LaunchEnv env = read(vars);
  REQUIRE(env.master_addr == "10.0.0.1");
  REQUIRE(env.master_port >= 20000);
  REQUIRE(env.local_rank == 1);
  REQUIRE(env.local_world_size == 2);
  // A launcher that does not say which ranks share a machine (PMI without MPI_LOCALNRANKS).
  REQUIRE_THROWS_WITH(read({{"PMI_RANK", "1"}, {"PMI_SIZE", "2"}}),
                      Contains("PMI does not say which ranks share a machine") && Contains("MASTER_ADDR"));
}

TEST_CASE("launch env: MPICH's hydra (PMI) on one machine, srun --mpi=pmi2 and pmix", "[comm][env]") {
  // What MPICH 4.0's mpiexec.hydra -n 2 gives rank 1: no job id; the ranks' common parent names it.
  comm::LaunchEnv env = read({{"PMI_RANK", "1"}, {"PMI_SIZE", "2"}, {"PMI_FD", "8"}, {"MPI_LOCALRANKID", "1"},
                              {"MPI_LOCALNRANKS", "2"}});
  REQUIRE(env.launcher == "PMI");
  REQUIRE(env.rank == 1);
  REQUIRE(env.world_size == 2);
  REQUIRE(env.local_rank == 1);
  REQUIRE(env.master_addr == "127.0.0.1");
  REQUIRE(env.master_port >= 20000);
  // Slurm's PMI2 and PMIx plugins set their variables beside Slurm's own, which say more (the nodes).
  env = read({{"PMI_RANK", "5"}, {"PMI_SIZE", "8"}, {"SLURM_PROCID", "5"}, {"SLURM_NTASKS", "8"}, {"SLURM_STEP_ID", "0"},
              {"SLURM_JOB_NODELIST", "gpu[07-08]"}, {"SLURM_JOB_ID", "123456"}});
  REQUIRE(env.launcher == "slurm");
  REQUIRE(env.master_addr == "gpu07");
  env = read({{"PMIX_RANK", "5"}, {"SLURM_PROCID", "5"}, {"SLURM_NTASKS", "8"}, {"SLURM_STEP_ID", "0"}, {"SLURM_JOB_NODELIST", "a,b"}});
  REQUIRE(env.launcher == "slurm");
  REQUIRE(env.rank == 5);
  // PMIx alone gives no size.
  REQUIRE_THROWS_WITH(read({{"PMIX_RANK", "2"}, {"PMIX_NAMESPACE", "prterun-x-1@1"}}),
                      Contains("PMIX_RANK=2 is set (PMIx) but no variable gives the job's size") &&
                          Contains("WORLD_SIZE"));
  // Open MPI's mpirun inside a Slurm allocation: the SLURM_* variables are those of the step that
  // runs mpirun or its daemons (here its node 1 of 2), not the MPI ranks'.
  env = read({{"OMPI_COMM_WORLD_RANK", "6"}, {"OMPI_COMM_WORLD_SIZE", "8"}, {"OMPI_COMM_WORLD_LOCAL_RANK", "2"},
              {"OMPI_COMM_WORLD_LOCAL_SIZE", "4"}, {"SLURM_PROCID", "1"}, {"SLURM_NTASKS", "2"}, {"SLURM_STEP_ID", "0"},
              {"MASTER_ADDR", "n0"}, {"MASTER_PORT", "29400"}});
  REQUIRE(env.launcher == "Open MPI");
  REQUIRE(env.rank == 6);
  REQUIRE(env.local_rank == 2);
}

TEST_CASE("launch env: a process alone while its launcher counts several is refused", "[comm][env]") {
  // torchrun's variables say 1, Slurm's 4: the job would run four times, independently.
  REQUIRE_THROWS_WITH(read({{"RANK", "0"}, {"WORLD_SIZE", "1"}, {"SLURM_PROCID", "2"}, {"SLURM_NTASKS", "4"}, {"SLURM_STEP_ID", "0"}}),
                      Contains("WORLD_SIZE=1 (torchrun) says this process runs alone, but SLURM_NTASKS=4 (slurm)") &&
                          Contains("independent job"));
  REQUIRE_THROWS_WITH(read({{"OMPI_COMM_WORLD_RANK", "0"}, {"OMPI_COMM_WORLD_SIZE", "1"}, {"PMI_RANK", "0"},
                            {"PMI_SIZE", "3"}}),
                      Contains("OMPI_COMM_WORLD_SIZE=1 (Open MPI) says this process runs alone, but PMI_SIZE=3"));
  // srun -n 2 brigade launch -n 2: two launchers, each with a job of its own, unless --nnodes 2.
  std::map<std::string, std::string> vars = {{"RANK", "1"},         {"WORLD_SIZE", "2"},     {"LOCAL_RANK", "1"},
                                             {"LOCAL_WORLD_SIZE", "2"}, {"BRIGADE_LAUNCH", "1"}, {"MASTER_ADDR", "h"},
                                             {"MASTER_PORT", "1234"},  {"SLURM_PROCID", "0"},  {"SLURM_NTASKS", "2"},
                                             {"SLURM_STEP_ID", "0"}};
  REQUIRE_THROWS_WITH(read(vars), Contains("SLURM_NTASKS=2 (slurm) started 2 copies of brigade launch") &&
                                      Contains("--nnodes 2 --node-rank $SLURM_PROCID"));
  vars["WORLD_SIZE"] = "4";  // --nnodes 2 -n 2
  vars["RANK"] = "3";
  REQUIRE(read(vars).rank == 3);
  // srun -n 2 torchrun --nproc_per_node 2: the same mistake with torchrun.
  vars.erase("BRIGADE_LAUNCH");
  vars["WORLD_SIZE"] = "2";
  vars["RANK"] = "1";
  REQUIRE_THROWS_WITH(read(vars), Contains("SLURM_NTASKS=2 (slurm) started 2 copies of torchrun") &&
                                      Contains("--nnodes 2 --node_rank $SLURM_PROCID"));
  // torchrun's variables set by hand to Slurm's own are one world: RANK=$SLURM_PROCID WORLD_SIZE=$SLURM_NTASKS.
  REQUIRE(read({{"RANK", "3"}, {"WORLD_SIZE", "4"}, {"MASTER_ADDR", "h"}, {"MASTER_PORT", "1234"}, {"SLURM_PROCID", "3"},
                {"SLURM_NTASKS", "4"}, {"SLURM_STEP_ID", "0"}})
              .rank == 3);
  // Everyone agreeing on one process is a single process.
  REQUIRE(read({{"OMPI_COMM_WORLD_RANK", "0"}, {"OMPI_COMM_WORLD_SIZE", "1"}, {"SLURM_PROCID", "0"},
                {"SLURM_NTASKS", "1"}, {"SLURM_STEP_ID", "0"}})
              .world_size == 1);
}

TEST_CASE("launch env: Slurm node lists", "[comm][env]") {
  REQUIRE(comm::first_slurm_host("node01") == "node01");
  REQUIRE(comm::first_slurm_host("node01,node02") == "node01");
  REQUIRE(comm::first_slurm_host("gpu[07-09,12],cpu1") == "gpu07");
  REQUIRE(comm::first_slurm_host("rack[3,5-7]-n") == "rack3-n");
  REQUIRE_THROWS_WITH(comm::first_slurm_host("gpu[07"), Contains("malformed SLURM_JOB_NODELIST"));
}

TEST_CASE("launch env: malformed or contradictory variables name the variable", "[comm][env]") {
  REQUIRE_THROWS_WITH(read({{"RANK", "x"}, {"WORLD_SIZE", "2"}}), Contains("RANK='x' is not an integer >= 0"));
  REQUIRE_THROWS_WITH(read({{"RANK", "2"}, {"WORLD_SIZE", "2"}}), Contains("RANK=2 is not below WORLD_SIZE=2"));
  REQUIRE_THROWS_WITH(read({{"RANK", "0"}}), Contains("RANK and WORLD_SIZE must be set together"));
  REQUIRE_THROWS_WITH(read({{"WORLD_SIZE", "0"}, {"RANK", "0"}}), Contains("WORLD_SIZE='0' is not an integer >= 1"));
  REQUIRE_THROWS_WITH(read({{"SLURM_PROCID", "4"}, {"SLURM_NTASKS", "4"}, {"SLURM_STEP_ID", "0"}}),
                      Contains("SLURM_PROCID=4 is not below SLURM_NTASKS=4"));
  REQUIRE_THROWS_WITH(read({{"MASTER_ADDR", "h"}}), Contains("MASTER_ADDR and MASTER_PORT must be set together"));
  REQUIRE_THROWS_WITH(read({{"OMPI_COMM_WORLD_RANK", "4"}, {"OMPI_COMM_WORLD_SIZE", "4"}}),
                      Contains("OMPI_COMM_WORLD_RANK=4 is not below OMPI_COMM_WORLD_SIZE=4"));
  REQUIRE_THROWS_WITH(read({{"PMI_RANK", "0"}, {"PMI_SIZE", "two"}}), Contains("PMI_SIZE='two' is not an integer"));
  REQUIRE_THROWS_WITH(read({{"MASTER_ADDR", "h"}, {"MASTER_PORT", "70000"}}), Contains("not a TCP port"));
}

TEST_CASE("store: a multi-process job without a rendezvous says what to set", "[comm][store]") {
  comm::LaunchEnv env = read({{"RANK", "0"}, {"WORLD_SIZE", "2"}});
  REQUIRE_THROWS_WITH(comm::open_store(env, comm::Deadline::after(ms(100))),
                      Contains("no rendezvous") && Contains("BRIGADE_COMM_STORE") && Contains("MASTER_ADDR"));
  REQUIRE(comm::open_store(read({}), comm::Deadline::after(ms(100)))->str() == "memory store");
}

TEST_CASE("store: file store", "[comm][store]") {
  std::string dir = fresh_dir();
  auto a = comm::make_file_store(dir), b = comm::make_file_store(dir);
  std::string binary("id\0with\xff bytes", 14);
  std::thread writer([&] {
    std::this_thread::sleep_for(ms(50));
    a->set("nccl/0/unique id", binary);
  });
  REQUIRE(b->get("nccl/0/unique id", comm::Deadline::after(std::chrono::seconds(10))) == binary);
  writer.join();
  REQUIRE_THROWS_WITH(b->set("nccl/0/unique id", "again"), Contains("already set"));
  auto start = std::chrono::steady_clock::now();
  REQUIRE_THROWS_AS(b->get("never", comm::Deadline::after(ms(100))), comm::TimeoutError);
  REQUIRE(std::chrono::steady_clock::now() - start < std::chrono::seconds(5));
  REQUIRE_THROWS_WITH(b->get("never", comm::Deadline::after(ms(50))),
                      Contains("timed out after 0.05 s waiting for key 'never' in " + dir));
  REQUIRE_THROWS_WITH(comm::make_file_store(dir + "/missing"), Contains("is not a writable directory"));
  std::system(("rm -rf " + dir).c_str());
}

TEST_CASE("store: TCP store, served by rank 0", "[comm][store]") {
  int port = free_port();
  auto deadline = comm::Deadline::after(std::chrono::seconds(10));
  // A client may start before the server: it retries until the server is up.
  std::unique_ptr<comm::Store> client;
  std::thread early([&] { client = comm::make_tcp_store("127.0.0.1", port, false, deadline); });
  std::this_thread::sleep_for(ms(100));
  auto server = comm::make_tcp_store("127.0.0.1", port, true, deadline);
  early.join();
  std::thread writer([&] {
    std::this_thread::sleep_for(ms(50));
    server->set("gloo/rank_1", std::string(300, 'x'));
  });
  REQUIRE(client->get("gloo/rank_1", deadline) == std::string(300, 'x'));
  writer.join();
  client->set("empty", "");
  REQUIRE(server->get("empty", deadline).empty());
  REQUIRE_THROWS_WITH(client->set("empty", "again"), Contains("already set"));
  REQUIRE_THROWS_WITH(client->get("never", comm::Deadline::after(ms(100))),
                      Contains("timed out after 0.1 s waiting for key 'never' in TCP store 127.0.0.1:" +
                               std::to_string(port)));
  // A second server on the same port is refused with the reason.
  REQUIRE_THROWS_WITH(comm::make_tcp_store("127.0.0.1", port, true, deadline), Contains("cannot listen on port"));
}

TEST_CASE("store: connecting to a TCP store nobody serves times out", "[comm][store]") {
  int port = free_port();
  REQUIRE_THROWS_WITH(comm::make_tcp_store("127.0.0.1", port, false, comm::Deadline::after(ms(200))),
                      Contains("timed out after 0.2 s connecting to TCP store 127.0.0.1:" + std::to_string(port)));
}

// ---- which address a rank advertises (comm/address.h) ----

namespace {

comm::GetEnv vars_of(const std::map<std::string, std::string>& vars) {
  return [vars](const char* name) -> const char* {
    auto it = vars.find(name);
    return it == vars.end() ? nullptr : it->second.c_str();
  };
}

}  // namespace

TEST_CASE("address: the route to MASTER_ADDR, else loopback on one machine", "[comm][address]") {
  // On one machine, with or without a TCP store on loopback.
  comm::LaunchEnv one = read({{"RANK", "1"}, {"WORLD_SIZE", "2"}});
  REQUIRE(comm::choose_address(one, vars_of({})).address == "127.0.0.1");
  one.master_addr = "127.0.0.1";
  one.master_port = 29500;
  comm::AdvertisedAddress a = comm::choose_address(one, vars_of({}));
  REQUIRE(a.address == "127.0.0.1");
  REQUIRE(a.interface == "lo");
  REQUIRE_THAT(a.why, Contains("routes to MASTER_ADDR=127.0.0.1"));
  // A name resolves first: "localhost" is routed like 127.0.0.1.
  one.master_addr = "localhost";
  REQUIRE(comm::is_loopback(comm::choose_address(one, vars_of({})).address));
  // The overrides win, in order.
  a = comm::choose_address(one, vars_of({{"BRIGADE_GLOO_HOST", "127.0.0.3"}, {"BRIGADE_GLOO_IFACE", "lo"}}));
  REQUIRE(a.address == "127.0.0.1");
  REQUIRE(a.why == "BRIGADE_GLOO_IFACE=lo");
  a = comm::choose_address(one, vars_of({{"BRIGADE_GLOO_HOST", "127.0.0.3"}}));
  REQUIRE(a.address == "127.0.0.3");
  REQUIRE(a.why == "BRIGADE_GLOO_HOST=127.0.0.3");
}

TEST_CASE("address: a loopback address in a job across machines is refused, saying what to set", "[comm][address]") {
  // Two ranks here, four in all: peers elsewhere could never reach 127.0.0.1.
  comm::LaunchEnv env = read({{"RANK", "1"}, {"WORLD_SIZE", "4"}, {"LOCAL_RANK", "1"}, {"LOCAL_WORLD_SIZE", "2"},
                              {"MASTER_ADDR", "127.0.0.1"}, {"MASTER_PORT", "29500"}});
  REQUIRE_THROWS_WITH(comm::choose_address(env, vars_of({})),
                      Contains("would listen on 127.0.0.1 (routes to MASTER_ADDR=127.0.0.1), a loopback address") &&
                          Contains("2 of its 4 ranks on this one") && Contains("BRIGADE_GLOO_IFACE") &&
                          Contains("BRIGADE_GLOO_HOST"));
  // Unless the user asked for it (two "nodes" on one machine).
  REQUIRE(comm::choose_address(env, vars_of({{"BRIGADE_GLOO_IFACE", "lo"}})).address == "127.0.0.1");
  REQUIRE(comm::choose_address(env, vars_of({{"BRIGADE_GLOO_HOST", "127.0.0.1"}})).address == "127.0.0.1");
  REQUIRE_THROWS_WITH(comm::choose_address(env, vars_of({{"BRIGADE_GLOO_IFACE", "nosuch0"}})),
                      Contains("BRIGADE_GLOO_IFACE=nosuch0 is not an interface") && Contains("lo 127.0.0.1"));
  // And connect() refuses before waiting for anyone (no store is reachable here: it would time out).
  comm::ConnectOptions options;
  options.connect_timeout = std::chrono::seconds(30);
  auto start = std::chrono::steady_clock::now();
  REQUIRE_THROWS_WITH(comm::connect(env, options), Contains("a loopback address"));
  REQUIRE(std::chrono::steady_clock::now() - start < std::chrono::seconds(5));
}
