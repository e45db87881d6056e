package io.weir.protocol.query;

import static io.weir.protocol.query.Json.json;
import static io.weir.protocol.query.Json.query;
import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.DoubleNode;
import com.fasterxml.jackson.databind.node.JsonNodeFactory;
import com.fasterxml.jackson.databind.node.ObjectNode;
import io.weir.protocol.query.Predicate.CompareOp;
import io.weir.protocol.query.QueryException.Reason;
import java.math.BigDecimal;
import java.util.List;
import java.util.stream.Stream;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.Arguments;
import org.junit.jupiter.params.provider.MethodSource;
import org.junit.jupiter.params.provider.ValueSource;

class Q1QueryParseTest {
  private static final JsonNodeFactory NODES = JsonNodeFactory.instance;
  private static final String EXAMPLE =
      """
      {"collection": "orders",
       "where": {"op":"and","args":[{"op":"eq","field":"status","value":"open"},
                                    {"op":"not","arg":{"op":"exists","field":"archived"}},
                                    {"op":"in","field":"region","values":["eu","us"]},
                                    {"op":"prefix","field":"customer.name","value":"Ac"},
                                    {"op":"ge","field":"total","value":100}]},
       "select": ["status","total","customer.name"]}""";

  @Test
  void theExampleParses() throws QueryException {
    Q1Query q = Q1Query.parse(Json.parseExact(EXAMPLE));
    assertThat(q.collection()).isEqualTo("orders");
    assertThat(q.select()).containsExactly("status", "total", "customer.name");
    assertThat(q.predicateFields())
        .containsExactly("archived", "customer.name", "region", "status", "total");
    assertThat(q.where()).isInstanceOf(Predicate.And.class);
    assertThat(((Predicate.And) q.where()).args())
        .containsExactlyInAnyOrder(
            new Predicate.Compare(CompareOp.EQ, "status", Literal.of("open")),
            new Predicate.Not(new Predicate.Exists("archived")),
            new Predicate.In("region", List.of(Literal.of("eu"), Literal.of("us"))),
            new Predicate.Prefix("customer.name", "Ac"),
            new Predicate.Compare(CompareOp.GE, "total", Literal.of(new BigDecimal(100))));
    assertThat(q.canonicalJson())
        .isEqualTo(
            "{\"collection\":\"orders\",\"where\":{\"op\":\"and\",\"args\":["
                + "{\"op\":\"eq\",\"field\":\"status\",\"value\":\"open\"},"
                + "{\"op\":\"ge\",\"field\":\"total\",\"value\":100},"
                + "{\"op\":\"in\",\"field\":\"region\",\"values\":[\"eu\",\"us\"]},"
                + "{\"op\":\"not\",\"arg\":{\"op\":\"exists\",\"field\":\"archived\"}},"
                + "{\"op\":\"prefix\",\"field\":\"customer.name\",\"value\":\"Ac\"}]},"
                + "\"select\":[\"status\",\"total\",\"customer.name\"]}");
  }

  @Test
  void whereAndSelectAreOptional() throws QueryException {
    Q1Query q = query("{'collection':'c'}");
    assertThat(q.where()).isSameAs(Predicate.ALL);
    assertThat(q.select()).isEmpty();
    assertThat(q.predicateFields()).isEmpty();
    assertThat(q.canonicalJson()).isEqualTo("{\"collection\":\"c\"}");
    assertThat(q.matches(json("{}"))).isTrue();
  }

  @Test
  void everyOperatorParses() throws QueryException {
    for (CompareOp op : CompareOp.values()) {
      assertThat(Json.where("{'op':'" + op.wireName() + "','field':'a.b','value':1.50}").where())
          .isEqualTo(new Predicate.Compare(op, "a.b", Literal.of(new BigDecimal("1.5"))));
    }
    assertThat(Json.where("{'op':'in','field':'a','values':[null,true,2,'x']}").where())
        .isEqualTo(
            new Predicate.In(
                "a",
                List.of(
                    Literal.of("x"), Literal.of(new BigDecimal(2)), Literal.NULL, Literal.TRUE)));
    assertThat(Json.where("{'op':'exists','field':'a'}").where())
        .isEqualTo(new Predicate.Exists("a"));
    assertThat(Json.where("{'op':'prefix','field':'a','value':''}").where())
        .isEqualTo(new Predicate.Prefix("a", ""));
    assertThat(Json.where("{'op':'not','arg':{'op':'exists','field':'a'}}").where())
        .isEqualTo(new Predicate.Not(new Predicate.Exists("a")));
    Predicate a = new Predicate.Exists("a");
    Predicate b = new Predicate.Exists("b");
    assertThat(
            Json.where(
                    "{'op':'and','args':[{'op':'exists','field':'b'},{'op':'exists','field':'a'}]}")
                .where())
        .isEqualTo(new Predicate.And(List.of(a, b)));
    assertThat(
            Json.where(
                    "{'op':'or','args':[{'op':'exists','field':'b'},{'op':'exists','field':'a'}]}")
                .where())
        .isEqualTo(new Predicate.Or(List.of(a, b)));
  }

