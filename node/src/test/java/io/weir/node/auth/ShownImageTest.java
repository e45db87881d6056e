package io.weir.node.auth;

import static org.assertj.core.api.Assertions.assertThat;

import com.fasterxml.jackson.core.StreamReadFeature;
import com.fasterxml.jackson.databind.DeserializationFeature;
import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.json.JsonMapper;
import com.fasterxml.jackson.databind.node.JsonNodeFactory;
import io.weir.persistence.PolicyStore.CollectionPolicy;
import io.weir.persistence.PolicyStore.Visibility;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Random;
import java.util.Set;
import org.junit.jupiter.api.Test;

/**
 * {@link ShownImage} against the tree reading it replaced (parse, check the row's ACL, copy the
 * tree without the omitted fields, write it): the same decision on every image, the same text on
 * images in the compact form the document API and the CDC rows store, the same values (read back as
 * trees) on any other spacing or number form, where it keeps the stored text of each value instead.
 */
class ShownImageTest {
  private static final CollectionPolicy ACL =
      new CollectionPolicy("c", 1, List.of("secret", "ssn"), Visibility.ACL, "acl");
  private static final CollectionPolicy OWNER =
      new CollectionPolicy("c", 1, List.of("secret"), Visibility.OWNER, "owner");
  private static final CollectionPolicy FIELDS_ONLY =
      new CollectionPolicy("c", 1, List.of("secret"), Visibility.NONE, null);
  private static final CollectionPolicy ROWS_ONLY =
      new CollectionPolicy("c", 1, List.of(), Visibility.ACL, "acl");
  private static final List<CollectionPolicy> POLICIES =
      List.of(ACL, OWNER, FIELDS_ONLY, ROWS_ONLY);

  private static final Principal ANN =
      new Principal("ann", false, Map.of("c", Set.of("FieldRead:ssn")), 1, Set.of("team"));
  private static final Principal BOB = new Principal("bob", false, Map.of(), 1, Set.of());
  private static final Principal ADMIN = new Principal("root", true);
  private static final List<Principal> PRINCIPALS = List.of(ANN, BOB, ADMIN);

  private static final String[] NAMES = {
    "acl", "owner", "secret", "ssn", "name", "n", "é", "a\"b", "nested", "list", "x"
  };

  @Test
  void compactImagesAreShownExactlyAsTheTreeReadingShowsThem() throws Exception {
    Random random = new Random(20261207);
    int[] outcomes = new int[2];
    for (int i = 0; i < 20_000; i++) {
      String image = object(random, false, 0);
      for (ShownImage shown : agree(image, true)) {
        outcomes[0] += shown.visible() ? 0 : 1;
        outcomes[1] += shown.visible() && shown.text().length() < image.length() ? 1 : 0;
      }
    }
    // Both outcomes and cuts are covered (the comparison would pass vacuously without them).
    assertThat(outcomes[0]).as("hidden").isGreaterThan(10_000);
    assertThat(outcomes[1]).as("cut").isGreaterThan(10_000);
  }

  @Test
  void anyOtherFormShowsTheSameValuesWithTheStoredText() throws Exception {
    Random random = new Random(7);
    for (int i = 0; i < 20_000; i++) {
      String image = object(random, true, 0);
      for (ShownImage shown : agree(image, false)) {
        // Each value shown is the stored text: omitting nothing shows the image itself.
        if (shown.visible()
            && repeatsNoField(image)
            && tree(shown.text()).size() == tree(image).size()) {
          assertThat(shown.text()).as(image).isEqualTo(image.strip());
        }
      }
    }
  }

  @Test
  void textThatIsNotAJsonObjectIsDecidedAsTheTreeReadingDecidesIt() throws Exception {
    Random random = new Random(11);
    for (int i = 0; i < 20_000; i++) {
      String image = object(random, random.nextBoolean(), 0);
      int at = random.nextInt(image.length());
      String broken =
          switch (random.nextInt(4)) {
            case 0 -> image.substring(0, at);
            case 1 ->
                image.substring(0, at)
                    + "\u0001{\"]:,x".charAt(random.nextInt(7))
                    + image.substring(at + 1);
            case 2 -> image + " trailing";
            default -> "[" + image + "]";
          };
      agree(broken, false);
    }
    assertThat(ShownImage.of(ADMIN, ACL, null).json()).isFalse();
  }

  /**
   * Compares {@code image} as each principal is shown it under each policy with the tree reading:
   * the same decision and values, and with {@code sameText} the same text.
   */
  private static List<ShownImage> agree(String image, boolean sameText) throws Exception {
    List<ShownImage> out = new ArrayList<>();
    for (CollectionPolicy policy : POLICIES) {
      for (Principal principal : PRINCIPALS) {
        ShownImage expected = ShownImage.fromTree(principal, policy, image);
        ShownImage shown = ShownImage.of(principal, policy, image);
        String as = image + " as " + principal.id() + " under " + policy;
        if (sameText) {
          assertThat(shown).as(as).isEqualTo(expected);
        }
        assertThat(shown.json()).as(as).isEqualTo(expected.json());
        assertThat(shown.visible()).as(as).isEqualTo(expected.visible());
        if (shown.visible()) {
          assertThat(tree(shown.text())).as(as).isEqualTo(tree(expected.text()));
        }
        out.add(shown);
      }
    }
    return out;
  }

