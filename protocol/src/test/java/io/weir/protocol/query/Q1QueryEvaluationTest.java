package io.weir.protocol.query;

import static io.weir.protocol.query.Json.json;
import static io.weir.protocol.query.Json.object;
import static io.weir.protocol.query.Json.query;
import static io.weir.protocol.query.Json.where;
import static org.assertj.core.api.Assertions.assertThat;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.node.DoubleNode;
import com.fasterxml.jackson.databind.node.JsonNodeFactory;
import com.fasterxml.jackson.databind.node.ObjectNode;
import java.util.Set;
import org.junit.jupiter.api.Test;

class Q1QueryEvaluationTest {
  private static final JsonNode DOC =
      json(
          """
      {'s':'open','n':100,'f':1.5,'t':true,'z':null,'arr':[1,2],'o':{'x':'y','n':{'deep':7}},
       'e':'','num_str':'100','big':123456789012345678901234567890}""");

  private static boolean m(String where) throws QueryException {
    return where(where).matches(DOC);
  }

  private static String cmp(String op, String field, String value) {
    return "{'op':'" + op + "','field':'" + field + "','value':" + value + "}";
  }

  @Test
  void eqComparesNumbersNumericallyAndNeverAcrossTypes() throws QueryException {
    assertThat(m(cmp("eq", "s", "'open'"))).isTrue();
    assertThat(m(cmp("eq", "s", "'Open'"))).isFalse();
    assertThat(m(cmp("eq", "n", "100"))).isTrue();
    assertThat(m(cmp("eq", "n", "100.0"))).isTrue();
    assertThat(m(cmp("eq", "n", "1e2"))).isTrue();
    assertThat(m(cmp("eq", "f", "1.50"))).isTrue();
    assertThat(m(cmp("eq", "big", "123456789012345678901234567890"))).isTrue();
    assertThat(m(cmp("eq", "big", "123456789012345678901234567891"))).isFalse();
    assertThat(m(cmp("eq", "n", "'100'"))).isFalse();
    assertThat(m(cmp("eq", "num_str", "100"))).isFalse();
    assertThat(m(cmp("eq", "num_str", "'100'"))).isTrue();
    assertThat(m(cmp("eq", "t", "true"))).isTrue();
    assertThat(m(cmp("eq", "t", "false"))).isFalse();
    assertThat(m(cmp("eq", "t", "1"))).isFalse();
    assertThat(m(cmp("eq", "t", "'true'"))).isFalse();
    assertThat(m(cmp("eq", "z", "null"))).isTrue();
    assertThat(m(cmp("eq", "e", "null"))).isFalse();
    assertThat(m(cmp("eq", "missing", "null"))).isFalse();
    assertThat(m(cmp("eq", "z", "false"))).isFalse();
    assertThat(m(cmp("eq", "arr", "1"))).isFalse();
    assertThat(m(cmp("eq", "o", "null"))).isFalse();
    assertThat(m(cmp("eq", "o.x", "'y'"))).isTrue();
    assertThat(m(cmp("eq", "o.n.deep", "7"))).isTrue();
  }

  @Test
  void neIsNotEqSoMissingFieldsAreNeAnything() throws QueryException {
    assertThat(m(cmp("ne", "s", "'open'"))).isFalse();
    assertThat(m(cmp("ne", "s", "'closed'"))).isTrue();
    assertThat(m(cmp("ne", "n", "100.00"))).isFalse();
    assertThat(m(cmp("ne", "n", "'100'"))).isTrue();
    assertThat(m(cmp("ne", "missing", "null"))).isTrue();
    assertThat(m(cmp("ne", "missing", "1"))).isTrue();
    assertThat(m(cmp("ne", "z", "null"))).isFalse();
    assertThat(m(cmp("ne", "o.x.deeper", "'y'"))).isTrue();
  }

  @Test
  void orderingComparesNumbersWithNumbersAndStringsWithStringsOnly() throws QueryException {
    assertThat(m(cmp("lt", "n", "100.5"))).isTrue();
    assertThat(m(cmp("lt", "n", "100"))).isFalse();
    assertThat(m(cmp("le", "n", "100.0"))).isTrue();
    assertThat(m(cmp("gt", "n", "99"))).isTrue();
    assertThat(m(cmp("gt", "n", "100"))).isFalse();
    assertThat(m(cmp("ge", "n", "100"))).isTrue();
    assertThat(m(cmp("ge", "f", "-1e9"))).isTrue();
    assertThat(m(cmp("gt", "big", "1e29"))).isTrue();
    assertThat(m(cmp("lt", "s", "'p'"))).isTrue();
    assertThat(m(cmp("lt", "s", "'open'"))).isFalse();
    assertThat(m(cmp("le", "s", "'open'"))).isTrue();
    assertThat(m(cmp("gt", "s", "'OPEN'"))).isTrue();
    assertThat(m(cmp("ge", "e", "''"))).isTrue();
    for (String op : new String[] {"lt", "le", "gt", "ge"}) {
      assertThat(m(cmp(op, "n", "'100'"))).as(op).isFalse();
      assertThat(m(cmp(op, "num_str", "100"))).as(op).isFalse();
      assertThat(m(cmp(op, "t", "true"))).as(op).isFalse();
      assertThat(m(cmp(op, "z", "null"))).as(op).isFalse();
      assertThat(m(cmp(op, "missing", "1"))).as(op).isFalse();
      assertThat(m(cmp(op, "o", "1"))).as(op).isFalse();
      assertThat(m(cmp(op, "arr", "1"))).as(op).isFalse();
    }
  }