  @Test
  void literalsOfEveryScalarType() throws QueryException {
    assertThat(literal("null")).isEqualTo(Literal.NULL);
    assertThat(literal("true")).isEqualTo(Literal.TRUE);
    assertThat(literal("false")).isEqualTo(Literal.FALSE);
    assertThat(literal("-12.50").numberValue()).isEqualByComparingTo("-12.5");
    assertThat(literal("1e400").numberValue()).isEqualByComparingTo("1e400");
    assertThat(literal("'x'").stringValue()).isEqualTo("x");
    // a number in a string stays a string
    assertThat(literal("'100'").type()).isEqualTo(Literal.Type.STRING);
  }

  private static Literal literal(String json) throws QueryException {
    return ((Predicate.Compare) Json.where("{'op':'eq','field':'a','value':" + json + "}").where())
        .value();
  }

  static Stream<Arguments> invalidQueries() {
    return Stream.of(
        bad("[]", Reason.INVALID, "query"),
        bad("'orders'", Reason.INVALID, "query"),
        bad("{}", Reason.INVALID, "collection"),
        bad("{'collection':null}", Reason.INVALID, "collection"),
        bad("{'collection':7}", Reason.INVALID, "collection"),
        bad("{'collection':''}", Reason.INVALID, "collection"),
        bad("{'collection':'1orders'}", Reason.INVALID, "collection"),
        bad("{'collection':'ord ers'}", Reason.INVALID, "collection"),
        bad("{'collection':'" + "a".repeat(64) + "'}", Reason.INVALID, "collection"),
        bad("{'collection':'c','limit':10}", Reason.INVALID, "limit"),
        bad("{'collection':'c','Where':{}}", Reason.INVALID, "Where"),
        bad("{'collection':'c','where':null}", Reason.INVALID, "where"),
        bad("{'collection':'c','where':[]}", Reason.INVALID, "where"),
        bad("{'collection':'c','where':{}}", Reason.INVALID, "where.op"),
        bad("{'collection':'c','where':{'op':1}}", Reason.INVALID, "where.op"),
        bad(
            "{'collection':'c','where':{'op':'EQ','field':'a','value':1}}",
            Reason.INVALID,
            "where.op"),
        bad("{'collection':'c','where':{'op':'and'}}", Reason.INVALID, "where.args"),
        bad("{'collection':'c','where':{'op':'and','args':[]}}", Reason.INVALID, "where.args"),
        bad(
            "{'collection':'c','where':{'op':'or','args':{'op':'exists','field':'a'}}}",
            Reason.INVALID,
            "where.args"),
        bad(
            "{'collection':'c','where':{'op':'or','args':[{'op':'exists','field':'a'},'x']}}",
            Reason.INVALID,
            "where.args[1]"),
        bad(
            "{'collection':'c','where':{'op':'and','args':[{'op':'exists','field':'a'}],'arg':{}}}",
            Reason.INVALID,
            "where.arg"),
        bad("{'collection':'c','where':{'op':'not'}}", Reason.INVALID, "where.arg"),
        bad(
            "{'collection':'c','where':{'op':'not','arg':[{'op':'exists','field':'a'}]}}",
            Reason.INVALID,
            "where.arg"),
        bad(
            "{'collection':'c','where':{'op':'not','args':[{'op':'exists','field':'a'}]}}",
            Reason.INVALID,
            "where.args"),
        bad("{'collection':'c','where':{'op':'eq','value':1}}", Reason.INVALID, "where.field"),
        bad("{'collection':'c','where':{'op':'eq','field':'a'}}", Reason.INVALID, "where.value"),
        bad(
            "{'collection':'c','where':{'op':'eq','field':1,'value':1}}",
            Reason.INVALID,
            "where.field"),
        bad(
            "{'collection':'c','where':{'op':'eq','field':['a'],'value':1}}",
            Reason.INVALID,
            "where.field"),
        bad(
            "{'collection':'c','where':{'op':'eq','field':'','value':1}}",
            Reason.INVALID,
            "where.field"),
        bad(
            "{'collection':'c','where':{'op':'eq','field':'1a','value':1}}",
            Reason.INVALID,
            "where.field"),
        bad(
            "{'collection':'c','where':{'op':'eq','field':'a..b','value':1}}",
            Reason.INVALID,
            "where.field"),
        bad(
            "{'collection':'c','where':{'op':'eq','field':'a.','value':1}}",
            Reason.INVALID,
            "where.field"),
        bad(
            "{'collection':'c','where':{'op':'eq','field':'a-b','value':1}}",
            Reason.INVALID,
            "where.field"),
        bad(
            "{'collection':'c','where':{'op':'eq','field':'a[0]','value':1}}",
            Reason.INVALID,
            "where.field"),
        bad(
            "{'collection':'c','where':{'op':'eq','field':'a','value':[1]}}",
            Reason.INVALID,
            "where.value"),
        bad(
            "{'collection':'c','where':{'op':'lt','field':'a','value':{'x':1}}}",
            Reason.INVALID,
            "where.value"),
        bad(
            "{'collection':'c','where':{'op':'eq','field':'a','value':1,'values':[1]}}",
            Reason.INVALID,
            "where.values"),
        bad(
            "{'collection':'c','where':{'op':'in','field':'a','value':1}}",
            Reason.INVALID,
            "where.value"),
        bad("{'collection':'c','where':{'op':'in','field':'a'}}", Reason.INVALID, "where.values"),
        bad(
            "{'collection':'c','where':{'op':'in','field':'a','values':1}}",
            Reason.INVALID,
            "where.values"),
        bad(
            "{'collection':'c','where':{'op':'in','field':'a','values':[]}}",
            Reason.INVALID,
            "where.values"),
        bad(
            "{'collection':'c','where':{'op':'in','field':'a','values':[1,[2]]}}",
            Reason.INVALID,
            "where.values[1]"),
        bad("{'collection':'c','where':{'op':'exists'}}", Reason.INVALID, "where.field"),
        bad(
            "{'collection':'c','where':{'op':'exists','field':'a','value':1}}",
            Reason.INVALID,
            "where.value"),
        bad(
            "{'collection':'c','where':{'op':'prefix','field':'a','value':1}}",
            Reason.INVALID,
            "where.value"),
        bad(
            "{'collection':'c','where':{'op':'prefix','field':'a','value':null}}",
            Reason.INVALID,
            "where.value"),
        bad(
            "{'collection':'c','where':{'op':'prefix','field':'a','value':true}}",
            Reason.INVALID,
            "where.value"),
        bad(
            "{'collection':'c','where':{'op':'prefix','field':'a'}}",
            Reason.INVALID,
            "where.value"),
        bad(
            "{'collection':'c','where':{'op':'and','args':[{'op':'exists','field':'a'},"
                + "{'op':'or','args':[{'op':'not','arg':{'op':'eq','field':'9','value':1}}]}]}}",
            Reason.INVALID,
            "where.args[1].args[0].arg.field"),
        bad("{'collection':'c','select':'a'}", Reason.INVALID, "select"),
        bad("{'collection':'c','select':null}", Reason.INVALID, "select"),
        bad("{'collection':'c','select':[]}", Reason.INVALID, "select"),
        bad("{'collection':'c','select':['a',1]}", Reason.INVALID, "select[1]"),
        bad("{'collection':'c','select':['a','b.']}", Reason.INVALID, "select[1]"),
        bad("{'collection':'c','select':[['a']]}", Reason.INVALID, "select[0]"));
  }

