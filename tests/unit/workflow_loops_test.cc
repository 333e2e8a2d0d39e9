// withItems / withParam / withSequence: items, {{item}} variables and the
// child node names Argo gives them.
#include <gtest/gtest.h>

#include "workflow/loops.h"

namespace headway::workflow {
namespace {

std::vector<LoopItem> Items(const char* json) {
  auto r = ExpandWithItems(nlohmann::json::parse(json));
  EXPECT_TRUE(r.ok()) << r.status().ToString();
  return r.ok() ? *r : std::vector<LoopItem>{};
}

std::vector<std::string> Suffixes(const std::vector<LoopItem>& items) {
  std::vector<std::string> out;
  for (const auto& i : items) out.push_back(i.node_suffix);
  return out;
}

std::vector<std::string> Values(const std::vector<LoopItem>& items) {
  std::vector<std::string> out;
  for (const auto& i : items) out.push_back(i.vars.at("item"));
  return out;
}

// docs/walk-through/loops.md: withItems over strings.
TEST(WorkflowLoops, ItemsOfStringsNumbersAndBooleans) {
  auto items = Items(R"(["hello world", "goodbye world"])");
  EXPECT_EQ(Suffixes(items), (std::vector<std::string>{"(0:hello world)", "(1:goodbye world)"}));
  EXPECT_EQ(Values(items), (std::vector<std::string>{"hello world", "goodbye world"}));

  auto mixed = Items(R"([1, 2.5, true, "x", 1e21, -0.000001])");
  EXPECT_EQ(Values(mixed),
            (std::vector<std::string>{"1", "2.5", "true", "x", "1e+21", "-0.000001"}));
  EXPECT_EQ(mixed[1].node_suffix, "(1:2.5)");
  EXPECT_EQ(mixed[2].node_suffix, "(2:true)");
  EXPECT_EQ(mixed[0].index, 0u);
  EXPECT_EQ(mixed[5].index, 5u);
}

// docs/walk-through/loops.md: withItems over maps, {{item.image}} {{item.tag}}.
TEST(WorkflowLoops, ItemsOfMaps) {
  auto items = Items(R"([{ "image": "debian", "tag": "9.1" },
                         { "image": "alpine", "tag": "3.6" },
                         { "tag": 7, "image": "ubuntu", "nested": {"b": 1, "a": [1, 2]} }])");
  ASSERT_EQ(items.size(), 3u);
  EXPECT_EQ(items[0].vars.at("item.image"), "debian");
  EXPECT_EQ(items[0].vars.at("item.tag"), "9.1");
  EXPECT_EQ(items[0].vars.at("item"), R"({"image":"debian","tag":"9.1"})");
  // Keys sorted, "key:value" joined by commas, as Argo names the child nodes.
  EXPECT_EQ(items[0].node_suffix, "(0:image:debian,tag:9.1)");
  EXPECT_EQ(items[1].node_suffix, "(1:image:alpine,tag:3.6)");
  EXPECT_EQ(items[2].vars.at("item.tag"), "7");
  EXPECT_EQ(items[2].vars.at("item.nested"), R"({"a":[1,2],"b":1})");
  EXPECT_EQ(items[2].node_suffix, R"((2:image:ubuntu,nested:{"a":[1,2],"b":1},tag:7))");
  EXPECT_EQ(items[2].vars.count("item.image"), 1u);
}

TEST(WorkflowLoops, ItemsFromAManifestList) {
  std::vector<nlohmann::json> list = {"a", 1, nlohmann::json::parse(R"({"k":"v"})")};
  auto r = ExpandWithItems(list);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(Suffixes(*r), (std::vector<std::string>{"(0:a)", "(1:1)", "(2:k:v)"}));
}

TEST(WorkflowLoops, ItemsOfLists) {
  auto items = Items(R"([[1, "a"], []])");
  EXPECT_EQ(items[0].vars.at("item"), R"([1,"a"])");
  EXPECT_EQ(items[0].node_suffix, "(0:[1 a])");  // Go's %v of a list
  EXPECT_EQ(items[1].node_suffix, "(1:[])");
}

TEST(WorkflowLoops, BadItems) {
  auto not_list = ExpandWithItems(nlohmann::json::parse(R"({"a": 1})"));
  ASSERT_FALSE(not_list.ok());
  EXPECT_NE(not_list.status().message().find("withItems: expected a list"), std::string::npos);
  auto null_item = ExpandWithItems(nlohmann::json::parse(R"(["a", null])"));
  ASSERT_FALSE(null_item.ok());
  EXPECT_NE(
      null_item.status().message().find("withItems[1]: expected string, number, list, or map"),
      std::string::npos);
  EXPECT_TRUE(Items("[]").empty());
}

// docs/walk-through/loops.md: withParam from a previous step's JSON output.
TEST(WorkflowLoops, WithParam) {
  auto r =
      ExpandWithParam(R"([{"image": "debian", "tag": "9.1"}, {"image": "alpine", "tag": "3.6"}])");
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->size(), 2u);
  EXPECT_EQ((*r)[1].vars.at("item.image"), "alpine");
  auto strings = ExpandWithParam(" [\"a\", \"b\"] \n");
  ASSERT_TRUE(strings.ok());
  EXPECT_EQ(Values(*strings), (std::vector<std::string>{"a", "b"}));
  auto empty = ExpandWithParam("[]");
  ASSERT_TRUE(empty.ok());
  EXPECT_TRUE(empty->empty());