  @Test
  void stringsAreOrderedByCodePoint() throws QueryException {
    // U+FFFF sorts before U+1F600 by code point, after it by UTF-16 unit (a surrogate is 0xD83D)
    JsonNode doc = JsonNodeFactory.instance.objectNode().put("s", "\uffff");
    assertThat("\uffff".compareTo("\ud83d\ude00")).isPositive();
    assertThat(where(cmp("lt", "s", "'\ud83d\ude00'")).matches(doc)).isTrue();
    assertThat(where(cmp("gt", "s", "'\ud83d\ude00'")).matches(doc)).isFalse();
    assertThat(Eval.compareCodePoints("a", "ab")).isNegative();
    assertThat(Eval.compareCodePoints("ab", "a")).isPositive();
    assertThat(Eval.compareCodePoints("", "")).isZero();
  }

  @Test
  void nonFiniteNumbersInDocumentsEqualAndOrderNothing() throws QueryException {
    ObjectNode doc = JsonNodeFactory.instance.objectNode();
    doc.set("d", DoubleNode.valueOf(Double.NaN));
    for (String op : new String[] {"eq", "lt", "le", "gt", "ge"}) {
      assertThat(where(cmp(op, "d", "0")).matches(doc)).as(op).isFalse();
    }
    assertThat(where(cmp("ne", "d", "0")).matches(doc)).isTrue();
  }

  @Test
  void inIsEqAgainstAnyValue() throws QueryException {
    assertThat(m("{'op':'in','field':'s','values':['closed','open']}")).isTrue();
    assertThat(m("{'op':'in','field':'s','values':['closed',1]}")).isFalse();
    assertThat(m("{'op':'in','field':'n','values':['100',100.0]}")).isTrue();
    assertThat(m("{'op':'in','field':'n','values':['100']}")).isFalse();
    assertThat(m("{'op':'in','field':'z','values':[null]}")).isTrue();
    assertThat(m("{'op':'in','field':'missing','values':[null,1,'x']}")).isFalse();
  }

  @Test
  void existsCountsNullAsPresent() throws QueryException {
    assertThat(m("{'op':'exists','field':'z'}")).isTrue();
    assertThat(m("{'op':'exists','field':'e'}")).isTrue();
    assertThat(m("{'op':'exists','field':'o.n.deep'}")).isTrue();
    assertThat(m("{'op':'exists','field':'missing'}")).isFalse();
    assertThat(m("{'op':'exists','field':'o.missing'}")).isFalse();
    // a non-object on the way is a missing field
    assertThat(m("{'op':'exists','field':'s.length'}")).isFalse();
    assertThat(m("{'op':'exists','field':'arr.x'}")).isFalse();
    assertThat(m("{'op':'exists','field':'z.x'}")).isFalse();
  }

  @Test
  void prefixMatchesStringsOnly() throws QueryException {
    assertThat(m("{'op':'prefix','field':'s','value':'op'}")).isTrue();
    assertThat(m("{'op':'prefix','field':'s','value':'open'}")).isTrue();
    assertThat(m("{'op':'prefix','field':'s','value':''}")).isTrue();
    assertThat(m("{'op':'prefix','field':'s','value':'Op'}")).isFalse();
    assertThat(m("{'op':'prefix','field':'s','value':'opened'}")).isFalse();
    assertThat(m("{'op':'prefix','field':'n','value':'1'}")).isFalse();
    assertThat(m("{'op':'prefix','field':'num_str','value':'1'}")).isTrue();
    assertThat(m("{'op':'prefix','field':'z','value':''}")).isFalse();
    assertThat(m("{'op':'prefix','field':'missing','value':''}")).isFalse();
  }

  @Test
  void andOrNot() throws QueryException {
    String yes = "{'op':'exists','field':'s'}";
    String no = "{'op':'exists','field':'missing'}";
    assertThat(m("{'op':'and','args':[" + yes + "," + yes + "]}")).isTrue();
    assertThat(m("{'op':'and','args':[" + yes + "," + no + "]}")).isFalse();
    assertThat(m("{'op':'or','args':[" + no + "," + yes + "]}")).isTrue();
    assertThat(m("{'op':'or','args':[" + no + "," + no + "]}")).isFalse();
    assertThat(m("{'op':'not','arg':" + no + "}")).isTrue();
    assertThat(m("{'op':'not','arg':" + yes + "}")).isFalse();
  }