  private static Arguments bad(String query, Reason reason, String construct) {
    return Arguments.of(query, reason, construct);
  }

  @ParameterizedTest
  @MethodSource("invalidQueries")
  void invalidQueriesAreRefusedNamingWhere(String query, Reason reason, String construct) {
    assertRefused(json(query), reason, construct);
  }

  @Test
  void unknownOperatorsAreNamedOnlyWhenTheyLookLikeOperators() {
    assertThatThrownBy(() -> Json.where("{'op':'regex','field':'a','value':'x'}"))
        .isInstanceOfSatisfying(
            QueryException.class,
            e -> {
              assertThat(e.reason()).isEqualTo(Reason.INVALID);
              assertThat(e.construct()).isEqualTo("where.op");
              assertThat(e.getMessage()).contains("'regex'");
            });
    for (String op : List.of("re-gex", "x".repeat(33), "", "eq ", "op1")) {
      assertThatThrownBy(() -> Json.where("{'op':'" + op + "','field':'a','value':'x'}"))
          .isInstanceOfSatisfying(
              QueryException.class,
              e -> {
                assertThat(e.construct()).isEqualTo("where.op");
                assertThat(e.getMessage()).isEqualTo("where.op: unknown operator");
              });
    }
  }

  @ParameterizedTest
  @ValueSource(strings = {"orderBy", "order_by", "sort"})
  void orderByIsUnsupported(String key) {
    assertRefused(json("{'collection':'c','" + key + "':['a']}"), Reason.UNSUPPORTED, "ORDER BY");
  }