  for (const char* bad : {"not json", "{\"a\": 1}", "\"a\"", "", "[1, 2"}) {
    auto e = ExpandWithParam(bad);
    ASSERT_FALSE(e.ok()) << bad;
    EXPECT_EQ(e.status().code(), StatusCode::kInvalidArgument);
    EXPECT_NE(e.status().message().find("withParam value could not be parsed as a JSON list"),
              std::string::npos);
  }
  auto unresolved = ExpandWithParam("{{tasks.gen.outputs.result}}");
  ASSERT_FALSE(unresolved.ok());
  EXPECT_NE(unresolved.status().message().find("{{tasks.gen.outputs.result}}"), std::string::npos);
}

LoopSequence Seq(std::optional<std::string> count, std::optional<std::string> start,
                 std::optional<std::string> end, std::string format = "") {
  LoopSequence s;
  s.count = std::move(count);
  s.start = std::move(start);
  s.end = std::move(end);
  s.format = std::move(format);
  return s;
}

std::vector<std::string> SeqValues(const LoopSequence& s) {
  auto r = ExpandWithSequence(s);
  EXPECT_TRUE(r.ok()) << r.status().ToString();
  return r.ok() ? Values(*r) : std::vector<std::string>{};
}

// examples/loops-sequence.yaml
TEST(WorkflowLoops, SequenceArgoExamples) {
  EXPECT_EQ(SeqValues(Seq("5", std::nullopt, std::nullopt)),
            (std::vector<std::string>{"0", "1", "2", "3", "4"}));
  EXPECT_EQ(SeqValues(Seq(std::nullopt, "100", "105")),
            (std::vector<std::string>{"100", "101", "102", "103", "104", "105"}));
  EXPECT_EQ(SeqValues(Seq("5", "1", std::nullopt, "testuser%02X")),
            (std::vector<std::string>{"testuser01", "testuser02", "testuser03", "testuser04",
                                      "testuser05"}));
  // start > end counts down.
  EXPECT_EQ(SeqValues(Seq(std::nullopt, "5", "0")),
            (std::vector<std::string>{"5", "4", "3", "2", "1", "0"}));
  EXPECT_EQ(SeqValues(Seq("0", std::nullopt, std::nullopt)), std::vector<std::string>{});
  EXPECT_EQ(SeqValues(Seq(std::nullopt, "-2", "1")),
            (std::vector<std::string>{"-2", "-1", "0", "1"}));
  EXPECT_EQ(SeqValues(Seq(std::nullopt, "3", "3")), std::vector<std::string>{"3"});
  // Items are strings; names carry the formatted value.
  auto r = ExpandWithSequence(Seq("2", "9", std::nullopt, "%03d"));
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(Suffixes(*r), (std::vector<std::string>{"(0:009)", "(1:010)"}));
  EXPECT_TRUE((*r)[0].value.is_string());
}

