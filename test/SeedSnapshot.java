// SeedSnapshot: writes a ZooKeeper snapshot into a server's data dir, so that
// the server starts with lock paths whose sequence counters stand where a test
// wants them (test/zk-harness.sh --seed). Making 2^31 nodes to reach the wrap
// would take hours; a snapshot takes a second.
//
//   java -cp zookeeper.jar:CLASSES SeedSnapshot DATADIR PATH=COUNT...
//
// ZooKeeper names a sequential child after its parent's count of child
// creations (the parent's internal cversion, "%010d"). Each PATH is made
// persistent and empty (with its missing ancestors) with COUNT as that
// count, so its next sequential child is numbered COUNT. COUNT may be
// negative: the state a server that lets the counter wrap leaves behind.
//
// The count is set in the node's stat directly: a replayed create
// (DataTree.createNode's parentCVersion argument) only ever raises it, and
// cannot set a negative one. The snapshot carries no digest to compare
// (this tree never processed a transaction); the server computes its
// digests from the nodes as it loads them.
import java.io.File;
import java.util.concurrent.ConcurrentHashMap;
import org.apache.zookeeper.ZooDefs;
import org.apache.zookeeper.server.DataNode;
import org.apache.zookeeper.server.DataTree;
import org.apache.zookeeper.server.persistence.FileTxnSnapLog;

public class SeedSnapshot {
    static long zxid = 0;

    static void ensure(DataTree tree, String path) throws Exception {
        if (tree.getNode(path) != null)
            return;
        int slash = path.lastIndexOf('/');
        if (slash > 0)
            ensure(tree, path.substring(0, slash));
        tree.createNode(path, new byte[0], ZooDefs.Ids.OPEN_ACL_UNSAFE, 0, -1, ++zxid,
                        System.currentTimeMillis());
    }

    public static void main(String[] args) throws Exception {
        if (args.length < 2) {
            System.err.println("usage: SeedSnapshot DATADIR PATH=COUNT...");
            System.exit(2);
        }
        File dir = new File(args[0]);
        DataTree tree = new DataTree();
        for (int i = 1; i < args.length; i++) {
            int eq = args[i].lastIndexOf('=');
            if (eq <= 0 || !args[i].startsWith("/")) {
                System.err.println("SeedSnapshot: not PATH=COUNT: " + args[i]);
                System.exit(2);
            }
            String path = args[i].substring(0, eq);
            int count = Integer.parseInt(args[i].substring(eq + 1));
            ensure(tree, path);
            DataNode node = tree.getNode(path);
            synchronized (node) {
                node.stat.setCversion(count);
            }
        }
        tree.lastProcessedZxid = zxid;
        FileTxnSnapLog snaps = new FileTxnSnapLog(dir, dir);
        snaps.save(tree, new ConcurrentHashMap<>(), true);
        snaps.close();
    }
}