  @Test
  void everyUnsupportedConstructIsNamed() {
    String[][] cases = {
      {"limitBy", "top-k"},
      {"top", "top-k"},
      {"topK", "top-k"},
      {"aggregate", "aggregates"},
      {"aggregates", "aggregates"},
      {"groupBy", "aggregates"},
      {"group_by", "aggregates"},
      {"count", "aggregates"},
      {"join", "joins"},
      {"joins", "joins"},
      {"continuation", "continuations"},
      {"after", "continuations"},
      {"cursor", "continuations"},
      {"explain", "EXPLAIN"}
    };
    for (String[] c : cases) {
      assertRefused(
          json("{'collection':'c','where':{'op':'exists','field':'a'},'" + c[0] + "':true}"),
          Reason.UNSUPPORTED,
          c[1]);
    }
  }

  @Test
  void nonFiniteNumbersAreNotLiterals() {
    ObjectNode where = NODES.objectNode().put("op", "eq").put("field", "a");
    where.set("value", DoubleNode.valueOf(Double.NaN));
    assertRefused(
        NODES.objectNode().put("collection", "c").set("where", where),
        Reason.INVALID,
        "where.value");
    where.set("value", DoubleNode.valueOf(Double.POSITIVE_INFINITY));
    assertRefused(
        NODES.objectNode().put("collection", "c").set("where", where),
        Reason.INVALID,
        "where.value");
  }

  @Test
  void aCollectionOf63CharactersAndEveryAllowedCharacterIsFine() throws QueryException {
    assertThat(query("{'collection':'" + "a".repeat(63) + "'}").collection()).hasSize(63);
    assertThat(query("{'collection':'_Ab.c-9'}").collection()).isEqualTo("_Ab.c-9");
  }

  // ---- limits, at and just past each boundary ----

  @Test
  void depthLimit() throws QueryException {
    assertThat(Q1Query.parse(withWhere(nested(16))).where()).isEqualTo(new Predicate.Exists("a"));
    assertRefused(withWhere(nested(17)), Reason.LIMIT, "depth");
    QueryLimits three = new QueryLimits(3, 256, 64, 4096, 1000, 8, 256);
    Q1Query.parse(withWhere(nested(3)), three);
    assertRefused(withWhere(nested(4)), three, Reason.LIMIT, "depth");
  }

  /** {@code depth} predicates nested: ands of one child around (exists a), which normalise away. */
  private static JsonNode nested(int depth) {
    JsonNode p = NODES.objectNode().put("op", "exists").put("field", "a");
    for (int i = 1; i < depth; i++) {
      ObjectNode and = NODES.objectNode().put("op", "and");
      and.set("args", NODES.arrayNode().add(p));
      p = and;
    }
    return p;
  }

  @Test
  void deepInputFailsOnTheDepthLimitNotTheStack() {
    assertRefused(withWhere(nested(100_000)), Reason.LIMIT, "depth");
  }

  @Test
  void nodeLimit() throws QueryException {
    assertThat(Q1Query.parse(withWhere(and(255))).predicateFields()).hasSize(255);
    assertRefused(withWhere(and(256)), Reason.LIMIT, "nodes");
    assertRefused(withWhere(and(100_000)), Reason.LIMIT, "nodes");
  }

  /** An and of {@code n} distinct exists: {@code n + 1} nodes. */
  private static JsonNode and(int n) {
    ArrayNode args = NODES.arrayNode();
    for (int i = 0; i < n; i++) {
      args.add(NODES.objectNode().put("op", "exists").put("field", "f" + i));
    }
    ObjectNode and = NODES.objectNode().put("op", "and");
    and.set("args", args);
    return and;
  }

