// librspreload.so's /etc/rdma/rsocket/preload_config: which lines become
// rules (read_rules) and which sockets the rules hand to rsockets (wanted),
// each case beside what rdma-core 44's preload.c (scan_config,
// intercept_socket) does with the same text.
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/socket.h>

#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <rdma/rsocket.h>

#include "../../preload/config.h"

namespace rspreload {
namespace {

// The rules read_rules() makes of `text`, as a file would hold it.
std::vector<Rule> rules_of(const std::string& text) {
  FILE* f = tmpfile();
  EXPECT_NE(f, nullptr);
  if (!f) return {};
  fwrite(text.data(), 1, text.size(), f);
  rewind(f);
  Rule* list = reinterpret_cast<Rule*>(1);  // must be overwritten
  int n = read_rules(f, &list);
  fclose(f);
  EXPECT_GE(n, 0);
  if (n <= 0) {
    EXPECT_EQ(list, nullptr);
    return {};
  }
  std::vector<Rule> out(list, list + n);
  free(list);
  return out;
}

std::string str(const Rule& r) {
  return std::string(r.program) + " " + std::to_string(r.domain) + " " + std::to_string(r.type) +
         " " + std::to_string(r.protocol);
}

std::string rule(const char* program, int domain, int type, int protocol) {
  Rule r{};
  snprintf(r.program, sizeof r.program, "%s", program);
  r.domain = domain, r.type = type, r.protocol = protocol;
  return str(r);
}

std::vector<std::string> strs(const std::vector<Rule>& rules) {
  std::vector<std::string> out;
  for (const Rule& r : rules) out.push_back(str(r));
  return out;
}

using Strings = std::vector<std::string>;
using namespace std::string_literals;

TEST(PreloadConfig, EveryDomainTypeAndProtocolSpellingInAnyCase) {
  EXPECT_EQ(strs(rules_of("rstream INET STREAM TCP\n"
                          "a af_inet sock_stream ipproto_tcp\n"
                          "b Pf_Inet Dgram Udp\n"
                          "c INET6 SOCK_DGRAM IPPROTO_UDP\n"
                          "d AF_INET6 stream tcp\n"
                          "e PF_INET6 STREAM TCP\n"
                          "f IB STREAM TCP\n"
                          "g AF_IB DGRAM UDP\n"
                          "h pf_ib STREAM TCP\n")),
            (Strings{rule("rstream", AF_INET, SOCK_STREAM, IPPROTO_TCP),
                     rule("a", AF_INET, SOCK_STREAM, IPPROTO_TCP),
                     rule("b", AF_INET, SOCK_DGRAM, IPPROTO_UDP),
                     rule("c", AF_INET6, SOCK_DGRAM, IPPROTO_UDP),
                     rule("d", AF_INET6, SOCK_STREAM, IPPROTO_TCP),
                     rule("e", AF_INET6, SOCK_STREAM, IPPROTO_TCP),
                     rule("f", AF_IB, SOCK_STREAM, IPPROTO_TCP),
                     rule("g", AF_IB, SOCK_DGRAM, IPPROTO_UDP),
                     rule("h", AF_IB, SOCK_STREAM, IPPROTO_TCP)}));
}

TEST(PreloadConfig, StarIsAnyInEveryField) {
  EXPECT_EQ(strs(rules_of("* * * *\nnc * DGRAM *\n")),
            (Strings{rule("*", kAny, kAny, kAny), rule("nc", kAny, SOCK_DGRAM, kAny)}));
}

// Separators are any white space, CRLF included; the last line needs no
// newline; words past the fourth are ignored (so a trailing comment is too).
TEST(PreloadConfig, WhiteSpaceLineEndsAndTrailingWords) {
  EXPECT_EQ(strs(rules_of("  a\tINET   STREAM\tTCP\r\n"
                          "b INET STREAM TCP # only for b\n"
                          "c INET DGRAM UDP")),
            (Strings{rule("a", AF_INET, SOCK_STREAM, IPPROTO_TCP),
                     rule("b", AF_INET, SOCK_STREAM, IPPROTO_TCP),
                     rule("c", AF_INET, SOCK_DGRAM, IPPROTO_UDP)}));
}

// A comment is a line whose first character is '#', as in rdma-core 44: an
// indented '#' starts a program name instead (a rule no program matches).
TEST(PreloadConfig, CommentsAndBlankLinesMakeNoRule) {
  EXPECT_TRUE(rules_of("").empty());
  EXPECT_TRUE(rules_of("\n\n   \n\t\r\n").empty());
  EXPECT_TRUE(rules_of("# rstream INET STREAM TCP\n#\n#* * * *\n").empty());
  EXPECT_EQ(strs(rules_of(" # INET STREAM TCP\n")),
            (Strings{rule("#", AF_INET, SOCK_STREAM, IPPROTO_TCP)}));
}

// A line with fewer than four words or a word the parser does not know is
// skipped whole (numbers are not known: rdma-core 44 takes names only), and
// the lines around it still count.
TEST(PreloadConfig, BadLinesAreSkippedAndTheRestKept) {
  EXPECT_EQ(strs(rules_of("a INET STREAM TCP\n"
                          "rstream INET STREAM\n"
                          "rstream\n"
                          "rstream UNIX STREAM TCP\n"
                          "rstream INET RAW TCP\n"
                          "rstream INET SEQPACKET TCP\n"
                          "rstream INET STREAM SCTP\n"
                          "rstream 2 1 6\n"
                          "rstream INET STREAM ** \n"
                          "rstream INET, STREAM, TCP\n"
                          "z INET6 DGRAM UDP\n")),
            (Strings{rule("a", AF_INET, SOCK_STREAM, IPPROTO_TCP),
                     rule("z", AF_INET6, SOCK_DGRAM, IPPROTO_UDP)}));
}

// A program name of 63 characters is kept whole; at 64 its last character
// becomes the domain word (both parsers scan "%63s%15s..."), so the line
// says nothing it meant and is skipped.
TEST(PreloadConfig, ProgramNamesUpTo63Characters) {
  std::string p63(63, 'p');
  EXPECT_EQ(strs(rules_of(p63 + " INET STREAM TCP\n")),
            (Strings{rule(p63.c_str(), AF_INET, SOCK_STREAM, IPPROTO_TCP)}));
  EXPECT_TRUE(rules_of(p63 + "q INET STREAM TCP\n").empty());
}

TEST(PreloadConfig, ThousandsOfRulesAllKeptInOrder) {
  std::string text;
  for (int i = 0; i < 5000; i++)
    text += "p" + std::to_string(i) + (i % 2 ? " INET STREAM TCP\n" : " INET6 DGRAM UDP\n");
  std::vector<Rule> rules = rules_of(text);
  ASSERT_EQ(rules.size(), 5000u);
  EXPECT_EQ(str(rules[0]), rule("p0", AF_INET6, SOCK_DGRAM, IPPROTO_UDP));
  EXPECT_EQ(str(rules[4999]), rule("p4999", AF_INET, SOCK_STREAM, IPPROTO_TCP));
}

// A line longer than the parser's buffer (159 characters) is one line: its
// first 159 characters are parsed and the rest skipped. rdma-core 44 (and
// this parser before) read the rest as a line of its own (past 119
// characters there), so the end of a long comment became a rule.
TEST(PreloadConfig, AnOverlongLineIsOneLine) {
  std::string tail = "nc * * *\n";
  EXPECT_TRUE(rules_of("#" + std::string(158, '-') + tail).empty());
  EXPECT_TRUE(rules_of("#" + std::string(1000, '-') + tail).empty());
  EXPECT_EQ(strs(rules_of("a INET STREAM TCP" + std::string(142, ' ') + tail +
                          "b INET DGRAM UDP\n")),
            (Strings{rule("a", AF_INET, SOCK_STREAM, IPPROTO_TCP),
                     rule("b", AF_INET, SOCK_DGRAM, IPPROTO_UDP)}));
  // Exactly 159 characters and its newline: whole, and the next line too.
  std::string full = "c INET STREAM TCP" + std::string(142, ' ');
  ASSERT_EQ(full.size(), 159u);
  EXPECT_EQ(strs(rules_of(full + "\n" + tail)),
            (Strings{rule("c", AF_INET, SOCK_STREAM, IPPROTO_TCP), rule("nc", kAny, kAny, kAny)}));
  // A NUL byte ends what is parsed of its line, not the line.
  EXPECT_EQ(strs(rules_of("a\0 INET STREAM TCP\nb INET STREAM TCP\n"s)),
            (Strings{rule("b", AF_INET, SOCK_STREAM, IPPROTO_TCP)}));
}

// wanted(): which socket() calls become rsockets, in `program`, under the
// rules of a config file holding `config`.
bool takes(const std::string& config, const char* program, int domain, int type,
           int protocol = 0) {
  std::vector<Rule> rules = rules_of(config);
  return wanted(rules.data(), static_cast<int>(rules.size()), program, domain, type, protocol);
}

TEST(PreloadWanted, WithoutRulesEveryTcpAndUdpSocketOfInetInet6AndIb) {
  for (int domain : {AF_INET, AF_INET6, AF_IB}) {
    SCOPED_TRACE(domain);
    EXPECT_TRUE(takes("", "any", domain, SOCK_STREAM));
    EXPECT_TRUE(takes("", "any", domain, SOCK_STREAM, IPPROTO_TCP));
    EXPECT_TRUE(takes("", "any", domain, SOCK_DGRAM));
    EXPECT_TRUE(takes("", "any", domain, SOCK_DGRAM, IPPROTO_UDP));
    EXPECT_FALSE(takes("", "any", domain, SOCK_STREAM, IPPROTO_UDP));
    EXPECT_FALSE(takes("", "any", domain, SOCK_STREAM, IPPROTO_SCTP));
    EXPECT_FALSE(takes("", "any", domain, SOCK_DGRAM, IPPROTO_TCP));
    EXPECT_FALSE(takes("", "any", domain, SOCK_RAW));
    EXPECT_FALSE(takes("", "any", domain, SOCK_SEQPACKET));
  }
  EXPECT_FALSE(takes("", "any", AF_UNIX, SOCK_STREAM));
  EXPECT_FALSE(takes("", "any", AF_NETLINK, SOCK_DGRAM));
  EXPECT_FALSE(takes("", "any", AF_PACKET, SOCK_DGRAM));
}

// A file of comments only (or only bad lines) has no rules: everything is
// taken, as with no file, in rdma-core 44 too.
TEST(PreloadWanted, AFileWithNoValidLineTakesEverything) {
  EXPECT_TRUE(takes("# only sockperf\nsockperf INET STREAM\n", "nc", AF_INET, SOCK_STREAM));
}

// Rules only narrow: a socket the preload never takes stays the kernel's
// whatever a rule says, and one it could take needs a rule that matches.
TEST(PreloadWanted, RulesTakeOnlyWhatTheyMatch) {
  const std::string two = "nc INET STREAM TCP\n* INET6 DGRAM *\n";
  EXPECT_TRUE(takes(two, "nc", AF_INET, SOCK_STREAM));
  EXPECT_TRUE(takes(two, "nc", AF_INET, SOCK_STREAM, IPPROTO_TCP));
  EXPECT_FALSE(takes(two, "nc", AF_INET6, SOCK_STREAM));
  EXPECT_FALSE(takes(two, "nc", AF_INET, SOCK_DGRAM));
  EXPECT_FALSE(takes(two, "socat", AF_INET, SOCK_STREAM));
  EXPECT_TRUE(takes(two, "socat", AF_INET6, SOCK_DGRAM));
  EXPECT_TRUE(takes(two, "nc", AF_INET6, SOCK_DGRAM, IPPROTO_UDP));

  EXPECT_TRUE(takes("* * * *\n", "x", AF_IB, SOCK_DGRAM));
  EXPECT_FALSE(takes("* * * *\n", "x", AF_UNIX, SOCK_STREAM));
  EXPECT_FALSE(takes("* * * *\n", "x", AF_INET, SOCK_RAW));
}

// A protocol rule matches a socket opened with protocol 0 by its type's
// default (TCP for stream, UDP for datagram), as intercept_socket does.
TEST(PreloadWanted, ProtocolZeroMatchesAsTheTypesDefault) {
  EXPECT_TRUE(takes("* * * TCP\n", "x", AF_INET, SOCK_STREAM));
  EXPECT_FALSE(takes("* * * TCP\n", "x", AF_INET, SOCK_DGRAM));
  EXPECT_FALSE(takes("* * * udp\n", "x", AF_INET, SOCK_STREAM));
  EXPECT_TRUE(takes("* * * udp\n", "x", AF_INET, SOCK_DGRAM));
}

// The program field is a prefix of the name the program runs as, compared
// without case (rdma-core 44: strncasecmp over the rule's length).
TEST(PreloadWanted, ProgramIsACaseInsensitivePrefix) {
  for (const char* program : {"rst", "rstream", "RStream"})
    EXPECT_TRUE(takes("rst * * *\n", program, AF_INET, SOCK_STREAM)) << program;
  for (const char* program : {"rs", "riostream", ""})
    EXPECT_FALSE(takes("rst * * *\n", program, AF_INET, SOCK_STREAM)) << program;
}

// RS_FALLBACK (ours; rdma-core's preload always falls back): unset or any
// other value keeps the fall back to kernel TCP, "0", "no", "off", "false"
// turn it off.
TEST(PreloadFallbackSetting, OnUnlessSaidOff) {
  EXPECT_TRUE(fall_back_from(nullptr));
  for (const char* on : {"1", "", "yes", "on", "true", "2", "00", "nope"})
    EXPECT_TRUE(fall_back_from(on)) << on;
  for (const char* off : {"0", "no", "off", "false", "OFF", "False", " 0 ", "0\n"})
    EXPECT_FALSE(fall_back_from(off)) << off;
}

}  // namespace
}  // namespace rspreload