  @Test
  void aRepeatedFieldIsReadAsTheTreeReadsIt() {
    String twice = "{\"acl\":[\"ann\"],\"secret\":1,\"acl\":[\"bob\"]}";
    assertThat(ShownImage.of(ANN, ACL, twice).visible()).isFalse();
    assertThat(ShownImage.of(BOB, ACL, twice))
        .isEqualTo(ShownImage.fromTree(BOB, ACL, twice))
        .extracting(ShownImage::text)
        .isEqualTo("{\"acl\":[\"bob\"]}");
  }

  @Test
  void omittedFieldsAreCutWhereverTheyStand() {
    String image = "{ \"secret\" : 1 , \"acl\" : [\"ann\"] ,\"x\":1.50e3, \"ssn\":\"s\"}";
    assertThat(ShownImage.of(BOB, FIELDS_ONLY, image).text())
        .isEqualTo("{\"acl\" : [\"ann\"],\"x\":1.50e3,\"ssn\":\"s\"}");
    assertThat(ShownImage.of(ANN, ACL, image).text())
        .isEqualTo("{\"acl\" : [\"ann\"],\"x\":1.50e3,\"ssn\":\"s\"}");
    assertThat(ShownImage.of(ANN, ACL, "{\"acl\":[\"group:team\"],\"ssn\":2,\"secret\":3}").text())
        .isEqualTo("{\"acl\":[\"group:team\"],\"ssn\":2}");
    assertThat(ShownImage.of(BOB, FIELDS_ONLY, "{\"secret\":3}").text()).isEqualTo("{}");
    assertThat(ShownImage.of(ADMIN, ACL, "  {\"secret\":3} ").text()).isEqualTo("{\"secret\":3}");
  }

  /** Strictly: no trailing content, no repeated field (a shown text must be one clean object). */
  private static final ObjectMapper STRICT =
      JsonMapper.builder()
          .enable(DeserializationFeature.USE_BIG_DECIMAL_FOR_FLOATS)
          .enable(DeserializationFeature.FAIL_ON_TRAILING_TOKENS)
          .enable(StreamReadFeature.STRICT_DUPLICATE_DETECTION)
          .nodeFactory(JsonNodeFactory.withExactBigDecimals(true))
          .build();

  @Test
  void edgeCasesDecideAsTheTreeReading() throws Exception {
    CollectionPolicy ruleFieldSensitive =
        new CollectionPolicy("c", 1, List.of("acl"), Visibility.ACL, "acl");
    assertThat(ShownImage.of(BOB, ruleFieldSensitive, "{\"acl\":[\"bob\"],\"x\":1}").text())
        .as("the rule's field decides, then is omitted")
        .isEqualTo("{\"x\":1}");
    assertThat(ShownImage.of(ANN, ruleFieldSensitive, "{\"acl\":[\"bob\"],\"x\":1}").visible())
        .isFalse();
    for (String image :
        List.of(
            "{\"acl\":{\"0\":\"bob\"}}",
            "{\"acl\":7}",
            "{\"acl\":true}",
            "{\"acl\":[\"bob\"],\"\\u0073ecret\":1,\"secret\":2}",
            "{\"\\u0073ecret\":1,\"acl\":[\"bob\"]}",
            "\uFEFF{}",
            "",
            "   ",
            "null",
            "[]",
            "{}",
            "{\"acl\":[\"bob\"],\"n\":" + "[".repeat(1001) + "]".repeat(1001) + "}",
            "{\"acl\":[\"bob\"],\"n\":" + "[".repeat(900) + "]".repeat(900) + "}")) {
      agree(image, false);
    }
    assertThat(ShownImage.of(BOB, ACL, "{\"\\u0073ecret\":1,\"acl\":[\"bob\"]}").text())
        .as("a field name is compared decoded")
        .isEqualTo("{\"acl\":[\"bob\"]}");
  }

  @Test
  void aNumberNoBigDecimalHoldsLeavesTheImageReadable() {
    String image = "{\"acl\":[\"bob\"],\"j\":{\"v\":1e9999999999}}";
    assertThat(ShownImage.fromTree(BOB, ACL, image).json()).as("the tree reading").isFalse();
    assertThat(ShownImage.of(BOB, ACL, "{\"acl\":1e9999999999}").json())
        .as("in the rule's field it is unreadable")
        .isFalse();
    assertThat(ShownImage.of(BOB, ACL, image).text()).isEqualTo(image);
    assertThat(ShownImage.of(ANN, ACL, image).visible()).as("the ACL still decides").isFalse();
  }

