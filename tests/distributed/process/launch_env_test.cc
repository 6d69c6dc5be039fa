// Reading a rank's place from the environment: kiln's, Open MPI's and Slurm's variables, their
// precedence, their limits, and every malformed setting named in its error.
#include "distributed/process/launch_env.h"

#include <gtest/gtest.h>

#include <map>
#include <string>
#include <utility>

#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"

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
  auto env = Read({{"KILN_RANK", "2"},
                   {"KILN_WORLD_SIZE", "4"},
                   {"KILN_LOCAL_RANK", "0"},
                   {"KILN_LOCAL_WORLD_SIZE", "2"},
                   {"KILN_RENDEZVOUS", kStore},
                   {"KILN_RUN_ID", "abc"},
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
  auto env = Read({{"OMPI_COMM_WORLD_RANK", "3"},
                   {"OMPI_COMM_WORLD_SIZE", "8"},
                   {"OMPI_COMM_WORLD_LOCAL_RANK", "1"},
                   {"OMPI_COMM_WORLD_LOCAL_SIZE", "2"},
                   {"KILN_RENDEZVOUS", "redis://head:6379"}});
  ASSERT_TRUE(env.ok()) << env.status();
  EXPECT_EQ((*env)->source, "openmpi");
  EXPECT_EQ((*env)->rank, 3);
  EXPECT_EQ((*env)->world_size, 8);
  EXPECT_EQ((*env)->local_rank, 1);
  EXPECT_EQ((*env)->local_world_size, 2);
  EXPECT_EQ((*env)->run_id, "");
}

TEST(LaunchEnv, SlurmVariables) {
  auto env = Read({{"SLURM_PROCID", "5"},
                   {"SLURM_NTASKS", "6"},
                   {"SLURM_LOCALID", "2"},
                   {"SLURM_NTASKS_PER_NODE", "3"},
                   {"SLURM_JOB_ID", "4711"},
                   {"SLURM_STEP_ID", "0"},
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
  const std::map<std::string, std::string> both{{"SLURM_PROCID", "0"},
                                                {"SLURM_NTASKS", "1"},
                                                {"OMPI_COMM_WORLD_RANK", "1"},
                                                {"OMPI_COMM_WORLD_SIZE", "2"},
                                                {"KILN_RENDEZVOUS", kStore}};
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
  ExpectError({{"SLURM_PROCID", "0"},
               {"SLURM_NTASKS", "4"},
               {"SLURM_LOCALID", "2"},
               {"SLURM_NTASKS_PER_NODE", "2"},
               {"KILN_RENDEZVOUS", kStore}},
              "SLURM_LOCALID=2 is out of range for 2 rank(s) on this machine (SLURM_NTASKS_PER_NODE)");
  ExpectError(
      {{"KILN_RANK", "0"}, {"KILN_WORLD_SIZE", "2"}, {"KILN_LOCAL_WORLD_SIZE", "3"}, {"KILN_RENDEZVOUS", kStore}},
      "KILN_LOCAL_WORLD_SIZE=3 must be in 1..KILN_WORLD_SIZE=2");
  ExpectError({{"SLURM_PROCID", "0"}, {"SLURM_NTASKS", "2"}},
              "SLURM_PROCID and SLURM_NTASKS are set but KILN_RENDEZVOUS is not; set it to file:///shared/dir or "
              "redis://host:port, the same for every rank");
  ExpectError({{"KILN_RANK", "0"}, {"KILN_WORLD_SIZE", "2"}, {"KILN_RENDEZVOUS", "/shared/run"}},
              "KILN_RENDEZVOUS: rendezvous address '/shared/run': expected file:///absolute/shared/dir or "
              "redis://host[:port]");
}

// A kiln rank of a world of two with `name` set to `value` (or replaced, for the kiln names).
std::map<std::string, std::string> KilnWith(const std::string& name, const std::string& value) {
  std::map<std::string, std::string> vars{{"KILN_RANK", "0"}, {"KILN_WORLD_SIZE", "2"}, {"KILN_RENDEZVOUS", kStore}};
  vars[name] = value;
  return vars;
}

TEST(LaunchEnv, WorldSizeHasACap) {
  // Accepted, each rank would wait for 2^31 - 1 peers that never come.
  ExpectError(KilnWith("KILN_WORLD_SIZE", "2147483647"),
              "KILN_WORLD_SIZE=2147483647: the world size must be at most 65536");
  ExpectError(KilnWith("KILN_WORLD_SIZE", "65537"), "KILN_WORLD_SIZE=65537: the world size must be at most 65536");
  ExpectError(KilnWith("KILN_WORLD_SIZE", "99999999999999999999"),
              "KILN_WORLD_SIZE='99999999999999999999' is out of range");
  ExpectError({{"SLURM_PROCID", "0"}, {"SLURM_NTASKS", "4294967296"}, {"KILN_RENDEZVOUS", kStore}},
              "SLURM_NTASKS=4294967296: the world size must be at most 65536");
  auto env = Read({{"KILN_RANK", "65535"},
                   {"KILN_WORLD_SIZE", "65536"},
                   {"KILN_LOCAL_RANK", "8191"},
                   {"KILN_LOCAL_WORLD_SIZE", "8192"},
                   {"KILN_RENDEZVOUS", kStore}});
  ASSERT_TRUE(env.ok()) << env.status();
  EXPECT_EQ((*env)->world_size, kMaxWorldSize);
  EXPECT_EQ((*env)->local_world_size, kMaxLocalWorldSize);
  auto vars = KilnWith("KILN_WORLD_SIZE", "65536");
  vars["KILN_LOCAL_WORLD_SIZE"] = "8193";
  ExpectError(vars, "KILN_LOCAL_WORLD_SIZE=8193 must be at most 8192 (ranks on one machine)");
  ExpectError(KilnWith("KILN_LOCAL_WORLD_SIZE", "99999999999999999999"),
              "KILN_LOCAL_WORLD_SIZE='99999999999999999999' is out of range");
}

TEST(LaunchEnv, IntegersAreExact) {
  for (const std::string bad : {" 1", "1 ", "+1", "1\n", "\t1", "0x1", "1e0", "1.0", "", "-", "--1", "1-"}) {
    SCOPED_TRACE(bad);
    auto env = Read(KilnWith("KILN_RANK", bad));
    ASSERT_FALSE(env.ok());
    EXPECT_TRUE(absl::StartsWith(env.status().message(), "KILN_RANK='")) << env.status();
    EXPECT_TRUE(absl::EndsWith(env.status().message(), "' is not an integer")) << env.status();
  }
  ExpectError(KilnWith("KILN_RANK", "+1"), "KILN_RANK='+1' is not an integer");
  ExpectError(KilnWith("KILN_WORLD_SIZE", " 2"), "KILN_WORLD_SIZE=' 2' is not an integer");
  ExpectError(KilnWith("KILN_LOCAL_RANK", "0 "), "KILN_LOCAL_RANK='0 ' is not an integer");
  ExpectError(KilnWith("KILN_LOCAL_WORLD_SIZE", "+1"), "KILN_LOCAL_WORLD_SIZE='+1' is not an integer");
  // Leading zeros and a minus sign are still numbers (the minus gives the range error).
  EXPECT_EQ((*Read(KilnWith("KILN_RANK", "01")))->rank, 1);
  ExpectError(KilnWith("KILN_RANK", "-0001"), "KILN_RANK=-1 is out of range for KILN_WORLD_SIZE=2 (ranks are 0..1)");
}

TEST(LaunchEnv, QuotedValuesAreEscapedAndCut) {
  ExpectError(KilnWith("KILN_RANK", "1\n[rank 0] fake line"), "KILN_RANK='1\\n[rank 0] fake line' is not an integer");
  ExpectError(KilnWith("KILN_RANK", "'\x01\xff"), "KILN_RANK='\\'\\x01\\xff' is not an integer");
  const std::string huge(1 << 20, '7');
  auto env = Read(KilnWith("KILN_RANK", "x" + huge));
  ASSERT_FALSE(env.ok());
  EXPECT_EQ(env.status().message(),
            absl::StrCat("KILN_RANK='x", std::string(63, '7'), "'... (1048577 bytes) is not an integer"));
  ExpectError(KilnWith("KILN_WORLD_SIZE", huge),
              absl::StrCat("KILN_WORLD_SIZE='", std::string(64, '7'), "'... (1048576 bytes) is out of range"));
  ExpectError(KilnWith("KILN_RENDEZVOUS", "http://" + huge),
              "KILN_RENDEZVOUS: rendezvous address is 1048583 bytes long; at most 4096 are accepted");
  ExpectError(KilnWith("KILN_RENDEZVOUS", "http://" + std::string(100, '7')),
              absl::StrCat("KILN_RENDEZVOUS: rendezvous address 'http://", std::string(57, '7'),
                           "'... (107 bytes): expected file:///absolute/shared/dir or redis://host[:port]"));
  ExpectError(
      KilnWith("KILN_HOST", std::string(100, 'h') + "\n"),
      absl::StrCat("KILN_HOST='", std::string(64, 'h'), "'... (101 bytes) has a control character at byte 100"));
}

std::map<std::string, std::string> SlurmWith(std::map<std::string, std::string> more) {
  more.insert({{"SLURM_PROCID", "0"}, {"SLURM_NTASKS", "8"}, {"KILN_RENDEZVOUS", kStore}});
  return more;
}

int LocalWorldSize(const std::map<std::string, std::string>& vars) {
  auto env = Read(vars);
  EXPECT_TRUE(env.ok()) << env.status();
  return env.ok() ? (*env)->local_world_size : -1;
}

TEST(LaunchEnv, SlurmTasksPerNodeLists) {
  // The same count on every node: no node id needed.
  EXPECT_EQ(LocalWorldSize(SlurmWith({{"SLURM_NTASKS_PER_NODE", "4(x2)"}})), 4);
  EXPECT_EQ(LocalWorldSize(SlurmWith({{"SLURM_NTASKS_PER_NODE", "2,2(x3)"}})), 2);
  // Heterogeneous nodes: this node's entry.
  const std::string mixed = "2(x3),1";
  EXPECT_EQ(LocalWorldSize(SlurmWith({{"SLURM_NTASKS_PER_NODE", mixed}, {"SLURM_NODEID", "0"}})), 2);
  EXPECT_EQ(LocalWorldSize(SlurmWith({{"SLURM_NTASKS_PER_NODE", mixed}, {"SLURM_NODEID", "2"}})), 2);
  EXPECT_EQ(LocalWorldSize(SlurmWith({{"SLURM_NTASKS_PER_NODE", mixed}, {"SLURM_NODEID", "3"}})), 1);
  EXPECT_EQ(LocalWorldSize(SlurmWith({{"SLURM_NTASKS_PER_NODE", "5,3"}, {"SLURM_NODEID", "1"}})), 3);
  // srun always sets SLURM_STEP_TASKS_PER_NODE; SLURM_NTASKS_PER_NODE (--ntasks-per-node) wins.
  EXPECT_EQ(LocalWorldSize(SlurmWith({{"SLURM_STEP_TASKS_PER_NODE", "3(x2),2"}, {"SLURM_NODEID", "2"}})), 2);
  EXPECT_EQ(LocalWorldSize(SlurmWith({{"SLURM_STEP_TASKS_PER_NODE", "3(x2),2"}, {"SLURM_NTASKS_PER_NODE", "4"}})), 4);
  EXPECT_EQ(LocalWorldSize(SlurmWith({})), 1);
  ExpectError(SlurmWith({{"SLURM_STEP_TASKS_PER_NODE", "2(x4)"}, {"SLURM_LOCALID", "2"}}),
              "SLURM_LOCALID=2 is out of range for 2 rank(s) on this machine (SLURM_STEP_TASKS_PER_NODE)");

  ExpectError(
      SlurmWith({{"SLURM_NTASKS_PER_NODE", mixed}}),
      "SLURM_NTASKS_PER_NODE='2(x3),1' differs between nodes, and SLURM_NODEID (which node this is) is not set");
  ExpectError(SlurmWith({{"SLURM_NTASKS_PER_NODE", mixed}, {"SLURM_NODEID", "4"}}),
              "SLURM_NODEID=4 is out of range for the 4 node(s) of SLURM_NTASKS_PER_NODE='2(x3),1'");
  ExpectError(SlurmWith({{"SLURM_NTASKS_PER_NODE", mixed}, {"SLURM_NODEID", "+1"}}),
              "SLURM_NODEID='+1' is not an integer");
  for (const std::string bad : {"", "4(x", "4(x)", "4(x0)", "4(x2", "4(x2))", "(x2)", "4,", ",4", "4,,2", " 4", "+4",
                                "-4", "4x2", "4(y2)", "4(x-1)", "4(x 2)", "99999999999999999999"}) {
    SCOPED_TRACE(bad);
    ExpectError(SlurmWith({{"SLURM_NTASKS_PER_NODE", bad}, {"SLURM_NODEID", "0"}}),
                absl::StrCat("SLURM_NTASKS_PER_NODE='", absl::CHexEscape(bad),
                             "' is not a count of tasks per node (expected e.g. 4, 4(x2) or 2(x3),1)"));
  }
  ExpectError(SlurmWith({{"SLURM_NTASKS_PER_NODE", "1(x65536),1"}}),
              "SLURM_NTASKS_PER_NODE='1(x65536),1' describes more than 65536 nodes");
  ExpectError(SlurmWith({{"SLURM_NTASKS_PER_NODE", "1(x9223372036854775807),1(x9223372036854775807)"}}),
              "SLURM_NTASKS_PER_NODE='1(x9223372036854775807),1(x9223372036854775807)' describes more than "
              "65536 nodes");
  ExpectError(SlurmWith({{"SLURM_NTASKS_PER_NODE", "0(x2)"}}), "SLURM_NTASKS_PER_NODE=0 must be in 1..SLURM_NTASKS=8");
  ExpectError(SlurmWith({{"SLURM_NTASKS_PER_NODE", "9,1"}, {"SLURM_NODEID", "0"}}),
              "SLURM_NTASKS_PER_NODE=9 must be in 1..SLURM_NTASKS=8");
}

const std::string kToken(64, 'a');

TEST(LaunchEnv, RunToken) {
  EXPECT_EQ((*Read(KilnWith("KILN_HOST", "h")))->run_token, "");  // unset: the process group derives one
  EXPECT_EQ((*Read(KilnWith("KILN_RUN_TOKEN", kToken)))->run_token, kToken);
  const std::string printable = "!\"#$%&'()*+,-./0123456789:;<=>?@AZ[\\]^_`az{|}~";
  EXPECT_EQ((*Read(KilnWith("KILN_RUN_TOKEN", printable)))->run_token, printable);
  EXPECT_EQ((*Read(KilnWith("KILN_RUN_TOKEN", std::string(16, 'x'))))->run_token.size(), 16);
  EXPECT_EQ((*Read(KilnWith("KILN_RUN_TOKEN", std::string(1024, 'x'))))->run_token.size(), 1024);
  // Its errors never show it: a token is a secret even when it is malformed.
  const std::string secret = "s3cr3t-pr3fix-";
  const std::pair<std::string, std::string> cases[] = {
      {"", "KILN_RUN_TOKEN is 0 bytes long; it must be 16..1024 bytes (tools/launch makes 64 hex digits)"},
      {secret, "KILN_RUN_TOKEN is 14 bytes long; it must be 16..1024 bytes (tools/launch makes 64 hex digits)"},
      {secret + std::string(1011, 'x'),
       "KILN_RUN_TOKEN is 1025 bytes long; it must be 16..1024 bytes (tools/launch makes 64 hex digits)"},
      {secret + " with a space",
       "KILN_RUN_TOKEN has a space, control character or non-ASCII byte at byte 14; it must be printable ASCII "
       "without spaces"},
      {secret + "\n" + kToken,
       "KILN_RUN_TOKEN has a space, control character or non-ASCII byte at byte 14; it must be printable ASCII "
       "without spaces"},
      {secret + "\x7f" + kToken,
       "KILN_RUN_TOKEN has a space, control character or non-ASCII byte at byte 14; it must be printable ASCII "
       "without spaces"},
      {secret + "\xc3\xa9" + kToken,
       "KILN_RUN_TOKEN has a space, control character or non-ASCII byte at byte 14; it must be printable ASCII "
       "without spaces"},
  };
  for (const auto& [token, message] : cases) {
    ExpectError(KilnWith("KILN_RUN_TOKEN", token), message);
    EXPECT_FALSE(absl::StrContains(Read(KilnWith("KILN_RUN_TOKEN", token)).status().message(), "s3cr3t"));
  }
}

TEST(LaunchEnv, TextValuesAreBoundedAndPrintable) {
  EXPECT_EQ((*Read(KilnWith("KILN_HOST", std::string(255, 'h'))))->host.size(), 255);
  ExpectError(KilnWith("KILN_HOST", std::string(256, 'h')), "KILN_HOST is 256 bytes long; at most 255 are accepted");
  ExpectError(KilnWith("KILN_HOST", "10.0.0.1\x1b[2J"),
              "KILN_HOST='10.0.0.1\\x1b[2J' has a control character at byte 8");
  EXPECT_EQ((*Read(KilnWith("KILN_RUN_ID", std::string(256, 'r'))))->run_id.size(), 256);
  ExpectError(KilnWith("KILN_RUN_ID", std::string(257, 'r')),
              "KILN_RUN_ID is 257 bytes long; at most 256 are accepted");
  ExpectError(KilnWith("KILN_RUN_ID", "run\r1"), "KILN_RUN_ID='run\\r1' has a control character at byte 3");
  ExpectError(SlurmWith({{"SLURM_JOB_ID", "47\n11"}}), "SLURM_JOB_ID='47\\n11' has a control character at byte 2");
  ExpectError(SlurmWith({{"SLURM_JOB_ID", "4711"}, {"SLURM_STEP_ID", std::string(65, '1')}}),
              "SLURM_STEP_ID is 65 bytes long; at most 64 are accepted");
  EXPECT_EQ((*Read(SlurmWith({{"SLURM_JOB_ID", "4711_3"}, {"SLURM_STEP_ID", "batch"}})))->run_id, "slurm-4711_3.batch");

  const std::string dir = "file:///" + std::string(4088, 'd');  // 4096 bytes in all
  EXPECT_EQ((*Read(KilnWith("KILN_RENDEZVOUS", dir)))->rendezvous, dir);
  ExpectError(KilnWith("KILN_RENDEZVOUS", dir + "d"),
              "KILN_RENDEZVOUS: rendezvous address is 4097 bytes long; at most 4096 are accepted");
  ExpectError(KilnWith("KILN_RENDEZVOUS", "file:///run\n"),
              "KILN_RENDEZVOUS: rendezvous address 'file:///run\\n' has a control character at byte 11");
  // The port is exact too.
  EXPECT_EQ((*Read(KilnWith("KILN_RENDEZVOUS", "redis://head:6379")))->rendezvous, "redis://head:6379");
  for (const std::string bad : {"redis://head: 6379", "redis://head:+6379", "redis://head:6379 ", "redis://head:"}) {
    ExpectError(KilnWith("KILN_RENDEZVOUS", bad),
                absl::StrCat("KILN_RENDEZVOUS: rendezvous address '", bad,
                             "': expected file:///absolute/shared/dir or redis://host[:port]"));
  }
  EXPECT_TRUE(CheckRendezvousAddress("redis://head").ok());
  EXPECT_FALSE(CheckRendezvousAddress("redis://head:0").ok());
  EXPECT_FALSE(CheckRendezvousAddress("redis://head:65536").ok());
}

TEST(LaunchEnv, RestartCountIsTheGenerationAndNamespacesTheRunId) {
  // Unset: generation 0, and the run id as it always was.
  EXPECT_EQ((*Read(KilnWith("KILN_RUN_ID", "r")))->restart_count, 0);
  EXPECT_EQ((*Read(KilnWith("KILN_RUN_ID", "r")))->run_id, "r");
  auto vars = KilnWith("KILN_RUN_ID", "launch-7-abc");
  vars["KILN_RESTART_COUNT"] = "0";
  EXPECT_EQ((*Read(vars))->run_id, "launch-7-abc");
  vars["KILN_RESTART_COUNT"] = "2";
  EXPECT_EQ((*Read(vars))->restart_count, 2);
  EXPECT_EQ((*Read(vars))->run_id, "launch-7-abc.restart-2");
  // No run id (Open MPI without KILN_RUN_ID): the generation alone.
  EXPECT_EQ((*Read(KilnWith("KILN_RESTART_COUNT", "1")))->run_id, "restart-1");
  // A requeued Slurm job: its restart count, next to its job and step.
  auto slurm = SlurmWith({{"SLURM_JOB_ID", "4711"}, {"SLURM_STEP_ID", "0"}, {"SLURM_RESTART_COUNT", "3"}});
  EXPECT_EQ((*Read(slurm))->restart_count, 3);
  EXPECT_EQ((*Read(slurm))->run_id, "slurm-4711.0.restart-3");
  // tools/launch's own count wins over the job's.
  slurm["KILN_RESTART_COUNT"] = "1";
  EXPECT_EQ((*Read(slurm))->restart_count, 1);
  EXPECT_EQ((*Read(slurm))->run_id, "slurm-4711.0.restart-1");
  // The longest run id and generation still fit their bound.
  vars = KilnWith("KILN_RUN_ID", std::string(kMaxRunIdLength, 'r'));
  vars["KILN_RESTART_COUNT"] = absl::StrCat(kMaxRestartCount);
  EXPECT_EQ((*Read(vars))->run_id.size(), kMaxGenerationRunIdLength);
}

TEST(LaunchEnv, RestartCountErrors) {
  ExpectError(KilnWith("KILN_RESTART_COUNT", "-1"),
              "KILN_RESTART_COUNT=-1 is out of range (a run generation is 0..1000000)");
  ExpectError(KilnWith("KILN_RESTART_COUNT", "1000001"),
              "KILN_RESTART_COUNT=1000001 is out of range (a run generation is 0..1000000)");
  ExpectError(KilnWith("KILN_RESTART_COUNT", "99999999999999999999"),
              "KILN_RESTART_COUNT='99999999999999999999' is out of range");
  for (const std::string bad : {"", " 1", "+1", "1 ", "one", "1.0", "0x1", "1\n"}) {
    ExpectError(KilnWith("KILN_RESTART_COUNT", bad),
                absl::StrCat("KILN_RESTART_COUNT='", absl::CHexEscape(bad), "' is not an integer"));
  }
  ExpectError(SlurmWith({{"SLURM_RESTART_COUNT", "-2"}}),
              "SLURM_RESTART_COUNT=-2 is out of range (a run generation is 0..1000000)");
  ExpectError(SlurmWith({{"SLURM_RESTART_COUNT", "2\n[rank 0] forged"}}),
              "SLURM_RESTART_COUNT='2\\n[rank 0] forged' is not an integer");
}

}  // namespace
}  // namespace kiln::distributed