  @Test
  void theExampleMatchesAnOpenOrder() throws QueryException {
    Q1Query q =
        query(
            """
        {'collection':'orders','where':{'op':'and','args':[{'op':'eq','field':'status','value':'open'},
          {'op':'not','arg':{'op':'exists','field':'archived'}},{'op':'in','field':'region','values':['eu','us']},
          {'op':'prefix','field':'customer.name','value':'Ac'},{'op':'ge','field':'total','value':100}]}}""");
    assertThat(
            q.matches(
                json("{'status':'open','region':'eu','customer':{'name':'Acme'},'total':100.0}")))
        .isTrue();
    assertThat(
            q.matches(
                json("{'status':'open','region':'eu','customer':{'name':'Acme'},'total':'100'}")))
        .isFalse();
    assertThat(
            q.matches(
                json(
                    "{'status':'open','region':'eu','customer':{'name':'Acme'},'total':100,'archived':null}")))
        .isFalse();
    assertThat(
            q.matches(
                json("{'status':'open','region':'apac','customer':{'name':'Acme'},'total':100}")))
        .isFalse();
    assertThat(q.matches(json("{'status':'open','region':'eu','customer':'Acme','total':100}")))
        .isFalse();
    // not an object at all: every field is missing
    assertThat(q.matches(json("[1]"))).isFalse();
    assertThat(
            query("{'collection':'c','where':{'op':'ne','field':'a','value':1}}")
                .matches(json("7")))
        .isTrue();
  }

  // ---- projection ----

  private static final ObjectNode ROW =
      object(
          """
      {'id':'k1','status':'open','total':5,'secret':'x','customer':{'name':'Acme','address':{'city':'Oslo','zip':'0150'}},
       'tags':['a'],'nil':null}""");

  @Test
  void withoutSelectEveryTopLevelFieldButTheOmittedOnes() throws QueryException {
    Q1Query q = query("{'collection':'c'}");
    assertThat(q.project(ROW)).isEqualTo(ROW).isNotSameAs(ROW);
    ObjectNode p = q.project(ROW, Set.of("secret", "id")::contains);
    assertThat(p.properties())
        .extracting(java.util.Map.Entry::getKey)
        .containsExactly("status", "total", "customer", "tags", "nil");
  }

  @Test
  void selectedPathsRebuildTheirObjects() throws QueryException {
    Q1Query q =
        query(
            "{'collection':'c','select':['total','customer.address.city','missing','customer.nope',"
                + "'status.length','nil','tags']}");
    assertThat(q.project(ROW))
        .isEqualTo(
            json("{'total':5,'customer':{'address':{'city':'Oslo'}},'nil':null,'tags':['a']}"));
    Q1Query two = query("{'collection':'c','select':['customer.address.zip','customer.name']}");
    assertThat(two.project(ROW))
        .isEqualTo(json("{'customer':{'address':{'zip':'0150'},'name':'Acme'}}"));
  }

  @Test
  void overlappingPathsGiveTheWiderValue() throws QueryException {
    ObjectNode whole = json("{'customer':" + ROW.get("customer") + "}").deepCopy();
    assertThat(query("{'collection':'c','select':['customer.name','customer']}").project(ROW))
        .isEqualTo(whole);
    assertThat(query("{'collection':'c','select':['customer','customer.name']}").project(ROW))
        .isEqualTo(whole);
  }

  @Test
  void anOmittedTopLevelFieldIsLeftOutOfSelectedPathsToo() throws QueryException {
    Q1Query q = query("{'collection':'c','select':['customer.name','secret','total']}");
    assertThat(q.project(ROW, Set.of("customer", "secret")::contains))
        .isEqualTo(json("{'total':5}"));
    // omission looks at the top-level segment only
    assertThat(q.project(ROW, "name"::equals))
        .isEqualTo(json("{'customer':{'name':'Acme'},'secret':'x','total':5}"));
  }

  @Test
  void projectionNeverChangesOrSharesTheDocument() throws QueryException {
    ObjectNode before = ROW.deepCopy();
    ObjectNode all = query("{'collection':'c'}").project(ROW);
    ObjectNode some = query("{'collection':'c','select':['customer.address','tags']}").project(ROW);
    ((ObjectNode) all.get("customer")).put("name", "changed");
    ((ObjectNode) some.get("customer").get("address")).put("city", "changed");
    ((com.fasterxml.jackson.databind.node.ArrayNode) some.get("tags")).add("b");
    assertThat(ROW).isEqualTo(before);
  }
}
