// A real YARN cluster (ResourceManager + one NodeManager, Hadoop's MiniYARNCluster) for the
// Spark-on-YARN test (test_spark_yarn.py, started by yarn_minicluster.py beside this file).
// Compiled at set-up time by scripts/setup.d/45-yarn.sh against hadoop-minicluster's jars.
//
//   java -cp CLASSES:LIB/* YarnMiniCluster CONF_DIR NM_MEMORY_MB NM_VCORES
//
// Starts in the current folder (MiniYARNCluster keeps its local and log dirs under ./target),
// writes CONF_DIR/yarn-site.xml (with the ports the ResourceManager bound) and core-site.xml
// (the local file system as the default one: no HDFS), prints "READY", and runs until it is
// terminated (SIGTERM: the shutdown hook stops the services).
import java.io.File;
import java.io.FileOutputStream;
import java.io.OutputStream;

import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.yarn.conf.YarnConfiguration;
import org.apache.hadoop.yarn.server.MiniYARNCluster;

public class YarnMiniCluster {
  public static void main(String[] args) throws Exception {
    File confDir = new File(args[0]);
    int memoryMb = Integer.parseInt(args[1]);
    int vcores = Integer.parseInt(args[2]);

    YarnConfiguration conf = new YarnConfiguration();
    conf.set("fs.defaultFS", "file:///");
    conf.setInt(YarnConfiguration.YARN_MINICLUSTER_NM_PMEM_MB, memoryMb);
    conf.setInt(YarnConfiguration.NM_VCORES, vcores);
    conf.setInt(YarnConfiguration.RM_SCHEDULER_MINIMUM_ALLOCATION_MB, 256);
    conf.setInt(YarnConfiguration.RM_SCHEDULER_MAXIMUM_ALLOCATION_MB, memoryMb);
    conf.setInt(YarnConfiguration.RM_SCHEDULER_MAXIMUM_ALLOCATION_VCORES, vcores);
    // A Spark application master in cluster mode holds the driver (1-2 GB): the default 10%
    // of the cluster would leave the application ACCEPTED and never running.
    conf.setFloat("yarn.scheduler.capacity.maximum-am-resource-percent", 0.5f);
    // A shared build machine's disk may be fuller than YARN's 90% default: never mark it bad.
    conf.setFloat(YarnConfiguration.NM_MAX_PER_DISK_UTILIZATION_PERCENTAGE, 100.0f);
    conf.setBoolean(YarnConfiguration.LOG_AGGREGATION_ENABLED, false);
    conf.setBoolean(YarnConfiguration.TIMELINE_SERVICE_ENABLED, false);

    final MiniYARNCluster cluster = new MiniYARNCluster("tokenbeam-yarn", 1, 1, 1);
    Runtime.getRuntime().addShutdownHook(new Thread(cluster::stop));
    cluster.init(conf);
    cluster.start();
    if (!cluster.waitForNodeManagersToConnect(120_000)) {
      throw new IllegalStateException("the NodeManager did not register within 120 s");
    }
    // The ResourceManager writes the ports it bound back into the cluster's configuration.
    Configuration live = cluster.getConfig();
    long deadline = System.currentTimeMillis() + 60_000;
    while (live.get(YarnConfiguration.RM_ADDRESS, ":0").endsWith(":0")) {
      if (System.currentTimeMillis() > deadline) {
        throw new IllegalStateException("the ResourceManager never published its address");
      }
      Thread.sleep(100);
    }
    confDir.mkdirs();
    write(live, new File(confDir, "yarn-site.xml"));
    Configuration core = new Configuration(false);
    core.set("fs.defaultFS", "file:///");
    write(core, new File(confDir, "core-site.xml"));
    System.out.println("READY " + live.get(YarnConfiguration.RM_ADDRESS));
    System.out.flush();
    Thread.currentThread().join();  // until SIGTERM (the shutdown hook stops the services)
  }

  private static void write(Configuration conf, File target) throws Exception {
    File tmp = new File(target.getPath() + ".part");
    try (OutputStream out = new FileOutputStream(tmp)) {
      conf.writeXml(out);
    }
    if (!tmp.renameTo(target)) {
      throw new IllegalStateException("could not write " + target);
    }
  }
}
