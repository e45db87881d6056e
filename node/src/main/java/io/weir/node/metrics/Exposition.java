package io.weir.node.metrics;

import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.Set;
import java.util.TreeSet;

/**
 * The samples of a Prometheus text exposition (format 0.0.4), as {@code GET /metrics} writes it:
 * for tools and tests that read the node's metrics. Comment lines are skipped; label values are
 * unescaped.
 */
public final class Exposition {
  /** One sample line: {@code name{labels} value}. */
  public record Sample(String name, Map<String, String> labels, double value) {}

  private final List<Sample> samples;

  private Exposition(List<Sample> samples) {
    this.samples = List.copyOf(samples);
  }

  public static Exposition parse(String text) {
    List<Sample> out = new ArrayList<>();
    for (String line : text.split("\n")) {
      if (line.isBlank() || line.startsWith("#")) {
        continue;
      }
      int brace = line.indexOf('{');
      int space = line.lastIndexOf(' ');
      String name;
      Map<String, String> labels = new LinkedHashMap<>();
      if (brace >= 0 && brace < space) {
        name = line.substring(0, brace);
        int end = labels(line, brace + 1, labels);
        space = line.indexOf(' ', end);
      } else {
        name = line.substring(0, line.indexOf(' '));
        space = line.indexOf(' ');
      }
      String value = line.substring(space + 1).trim();
      int blank = value.indexOf(' ');
      if (blank > 0) {
        value = value.substring(0, blank); // a timestamp follows
      }
      out.add(new Sample(name, labels, parseValue(value)));
    }
    return new Exposition(out);
  }

  private static double parseValue(String v) {
    return switch (v) {
      case "+Inf" -> Double.POSITIVE_INFINITY;
      case "-Inf" -> Double.NEGATIVE_INFINITY;
      case "NaN" -> Double.NaN;
      default -> Double.parseDouble(v);
    };
  }

  /**
   * Reads {@code a="x",b="y"} from {@code from} into {@code labels}; returns the index after the
   * closing brace.
   */
  private static int labels(String line, int from, Map<String, String> labels) {
    int i = from;
    while (i < line.length() && line.charAt(i) != '}') {
      int eq = line.indexOf('=', i);
      String key = line.substring(i, eq).trim();
      StringBuilder value = new StringBuilder();
      int j = eq + 2; // past ="
      while (line.charAt(j) != '"') {
        char c = line.charAt(j);
        if (c == '\\') {
          char n = line.charAt(++j);
          value.append(n == 'n' ? '\n' : n);
        } else {
          value.append(c);
        }
        j++;
      }
      labels.put(key, value.toString());
      i = j + 1;
      if (i < line.length() && line.charAt(i) == ',') {
        i++;
      }
    }
    return i + 1;
  }

  public List<Sample> samples() {
    return samples;
  }

  /** The samples named {@code name} (e.g. {@code weir_cdc_lag_bytes}). */
  public List<Sample> named(String name) {
    return samples.stream().filter(s -> s.name().equals(name)).toList();
  }

  /** The value of the sample named {@code name} whose labels include {@code labels}. */
  public Optional<Double> value(String name, Map<String, String> labels) {
    return samples.stream()
        .filter(s -> s.name().equals(name) && s.labels().entrySet().containsAll(labels.entrySet()))
        .map(Sample::value)
        .findFirst();
  }

  /** The sum over samples named {@code name} whose labels include {@code labels}. */
  public double sum(String name, Map<String, String> labels) {
    return samples.stream()
        .filter(s -> s.name().equals(name) && s.labels().entrySet().containsAll(labels.entrySet()))
        .mapToDouble(Sample::value)
        .sum();
  }

  /** Every value label {@code label} takes over all samples (e.g. every {@code route}). */
  public Set<String> labelValues(String label) {
    Set<String> out = new TreeSet<>();
    samples.forEach(
        s -> {
          String v = s.labels().get(label);
          if (v != null) {
            out.add(v);
          }
        });
    return out;
  }

  /** Every label name used. */
  public Set<String> labelNames() {
    Set<String> out = new TreeSet<>();
    samples.forEach(s -> out.addAll(s.labels().keySet()));
    return out;
  }
}
