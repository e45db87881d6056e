package io.weir.protocol.query;

import static io.weir.protocol.query.Json.query;
import static io.weir.protocol.query.Json.where;
import static org.assertj.core.api.Assertions.assertThat;

import io.weir.protocol.query.Predicate.CompareOp;
import java.math.BigDecimal;
import java.nio.charset.StandardCharsets;
import java.security.MessageDigest;
import java.util.HashSet;
import java.util.HexFormat;
import java.util.List;
import java.util.Set;
import org.junit.jupiter.api.Test;

class Q1QueryNormalisationTest {
  private static final String A = "{'op':'exists','field':'a'}";
  private static final String B = "{'op':'exists','field':'b'}";
  private static final String C = "{'op':'exists','field':'c'}";

  @Test
  void nestedAndsAndOrsFlatten() throws QueryException {
    assertSame(
        "{'op':'and','args':["
            + A
            + ",{'op':'and','args':["
            + B
            + ",{'op':'and','args':["
            + C
            + "]}]}]}",
        "{'op':'and','args':[" + A + "," + B + "," + C + "]}");
    assertSame(
        "{'op':'or','args':[{'op':'or','args':[" + C + "," + B + "]}," + A + "]}",
        "{'op':'or','args':[" + A + "," + B + "," + C + "]}");
    // and in or stays
    Predicate p =
        where("{'op':'or','args':[" + A + ",{'op':'and','args':[" + B + "," + C + "]}]}").where();
    assertThat(p).isInstanceOf(Predicate.Or.class);
    assertThat(((Predicate.Or) p).args()).hasSize(2);
  }

  @Test
  void duplicatesGoAndSingleChildrenCollapse() throws QueryException {
    assertThat(where("{'op':'and','args':[" + A + "," + A + "]}").where())
        .isEqualTo(new Predicate.Exists("a"));
    assertThat(where("{'op':'or','args':[{'op':'and','args':[" + A + "]}]}").where())
        .isEqualTo(new Predicate.Exists("a"));
    assertSame(
        "{'op':'and','args':[" + A + "," + B + "," + A + "]}",
        "{'op':'and','args':[" + B + "," + A + "]}");
    // the collapsed or is flattened into the and around it
    assertSame(
        "{'op':'and','args':["
            + A
            + ",{'op':'or','args':[{'op':'and','args':["
            + B
            + ","
            + C
            + "]}]}]}",
        "{'op':'and','args':[" + A + "," + B + "," + C + "]}");
    // 1 and 1.0 are one value
    assertSame(
        "{'op':'and','args':[{'op':'eq','field':'a','value':1},{'op':'eq','field':'a','value':1.0}]}",
        "{'op':'eq','field':'a','value':1}");
  }

  @Test
  void doubleNegationAndNegatedEqualityNormalise() throws QueryException {
    assertThat(where("{'op':'not','arg':{'op':'not','arg':" + A + "}}").where())
        .isEqualTo(new Predicate.Exists("a"));
    assertThat(where("{'op':'not','arg':{'op':'not','arg':{'op':'not','arg':" + A + "}}}").where())
        .isEqualTo(new Predicate.Not(new Predicate.Exists("a")));
    assertSame(
        "{'op':'not','arg':{'op':'eq','field':'a','value':'x'}}",
        "{'op':'ne','field':'a','value':'x'}");
    assertSame(
        "{'op':'not','arg':{'op':'ne','field':'a','value':'x'}}",
        "{'op':'eq','field':'a','value':'x'}");
    // not(lt) is not ge: a missing field or another type satisfies neither lt nor ge
    assertThat(where("{'op':'not','arg':{'op':'lt','field':'a','value':1}}").where())
        .isInstanceOf(Predicate.Not.class);
  }

  @Test
  void inValuesAreDeduplicatedAndSorted() throws QueryException {
    assertSame(
        "{'op':'in','field':'a','values':['us','eu',1,1.00,null,'eu']}",
        "{'op':'in','field':'a','values':[null,'eu',1,'us']}");
    assertThat(where("{'op':'in','field':'a','values':[2.0,2]}").where())
        .isEqualTo(new Predicate.Compare(CompareOp.EQ, "a", Literal.of(new BigDecimal(2))));
  }

  @Test
  void selectKeepsItsOrderWithoutDuplicates() throws QueryException {
    Q1Query q = query("{'collection':'c','select':['b','a','b','c.d','a']}");
    assertThat(q.select()).containsExactly("b", "a", "c.d");
    assertThat(q.canonicalJson())
        .isEqualTo("{\"collection\":\"c\",\"select\":[\"b\",\"a\",\"c.d\"]}");
  }

  @Test
  void numbersAreWrittenWithoutTrailingZerosAndBounded() throws QueryException {
    assertThat(value("1.50")).isEqualTo("1.5");
    assertThat(value("100")).isEqualTo("100");
    assertThat(value("1e20")).isEqualTo("100000000000000000000");
    assertThat(value("1e21")).isEqualTo("1E+21");
    assertThat(value("-0.0")).isEqualTo("0");
    assertThat(value("0.000001")).isEqualTo("0.000001");
    assertThat(value("1e-7")).isEqualTo("1E-7");
    assertThat(value("1e999")).isEqualTo("1E+999");
    String json =
        "{\"collection\":\"c\",\"where\":{\"op\":\"eq\",\"field\":\"a\",\"value\":"
            + "\"a\\\"b\\\\c\\n\\u0001\\ud800\\ud83d\\ude00é\\u2028\"}}";
    assertThat(Q1Query.parse(Json.parseExact(json)).canonicalJson())
        .isEqualTo(json.replace("\\ud83d\\ude00", "\ud83d\ude00").replace("\\u2028", "\u2028"));
  }

