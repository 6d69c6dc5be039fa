// Reading a rank's place from the environment: kiln's, Open MPI's and Slurm's variables, their
// precedence, and every malformed setting named in its error.
#include "distributed/launch_env.h"

#include <gtest/gtest.h>

#include <map>
#include <string>

namespace kiln::distributed {
namespace {

absl::StatusOr<std::optional<LaunchEnv>> Read(const std::map<std::string, std::string>& vars) {
  return ReadLaunchEnv([&](const char* name) -> const char* {
    auto it = vars.find(name);
    return it == vars.end() ? nullptr : it->second.c_str();
  });
}

const std::string kStore = "file:///shared/run";

TEST(LaunchEnv, NothingSetIsASingleProcessRun) {
  auto env = Read({{"PATH", "/bin"}, {"KILN_RENDEZVOUS", kStore}});
  ASSERT_TRUE(env.ok());
  EXPECT_FALSE(env->has_value());
}

TEST(LaunchEnv, KilnVariables) {
  auto env = Read({{"KILN_RANK", "2"}, {"KILN_WORLD_SIZE", "4"}, {"KILN_LOCAL_RANK", "0"},
                   {"KILN_LOCAL_WORLD_SIZE", "2"}, {"KILN_RENDEZVOUS", kStore}, {"KILN_RUN_ID", "abc"},
                   {"KILN_HOST", "10.0.0.1"}});
  ASSERT_TRUE(env.ok()) << env.status();
  const LaunchEnv& e = **env;
  EXPECT_EQ(e.rank, 2);
  EXPECT_EQ(e.world_size, 4);
  EXPECT_EQ(e.local_rank, 0);
  EXPECT_EQ(e.local_world_size, 2);
  EXPECT_EQ(e.rendezvous, kStore);
  EXPECT_EQ(e.run_id, "abc");
  EXPECT_EQ(e.host, "10.0.0.1");
  EXPECT_EQ(e.source, "kiln");
}

TEST(LaunchEnv, OpenMpiVariables) {
  auto env = Read({{"OMPI_COMM_WORLD_RANK", "3"}, {"OMPI_COMM_WORLD_SIZE", "8"}, {"OMPI_COMM_WORLD_LOCAL_RANK", "1"},
                   {"OMPI_COMM_WORLD_LOCAL_SIZE", "2"}, {"KILN_RENDEZVOUS", "redis://head:6379"}});
  ASSERT_TRUE(env.ok()) << env.status();
  EXPECT_EQ((*env)->source, "openmpi");
  EXPECT_EQ((*env)->rank, 3);
  EXPECT_EQ((*env)->world_size, 8);
  EXPECT_EQ((*env)->local_rank, 1);
  EXPECT_EQ((*env)->local_world_size, 2);
  EXPECT_EQ((*env)->run_id, "");
}

TEST(LaunchEnv, SlurmVariables) {
  auto env = Read({{"SLURM_PROCID", "5"}, {"SLURM_NTASKS", "6"}, {"SLURM_LOCALID", "2"},
                   {"SLURM_NTASKS_PER_NODE", "3"}, {"SLURM_JOB_ID", "4711"}, {"SLURM_STEP_ID", "0"},
                   {"KILN_RENDEZVOUS", kStore}});
  ASSERT_TRUE(env.ok()) << env.status();
  EXPECT_EQ((*env)->source, "slurm");
  EXPECT_EQ((*env)->rank, 5);
  EXPECT_EQ((*env)->world_size, 6);
  EXPECT_EQ((*env)->local_rank, 2);
  EXPECT_EQ((*env)->local_world_size, 3);
  EXPECT_EQ((*env)->run_id, "slurm-4711.0");  // every task of a step shares it
}

TEST(LaunchEnv, PrecedenceKilnThenOpenMpiThenSlurm) {
  // mpirun inside a Slurm allocation: the allocation's SLURM_* describe the mpirun step.
  const std::map<std::string, std::string> both{
      {"SLURM_PROCID", "0"}, {"SLURM_NTASKS", "1"}, {"OMPI_COMM_WORLD_RANK", "1"},
      {"OMPI_COMM_WORLD_SIZE", "2"}, {"KILN_RENDEZVOUS", kStore}};
  auto env = Read(both);
  ASSERT_TRUE(env.ok()) << env.status();
  EXPECT_EQ((*env)->source, "openmpi");
  EXPECT_EQ((*env)->rank, 1);
  auto all = both;
  all["KILN_RANK"] = "0";
  all["KILN_WORLD_SIZE"] = "3";
  env = Read(all);
  ASSERT_TRUE(env.ok()) << env.status();
  EXPECT_EQ((*env)->source, "kiln");
  EXPECT_EQ((*env)->world_size, 3);
  // Slurm's local id does not leak into a kiln-launched rank.
  EXPECT_EQ((*env)->local_rank, 0);
  // KILN_RUN_ID wins over Slurm's job id.
  all["SLURM_JOB_ID"] = "9";
  all["KILN_RUN_ID"] = "mine";
  EXPECT_EQ((*Read(all))->run_id, "mine");
}

void ExpectError(const std::map<std::string, std::string>& vars, const std::string& message) {
  auto env = Read(vars);
  ASSERT_FALSE(env.ok());
  EXPECT_EQ(env.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(env.status().message(), message);
}

TEST(LaunchEnv, Errors) {
  ExpectError({{"KILN_RANK", "0"}}, "KILN_RANK is set but KILN_WORLD_SIZE is not; a launcher sets both");
  ExpectError({{"SLURM_NTASKS", "2"}}, "SLURM_NTASKS is set but SLURM_PROCID is not; a launcher sets both");
  ExpectError({{"KILN_RANK", "0"}, {"KILN_WORLD_SIZE", "0"}, {"KILN_RENDEZVOUS", kStore}},
              "KILN_WORLD_SIZE=0: the world size must be at least 1");
  ExpectError({{"KILN_RANK", "2"}, {"KILN_WORLD_SIZE", "2"}, {"KILN_RENDEZVOUS", kStore}},
              "KILN_RANK=2 is out of range for KILN_WORLD_SIZE=2 (ranks are 0..1)");
  ExpectError({{"OMPI_COMM_WORLD_RANK", "-1"}, {"OMPI_COMM_WORLD_SIZE", "2"}, {"KILN_RENDEZVOUS", kStore}},
              "OMPI_COMM_WORLD_RANK=-1 is out of range for OMPI_COMM_WORLD_SIZE=2 (ranks are 0..1)");
  ExpectError({{"KILN_RANK", "one"}, {"KILN_WORLD_SIZE", "2"}}, "KILN_RANK='one' is not an integer");
  ExpectError({{"SLURM_PROCID", "0"}, {"SLURM_NTASKS", "4"}, {"SLURM_LOCALID", "2"}, {"SLURM_NTASKS_PER_NODE", "2"},
               {"KILN_RENDEZVOUS", kStore}},
              "SLURM_LOCALID=2 is out of range for 2 rank(s) on this machine (SLURM_NTASKS_PER_NODE)");
  ExpectError({{"KILN_RANK", "0"}, {"KILN_WORLD_SIZE", "2"}, {"KILN_LOCAL_WORLD_SIZE", "3"}, {"KILN_RENDEZVOUS", kStore}},
              "KILN_LOCAL_WORLD_SIZE=3 must be in 1..KILN_WORLD_SIZE=2");
  ExpectError({{"SLURM_PROCID", "0"}, {"SLURM_NTASKS", "2"}},
              "SLURM_PROCID and SLURM_NTASKS are set but KILN_RENDEZVOUS is not; set it to file:///shared/dir or "
              "redis://host:port, the same for every rank");
  ExpectError({{"KILN_RANK", "0"}, {"KILN_WORLD_SIZE", "2"}, {"KILN_RENDEZVOUS", "/shared/run"}},
              "KILN_RENDEZVOUS: rendezvous address '/shared/run': expected file:///absolute/shared/dir or "
              "redis://host[:port]");
}

}  // namespace
}  // namespace kiln::distributed