  @Test
  void stringLiteralLimit() throws QueryException {
    for (String op : List.of("eq", "prefix")) {
      Q1Query.parse(
          withWhere(
              NODES.objectNode().put("op", op).put("field", "a").put("value", "x".repeat(4096))));
      assertRefused(
          withWhere(
              NODES.objectNode().put("op", op).put("field", "a").put("value", "x".repeat(4097))),
          Reason.LIMIT,
          "string length");
    }
    ObjectNode in = NODES.objectNode().put("op", "in").put("field", "a");
    in.set("values", NODES.arrayNode().add("ok").add("x".repeat(4097)));
    assertRefused(withWhere(in), Reason.LIMIT, "string length");
  }

  @Test
  void inListLimit() throws QueryException {
    assertThat(((Predicate.In) Q1Query.parse(withWhere(in(1000))).where()).values()).hasSize(1000);
    assertRefused(withWhere(in(1001)), Reason.LIMIT, "in values");
  }

  private static JsonNode in(int n) {
    ArrayNode values = NODES.arrayNode();
    for (int i = 0; i < n; i++) {
      values.add(i);
    }
    ObjectNode in = NODES.objectNode().put("op", "in").put("field", "a");
    in.set("values", values);
    return in;
  }

  @Test
  void selectLimit() throws QueryException {
    assertThat(Q1Query.parse(select(64)).select()).hasSize(64);
    assertRefused(select(65), Reason.LIMIT, "select");
  }

  private static JsonNode select(int n) {
    ArrayNode select = NODES.arrayNode();
    for (int i = 0; i < n; i++) {
      select.add("f" + i);
    }
    return NODES.objectNode().put("collection", "c").set("select", select);
  }

  @Test
  void pathSegmentAndLengthLimits() throws QueryException {
    String eight = String.join(".", List.of("a", "b", "c", "d", "e", "f", "g", "h"));
    assertThat(Q1Query.parse(withWhere(exists(eight))).predicateFields()).containsExactly(eight);
    assertRefused(withWhere(exists(eight + ".i")), Reason.LIMIT, "path segments");
    assertThat(Q1Query.parse(withWhere(exists("a".repeat(256)))).predicateFields()).hasSize(1);
    assertRefused(withWhere(exists("a".repeat(257))), Reason.LIMIT, "path length");
    String long8 =
        String.join(
            ".",
            "a".repeat(31),
            "b".repeat(31),
            "c".repeat(31),
            "d".repeat(31),
            "e".repeat(31),
            "f".repeat(31),
            "g".repeat(31),
            "h".repeat(32));
    assertThat(long8).hasSize(256);
    Q1Query.parse(withWhere(exists(long8)));
    // select paths obey the same limits
    assertRefused(
        json("{'collection':'c','select':['" + eight + ".i']}"), Reason.LIMIT, "path segments");
    assertRefused(
        json("{'collection':'c','select':['" + "a".repeat(257) + "']}"),
        Reason.LIMIT,
        "path length");
  }

  private static JsonNode exists(String field) {
    return NODES.objectNode().put("op", "exists").put("field", field);
  }

  @Test
  void limitsAreConfigurable() throws QueryException {
    QueryLimits small = new QueryLimits(4, 5, 2, 3, 2, 2, 5);
    Q1Query.parse(
        json(
            "{'collection':'c','where':{'op':'in','field':'ab.cd','values':['abc','d']},'select':['a','b']}"),
        small);
    assertRefused(
        json("{'collection':'c','where':{'op':'in','field':'a','values':[1,2,3]}}"),
        small,
        Reason.LIMIT,
        "in values");
    assertRefused(
        json("{'collection':'c','where':{'op':'eq','field':'a','value':'abcd'}}"),
        small,
        Reason.LIMIT,
        "string length");
    assertRefused(
        json("{'collection':'c','where':{'op':'exists','field':'a.b.c'}}"),
        small,
        Reason.LIMIT,
        "path segments");
    assertRefused(
        json("{'collection':'c','where':{'op':'exists','field':'abcdef'}}"),
        small,
        Reason.LIMIT,
        "path length");
    assertRefused(json("{'collection':'c','select':['a','b','c']}"), small, Reason.LIMIT, "select");
    assertRefused(withWhere(and(5)), small, Reason.LIMIT, "nodes");
    assertThat(QueryLimits.DEFAULTS).isEqualTo(new QueryLimits(16, 256, 64, 4096, 1000, 8, 256));
    assertThatThrownBy(() -> new QueryLimits(0, 1, 1, 1, 1, 1, 1))
        .isInstanceOf(IllegalArgumentException.class);
  }