TEST(WorkflowLoops, SequenceFormats) {
  auto f = [](const char* format, int64_t v) {
    auto r = FormatSequenceValue(format, v);
    EXPECT_TRUE(r.ok()) << format << ": " << r.status().ToString();
    return r.ok() ? *r : "<error>";
  };
  EXPECT_EQ(f("%d", 7), "7");
  EXPECT_EQ(f("%02d", 7), "07");
  EXPECT_EQ(f("%02d", 123), "123");
  EXPECT_EQ(f("%5d|", 42), "   42|");
  EXPECT_EQ(f("%-5d|", 42), "42   |");
  EXPECT_EQ(f("%+d", 3), "+3");
  EXPECT_EQ(f("%03d", -7), "-07");
  EXPECT_EQ(f("%x", 255), "ff");
  EXPECT_EQ(f("%X", 255), "FF");
  EXPECT_EQ(f("%#x", 255), "0xff");
  EXPECT_EQ(f("%o", 8), "10");
  EXPECT_EQ(f("%b", 5), "101");
  EXPECT_EQ(f("%.3d", 5), "005");
  EXPECT_EQ(f("%v", 5), "5");
  EXPECT_EQ(f("node-%d-100%%", 1), "node-1-100%");
  EXPECT_EQ(f("%d", INT64_MIN), "-9223372036854775808");

  for (const char* bad : {"%s", "%d-%d", "no verb", "%", "%05"}) {
    auto r = ExpandWithSequence(Seq("2", std::nullopt, std::nullopt, bad));
    ASSERT_FALSE(r.ok()) << bad;
    EXPECT_NE(r.status().message().find("withSequence.format"), std::string::npos) << bad;
  }
}

TEST(WorkflowLoops, SequenceErrors) {
  struct Case {
    LoopSequence seq;
    const char* want;
  } cases[] = {
      {Seq("3", std::nullopt, "5"), "only one of count or end"},
      {Seq(std::nullopt, "1", std::nullopt), "neither end nor count"},
      {Seq("three", std::nullopt, std::nullopt), "withSequence.count: 'three' is not an integer"},
      {Seq("-1", std::nullopt, std::nullopt), "withSequence.count: must be >= 0"},
      {Seq(std::nullopt, "x", "3"), "withSequence.start: 'x' is not an integer"},
      {Seq(std::nullopt, "1", "{{inputs.parameters.n}}"),
       "withSequence.end: '{{inputs.parameters.n}}'"},
      {Seq(std::nullopt, "1.5", "3"), "withSequence.start: '1.5' is not an integer"},
  };
  for (const auto& c : cases) {
    auto r = ExpandWithSequence(c.seq);
    ASSERT_FALSE(r.ok()) << c.want;
    EXPECT_NE(r.status().message().find(c.want), std::string::npos) << r.status().message();
  }
  EXPECT_EQ(SeqValues(Seq(" 2 ", "+1", std::nullopt)), (std::vector<std::string>{"1", "2"}));
}

TEST(WorkflowLoops, LimitOfTenThousandItems) {
  auto ok = ExpandWithSequence(Seq("10000", std::nullopt, std::nullopt));
  ASSERT_TRUE(ok.ok());
  EXPECT_EQ(ok->size(), kMaxLoopItems);
  EXPECT_EQ(ok->back().node_suffix, "(9999:9999)");

  for (const LoopSequence& s :
       {Seq("10001", std::nullopt, std::nullopt), Seq(std::nullopt, "0", "10000"),
        Seq(std::nullopt, "9223372036854775807", "-9223372036854775808"),
        Seq("99999999999", std::nullopt, std::nullopt)}) {
    auto r = ExpandWithSequence(s);
    ASSERT_FALSE(r.ok());
    EXPECT_NE(r.status().message().find("limit of 10000"), std::string::npos)
        << r.status().message();
  }
  nlohmann::json many = nlohmann::json::array();
  for (int i = 0; i <= 10000; ++i) many.push_back(i);
  auto items = ExpandWithItems(many);
  ASSERT_FALSE(items.ok());
  EXPECT_NE(items.status().message().find("10001 items is more than the limit of 10000"),
            std::string::npos);
  auto param = ExpandWithParam(many.dump());
  ASSERT_FALSE(param.ok());
  EXPECT_NE(param.status().message().find("withParam: 10001 items"), std::string::npos);
}

TEST(WorkflowLoops, SequenceOverflowIsAnError) {
  auto r = ExpandWithSequence(Seq("3", "9223372036854775806", std::nullopt));
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("overflow"), std::string::npos);
}

}  // namespace
}  // namespace headway::workflow
