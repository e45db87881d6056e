package io.weir.node.cli;

import java.util.concurrent.Callable;
import picocli.CommandLine.Model.CommandSpec;
import picocli.CommandLine.Spec;

/** A {@code weir ctl} command group: run without a subcommand it prints its usage (status 2). */
abstract class Group implements Callable<Integer> {
  @Spec CommandSpec groupSpec;

  @Override
  public Integer call() {
    groupSpec.commandLine().usage(groupSpec.commandLine().getErr());
    return CtlCommand.EXIT_USAGE;
  }
}
