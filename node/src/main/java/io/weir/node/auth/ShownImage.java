package io.weir.node.auth;

import com.fasterxml.jackson.core.JsonParser;
import com.fasterxml.jackson.core.JsonToken;
import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.node.NullNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import io.weir.persistence.PolicyStore.CollectionPolicy;
import io.weir.persistence.PolicyStore.Visibility;
import java.io.IOException;
import java.util.HashSet;
import java.util.Set;
import java.util.function.Predicate;

/**
 * What a principal is shown of a stored JSON image (a document's body, a change's before or after
 * image): nothing when its row rule hides the row, else the image without the fields the principal
 * may not read ({@link Access}).
 *
 * <p>One pass of a streaming parser over the text, no tree: the row-visibility field is read as it
 * passes, and the shown text is the image's own text with the omitted top-level fields cut out, so
 * every value shown is byte-identical to the stored one (an administrator and a restricted
 * principal see the same bytes for the same field). An image with a repeated top-level field name
 * (which the document API refuses and row images cannot have) takes the tree path instead, whose
 * last-wins reading the visibility check has always used, and is shown written out compact.
 *
 * <p>One difference from the tree reading, on purpose: values outside the rule's field are not
 * decoded, so a number no {@code BigDecimal} holds (an exponent past the int range, possible in a
 * CDC row's {@code json} column) no longer makes the whole image unreadable; the row's ACL still
 * decides whether it is shown.
 *
 * @param json whether the image is JSON at all (false for none, or text that does not parse)
 * @param text the text shown; null when the principal may not see the row, or it is not an object
 */
public record ShownImage(boolean json, String text) {
  private static final ShownImage NOT_JSON = new ShownImage(false, null);
  private static final ShownImage HIDDEN = new ShownImage(true, null);

  /** Whether the principal sees the image (then {@link #text()} is what it sees). */
  public boolean visible() {
    return text != null;
  }

  /** What {@code principal} is shown of {@code image} under {@code policy}. */
  public static ShownImage of(Principal principal, CollectionPolicy policy, String image) {
    return of(principal, policy, Access.omitted(principal, policy), image);
  }

  /**
   * Like {@link #of(Principal, CollectionPolicy, String)}, with the omitted fields' test given
   * ({@link Access#omitted}: one per principal and policy, shared by many images).
   */
  public static ShownImage of(
      Principal principal, CollectionPolicy policy, Predicate<String> omitted, String image) {
    if (image == null) {
      return NOT_JSON;
    }
    String ruleField =
        principal.administrator() || policy.visibility() == Visibility.NONE
            ? null
            : policy.visibilityField();
    try (JsonParser p = Access.JSON.createParser(image)) {
      if (p.nextToken() != JsonToken.START_OBJECT) {
        return fromTree(principal, policy, image);
      }
      int open = (int) p.currentTokenLocation().getCharOffset();
      JsonNode acl = NullNode.getInstance();
      Set<String> names = new HashSet<>();
      StringBuilder out = null;
      JsonToken t;
      while ((t = p.nextToken()) == JsonToken.FIELD_NAME) {
        int start = (int) p.currentTokenLocation().getCharOffset();
        String name = p.currentName();
        if (!names.add(name)) {
          return fromTree(principal, policy, image);
        }
        JsonToken value = p.nextToken();
        if (value == null) {
          return NOT_JSON;
        }
        if (name.equals(ruleField)) {
          acl = p.readValueAsTree();
        } else if (value.isStructStart()) {
          p.skipChildren();
        } else {
          p.finishToken();
        }
        int end = (int) p.currentLocation().getCharOffset();
        if (omitted.test(name)) {
          if (out == null) {
            out = keptBefore(image, open, start);
          }
        } else if (out != null) {
          out.append(out.length() == 1 ? "" : ",").append(image, start, end);
        }
      }
      if (t != JsonToken.END_OBJECT) {
        return NOT_JSON;
      }
      if (ruleField != null && !Access.visible(principal, policy, acl)) {
        return HIDDEN;
      }
      if (out != null) {
        return new ShownImage(true, out.append('}').toString());
      }
      int close = (int) p.currentLocation().getCharOffset();
      return new ShownImage(
          true, open == 0 && close == image.length() ? image : image.substring(open, close));
    } catch (IOException | NumberFormatException e) {
      // A number no BigDecimal holds fails the tree reading unchecked: the image is unreadable.
      return NOT_JSON;
    }
  }

  /**
   * The object's text from its opening brace to the field starting at {@code start}, without the
   * comma and whitespace after the last field kept before it (the brace alone when none was). No
   * value ends in a comma or whitespace, so only separators are cut.
   */
  private static StringBuilder keptBefore(String image, int open, int start) {
    StringBuilder out = new StringBuilder(image.length()).append('{');
    int end = start;
    while (end > open + 1
        && (image.charAt(end - 1) == ',' || Character.isWhitespace(image.charAt(end - 1)))) {
      end--;
    }
    return out.append(image, open + 1, end);
  }

  /** The tree reading: the text shown is the projected tree written out. */
  static ShownImage fromTree(Principal principal, CollectionPolicy policy, String image) {
    JsonNode tree = Access.tree(image);
    if (tree == null) {
      return NOT_JSON;
    }
    // Empty text reads as a missing node: JSON that is no object, as the feed and GET took it.
    if (!tree.isObject() || !Access.visibleRow(principal, policy, tree)) {
      return HIDDEN;
    }
    try {
      return new ShownImage(
          true,
          Access.JSON.writeValueAsString(Access.project(principal, policy, (ObjectNode) tree)));
    } catch (IOException e) {
      throw new IllegalStateException("a JSON tree always serializes", null);
    }
  }
}