  @Test
  void longImagesCutAcrossTheParsersBufferEdges() throws Exception {
    // Over 32K characters the parser reads through a buffer of 4,000: sweep every token edge
    // across one of the buffer's boundaries.
    for (int pad = 0; pad < 60; pad++) {
      String image =
          "{\"x\":\""
              + "y".repeat(40_000 + pad)
              + "\",\"secret\":\"s\\\"t\",\"acl\":[\"bob\",\"group:team\"],\"n\":-12.5e3,"
              + "\"ssn\":{\"a\":[1,2]},\"é\":true}";
      List<ShownImage> shown = agree(image, false);
      assertThat(shown).anyMatch(i -> i.visible() && i.text().length() < image.length());
    }
  }

  private static JsonNode tree(String text) throws Exception {
    return STRICT.readTree(text);
  }

  private static boolean repeatsNoField(String image) {
    try {
      STRICT.readTree(image);
      return true;
    } catch (Exception e) {
      return false;
    }
  }

  /** A random JSON object; {@code loose}: random spacing and number forms. */
  private static String object(Random r, boolean loose, int depth) {
    StringBuilder b = new StringBuilder();
    space(r, loose, b);
    b.append('{');
    int n = r.nextInt(depth == 0 ? 7 : 3);
    java.util.Set<String> used = new java.util.HashSet<>();
    for (int i = 0; i < n; i++) {
      String name =
          depth == 0 && i == 0 && r.nextInt(4) > 0 ? aclName(r) : NAMES[r.nextInt(NAMES.length)];
      if (!used.add(name) && (depth > 0 || r.nextInt(8) > 0)) {
        continue; // now and then a name twice: the tree path's case
      }
      if (b.charAt(b.length() - 1) != '{') {
        space(r, loose, b);
        b.append(',');
      }
      space(r, loose, b);
      string(r, loose, b, name);
      space(r, loose, b);
      b.append(':');
      space(r, loose, b);
      if (name.equals("acl")) {
        acl(r, b);
      } else if (name.equals("owner")) {
        b.append(r.nextBoolean() ? "\"ann\"" : r.nextBoolean() ? "\"bob\"" : "[\"ann\"]");
      } else {
        value(r, loose, b, depth);
      }
    }
    space(r, loose, b);
    b.append('}');
    space(r, loose, b);
    return b.toString();
  }

  private static String aclName(Random r) {
    return r.nextBoolean() ? "acl" : "owner";
  }

  private static void acl(Random r, StringBuilder b) {
    switch (r.nextInt(6)) {
      case 0 -> b.append("[\"ann\"]");
      case 1 -> b.append("[\"bob\",\"group:team\"]");
      case 2 -> b.append("[\"group:other\",1,null]");
      case 3 -> b.append("\"ann\"");
      case 4 -> b.append("null");
      default -> b.append("[]");
    }
  }

  private static void value(Random r, boolean loose, StringBuilder b, int depth) {
    switch (r.nextInt(depth < 2 ? 8 : 6)) {
      case 0 -> b.append(r.nextInt(2000) - 1000);
      case 1 -> b.append(loose ? LOOSE_NUMBERS[r.nextInt(LOOSE_NUMBERS.length)] : "12.5");
      case 2 -> b.append(r.nextBoolean() ? "true" : "false");
      case 3 -> b.append("null");
      case 4, 5 -> string(r, loose, b, text(r));
      case 6 -> b.append(object(r, loose, depth + 1));
      default -> {
        b.append('[');
        int n = r.nextInt(3);
        for (int i = 0; i < n; i++) {
          if (i > 0) {
            b.append(',');
            space(r, loose, b);
          }
          value(r, loose, b, depth + 1);
        }
        b.append(']');
      }
    }
  }

  /** Number forms the tree reading writes differently (CDC rows carry floats and json as is). */
  private static final String[] LOOSE_NUMBERS = {"1.50e3", "1.0E10", "-0", "-0.0", "1e-7", "12.5"};

  private static final String CHARS = "ab \"\\\n/é☃,:{}[]";

  private static String text(Random r) {
    StringBuilder s = new StringBuilder();
    int n = r.nextInt(8);
    for (int i = 0; i < n; i++) {
      s.append(CHARS.charAt(r.nextInt(CHARS.length())));
    }
    return s.toString();
  }

  /** {@code s} as a JSON string: escaped as Jackson writes it, or (loose) with \\u escapes. */
  private static void string(Random r, boolean loose, StringBuilder b, String s) {
    b.append('"');
    for (char c : s.toCharArray()) {
      if (loose && r.nextInt(4) == 0) {
        b.append(String.format("\\u%04x", (int) c));
      } else if (c == '"' || c == '\\') {
        b.append('\\').append(c);
      } else if (c == '\n') {
        b.append("\\n");
      } else {
        b.append(c);
      }
    }
    b.append('"');
  }

  private static void space(Random r, boolean loose, StringBuilder b) {
    if (loose && r.nextInt(3) == 0) {
      b.append(" \t\n\r".charAt(r.nextInt(4)));
    }
  }
}
