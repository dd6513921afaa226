// A single-node Slurm cluster for one test: munged, slurmctld and slurmd (Debian's munge and
// slurm-wlm), started by hand in the foreground with a generated slurm.conf, their own munge key and
// socket, state and spool in a temporary directory, on ports picked here. No systemd, no cgroups.
//
//   test::SlurmCluster slurm;                   // up and idle, or throws naming the daemon and its log
//   run_command(slurm.env() + "srun --overcommit -n 4 prog");
//
// The destructor kills the daemons and everything they started (this process becomes a "child
// subreaper", so even the step daemons that slurmd detaches come back to it) and removes the
// directory.
#pragma once

#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <memory>
#include <random>
#include <stdexcept>
#include <string>
#include <thread>

#include "comm/background.h"
#include "comm/run_command.h"
#include "temp_dir.h"

namespace test {

class SlurmCluster {
 public:
  // Which of the programs a cluster needs are missing from PATH ("" when none is).
  static std::string missing_programs() {
    std::string missing;
    for (const char* p : {"munged", "slurmctld", "slurmd", "srun", "sinfo"})
      if (run_command(std::string("command -v ") + p).status != 0) missing += std::string(missing.empty() ? "" : " ") + p;
    return missing;
  }

  explicit SlurmCluster(double seconds = 20) : dir_("brigade_slurm") {
    prctl(PR_SET_CHILD_SUBREAPER, 1);
    const std::string d = dir_.path.string();
    std::filesystem::permissions(d, std::filesystem::perms::owner_all);  // munged refuses open directories
    {
      std::ofstream key(d + "/munge.key", std::ios::binary);
      std::random_device random;
      for (int i = 0; i < 1024; ++i) key.put(char(random()));
    }
    std::filesystem::permissions(d + "/munge.key", std::filesystem::perms::owner_read);
    std::filesystem::create_directories(d + "/state");
    std::filesystem::create_directories(d + "/spool");
    write_conf();
    munged_ = std::make_unique<Background>("munged --foreground --force --key-file=" + d + "/munge.key --socket=" + d +
                                               "/munge.socket --pid-file=" + d + "/munged.pid --seed-file=" + d +
                                               "/munged.seed --log-file=" + d + "/munged.log",
                                           d + "/munged.out");
    wait_until("munged", [&] { return std::filesystem::exists(d + "/munge.socket"); }, seconds, d + "/munged.out");
    ctld_ = std::make_unique<Background>("slurmctld -D -i -f " + conf(), d + "/slurmctld.out");
    slurmd_ = std::make_unique<Background>("slurmd -D -f " + conf(), d + "/slurmd.out");
    // sinfo prints "idle" once slurmd has registered with the controller.
    wait_until("slurmd", [&] { return run_command(env() + "sinfo -h -o %t").output.find("idle") == 0; }, seconds,
               d + "/slurmd.out and " + d + "/slurmctld.out");
  }

  ~SlurmCluster() {
    // Everything this process started that is still running is a daemon of ours or a step of theirs.
    for (int round = 0; round < 3; ++round) {
      for (int pid : descendants(getpid())) kill(pid, SIGKILL);
      while (waitpid(-1, nullptr, WNOHANG) > 0) {
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    munged_.reset();
    ctld_.reset();
    slurmd_.reset();
    prctl(PR_SET_CHILD_SUBREAPER, 0);
  }

  // The prefix that points Slurm's commands at this cluster.
  std::string env() const { return "SLURM_CONF=" + conf() + " "; }
  // The cluster's scratch directory (removed with it): for batch jobs' output files.
  std::string dir() const { return dir_.path.string(); }
  // The first job's id: the Slurm ranks' TCP store serves on 29500 + id mod 1000 (comm/launch_env.h).
  int first_job_id() const { return first_job_id_; }

 private:
  std::string conf() const { return dir_.file("slurm.conf"); }

  // A first job id whose next few derived store ports are free now, so that parallel tests (and a
  // second cluster) are unlikely to meet on one.
  static int pick_first_job_id() {
    std::mt19937 random{std::random_device{}()};
    for (;;) {
      const int id = 1000 + int(random() % 100000);
      bool free = true;
      for (int k = 0; k < 8 && free; ++k) {
        const int fd = brigade::comm::listen_on_any(29500 + (id + k) % 1000, 1);
        free = fd >= 0;
        if (fd >= 0) close(fd);
      }
      if (free) return id;
    }
  }

  void write_conf() {
    char host[256] = {};
    gethostname(host, sizeof host - 1);
    first_job_id_ = pick_first_job_id();
    const std::string d = dir_.path.string();
    std::ofstream conf_file(conf());
    conf_file << "ClusterName=brigade\nSlurmctldHost=" << host << "\nSlurmctldPort=" << free_port()
              << "\nSlurmdPort=" << free_port()
              << "\nSlurmUser=root\nSlurmdUser=root\nAuthType=auth/munge\nCredType=cred/munge\nAuthInfo=socket=" << d
              << "/munge.socket\nStateSaveLocation=" << d << "/state\nSlurmdSpoolDir=" << d
              << "/spool\nSlurmctldPidFile=" << d << "/slurmctld.pid\nSlurmdPidFile=" << d
              << "/slurmd.pid\nSlurmctldLogFile=" << d << "/slurmctld.log\nSlurmdLogFile=" << d
              << "/slurmd.log\n"
                 // No cgroups in a container: track processes by parentage, bind nothing.
                 "ProctrackType=proctrack/linuxproc\nTaskPlugin=task/none\nJobAcctGatherType=jobacct_gather/none\n"
                 "SwitchType=switch/none\nMpiDefault=none\nReturnToService=2\nFirstJobId="
              << first_job_id_
              << "\n"
                 // Four CPUs whatever the machine has (trust the config), and srun --overcommit for more.
                 "SlurmdParameters=config_overrides\nNodeName="
              << host << " CPUs=4 State=UNKNOWN\nPartitionName=debug Nodes=ALL Default=YES MaxTime=INFINITE State=UP\n";
  }

  template <class Ready>
  void wait_until(const std::string& daemon, Ready ready, double seconds, const std::string& logs) {
    const auto until = Clock::now() + std::chrono::milliseconds(int64_t(seconds * 1000));
    while (!ready()) {
      if (Clock::now() >= until)
        throw std::runtime_error("slurm cluster: " + daemon + " was not up after " + std::to_string(int(seconds)) +
                                 " s (see " + logs + ")");
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
  }

  static std::vector<int> descendants(int root) {
    std::vector<int> all;
    for (int child : children_of(root)) {
      all.push_back(child);
      for (int d : descendants(child)) all.push_back(d);
    }
    return all;
  }

  TempDir dir_;
  int first_job_id_ = 0;
  std::unique_ptr<Background> munged_, ctld_, slurmd_;
};

}  // namespace test
