// Reading which sockets listen on a port, from /proc/net/tcp as the kernel
// writes it, and from this very process.
#include "exec/local/process_identity.h"

#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

namespace headway::internal {
namespace {

// Two listeners on 8080 (127.0.0.1 and ::), a connection from it, and a
// listener on another port.
constexpr const char* kTcp =
    "  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout "
    "inode\n"
    "   0: 0100007F:1F90 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 "
    "41122 1 0000000000000000 100 0 0 10 0\n"
    "   1: 0100007F:1F90 0100007F:D2F0 01 00000000:00000000 00:00000000 00000000     0        0 "
    "41200 1 0000000000000000 20 4 30 10 -1\n"
    "   2: 00000000:0016 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 "
    "1234 1 0000000000000000 100 0 0 10 0\n";
constexpr const char* kTcp6 =
    "  sl  local_address                         remote_address                        st tx_queue "
    "rx_queue tr tm->when retrnsmt   uid  timeout inode\n"
    "   0: 00000000000000000000000000000000:1F90 00000000000000000000000000000000:0000 0A "
    "00000000:00000000 00:00000000 00000000     0        0 51515 1 0000000000000000 100 0 0 10 0\n";

TEST(ProcessIdentity, ListeningSocketsAreReadByPortAndStateOnly) {
  EXPECT_EQ(ListeningSocketInodes(kTcp, 8080), std::vector<std::uint64_t>{41122});
  EXPECT_EQ(ListeningSocketInodes(kTcp, 22), std::vector<std::uint64_t>{1234});
  EXPECT_TRUE(ListeningSocketInodes(kTcp, 53426).empty());  // D2F0: a remote port
  EXPECT_EQ(ListeningSocketInodes(kTcp6, 8080), std::vector<std::uint64_t>{51515});
  EXPECT_TRUE(ListeningSocketInodes("garbage\nnot a table\n", 8080).empty());
}

TEST(ProcessIdentity, AProcessListensOnlyOnThePortsItsSocketsHold) {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  ASSERT_GE(fd, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
  socklen_t len = sizeof addr;
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
  const int port = ntohs(addr.sin_port);
  EXPECT_FALSE(AnyListensOn({::getpid()}, port));  // bound, not listening
  ASSERT_EQ(::listen(fd, 1), 0);
  EXPECT_TRUE(AnyListensOn({::getpid()}, port));
  EXPECT_FALSE(AnyListensOn({}, port));
  EXPECT_FALSE(AnyListensOn({::getpid()}, port == 65535 ? 1 : port + 1));
  ::close(fd);
  EXPECT_FALSE(AnyListensOn({::getpid()}, port));
}

}  // namespace
}  // namespace headway::internal