  private static String value(String literal) throws QueryException {
    String canonical = where("{'op':'eq','field':'a','value':" + literal + "}").canonicalJson();
    String prefix = "{\"collection\":\"c\",\"where\":{\"op\":\"eq\",\"field\":\"a\",\"value\":";
    assertThat(canonical).startsWith(prefix).endsWith("}}");
    return canonical.substring(prefix.length(), canonical.length() - 2);
  }

  @Test
  void theFingerprintIsTheSha256OfTheCanonicalJson() throws Exception {
    Q1Query q = where("{'op':'and','args':[" + B + "," + A + "]}");
    byte[] expected =
        MessageDigest.getInstance("SHA-256")
            .digest(q.canonicalJson().getBytes(StandardCharsets.UTF_8));
    assertThat(q.fingerprint()).isEqualTo(expected);
    assertThat(q.fingerprintHex()).isEqualTo(HexFormat.of().formatHex(expected)).hasSize(64);
    q.fingerprint()[0] ^= 1;
    assertThat(q.fingerprint()).isEqualTo(expected);
  }

  @Test
  void reorderedQueriesShareAFingerprint() throws QueryException {
    Q1Query one =
        query(
            "{'collection':'orders','where':{'op':'and','args':["
                + "{'op':'eq','field':'status','value':'open'},{'op':'in','field':'region','values':['eu','us']},"
                + "{'op':'or','args':["
                + A
                + ","
                + B
                + "]}]},'select':['x']}");
    Q1Query two =
        query(
            "{'select':['x'],'where':{'op':'and','args':[{'op':'or','args':["
                + B
                + ","
                + A
                + "]},"
                + "{'op':'in','field':'region','values':['us','eu','us']},{'op':'eq','value':'open','field':'status'}]},"
                + "'collection':'orders'}");
    assertThat(two.fingerprintHex()).isEqualTo(one.fingerprintHex());
    assertThat(two).isEqualTo(one).hasSameHashCodeAs(one);
  }

  @Test
  void differentQueriesHaveDifferentFingerprints() throws QueryException {
    List<String> queries =
        List.of(
            "{'collection':'c'}",
            "{'collection':'d'}",
            "{'collection':'c','select':['a']}",
            "{'collection':'c','select':['a','b']}",
            "{'collection':'c','select':['b','a']}",
            "{'collection':'c','where':" + A + "}",
            "{'collection':'c','where':" + B + "}",
            "{'collection':'c','where':{'op':'not','arg':" + A + "}}",
            "{'collection':'c','where':{'op':'and','args':[" + A + "," + B + "]}}",
            "{'collection':'c','where':{'op':'or','args':[" + A + "," + B + "]}}",
            "{'collection':'c','where':{'op':'eq','field':'a','value':1}}",
            "{'collection':'c','where':{'op':'eq','field':'a','value':'1'}}",
            "{'collection':'c','where':{'op':'eq','field':'a','value':1.1}}",
            "{'collection':'c','where':{'op':'eq','field':'a','value':true}}",
            "{'collection':'c','where':{'op':'eq','field':'a','value':null}}",
            "{'collection':'c','where':{'op':'eq','field':'a','value':'null'}}",
            "{'collection':'c','where':{'op':'ne','field':'a','value':1}}",
            "{'collection':'c','where':{'op':'lt','field':'a','value':1}}",
            "{'collection':'c','where':{'op':'le','field':'a','value':1}}",
            "{'collection':'c','where':{'op':'gt','field':'a','value':1}}",
            "{'collection':'c','where':{'op':'ge','field':'a','value':1}}",
            "{'collection':'c','where':{'op':'eq','field':'a.b','value':1}}",
            "{'collection':'c','where':{'op':'in','field':'a','values':[1,2]}}",
            "{'collection':'c','where':{'op':'in','field':'a','values':[1,3]}}",
            "{'collection':'c','where':{'op':'prefix','field':'a','value':'1'}}",
            "{'collection':'c','where':{'op':'prefix','field':'a','value':'\\ud800'}}",
            "{'collection':'c','where':{'op':'prefix','field':'a','value':'\\ud801'}}",
            "{'collection':'c','where':{'op':'prefix','field':'a','value':'?'}}",
            "{'collection':'c','where':" + A + ",'select':['a']}");
    Set<String> fingerprints = new HashSet<>();
    for (String q : queries) {
      assertThat(fingerprints.add(query(q).fingerprintHex())).as(q).isTrue();
    }
  }

  @Test
  void parsingTheCanonicalJsonAgainChangesNothing() throws QueryException {
    Q1Query q =
        query(
            "{'collection':'orders','where':{'op':'or','args':[{'op':'and','args':["
                + "{'op':'not','arg':{'op':'not','arg':{'op':'in','field':'r','values':[3,'x',null,1.50]}}},"
                + "{'op':'prefix','field':'n.m','value':'Ac\\u0000\\ud800'},{'op':'and','args':["
                + A
                + "]}]},"
                + "{'op':'not','arg':{'op':'le','field':'t','value':-1e-9}}]},'select':['a','a','b.c']}");
    Q1Query again = Q1Query.parse(Json.parseExact(q.canonicalJson()));
    assertThat(again.canonicalJson()).isEqualTo(q.canonicalJson());
    assertThat(again.where()).isEqualTo(q.where());
    assertThat(again.predicateFields()).containsExactly("a", "n.m", "r", "t");
  }

  private static void assertSame(String where, String equivalent) throws QueryException {
    Q1Query q = where(where);
    Q1Query e = where(equivalent);
    assertThat(q.canonicalJson()).isEqualTo(e.canonicalJson());
    assertThat(q.fingerprint()).isEqualTo(e.fingerprint());
  }
}