  private static JsonNode withWhere(JsonNode where) {
    return NODES.objectNode().put("collection", "c").set("where", where);
  }

  // ---- no literal or value ever appears in a message ----

  private static final String SECRET = "s3cr3t-Hunter2";

  @Test
  void messagesNeverQuoteLiteralsOrInvalidNames() {
    String s = SECRET;
    List<String> queries =
        List.of(
            "{'collection':'" + s + " x'}",
            "{'collection':'c','" + s + "':1}",
            "{'collection':'c','where':{'op':'" + s + "','field':'a','value':'" + s + "'}}",
            "{'collection':'c','where':{'op':'eq','field':'" + s + "','value':'" + s + "'}}",
            "{'collection':'c','where':{'op':'eq','field':'a','value':['" + s + "']}}",
            "{'collection':'c','where':{'op':'eq','field':'a','value':{'" + s + "':'" + s + "'}}}",
            "{'collection':'c','where':{'op':'eq','field':'a','value':'" + s + "','" + s + "':1}}",
            "{'collection':'c','where':{'op':'eq','field':'a','value':'" + s.repeat(300) + "'}}",
            "{'collection':'c','where':{'op':'prefix','field':'a','value':['" + s + "']}}",
            "{'collection':'c','where':{'op':'in','field':'a','values':['"
                + s
                + "',{'k':'"
                + s
                + "'}]}}",
            "{'collection':'c','where':{'op':'in','field':'a','values':'" + s + "'}}",
            "{'collection':'c','where':{'op':'exists','field':'" + s + "'}}",
            "{'collection':'c','where':{'op':'not','arg':'" + s + "'}}",
            "{'collection':'c','where':{'op':'and','args':['" + s + "']}}",
            "{'collection':'c','where':'" + s + "'}",
            "{'collection':'c','select':['" + s + "']}",
            "{'collection':'c','select':'" + s + "'}",
            "{'collection':'c','where':{'op':'eq','field':'a','value':'"
                + s
                + "'},'orderBy':'"
                + s
                + "'}",
            "{'collection':'c','where':{'op':'eq','field':'a','value':31337.25,'x':1}}");
    for (String q : queries) {
      assertThatThrownBy(() -> query(q))
          .as(q)
          .isInstanceOfSatisfying(
              QueryException.class,
              e -> {
                assertThat(e.getMessage())
                    .doesNotContain(SECRET)
                    .doesNotContain("s3cr3t")
                    .doesNotContain("31337");
                assertThat(e.construct()).doesNotContain("s3cr3t");
              });
    }
  }

  @Test
  void toStringsNameStructureOnly() throws QueryException {
    Q1Query q =
        query(
            "{'collection':'c','where':{'op':'and','args':["
                + "{'op':'eq','field':'a','value':'"
                + SECRET
                + "'},"
                + "{'op':'in','field':'b','values':['"
                + SECRET
                + "',31337]},"
                + "{'op':'prefix','field':'c','value':'"
                + SECRET
                + "'},"
                + "{'op':'not','arg':{'op':'lt','field':'d','value':31337}}]}}");
    for (String text : List.of(q.toString(), q.where().toString())) {
      assertThat(text).doesNotContain("s3cr3t").doesNotContain("31337");
    }
    assertThat(q.where().toString())
        .contains("Eq[field=a]", "In[field=b, values=2]", "Prefix[field=c]", "Lt[field=d]");
    assertThat(Literal.of(SECRET).toString()).isEqualTo("Literal[STRING]");
  }

  private static void assertRefused(JsonNode query, Reason reason, String construct) {
    assertRefused(query, QueryLimits.DEFAULTS, reason, construct);
  }

  private static void assertRefused(
      JsonNode query, QueryLimits limits, Reason reason, String construct) {
    assertThatThrownBy(() -> Q1Query.parse(query, limits))
        .isInstanceOfSatisfying(
            QueryException.class,
            e -> {
              assertThat(e.reason()).as("reason (%s)", e.getMessage()).isEqualTo(reason);
              assertThat(e.construct()).as("construct (%s)", e.getMessage()).isEqualTo(construct);
              assertThat(e.getMessage()).isNotBlank();
            });
  }
}
